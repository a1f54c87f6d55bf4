"""overlay.reporting.table: one renderer for the terminal tables (pure)."""

from __future__ import annotations

from overlay.drift.classify import Verdict
from overlay.drift.report import DriftReport, terminal
from overlay.drift.scan import TargetRun
from overlay.gate.forward import Row, render as forward_render
from overlay.reporting import table


def test_columns_align_right_where_asked_and_lines_carry_no_trailing_spaces():
    lines = table.render([("a", 1, "x"), ("longer", 22, "")], header=("name", "n", "note"), align="lr",
                         indent="  ")
    assert lines == ["  name     n  note", "  a        1  x", "  longer  22"]


def test_the_last_column_wraps_under_itself_only_when_a_width_is_given():
    long = "word " * 30
    whole = table.render([("0001-x.patch", "conflict", long.strip())])
    assert len(whole) == 1  # a pipe or a file: every row on one line
    wrapped = table.render([("0001-x.patch", "conflict", long.strip())], width=60)
    assert len(wrapped) > 1 and all(len(line) <= 60 for line in wrapped)
    start = len("0001-x.patch  conflict  ")
    assert all(line.startswith(" " * start) and line[start] != " " for line in wrapped[1:])
    assert " ".join(line.strip() for line in wrapped).endswith(long.strip().split(" ", 2)[2])


def test_drift_terminal_table_fits_the_terminal_width():
    detail = "pkg/a.py: hunk #1 (line 3) does not apply; " * 6
    v = Verdict("0001-a-long-patch-name.patch", "conflict", detail)
    report = DriftReport("pin", "onto", (TargetRun("plugin", "main", "b" * 40, "c" * 40, (v,), 0),))
    assert max(map(len, terminal(report).splitlines())) > 250  # piped: whole rows, as before
    assert max(map(len, terminal(report, 100).splitlines())) <= 100


def test_forward_view_keeps_its_columns_when_a_release_name_is_long():
    rows = [Row("v0.27.1", 2, 1, ("import a.py:3: gone", "override b.py:9: moved"), 3.21, True),
            Row("0.28.0", 10, 0, (), 1.0, False)]
    head, *lines = forward_render("p", rows).splitlines()[1:]
    ends = [head.index(h) + len(h) for h in ("errors", "warnings", "seconds")]  # right-aligned
    for line in (lines[0], lines[2]):
        assert all(line[e - 1] != " " and line[e] == " " for e in ends), line
    assert lines[1].strip() == "override b.py:9: moved" and lines[1].index("override") == head.index("top")
