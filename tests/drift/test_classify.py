"""Series semantics of the pure classifier: stacking, blocking, merged rules."""

from __future__ import annotations

from overlay.drift.classify import DriftPatch, Memo, classify_series
from overlay.drift.inmem_apply import parse_diff

TEXT = "".join(f"v{i} = {i}\n" for i in range(1, 16))


def patch(name: str, path: str, hunk: str, header: str = "") -> DriftPatch:
    diff = f"diff --git a/{path} b/{path}\n{header}--- a/{path}\n+++ b/{path}\n{hunk}"
    return DriftPatch(name, "plugin", parse_diff(diff))


P1 = patch("0001", "m.py", "@@ -4,7 +4,7 @@\n v4 = 4\n v5 = 5\n v6 = 6\n-v7 = 7\n+v7 = 70\n v8 = 8\n v9 = 9\n v10 = 10\n")
# 0002 is written on top of 0001: its context holds 0001's new line.
P2 = patch("0002", "m.py", "@@ -5,6 +5,7 @@\n v5 = 5\n v6 = 6\n v7 = 70\n+v7b = 7.5\n v8 = 8\n v9 = 9\n v10 = 10\n")
P3 = patch("0003", "other.py", "@@ -1,3 +1,3 @@\n o1\n-o2\n+o2 patched\n o3\n")


def run(base: dict, *patches: DriftPatch, **kw):
    texts = {f"blob:{k}": v for k, v in base.items() if v is not None}
    keys = {k: (f"blob:{k}" if v is not None else None) for k, v in base.items()}
    return {v.patch: v for v in classify_series(patches, keys, texts.__getitem__, **kw)}


def test_each_patch_is_checked_on_top_of_the_ones_before_it():
    got = run({"m.py": TEXT}, P1, P2)
    assert (got["0001"].cls, got["0002"].cls) == ("clean", "clean")
    alone = run({"m.py": TEXT}, P2)  # without 0001 underneath, 0002 cannot apply
    assert alone["0002"].cls == "conflict"


def test_a_failed_patch_blocks_later_patches_on_its_files_only():
    broken = TEXT.replace("v7 = 7\n", "v7 = 7.1\n")
    got = run({"m.py": broken, "other.py": "o1\no2\no3\n"}, P1, P2, P3)
    assert got["0001"].cls == "conflict"
    assert got["0002"].cls == "blocked" and got["0002"].blocked_by == "0001"
    assert got["0003"].cls == "clean"  # another file: still checked


def test_blocking_chains_through_blocked_patches():
    P4 = patch("0004", "m.py", "@@ -13,3 +13,3 @@\n v13 = 13\n-v14 = 14\n+v14 = 140\n v15 = 15\n")
    got = run({"m.py": TEXT.replace("v7 = 7\n", "v7 = 7.1\n")}, P1, P2, P4)
    assert got["0004"].cls == "blocked" and got["0004"].blocked_by == "0002"


def test_a_merged_patch_does_not_block_the_ones_built_on_it():
    merged = TEXT.replace("v7 = 7\n", "v7 = 70\n")
    got = run({"m.py": merged}, P1, P2)
    assert (got["0001"].cls, got["0001"].rule) == ("merged", "reverse")
    assert got["0002"].cls == "clean"  # upstream's text carries 0001's change


def test_patch_id_rule_when_the_text_moved_on():
    # upstream took the change, then changed the line again: only the patch-id remembers
    moved_on = TEXT.replace("v7 = 7\n", "v7 = 71\n")
    got = run({"m.py": moved_on}, P1)
    assert got["0001"].cls == "conflict"
    got = run({"m.py": moved_on}, P1, merged_by_id={"0001": "c" * 40})
    assert (got["0001"].cls, got["0001"].rule, got["0001"].upstream_commit) == \
        ("merged", "patch-id", "c" * 40)


def test_likely_merged_needs_every_added_line_and_the_old_line_gone():
    reformatted = TEXT.replace("v7 = 7\n", "v7  =  70   # merged\n").replace("v6 = 6\n", "v6 = 6  # x\n")
    got = run({"m.py": reformatted}, P1)
    # "v7=70#merged" is not "v7=70": a whole-line comparison, not a substring
    assert got["0001"].cls == "conflict"
    reformatted = TEXT.replace("v7 = 7\n", "v7  =  70\n").replace("v6 = 6\n", "v6 = 6  # x\n")
    got = run({"m.py": reformatted}, P1)
    assert (got["0001"].cls, got["0001"].rule) == ("merged", "likely")
    both = reformatted.replace("v8 = 8\n", "v8 = 8\nv7 = 7\n")
    assert run({"m.py": both}, P1)["0001"].cls == "conflict"  # the old line is still there


def test_trivial_additions_never_count_as_likely_merged():
    P5 = patch("0005", "m.py", "@@ -4,6 +4,7 @@\n v4 = 4\n v5 = 5\n v6 = 6\n+)\n v7 = 7\n v8 = 8\n v9 = 9\n")
    text = TEXT.replace("v6 = 6\n", "v6 = 66\n)\n").replace("v7 = 7\n", "v7 = 77\n")
    assert run({"m.py": text}, P5)["0005"].cls == "conflict"


def test_missing_file_and_rename_hint():
    got = run({"m.py": None}, P1, renames={"m.py": "pkg/m.py"})
    v = got["0001"]
    assert v.cls == "missing" and v.missing == ("m.py",) and v.moved_to == (("m.py", "pkg/m.py"),)
    assert "m.py was renamed to pkg/m.py" in v.detail
    assert run({"m.py": None}, P1)["0001"].detail == "gone upstream: m.py"


def test_memo_reuses_checks_without_changing_verdicts():
    memo = Memo()
    first = run({"m.py": TEXT}, P1, P2, memo=memo)
    again = run({"m.py": TEXT}, P1, P2, memo=memo)
    assert first == again and memo.hits == 2 and memo.misses == 2


# ----------------------------------------------------------------------------- "likely merged" is strict

PRE = "".join(f"x{i} = {i}\n" for i in range(30))
POST = "".join(f"y{i} = {i}\n" for i in range(30))


def addition(name: str, added: str) -> DriftPatch:
    """A patch that only adds `added` (one or more lines) between x29 and y0."""
    body = "".join(f"+{line}\n" for line in added.splitlines())
    n = len(added.splitlines())
    return patch(name, "m.py", f"@@ -28,6 +28,{6 + n} @@\n x27 = 27\n x28 = 28\n x29 = 29\n"
                 f"{body} y0 = 0\n y1 = 1\n y2 = 2\n")


REPLACE = patch("0007", "m.py", "@@ -29,5 +29,5 @@\n x28 = 28\n x29 = 29\n-old = 1\n"
                "+result = compute(alpha, beta, gamma)\n y0 = 0\n y1 = 1\n")


def test_a_common_added_line_found_nearby_is_not_likely_merged():
    # the patch only adds `return None`; upstream changed the context, and happens to
    # have a `return None` of its own 25 lines away: nothing says the patch landed
    upstream = PRE.replace("x5 = 5\n", "return None\n") + "z = 1\n" + POST
    assert run({"m.py": upstream}, addition("0006", "return None"))["0006"].cls == "conflict"
    upstream = PRE + "z = 1\n" + "return None\n" + POST  # even right there: proves nothing
    assert run({"m.py": upstream}, addition("0006", "return None"))["0006"].cls == "conflict"


def test_added_lines_must_appear_in_order_and_together():
    lines = "first = compute(alpha)\nsecond = compute(beta)"
    together = PRE + "z = 1\nfirst = compute(alpha)\nsecond = compute(beta)\n" + POST
    assert run({"m.py": together}, addition("0006", lines))["0006"].rule == "likely"
    swapped = PRE + "z = 1\nsecond = compute(beta)\nfirst = compute(alpha)\n" + POST
    assert run({"m.py": swapped}, addition("0006", lines))["0006"].cls == "conflict"
    apart = PRE.replace("x10 = 10\n", "first = compute(alpha)\n") + "z = 1\nsecond = compute(beta)\n" + POST
    assert run({"m.py": apart}, addition("0006", lines))["0006"].cls == "conflict"


def test_a_pure_addition_must_sit_next_to_its_context():
    # the added line is there, but 25 lines from anything the hunk's context names
    far = PRE.replace("x5 = 5\n", "result = compute(alpha, beta, gamma)\n") + "z = 1\n" + POST
    assert run({"m.py": far}, addition("0006", "result = compute(alpha, beta, gamma)"))["0006"].cls \
        == "conflict"


def test_pure_addition_reformatted_upstream_is_likely_merged():
    upstream = PRE + "z = 1\nresult = compute(\n    alpha, beta, gamma\n)\n" + POST
    got = run({"m.py": upstream}, addition("0006", "result = compute(alpha, beta, gamma)"))["0006"]
    assert (got.cls, got.rule) == ("merged", "likely")


def test_black_style_reformatting_is_likely_merged():
    # one argument per line and black's "magic trailing comma"
    base = PRE + "old = 1\n" + POST
    black = PRE + "result = compute(\n    alpha,\n    beta,\n    gamma,\n)\n" + POST
    assert run({"m.py": base}, REPLACE)["0007"].cls == "clean"
    got = run({"m.py": black}, REPLACE)["0007"]
    assert (got.cls, got.rule) == ("merged", "likely")
    other = black.replace("    gamma,\n", "    delta,\n")  # a different call is not the patch
    assert run({"m.py": other}, REPLACE)["0007"].cls == "conflict"
