"""The smoke's decode counts as an evidence packet's counters (pure: text in, text out).

`overlay smoke --write-counters DIR` writes, from the walk with the series:

  DIR/baseline.csv            switch off          } the protocol's variants, which differ
  DIR/optimized.csv           switch on           } only by the patch's switch
  DIR/speculative-off.csv     draft tokens, switch off
  DIR/speculative-on.csv      draft tokens, switch on (must equal speculative-off)
  DIR/measured.yaml           whose code was counted, where, how to count again

Each CSV has the profiler's `API Name,Count` columns, so `overlay evidence
counters` and `overlay evidence analyze` read it as they read an Ascend
profiler export. measured.yaml's `implementation: series` says the counts are of
this repository's series (evidence/README.md, "Implementations").
"""

from __future__ import annotations

import csv
import io
from typing import Any

from overlay.smoke.results import Walk

# smoke step -> (file stem, what it is)
CASES = {
    "metadata-switch-off": ("baseline", "switch off"),
    "metadata-switch-on": ("optimized", "switch on"),
    "metadata-speculative": ("speculative-on", "one draft token per request every step, switch on"),
}
SPECULATIVE_OFF = ("speculative-off", "one draft token per request every step, switch off")
PROVENANCE = "measured.yaml"


class NotCounted(ValueError):
    """The walk did not produce every case's counts."""


def statistics_csv(counts: dict[str, int]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["API Name", "Count"])
    for name, count in counts.items():
        writer.writerow([name, int(count)])
    return out.getvalue()


def case_counts(walk: Walk) -> dict[str, tuple[str, dict[str, Any]]]:
    """file stem -> (what it is, the step's data) for every case; NotCounted if one is missing."""
    by_step = {s.step: s for s in walk.steps}
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for step, (stem, what) in CASES.items():
        got = by_step.get(step)
        if got is None or not got.ok or "counts" not in got.data:
            state = "did not run" if got is None else f"is {got.status}" if not got.ok else "has no counts"
            raise NotCounted(f"step {step} {state}")
        out[stem] = (what, got.data)
    spec = out["speculative-on"][1]
    if "switch-off" not in spec:
        raise NotCounted("step metadata-speculative has no switch-off counts")
    out[SPECULATIVE_OFF[0]] = (SPECULATIVE_OFF[1], {**spec, "counts": spec["switch-off"],
                                                    "sites": spec.get("switch-off-sites", [])})
    return out


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def provenance_yaml(pin: str, targets: dict[str, dict], cases: dict[str, tuple[str, dict[str, Any]]],
                    date: str, command: str) -> str:
    """measured.yaml: the implementation counted, its trees, and the command that counts again."""
    first = next(iter(cases.values()))[1]
    lines = [
        "# Written by `overlay smoke --write-counters`; do not edit by hand.",
        "implementation: series",
        "device: CPU with the NPU stubbed (overlay smoke)",
        f"pin: {pin}",
        f"date: {date}",
        f"steps: {int(first['steps'])}",
        f"batch: {int(first['batch'])}",
        f"command: {_quote(command)}",
        "trees:",
    ]
    for target in sorted(targets):
        rec = targets[target]
        lines.append(f"  {target}: {{base: {rec.get('base', '')}, tree: {rec.get('tree', '')}}}")
    lines.append("cases:")
    for stem, (what, data) in cases.items():
        lines.append(f"  {stem}:")
        lines.append(f"    what: {_quote(what)}")
        sites = data.get("sites") or []
        lines.append("    sites:" + ("" if sites else " []"))
        for site in sites:
            lines.append(f"      - {{name: {site['name']}, site: {_quote(site['site'])}, count: {int(site['count'])}}}")
    return "\n".join(lines) + "\n"


def counter_files(walk: Walk, pin: str, targets: dict[str, dict], date: str, command: str) -> dict[str, str]:
    """file name -> text, for every file --write-counters writes."""
    cases = case_counts(walk)
    files = {f"{stem}.csv": statistics_csv(data["counts"]) for stem, (_, data) in cases.items()}
    files[PROVENANCE] = provenance_yaml(pin, targets, cases, date, command)
    return files
