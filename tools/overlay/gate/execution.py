"""Grading a forecast by execution (the forward matrix's execution column). Pure.

A gate error says "this site breaks on release R". Running the plugin's unit tests on R
with a probe at the site (overlay.testing.execution) tells:
- **failed there**: a test reached the site and failed inside the function holding it,
  the break observed;
- **reached**: tests reached the site and none failed inside that function (the finding
  did not show at run time: on these tests' inputs, or not at all);
- **not reached**: the probe was placed and no test reached it: not proven either way;
- **not probed** (no statement could carry a probe) and **not run** (no execution for R):
  unknown.

And the other way round, each failure of the run whose crash lies in the plugin's own
code is **forecast** (a gate error sits in the same function) or **missed**.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

FAILED_THERE, REACHED, NOT_REACHED, NOT_PROBED, NOT_RUN = (
    "failed there", "reached", "not reached", "not probed", "not run")
DID_NOT_START = "not run (the tests did not start)"
_FRAME = re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+): in ")
_CRASH = re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+):\s*(?P<message>.*)$")


@dataclass(frozen=True)
class Crash:
    path: str
    line: int
    message: str


def crash_of(where: str) -> Crash | None:
    """A failure's crash location ("path.py:LINE: message"), as composed-test records it."""
    m = _CRASH.match(where or "")
    return Crash(m["path"], int(m["line"]), m["message"]) if m else None


def enclosing_span(source: str | None, line: int) -> tuple[int, int]:
    """The innermost function's (first, last) line holding `line`; the line alone at module
    level or when the source does not parse."""
    if source is None:
        return line, line
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return line, line
    best = (line, line)
    size = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and (size is None or end - node.lineno < size):
                best, size = (node.lineno, end), end - node.lineno
    return best


def grade_site(where: str, span: tuple[int, int], placed: bool | None, reached_by: tuple[str, ...],
               failures: dict[str, str]) -> tuple[str, list[str]]:
    """(label, tests) for one gate error at `where` ("path:line"), `span` its function."""
    if placed is None:
        return NOT_RUN, []
    if not placed:
        return NOT_PROBED, []
    if not reached_by:
        return NOT_REACHED, []
    path = where.rpartition(":")[0]
    failed = []
    for test in reached_by:
        crash = crash_of(failures.get(test, ""))
        if crash and crash.path == path and span[0] <= crash.line <= span[1]:
            failed.append(test)
    return (FAILED_THERE, failed) if failed else (REACHED, list(reached_by))


def label(outcome: str, tests: list[str]) -> str:
    if outcome in (FAILED_THERE, REACHED):
        return f"{outcome} ({len(tests)} test{'s' if len(tests) != 1 else ''})"
    return outcome


def grade_failures(failures: dict[str, str], package: str,
                   error_spans: dict[str, list[tuple[int, int]]]) -> list[dict]:
    """Each distinct crash location in the plugin's `package` code: forecast (a gate error's
    function holds it) or missed. `error_spans`: path -> the errors' function spans."""
    by_site: dict[tuple[str, int], dict] = {}
    for test, where in sorted(failures.items()):
        crash = crash_of(where)
        if crash is None or not crash.path.startswith(package + "/"):
            continue
        entry = by_site.setdefault((crash.path, crash.line), {
            "where": f"{crash.path}:{crash.line}", "message": crash.message[:200], "tests": 0})
        entry["tests"] += 1
    out = []
    for (path, line), entry in sorted(by_site.items()):
        hit = any(lo <= line <= hi for lo, hi in error_spans.get(path, ()))
        out.append({**entry, "grade": "forecast" if hit else "missed"})
    return out


def stopping_crash(output: list[str], package: str) -> Crash | None:
    """Where a run that never started its tests (a conftest that does not import) crashed in
    the plugin's own code: the last `path.py:LINE: in ...` frame of pytest's report within
    `package`, with the error line after it."""
    frames = [(i, _FRAME.match(line.strip())) for i, line in enumerate(output)]
    ours = [(i, m) for i, m in frames if m and m["path"].startswith(package + "/")]
    if not ours:
        return None
    i, m = ours[-1]
    errors = [line.strip()[4:] for line in output[i:] if line.strip().startswith("E   ")]
    return Crash(m["path"], int(m["line"]), errors[-1] if errors else "")
