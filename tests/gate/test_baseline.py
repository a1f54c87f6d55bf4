"""New findings against a baseline (issue 30 item 5, issue 27 item 4): pure."""

from overlay.gate.baseline import new_findings
from overlay.gate.findings import Finding


def _f(symbol, path="p/a.py", line=1, kind="import", severity="error"):
    return Finding(kind, symbol, path, line, "core/x.py", 3, "msg", severity)


def test_a_finding_upstream_ships_with_is_not_new_even_where_its_line_moved():
    assert new_findings([_f("import:vllm.x:Y", line=40)], [_f("import:vllm.x:Y", line=12)]) == []


def test_only_the_extra_one_of_the_same_kind_is_new():
    ours = [_f("import:vllm.x:Y"), _f("import:vllm.x:Y", line=9)]
    assert new_findings(ours, [_f("import:vllm.x:Y")]) == [ours[1]]


def test_another_symbol_or_file_is_new():
    base = [_f("import:vllm.x:Y")]
    assert len(new_findings([_f("import:vllm.x:Z"), _f("import:vllm.x:Y", path="p/b.py")], base)) == 2
