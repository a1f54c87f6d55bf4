"""Drift results for people (terminal table, Markdown job summary) and for machines
(JSON, JUnit XML with one test case per patch and ref). Pure: data in, text out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from overlay.drift.classify import CLASSES, Verdict
from overlay.drift.scan import CommitInfo, Overlap, TargetRun, Transition
from overlay.reporting import junit as junit_xml
from overlay.reporting import table
from overlay.reporting.text import printable

DEFAULT_FAIL_ON = ("conflict", "missing")
WARN_ON = frozenset({"fuzz"})

@dataclass(frozen=True)
class DriftReport:
    pin: str
    mode: str  # onto | scan | bisect
    runs: tuple[TargetRun, ...]
    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON

    def failures(self) -> list[tuple[TargetRun, Verdict]]:
        return [(r, v) for r in self.runs for v in r.verdicts if v.cls in self.fail_on]

    def warnings(self) -> list[tuple[TargetRun, Verdict]]:
        return [(r, v) for r in self.runs for v in r.verdicts
                if v.cls in WARN_ON and v.cls not in self.fail_on]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures() else 0


def _counts(verdicts) -> str:
    c = Counter(v.cls for v in verdicts)
    return ", ".join(f"{c[k]} {k}" for k in CLASSES if c[k]) or "no patches"


def _class_text(cls: str, rule: str | None, alone: str | None = None,
                alone_rule: str | None = None) -> str:
    """`merged (reverse)`, `blocked (alone: clean)`, `blocked (alone: merged, likely)`."""
    if alone:
        return f"{cls} (alone: {alone}{', ' + alone_rule if alone_rule else ''})"
    return f"{cls} ({rule})" if rule else cls


def _label(v: Verdict) -> str:
    return _class_text(v.cls, v.rule, v.alone, v.alone_rule)


def _before(t: Transition) -> str:
    return _class_text(t.before, t.before_rule, t.before_alone, t.before_alone_rule)


def _commit_ref(c: CommitInfo) -> str:
    return c.sha[:12]


DID_TOO = "upstream did this too"
REWROTE = "upstream rewrote the same lines"
OVERLAP_SHOWN = 6  # per patch on a terminal; every one goes to JSON, Markdown and JUnit


def overlap_of(r: TargetRun, patch: str) -> list[Overlap]:
    return [o for o in r.overlap if o.patch == patch]


def overlap_line(o: Overlap) -> str:
    """`8c28b0eb1383 2026-07-04 #10935 [CI] upgrade vllm to 0619 (SILONG ZENG), hunks 1, 3:
    upstream did this too`."""
    pr = f" #{o.commit.pr}" if o.commit.pr and f"#{o.commit.pr}" not in o.commit.subject else ""
    by = f" ({o.commit.author})" if o.commit.author else ""
    what = f"hunk{'s' if len(o.hunks) != 1 else ''} {', '.join(map(str, o.hunks))}"
    return (f"{o.commit.sha[:12]} {o.commit.date[:10]}{pr} {o.commit.subject}{by}, {what}"
            + (f": {overlap_note(o)}" if overlap_note(o) else ""))


def overlap_note(o: Overlap) -> str:
    return DID_TOO if o.resembles else REWROTE if o.same_lines else ""


def _head_line(r: TargetRun, pin: str) -> str:
    text = f"pin {pin}: {r.target} {r.base[:12]} -> {r.ref} ({r.head[:12]})"
    if r.commits:
        text += f", {r.commits} first-parent commits"
    return text


# ----------------------------------------------------------------------------- terminal


def terminal(report: DriftReport, width: int | None = None) -> str:
    """`width`: wrap the table's detail column to it (a terminal's width; None: whole lines)."""
    out: list[str] = []
    for r in report.runs:
        out.append(_head_line(r, report.pin))
        if not r.verdicts:
            out.append("  (no patches for this target)")
            continue
        at = "at head" if report.mode != "onto" else "class"
        out += table.render([(v.patch, _label(v), printable(v.detail)) for v in r.verdicts],
                            header=("PATCH", at.upper(), "DETAIL"), indent="  ", width=width)
        if r.history:
            out.append("  class changes along first-parent history:")
            for h in r.history:
                if not h.transitions:
                    out.append(f"    {h.patch}: {h.at_pin.cls} throughout")
                    continue
                out.append(f"    {h.patch}: {h.at_pin.cls} at pin")
                for t in h.transitions:
                    out.append(f"      {_before(t)} -> {_label(t.after)} at {_commit_ref(t.commit)} "
                               f"{t.commit.date[:10]} {printable(t.commit.subject)}")
                    if t.after.cls not in ("clean",):
                        out.append(f"        {printable(t.after.detail)}")
        if r.bisect:
            out.append("  first commit where each patch stops applying (bisect):")
            for b in r.bisect:
                if b.status == "found" and b.commit and b.verdict:
                    out.append(f"    {b.patch}: {b.before} -> {_label(b.verdict)} at "
                               f"{_commit_ref(b.commit)} {b.commit.date[:10]} "
                               f"{printable(b.commit.subject)} "
                               f"[{b.checks} checks]")
                elif b.status == "fails-at-pin":
                    out.append(f"    {b.patch}: already fails at the pin [{b.checks} checks]")
                else:
                    out.append(f"    {b.patch}: still applies at {r.ref} [{b.checks} checks]")
        if r.overlap:
            out.append("  upstream commits on the lines each patch touches (overlap):")
            for v in r.verdicts:
                found = overlap_of(r, v.patch)
                if not found:
                    continue
                alike = [o for o in found if o.resembles]
                ranked = sorted(found, key=lambda o: (not o.resembles, not o.same_lines, o.index))
                shown = ranked[:max(OVERLAP_SHOWN, len(alike))]
                out.append(f"    {v.patch}: {len(found)} commit{'s' if len(found) != 1 else ''}"
                           + (f", {len(alike)} where {DID_TOO}" if alike else ""))
                for o in sorted(shown, key=lambda o: o.index):
                    out.append(f"      {printable(overlap_line(o))}")
                if len(found) > len(shown):
                    out.append(f"      ... {len(found) - len(shown)} more (--json, --markdown)")
        per = f", {1000 * r.seconds / max(r.commits, 1):.2f} ms/commit" if r.commits else ""
        out.append(f"  summary: {_counts(r.verdicts)} ({r.seconds:.2f}s{per})")
    fails = report.failures()
    warns = report.warnings()
    if fails:
        out.append("FAIL: " + "; ".join(f"{v.patch} {v.cls} on {r.target}@{r.ref}" for r, v in fails)
                   + f" (--fail-on {','.join(report.fail_on)})")
    else:
        out.append("OK" + (": warnings: " + "; ".join(f"{v.patch} {v.cls}" for _, v in warns)
                           if warns else ""))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- JSON


def to_json(report: DriftReport) -> dict:
    runs = []
    for r in report.runs:
        run: dict = {"target": r.target, "ref": r.ref, "base": r.base, "head": r.head,
                     "verdicts": [v.to_json() for v in r.verdicts],
                     "counts": dict(Counter(v.cls for v in r.verdicts)),
                     "seconds": round(r.seconds, 4), "snapshots": r.snapshots}
        if report.mode != "onto":
            run["commits"] = r.commits
            run["ms_per_commit"] = round(1000 * r.seconds / max(r.commits, 1), 4)
            run["stats"] = r.stats
        if r.history:
            run["history"] = [{"patch": h.patch, "at_pin": h.at_pin.to_json(),
                               "at_head": h.at_head.to_json(),
                               "transitions": [t.to_json() for t in h.transitions]}
                              for h in r.history]
        run["overlap"] = [{"patch": v.patch,
                           "commits": [o.to_json() for o in overlap_of(r, v.patch)]}
                          for v in r.verdicts]
        if r.bisect:
            run["bisect"] = [{"patch": b.patch, "status": b.status, "checks": b.checks,
                              **({"index": b.index, "from": b.before, "to": b.verdict.cls,
                                  **b.commit.to_json(), "verdict": b.verdict.to_json()}
                                 if b.status == "found" and b.commit and b.verdict else {}),
                              **({"verdict": b.verdict.to_json()}
                                 if b.status == "fails-at-pin" and b.verdict else {})}
                             for b in r.bisect]
        runs.append(run)
    return {"pin": report.pin, "mode": report.mode, "fail_on": list(report.fail_on),
            "ok": report.exit_code == 0, "runs": runs}


# ----------------------------------------------------------------------------- Markdown


def _md(text: str) -> str:
    return printable(text).replace("|", "\\|")


def markdown(report: DriftReport) -> str:
    fails = report.failures()
    status = ("FAIL" if fails else "OK") if report.fail_on else "report only"
    out = [f"## Patch drift: pin `{report.pin}` ({report.mode}): {status}", ""]
    for r in report.runs:
        out.append(f"### {r.target}: `{r.base[:12]}` -> `{r.ref}` (`{r.head[:12]}`)")
        out.append("")
        out.append(f"{_counts(r.verdicts)}" + (f"; {r.commits} first-parent commits scanned"
                                                if r.commits else ""))
        out.append("")
        if r.verdicts:
            out.append("| Patch | Class | Detail |")
            out.append("| --- | --- | --- |")
            for v in r.verdicts:
                mark = " **(fails)**" if v.cls in report.fail_on else (
                    " (warning)" if v.cls in WARN_ON else "")
                out.append(f"| `{v.patch}` | {_label(v)}{mark} | {_md(v.detail)} |")
            out.append("")
        changes = [(h.patch, t) for h in r.history for t in h.transitions]
        if r.history:
            if changes:
                out.append("| Patch | Change | Commit | Date | PR | Subject |")
                out.append("| --- | --- | --- | --- | --- | --- |")
                for patch, t in changes:
                    pr = f"#{t.commit.pr}" if t.commit.pr else ""
                    out.append(f"| `{patch}` | {_before(t)} → {_label(t.after)} | "
                               f"`{t.commit.sha[:12]}` | {t.commit.date[:10]} | {pr} | "
                               f"{_md(t.commit.subject)} |")
            else:
                out.append("No patch changed class along the scanned history.")
            out.append("")
        if r.bisect:
            out.append("| Patch | First failing commit | Change | PR | Checks |")
            out.append("| --- | --- | --- | --- | --- |")
            for b in r.bisect:
                if b.status == "found" and b.commit and b.verdict:
                    pr = f"#{b.commit.pr}" if b.commit.pr else ""
                    out.append(f"| `{b.patch}` | `{b.commit.sha[:12]}` {_md(b.commit.subject)} | "
                               f"{b.before} → {_label(b.verdict)} | {pr} | {b.checks} |")
                else:
                    what = "fails at the pin" if b.status == "fails-at-pin" else "still applies"
                    out.append(f"| `{b.patch}` | {what} | | | {b.checks} |")
            out.append("")
        if r.overlap:
            out.append("Upstream commits on the lines each patch touches:")
            out.append("")
            out.append("| Patch | Commit | Date | PR | Author | Subject | Hunks | Note |")
            out.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for o in (o for v in r.verdicts for o in overlap_of(r, v.patch)):
                pr = f"#{o.commit.pr}" if o.commit.pr else ""
                out.append(f"| `{o.patch}` | `{o.commit.sha[:12]}` | {o.commit.date[:10]} | {pr} | "
                           f"{_md(o.commit.author)} | {_md(o.commit.subject)} | "
                           f"{', '.join(map(str, o.hunks))} | {overlap_note(o)} |")
            out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------------------- JUnit


def suite_name(mode: str, r: TargetRun) -> str:
    """`drift.onto.plugin@main`, `drift.scan.plugin@main`: the mode is in the name, so the
    scan's report-only file and the `--onto` check never share a suite or a test case."""
    return f"drift.{mode}.{r.target}@{r.ref}"


def junit_suites(report: DriftReport) -> tuple[junit_xml.Suite, ...]:
    """One suite per target and ref, one test case per patch."""
    suites = []
    for r in report.runs:
        cases = []
        did_too = []
        for v in r.verdicts:
            detail = printable(v.detail)
            failure = (junit_xml.Failure(f"{_label(v)}: {detail}", v.cls, detail)
                       if v.cls in report.fail_on else None)
            prefix = "warning: " if v.cls in WARN_ON else ""
            notes = [f"overlap: {printable(overlap_line(o))}" for o in overlap_of(r, v.patch)]
            cases.append(junit_xml.Case(v.patch, f"drift.{report.mode}.{r.target}.{r.ref}", failure,
                                        skipped=detail if v.cls == "blocked" else None,
                                        output="\n".join([f"{prefix}{_label(v)}: {detail}", *notes])))
            did_too += [("upstream-did-this-too", f"{v.patch} {o.commit.sha}"
                         + (f" #{o.commit.pr}" if o.commit.pr else ""))
                        for o in overlap_of(r, v.patch) if o.resembles]
        props = (("pin", report.pin), ("base", r.base), ("head", r.head), ("mode", report.mode))
        suites.append(junit_xml.Suite(suite_name(report.mode, r), tuple(cases), r.seconds,
                                      props + tuple(did_too)))
    return tuple(suites)


def junit(report: DriftReport, extra: tuple[junit_xml.Suite, ...] = ()) -> str:
    """Drift's suites, then `extra` suites (the gate's, with --gate)."""
    return junit_xml.render(junit_suites(report) + tuple(extra), name=f"overlay drift {report.pin}")
