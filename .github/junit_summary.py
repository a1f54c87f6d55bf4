"""A job summary (Markdown) from a pytest JUnit report: counts, then each failure on one line.

Usage: python .github/junit_summary.py reports/pytest.xml [TITLE] >> "$GITHUB_STEP_SUMMARY"
(TITLE: the heading, by default "Tests on Python <version>").
Standard library only; a missing or unreadable report is said as such (exit 0: the test
step already decides the job).
"""

from __future__ import annotations

import platform
import sys
import xml.etree.ElementTree as ET

MAX_LISTED = 50


def summary(path: str, heading: str | None = None) -> str:
    title = f"### {heading or f'Tests on Python {platform.python_version()}'}"
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        return f"{title}\n\nNo JUnit report ({path}: {exc}); see the test step's log.\n"
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    count = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    passed = count["tests"] - count["failures"] - count["errors"] - count["skipped"]
    lines = [title, "", "| passed | failed | errors | skipped |", "|---:|---:|---:|---:|",
             f"| {passed} | {count['failures']} | {count['errors']} | {count['skipped']} |", ""]
    bad = [(case, child) for s in suites for case in s.iter("testcase")
           for child in case if child.tag in ("failure", "error")]
    for case, child in bad[:MAX_LISTED]:
        message = " ".join((child.get("message") or child.tag).split())[:200]
        lines.append(f"- `{case.get('classname')}::{case.get('name')}`: {message}")
    if len(bad) > MAX_LISTED:
        lines.append(f"- … and {len(bad) - MAX_LISTED} more (see the JUnit artifact)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(summary(sys.argv[1] if len(sys.argv) > 1 else "reports/pytest.xml",
                             sys.argv[2] if len(sys.argv) > 2 else None))
