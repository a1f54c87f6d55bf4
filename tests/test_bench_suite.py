"""`overlay bench suite` (issue 22 item 2): `make bench` is an alias of it. It runs the
repository's benchmarks/bench_<NAME>.py, in order, each in a fresh process, and stops at the
first failure."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overlay import paths

SCRIPT = """\
import json, os, sys
with open(os.environ["BENCH_LOG"], "a") as f:
    f.write(json.dumps([{name!r}, sys.argv[1:], os.getcwd()]) + "\\n")
sys.exit({code})
"""


def _project(tmp_path: Path, scripts: dict[str, int]) -> Path:
    root = tmp_path / "project"
    (root / "benchmarks").mkdir(parents=True)
    (root / "series.yaml").write_text("series: []\n")
    for name, code in scripts.items():
        (root / "benchmarks" / f"bench_{name}.py").write_text(SCRIPT.format(name=name, code=code))
    for p in (root, root / "benchmarks", *(root / "benchmarks").iterdir()):  # whatever the umask
        p.chmod(p.stat().st_mode & ~0o022)
    return root


def _log(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_runs_the_named_benchmarks_in_order_with_their_arguments(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"gate": 0, "compose": 0, "drift": 0})
    log = tmp_path / "log"
    monkeypatch.setenv("BENCH_LOG", str(log))
    code, _, err = run("bench", "suite", "gate", "compose", "--arg=--rounds", "--arg=2", root=root)
    assert code == 0, err
    assert _log(log) == [["gate", ["--rounds", "2"], str(root)], ["compose", ["--rounds", "2"], str(root)]]
    log.unlink()
    assert run("bench", "suite", root=root)[0] == 0  # all of them, in name order
    assert [entry[0] for entry in _log(log)] == ["compose", "drift", "gate"]


def test_stops_at_the_first_failure_with_its_status(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"a": 0, "b": 3, "c": 0})
    log = tmp_path / "log"
    monkeypatch.setenv("BENCH_LOG", str(log))
    code, _, err = run("bench", "suite", root=root)
    assert code == 3 and [entry[0] for entry in _log(log)] == ["a", "b"]
    assert err.strip() == "overlay: error: benchmarks/bench_b.py exited with 3"


def test_an_unknown_name_or_no_benchmarks_folder_is_one_line(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"gate": 0})
    monkeypatch.setenv("BENCH_LOG", str(tmp_path / "log"))
    code, _, err = run("bench", "suite", "gates", root=root)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no benchmark named gates" in err and "gate" in err and not (tmp_path / "log").exists()
    (root / "benchmarks" / "bench_gate.py").unlink()
    (root / "benchmarks").rmdir()
    code, _, err = run("bench", "suite", root=root)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no benchmarks/ folder" in err


# ---- issue 26, case 9: benchmarks run only from a folder this user owns and no one else writes

def _not_run(run, root: Path, log: Path, why: str) -> None:
    code, _, err = run("bench", "suite", root=root)
    assert code == 2 and len(err.strip().splitlines()) == 1 and why in err, err
    assert "Traceback" not in err and not log.exists()


def test_benchmarks_of_another_user_are_not_run(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"gate": 0})
    log = tmp_path / "log"
    monkeypatch.setenv("BENCH_LOG", str(log))
    if os.geteuid() == 0:  # each of the three in turn belongs to someone else
        for where in (root, root / "benchmarks", root / "benchmarks" / "bench_gate.py"):
            os.chown(where, 65534, -1)
            _not_run(run, root, log, "owned by another user")
            assert str(where) in run("bench", "suite", root=root)[2]
            os.chown(where, 0, -1)
    else:  # not root: no chown; the same files seen by another user
        with monkeypatch.context() as m:
            m.setattr(os, "geteuid", lambda: os.getuid() + 1)
            _not_run(run, root, log, "owned by another user")
    assert run("bench", "suite", root=root)[0] == 0 and _log(log) == [["gate", [], str(root)]]


def test_benchmarks_others_can_write_are_not_run(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"gate": 0})
    log = tmp_path / "log"
    monkeypatch.setenv("BENCH_LOG", str(log))
    for where in (root, root / "benchmarks", root / "benchmarks" / "bench_gate.py"):
        for bit in (stat.S_IWGRP, stat.S_IWOTH):
            mode = where.stat().st_mode
            where.chmod(mode | bit)
            _not_run(run, root, log, "writable by")
            where.chmod(mode)
    # a script that is a link to one someone else may write is judged by what it runs
    shared = tmp_path / "shared.py"
    shared.write_text("import sys; sys.exit(0)\n")
    shared.chmod(0o666)
    script = root / "benchmarks" / "bench_gate.py"
    script.unlink()
    script.symlink_to(shared)
    _not_run(run, root, log, "writable by")


@given(uid=st.integers(0, 70000), me=st.integers(0, 70000), mode=st.integers(0, 0o7777))
def test_untrusted_is_exactly_foreign_owner_or_writable_by_others(uid, me, mode):
    """The pure rule: trusted exactly when owned by this user and writable by no group or other."""
    why = paths.not_ours_to_run(uid, stat.S_IFREG | mode, me)
    assert (why is None) == (uid == me and not mode & (stat.S_IWGRP | stat.S_IWOTH))
