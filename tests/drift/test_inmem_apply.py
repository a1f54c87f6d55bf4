"""In-memory hunk application: the clean / offset / fuzz / fail judgement of one file."""

from __future__ import annotations

import os
import subprocess

import pytest

from overlay.drift.inmem_apply import (FilePatch, apply_file, apply_hunks, parse_diff,
                                       split_lines)

BASE = "".join(f"line {i}\n" for i in range(1, 21))


def diff_of(old: str, new: str, path: str = "f.txt", tmp_path=None) -> str:
    """A real `git diff` between two texts (git writes the hunks, not the test)."""
    for side, text in (("a", old), ("b", new)):
        (tmp_path / side).mkdir(exist_ok=True)
        (tmp_path / side / path).write_text(text)
    # --no-prefix with paths a/<path> and b/<path> gives the usual a/ b/ headers
    proc = subprocess.run(["git", "-c", "core.quotePath=true", "diff", "--no-index", "--no-prefix",
                           f"a/{path}", f"b/{path}"], cwd=tmp_path, capture_output=True, text=True,
                          env={"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                               "PATH": os.environ["PATH"]})
    assert proc.returncode == 1, proc.stderr
    return proc.stdout


@pytest.fixture
def change(tmp_path):
    new = BASE.replace("line 10\n", "line 10 changed\n")
    fp, = parse_diff(diff_of(BASE, new, tmp_path=tmp_path))
    return fp, new


def test_clean_at_recorded_lines(change):
    fp, new = change
    r = apply_file(BASE, fp)
    assert (r.status, r.shift, r.text) == ("clean", 0, new)


def test_offset_reports_the_shift(change):
    fp, new = change
    r = apply_file("extra 1\nextra 2\nextra 3\n" + BASE, fp)
    assert (r.status, r.shift) == ("offset", 3)
    assert r.text == "extra 1\nextra 2\nextra 3\n" + new


def test_fuzz_when_outer_context_changed(change):
    fp, _ = change
    r = apply_file(BASE.replace("line 13\n", "line 13 edited\n"), fp)
    assert (r.status, r.fuzz) == ("fuzz", 1)
    assert "line 10 changed\n" in r.text and "line 13 edited\n" in r.text
    r2 = apply_file(BASE.replace("line 12\n", "line 12 edited\n"), fp)
    assert (r2.status, r2.fuzz) == ("fuzz", 2)


def test_fails_when_the_changed_line_moved_on(change):
    fp, _ = change
    r = apply_file(BASE.replace("line 10\n", "line ten\n"), fp)
    assert r.status == "fail" and r.failed_hunk == 1 and "hunk #1" in r.reason


def test_reverse_applies_on_the_result(change):
    fp, new = change
    assert apply_file(new, fp.reversed(), 0).status == "clean"
    assert apply_file(BASE, fp.reversed(), 0).status == "fail"


def test_nearest_match_wins_when_context_repeats(tmp_path):
    text = "a\nb\nc\nX\nd\ne\nf\n" * 3
    new = text.replace("X", "Y", 1)
    fp, = parse_diff(diff_of(text, new, tmp_path=tmp_path))
    r = apply_file("pad\n" * 7 + text, fp)  # the first copy moved by 7, the others by 0 and 14
    assert r.status == "offset" and r.shift == 7


def test_no_newline_at_end_of_file(tmp_path):
    old = "one\ntwo\nthree"
    new = "one\ntwo\nthree and more"
    fp, = parse_diff(diff_of(old, new, tmp_path=tmp_path))
    assert apply_file(old, fp).text == new
    assert apply_file(old + "\n", fp).status == "fail"  # the last line differs by its newline


def test_creation_deletion_and_rename_parse(tmp_path):
    diff = (
        "diff --git a/new.txt b/new.txt\nnew file mode 100644\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
        "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\nindex 1111111..0000000\n"
        "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        "diff --git a/x.txt b/y.txt\nsimilarity index 100%\nrename from x.txt\nrename to y.txt\n"
        "-- \n2.39.5\n")
    create, delete, rename = parse_diff(diff)
    assert (create.old_path, create.new_path) == (None, "new.txt")
    assert apply_file(None, create).text == "hello\nworld\n"
    assert apply_file("already\n", create).status == "fail"
    assert (delete.old_path, delete.new_path) == ("old.txt", None)
    assert apply_file("bye\n", delete).status == "clean"
    assert apply_file("bye\nand more\n", delete).status == "fail"
    assert (rename.old_path, rename.new_path, rename.hunks) == ("x.txt", "y.txt", ())
    assert apply_file("x\n", rename, target_exists=True).status == "fail"
    # the mail signature after the last hunk is not part of any hunk
    assert delete.hunks[0].old == ("bye\n",)


def test_split_lines_keeps_form_feeds_inside_lines():
    assert split_lines("a\x0cb\nc") == ["a\x0cb\n", "c"]


def test_truncated_hunk_is_one_error_line():
    from overlay.errors import OverlayError
    with pytest.raises(OverlayError, match="truncated"):
        parse_diff("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n")


def test_hunks_apply_in_order_and_fail_on_the_second(tmp_path):
    new = BASE.replace("line 3\n", "line 3!\n").replace("line 17\n", "line 17!\n")
    fp, = parse_diff(diff_of(BASE, new, tmp_path=tmp_path))
    assert len(fp.hunks) == 2
    r = apply_hunks(BASE.replace("line 17\n", "seventeen\n"), fp.hunks)
    assert r.status == "fail" and r.failed_hunk == 2
    assert isinstance(fp, FilePatch)
