"""The one reader for untrusted files (paths.read_capped / iter_capped, issue 26 "bounded
everything"): regular files only, inside the tree it is given, at most a cap, and no open
that blocks. What it refuses, it refuses without reading: a FIFO, a device, a link out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overlay import paths


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\n")
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    return root, outside


def test_regular_file_inside_is_read_and_capped(tmp_path):
    root, _ = _tree(tmp_path)
    assert paths.read_capped(root / "pkg" / "a.py", 100, within=root) == b"x = 1\n"
    assert paths.read_capped(root / "pkg" / "a.py", 3, within=root) == b"x = "  # limit + 1: the caller refuses
    (root / "pkg" / "alias.py").symlink_to("a.py")  # a link that stays inside is the file it names
    assert paths.read_capped(root / "pkg" / "alias.py", 100, within=root) == b"x = 1\n"
    assert b"".join(paths.iter_capped(root / "pkg" / "a.py", 100, within=root, chunk=2)) == b"x = 1\n"


def test_a_link_leaving_the_tree_is_refused(tmp_path):
    root, outside = _tree(tmp_path)
    (root / "pkg" / "out.py").symlink_to(outside)
    (root / "up").symlink_to(tmp_path)  # a folder link: the file behind it is outside too
    for path in (root / "pkg" / "out.py", root / "up" / "outside.py", root / "pkg" / ".." / ".." / "outside.py"):
        with pytest.raises(paths.OutsideTree):
            paths.read_capped(path, 100, within=root)
    assert paths.read_capped(root / "pkg" / "out.py", 100) == b"SECRET = 1\n"  # no tree given: not judged


def test_fifo_and_device_are_refused_without_blocking(tmp_path):
    root, _ = _tree(tmp_path)
    os.mkfifo(root / "pkg" / "fifo.py")
    (root / "pkg" / "zero.py").symlink_to("/dev/zero")
    for name, kind in (("fifo.py", "a FIFO"), ("zero.py", "a device")):
        with pytest.raises((paths.NotARegularFile, paths.OutsideTree)) as exc:
            paths.read_capped(root / "pkg" / name, 100, within=root)
        with pytest.raises(paths.NotARegularFile) as exc:
            paths.read_capped(root / "pkg" / name, 100)
        assert exc.value.kind == kind


@given(name=st.sampled_from(["a.py", "../outside.py", "../../etc/passwd", "pkg/../pkg/a.py", "./a.py", "x/../../y"]),
       link=st.booleans())
def test_whatever_the_spelling_nothing_outside_is_read(tmp_path_factory, name, link):
    tmp = tmp_path_factory.mktemp("spell")
    root, outside = _tree(tmp)
    target = root / "pkg" / name
    if link:
        (root / "pkg" / "l").symlink_to("..")
        target = root / "pkg" / "l" / name
    try:
        data = paths.read_capped(target, 1 << 10, within=root)
    except (paths.OutsideTree, OSError):
        return
    real = Path(os.path.realpath(target))
    assert real.is_relative_to(root.resolve()) and data != outside.read_bytes()
