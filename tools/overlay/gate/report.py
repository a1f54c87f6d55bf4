"""Rendering a GateReport: text for people, JSON for tools, JUnit XML for CI."""

from __future__ import annotations

import json
from collections import Counter
from overlay.gate.engines import clusters, first_line
from overlay.gate.findings import SEVERITIES, Finding, GateReport

CLUSTERS_SHOWN = 10
from overlay.reporting import junit, printable


def text(report: GateReport, verbose: bool = False) -> str:
    """One short line per finding (`severity: plugin file:line: what`), errors first;
    `-v` adds the kind, symbol, core location and why it is (or is not) an error. The
    full explanation of every finding is in the JSON (`message`, `reason`)."""
    lines = [f"gate: plugin {report.plugin}", f"      core   {report.core}"
             + (f" (version {report.core_version})" if report.core_version else "")]
    ordered = sorted(report.findings, key=lambda f: (SEVERITIES.index(f.severity), f.sort_key()))
    for f in ordered:
        tag = f" [{f.engine}]" if f.engine != "hand" else ""
        lines.append(f"{f.severity}{tag}: {f.plugin_path}:{f.plugin_line}: {f.short()}")
        if verbose:
            core = f"{f.core_path}:{f.core_line}" if f.core_line else (f.core_path or "-")
            lines.append(f"    {f.kind} {f.symbol} (core {core})")
            if f.reason:
                lines.append(f"    why: {f.reason}")
    for s in report.suppressed:
        if verbose:
            lines.append(f"accepted: {s.finding.location()}: {s.finding.symbol} ({s.reason})")
    groups = clusters(report.findings)
    if groups:
        lines.append(f"checker clusters (rule, message): {len(groups)}")
        for c in groups if verbose else groups[:CLUSTERS_SHOWN]:
            lines.append(f"  {c.count:>4} [{c.rule}] {first_line(c.message)[:140]} ({', '.join(c.engines)})")
        if not verbose and len(groups) > CLUSTERS_SHOWN:
            lines.append(f"  ... {len(groups) - CLUSTERS_SHOWN} more (-v or --json)")
    for note in report.notes:
        lines.append(f"note: {note}")
    sev = report.severity_counts()
    summary = ", ".join(f"{sev[k]} {k}{'s' if sev[k] != 1 else ''}" for k in SEVERITIES if sev.get(k))
    stats = report.stats
    head = "FAILED: " if not report.ok else ("OK: " if report.findings else "OK: no contract breaks")
    lines.append(
        (head + summary if report.findings else head)
        + (f"; {len(report.suppressed)} accepted" if report.suppressed else "")
        + f" ({stats.get('plugin_files', 0)} plugin files, {stats.get('core_files_read', 0)} core files read,"
          f" {stats.get('seconds', 0.0):.1f}s)")
    # findings quote upstream's names, paths and source: each line printable, one line each
    return "\n".join(printable(line) for line in lines) + "\n"


def to_json(report: GateReport) -> str:
    doc = {
        "ok": report.ok,
        "plugin": report.plugin,
        "core": report.core,
        "core_version": report.core_version,
        "counts": report.counts(),
        "severity_counts": report.severity_counts(),
        "fail_on": report.fail_on,
        "findings": [f.to_dict() for f in report.findings],
        "accepted": [dict(s.finding.to_dict(), reason=s.reason, allowlist_line=s.allowlist_line)
                     for s in report.suppressed],
        "notes": list(report.notes),
        "stats": report.stats,
        "engine_counts": dict(Counter(f.engine for f in report.findings)),
        "clusters": [c.to_dict() for c in clusters(report.findings)],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _case_names(findings: list[Finding]) -> list[str]:
    """Unique test case names: the symbol, then its plugin location where a symbol
    repeats, then the core location where that repeats too (one override broken at two
    core call sites), then a counter."""
    names = [f.symbol for f in findings]
    for widen in (lambda f: f" @ {f.plugin_path}:{f.plugin_line}",
                  lambda f: f" -> core {f.core_path}:{f.core_line}"):
        counts = Counter(names)
        names = [n + widen(f) if counts[n] > 1 else n for n, f in zip(names, findings)]
    seen: Counter = Counter()
    out = []
    for n in names:
        seen[n] += 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


SUITE = "overlay-gate"


def junit_suite(report: GateReport) -> junit.Suite:
    """One test case per finding (failed) and per accepted finding (skipped), each with a
    unique name; a passing run is one passing test case, so CI shows the gate ran. The
    plugin location leads the failure text (the schema has no file/line on a test case)."""
    names = iter(_case_names(list(report.findings) + [s.finding for s in report.suppressed]))
    failing = {id(f) for f in report.failing}
    cases = []
    for f in report.findings:
        text = f"{f.location()}\n{f.message}\nwhy: {f.reason}"
        if id(f) in failing:
            cases.append(junit.Case(next(names), f"gate.{f.kind}",
                                    junit.Failure(f"{f.severity}: {f.short()}", f.kind, text)))
        else:  # a warning or info finding: a passing case that still shows what was found
            cases.append(junit.Case(next(names), f"gate.{f.kind}", output=f"{f.severity}: {text}"))
    for s in report.suppressed:
        cases.append(junit.Case(next(names), f"gate.{s.finding.kind}", skipped=f"accepted: {s.reason}",
                                output=f"{s.finding.location()}\n{s.finding.message}"))
    if not cases:
        cases.append(junit.Case("contract", "gate"))
    seconds = report.stats.get("seconds")
    return junit.Suite(SUITE, tuple(cases), float(seconds) if seconds is not None else None)


def to_junit(report: GateReport) -> str:
    return junit.render([junit_suite(report)])
