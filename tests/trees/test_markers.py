"""Issue 26, case 10: forged ownership markers.

A marker proves a folder was made by an overlay run only when it parses to the exact
schema `ownership.make` writes; anything else proves nothing: the folder is left alone,
and the run says so. Cleaning up never moves or deletes through a symbolic link.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

NONCE = "0123456789abcdef"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _record(**changes) -> dict:
    record = {"tool": "overlay", "pid": _dead_pid(), "started": 12345, "nonce": NONCE,
              "since": "2026-07-01T10:00:00Z"}
    record.update(changes)
    return {k: v for k, v in record.items() if v is not _DROP}


_DROP = object()


def _forge(folder: Path, marker) -> Path:
    folder.mkdir(parents=True)
    text = marker if isinstance(marker, str) else json.dumps(marker)
    (folder / ".overlay-owner.json").write_text(text)
    (folder / "p1" / "plugin").mkdir(parents=True)
    (folder / "p1" / "plugin" / "user.txt").write_text("mine\n")
    return folder


FORGED = {
    "started null": lambda: _record(started=None),
    "started a string": lambda: _record(started="12345"),
    "started true": lambda: _record(started=True),
    "pid true": lambda: _record(pid=True),
    "pid zero": lambda: _record(pid=0),
    "an extra key": lambda: _record(extra="x"),
    "no since": lambda: _record(since=_DROP),
    "since a number": lambda: _record(since=5),
    "nonce upper case": lambda: _record(nonce=NONCE.upper()),
    "tool other": lambda: _record(tool="Overlay"),
    "a list": lambda: json.dumps([_record()]),
}


@pytest.mark.parametrize("how", sorted(FORGED))
def test_a_marker_not_of_the_exact_schema_proves_nothing_and_says_so(world, run, tmp_path, how):
    into = tmp_path / "trees"
    folder = _forge(into / f".discard-{NONCE}", FORGED[how]())
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, root=world.project)
    assert code == 0, err
    assert (folder / "p1" / "plugin" / "user.txt").read_text() == "mine\n"
    if how != "nonce upper case":  # a nonce that does not fit the folder is just not ours
        assert f"left {folder} as it is" in err and "Traceback" not in err, err


def test_a_valid_marker_of_a_run_that_is_gone_is_still_cleaned_up(world, run, tmp_path):
    into = tmp_path / "trees"
    folder = _forge(into / f".discard-{NONCE}", _record())
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, root=world.project)
    assert code == 0, err
    assert not folder.exists() and "as it is" not in err


def test_an_old_folder_whose_pin_subfolder_is_a_symlink_moves_nothing_in(world, run, tmp_path):
    into = tmp_path / "trees"
    into.mkdir()
    outside = tmp_path / "outside"
    (outside / "plugin").mkdir(parents=True)
    (outside / "plugin" / "precious.txt").write_text("not overlay's\n")
    old = into / f".old-{NONCE}"
    old.mkdir()
    (old / ".overlay-owner.json").write_text(json.dumps(_record()))
    (old / "p1").symlink_to(outside)
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, root=world.project)
    assert (outside / "plugin" / "precious.txt").read_text() == "not overlay's\n"
    assert not (into / "p1" / "plugin" / "precious.txt").exists()
    assert code == 0, err
    assert (into / "p1" / "plugin" / "vllm_ascend" / "envs.py").is_file()
    assert (old / "p1").is_symlink() and f"left {old} as it is" in err and "symbolic link" in err, err


def test_an_old_folder_whose_tree_is_a_symlink_or_whose_pin_folder_is_one_moves_nothing(world, run,
                                                                                      tmp_path):
    """A tree inside the `.old-` folder that is a link, or a destination pin folder in
    the trees' folder that is a link: nothing is moved through either."""
    into = tmp_path / "trees"
    into.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("not overlay's\n")
    old = into / f".old-{NONCE}"
    (old / "p2" / "plugin").mkdir(parents=True)
    (old / "p2" / "plugin" / "tree.txt").write_text("a tree moved aside\n")
    (old / ".overlay-owner.json").write_text(json.dumps(_record()))
    (into / "p2").symlink_to(outside)  # where the tree would be put back
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, root=world.project)
    assert code == 0, err
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (old / "p2" / "plugin" / "tree.txt").is_file() and f"left {old} as it is" in err, err


def test_remove_never_deletes_through_a_symlinked_folder(tmp_path):
    from overlay.trees import ownership

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("x")
    link = tmp_path / ".discard-link"
    link.symlink_to(outside)
    ownership.remove(link, ignore_errors=True)
    assert (outside / "precious.txt").is_file()
    with pytest.raises(OSError):
        ownership.remove(link)


# A run killed between making its folder and marking it, or between deleting the marker
# and the folder, leaves an empty folder of its own name shape: the next run under the
# lock removes that one (rmdir: an empty folder and nothing else), and no other.

_NAMES = st.one_of(
    st.builds(lambda prefix, nonce: f"{prefix}{nonce}",
              st.sampled_from([".staging-p1-", ".old-", ".discard-", "refresh-", "x"]),
              st.one_of(st.text("0123456789abcdef", min_size=16, max_size=16),
                        st.text("0123456789abcdefABCDEF-", min_size=14, max_size=18))),
    st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1,
            max_size=30).filter(lambda n: n not in (".", "..")),
)


def _made_shape(name: str) -> bool:
    return len(name) > 16 and name[-17] == "-" and all(c in "0123456789abcdef" for c in name[-16:])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_NAMES, content=st.sampled_from(["empty", "file", "hidden file", "folder", "marker tmp", "link"]))
def test_leftover_removes_only_an_empty_folder_of_the_name_make_gives(tmp_path, name, content):
    from overlay.trees import ownership

    # a fresh folder per example: hypothesis may run the same example twice (a replay, a
    # shrink), and a folder the example leaves behind would meet it
    parent = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = parent / name
    try:
        folder.mkdir()
    except OSError:
        return  # a name this file system refuses
    if content == "file":
        (folder / "draft.md").write_text("a draft\n")
    elif content == "hidden file":
        (folder / ".keep").write_text("")
    elif content == "folder":
        (folder / "p1").mkdir()
    elif content == "marker tmp":
        (folder / ".overlay-owner.json.tmp").write_text('{"tool": "over')
    elif content == "link":
        (folder / "to").symlink_to(tmp_path)
    assert ownership.leftover(folder) is None
    removed = not folder.exists()
    assert removed == (content == "empty" and _made_shape(name)), (name, content)
    assert tmp_path.is_dir()


def test_the_marker_is_named_only_once_whole_here(tmp_path):
    """Where O_TMPFILE works (this file system), no half-made marker file ever has a name."""
    from overlay.trees import ownership

    folder = tmp_path / "f"
    folder.mkdir()
    assert ownership._link_whole(folder, b'{"x": 1}\n')
    assert [p.name for p in folder.iterdir()] == [".overlay-owner.json"]
    assert (folder / ".overlay-owner.json").read_bytes() == b'{"x": 1}\n'
