"""Issue 26, case 3: the rebase state file (.overlay/rebase.json) is data.

It is checked against its exact schema on load (one line naming it, exit 2, nothing
written); its paths are the ones the rebase itself would choose, and the composed tree
is removed only when it carries the marker the rebase put there. The new pin file is
created exclusively, and the rebase holds the checkout lock throughout, so two cannot
start at once. Generated tamperings (hypothesis) hold the same invariants.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from test_rebase import _history, project, rebase, resolve_o_py, snapshot  # noqa: F401 (fixtures)

STATE = Path(".overlay") / "rebase.json"


@pytest.fixture
def stopped(capsys, project):  # noqa: F811
    """A rebase of `base` onto u4 as `next`, stopped at 0003's conflict."""
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    assert rc == 1, err
    return project


def _state(project: Path) -> dict:
    return json.loads((project / STATE).read_text())


def _put(project: Path, data) -> None:
    (project / STATE).write_text(data if isinstance(data, str) else json.dumps(data))


def _work(project: Path) -> Path:
    return project / "build" / "next" / "plugin"


def _stamp(path: Path) -> tuple[int, int]:
    st_ = path.stat()
    return st_.st_ino, st_.st_mtime_ns


def _one_line(rc: int, err: str) -> None:
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("overlay: error: "), err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------- abort

def test_abort_never_deletes_the_folder_a_tampered_state_names(capsys, stopped, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("not the rebase's\n")
    data = _state(stopped)
    data["work"] = str(victim)
    _put(stopped, data)
    rc, out, err = rebase(capsys, stopped, "--abort")
    assert (victim / "keep.txt").read_text() == "not the rebase's\n"
    assert rc == 0 and "Traceback" not in err, err
    assert not (stopped / STATE).exists()
    assert _work(stopped).is_dir() and "rebase.json" in out  # not proven this rebase's: left


def test_abort_leaves_a_tree_that_lacks_the_rebases_marker(capsys, stopped):
    work = _work(stopped)
    shutil.rmtree(work)  # the user's own folder where the rebase's was
    work.mkdir()
    (work / "mine.txt").write_text("mine\n")
    rc, out, err = rebase(capsys, stopped, "--abort")
    assert rc == 0, err
    assert (work / "mine.txt").read_text() == "mine\n"
    assert f"left {work} as it is" in out, out
    assert not (stopped / STATE).exists()


def test_abort_removes_the_tree_the_rebase_made(capsys, stopped):
    rc, out, err = rebase(capsys, stopped, "--abort")
    assert rc == 0, err
    assert not (stopped / "build" / "next").exists() and not (stopped / STATE).exists()


# ----------------------------------------------------------------------------- the pin file

def test_continue_never_overwrites_a_pin_file_that_appeared_meanwhile(capsys, stopped):
    resolve_o_py(_work(stopped))
    (stopped / "pins" / "next.yaml").write_text("# a teammate's pin set, pulled meanwhile\n")
    before, series = snapshot(stopped), _stamp(stopped / "series.yaml")
    rc, out, err = rebase(capsys, stopped, "--continue")
    _one_line(rc, err)
    assert "pins/next.yaml" in err and "already exists" in err, err
    assert snapshot(stopped) == before and _stamp(stopped / "series.yaml") == series


def test_a_pin_file_appearing_while_the_end_runs_is_neither_overwritten_nor_removed(capsys, stopped,
                                                                                   monkeypatch):
    from overlay.rebase import steps

    resolve_o_py(_work(stopped))
    before = snapshot(stopped)
    theirs = b"# a teammate's pin set, written while the rebase ended\n"
    take = steps._Snapshot.take  # just before the end writes anything

    def racing(root, new_pin):
        (stopped / "pins" / "next.yaml").write_bytes(theirs)
        return take(root, new_pin)

    monkeypatch.setattr(steps._Snapshot, "take", staticmethod(racing))
    rc, out, err = rebase(capsys, stopped, "--continue")
    _one_line(rc, err)
    assert "pins/next.yaml" in err, err
    assert snapshot(stopped) == dict(before, **{"pins/next.yaml": theirs})


@pytest.mark.parametrize("new_pin", ["../escape", "../../escape", "/abs/escape", "a/b", "next\n", ".next",
                                     "", "x" * 300])
def test_a_tampered_new_pin_writes_nothing_anywhere(capsys, stopped, tmp_path, new_pin):
    from overlay import paths

    resolve_o_py(_work(stopped))
    escape = stopped / "escape.yaml"
    escape.write_text("the user's file\n")
    outside = stopped.parent / "escape.yaml"
    outside.write_text("outside the project\n")
    data = _state(stopped)
    data["new_pin"] = new_pin
    data["work"] = str(paths.composed_dir(stopped, new_pin, "plugin"))
    _put(stopped, data)
    before, series = snapshot(stopped), _stamp(stopped / "series.yaml")
    rc, out, err = rebase(capsys, stopped, "--continue")
    _one_line(rc, err)
    assert ".overlay/rebase.json" in err and "overlay rebase --abort" in err, err
    assert snapshot(stopped) == before and _stamp(stopped / "series.yaml") == series
    assert outside.read_text() == "outside the project\n"


# ----------------------------------------------------------------------------- tamperings

def _plan_named(data: dict, prefix: str) -> dict:
    return next(p for p in data["plans"] if p["patch"].startswith(prefix))


def _set(path: list, value):
    def change(data: dict) -> dict:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return data
    return change


def _drop(key: str):
    def change(data: dict) -> dict:
        del data[key]
        return data
    return change


TAMPERINGS = {
    "not json": lambda d: "{\"old_pin\": ",
    "a list": lambda d: [d],
    "nested": lambda d: "[" * 100_000 + "]" * 100_000,
    "an extra key": _set(["run"], "rm -rf /"),
    "a missing key": _drop("apply_order"),
    "plans a mapping": _set(["plans"], {"0003": {}}),
    "a plan with a field missing": lambda d: (d["plans"][0].pop("drift"), d)[1],
    "apply_order names no plan": _set(["apply_order"], ["9999-nothing.patch"]),
    "apply_order reordered": lambda d: _set(["apply_order"], d["apply_order"][::-1])(d),
    "a conflict of a dropped patch": lambda d: _set(["conflicts"], [d["plans"][0]["patch"]])(d),
    "conflicts a string": _set(["conflicts"], "0003-o-ours-at-o_10.patch"),
    "skipped a list of numbers": _set(["skipped"], [1, 2]),
    "timings of text": _set(["timings", "drift"], "fast"),
    "waited not finite": lambda d: json.dumps(d).replace('"waited": 0.0', '"waited": NaN'),
    "decision_base a number": _set(["decision_base"], 12),
    "upstream_version without ref": lambda d: _set(["plans", 2, "upstream_version"], {"commit": None})(d),
    "applied_upstream commit not hex": lambda d: _set(
        ["plans", 0, "applied_upstream", "commit"], "HEAD\nrule: injected")(d),
    "head not a commit": _set(["head"], "--output=x.txt"),
    "ports not a mapping": _set(["ports"], ["x"]),
    "ports of another patch": _set(["ports"], {"9999-nothing.patch": []}),
    "a huge why": lambda d: _set(["plans", 0, "why"], "w" * (2 << 20))(d),
    "others an unknown target": _set(["others"], ["../core"]),
    "git_dir relative": _set(["git_dir"], "../../mirror"),
    "git_dir a folder without its head": _set(["git_dir"], "/"),
    "work another pin set's": lambda d: _set(["work"], d["work"].replace("/next/", "/base/"))(d),
    "owner not a nonce": _set(["owner"], "x"),
    "action unknown": lambda d: _set(["plans", 0, "action"], "delete")(d),
    "a patch name with a path": lambda d: _set(["plans", 0, "patch"], "../../escape.patch")(d),
    "a plan for a patch not in the series": lambda d: _rename_plan(d, "0009-unknown.patch"),
    "pin_text not a pin set": _set(["pin_text"], "targets: 5\n"),
    "pin_text of another name": lambda d: _set(["pin_text"], "name: base\n" + d["pin_text"])(d),
}


def _rename_plan(data: dict, name: str) -> dict:
    """A plan (and every mention of it) renamed to a patch the series does not have."""
    old = data["plans"][1]["patch"]
    text = json.dumps(data).replace(json.dumps(old), json.dumps(name))
    return json.loads(text)


@pytest.mark.parametrize("command", ["--continue", "--skip"])
@pytest.mark.parametrize("how", sorted(TAMPERINGS))
def test_a_tampered_state_is_one_line_and_changes_nothing(capsys, stopped, how, command):
    """Resolved first: with a sound state, --continue and --skip would finish (and write)."""
    resolve_o_py(_work(stopped))
    _put(stopped, TAMPERINGS[how](copy.deepcopy(_state(stopped))))
    before, series = snapshot(stopped), _stamp(stopped / "series.yaml")
    rc, out, err = rebase(capsys, stopped, command)
    _one_line(rc, err)
    assert ".overlay/rebase.json" in err, err
    assert snapshot(stopped) == before and _stamp(stopped / "series.yaml") == series
    assert not (stopped / "pins" / "next.yaml").exists()
    assert len(err) < 1000, err  # a huge value is not echoed


def test_a_state_file_that_is_a_symlink_or_a_fifo_is_refused(capsys, stopped, tmp_path):
    copy_ = tmp_path / "elsewhere.json"
    shutil.copy(stopped / STATE, copy_)
    (stopped / STATE).unlink()
    (stopped / STATE).symlink_to(copy_)
    rc, out, err = rebase(capsys, stopped, "--continue")
    _one_line(rc, err)
    assert "not a regular file" in err or "symbolic link" in err, err
    (stopped / STATE).unlink()
    os.mkfifo(stopped / STATE)
    rc, out, err = rebase(capsys, stopped, "--continue")
    _one_line(rc, err)


# ----------------------------------------------------------------------------- generated

_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=5), inner,
                                                                          max_size=3)),
                     max_leaves=6)
_OPTIONAL = {"decision_base": (type(None), str), "stopped_at": (type(None), int, float),
             "applied_upstream": (type(None), dict), "upstream_version": (type(None), dict),
             "commit": (type(None), str)}


def _nodes(data, path=()):
    """Every (path, value) in a JSON document."""
    yield path, data
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _nodes(v, path + (i,))


def _kinds(value, key) -> tuple:
    if key in _OPTIONAL:
        return _OPTIONAL[key]
    if isinstance(value, bool):
        return (bool,)
    if isinstance(value, (int, float)):
        return (int, float)
    return (type(value),)


def _wrong_type(draw, data):
    nodes = [(p, v) for p, v in _nodes(data) if p]
    path, value = draw(st.sampled_from(nodes))
    kinds = _kinds(value, path[-1])
    new = draw(_JSON.filter(lambda x: not isinstance(x, kinds) or (isinstance(x, bool) and bool not in kinds)))
    return _at(data, path, new)


def _at(data, path, new):
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return data


_SCHEMA_OBJECTS = lambda data: [(), *[("plans", i) for i in range(len(data["plans"]))]]  # noqa: E731


@st.composite
def tampered(draw, base: dict, outside: str):
    """A mutation of a real state that no rebase writes."""
    data = copy.deepcopy(base)
    kind = draw(st.sampled_from(["type", "missing", "extra", "huge", "nested", "path", "name"]))
    if kind == "type":
        return kind, json.dumps(_wrong_type(draw, data))
    if kind in ("missing", "extra"):
        where = draw(st.sampled_from(_SCHEMA_OBJECTS(data)))
        node = data
        for key in where:
            node = node[key]
        if kind == "missing":
            del node[draw(st.sampled_from(sorted(node)))]
        else:
            node[draw(st.text(min_size=1, max_size=6).filter(lambda k: k not in node))] = draw(_JSON)
        return kind, json.dumps(data)
    if kind == "huge":
        field = draw(st.sampled_from(["ref", "why", "pin_text", "overlap", "apply_order"]))
        if field == "why":
            data["plans"][0]["why"] = "w" * (2 << 20)
        elif field == "overlap":
            data["plans"][0]["overlap"] = ["o"] * 200_001
        elif field == "apply_order":
            data["apply_order"] = data["apply_order"] * 50_000
        else:
            data[field] = "x" * (2 << 20)
        return kind, json.dumps(data)
    if kind == "nested":
        depth = draw(st.sampled_from([64, 1000, 50_000]))
        path, _ = draw(st.sampled_from([(p, v) for p, v in _nodes(data) if p]))
        return kind, json.dumps(_at(data, path, "@@")).replace('"@@"', "[" * depth + "]" * depth)
    if kind == "path":  # (a git_dir elsewhere that holds no head: TAMPERINGS; --abort needs none)
        field = draw(st.sampled_from(["work", "git_dir"]))
        values = [outside + "/../..", "build/next/plugin", data[field] + "/..", data[field] + "/../../escape",
                  "", "../" * 8 + "etc", data[field] + "/", data[field].replace("/", "//", 2)]
        if field == "work":
            values += [outside, "/", str(Path(outside).parent)]
        data[field] = draw(st.sampled_from(values))
        return kind, json.dumps(data)
    # names that would become paths: pins, targets, patches
    field = draw(st.sampled_from(["new_pin", "old_pin", "target", "plan", "order", "ported_as"]))
    name = draw(st.sampled_from(["..", "../escape", "/abs", "a/b", "x\n", "-x", ".x", "", "x" * 300,
                                 "x\x00y", outside]))
    if field == "plan":
        data["plans"][0]["patch"] = name
    elif field == "order":
        data["apply_order"][0] = name
    elif field == "ported_as":
        data["plans"][0]["ported_as"] = [name]
    else:
        data[field] = name
    return kind, json.dumps(data)


def _tree(path: Path) -> dict:
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(path.rglob("*"))}


@pytest.fixture
def generated(capsys, stopped, tmp_path):
    """(project, its real state, a folder outside it, its contents); a link swapped in
    for the composed tree is put back after each example."""
    resolve_o_py(_work(stopped))
    outside = tmp_path / "outside"
    (outside / "plugin" / ".git").mkdir(parents=True)
    (outside / "plugin" / "keep.txt").write_text("not the rebase's\n")
    return stopped, (stopped / STATE).read_text(), outside


def _check_invariants(capsys, project, outside, before, series, outside_before, command):
    rc, out, err = rebase(capsys, project, command)
    assert "Traceback" not in err and "Traceback" not in out
    if command == "--abort":  # a state that proves nothing: only itself is removed
        assert rc == 0 and "Traceback" not in err, err
        assert not os.path.lexists(project / STATE)
        assert _work(project).is_dir() and (_work(project) / "o.py").is_file()
    else:
        _one_line(rc, err)
        assert ".overlay/rebase.json" in err, err
        assert len(err) < 1000, err
    assert snapshot(project) == before and _stamp(project / "series.yaml") == series
    assert _tree(outside) == outside_before
    assert not list(project.parent.glob("escape*")) and not (project / "escape.yaml").exists()


@given(data=st.data(), command=st.sampled_from(["--continue", "--skip", "--abort"]))
def test_generated_tamperings_are_one_line_and_change_nothing(capsys, generated, data, command):
    project, real, outside = generated
    kind, text = data.draw(tampered(json.loads(real), str(outside / "plugin")))
    (project / STATE).write_text(text)
    before, series, outside_before = snapshot(project), _stamp(project / "series.yaml"), _tree(outside)
    _check_invariants(capsys, project, outside, before, series, outside_before, command)
    (project / STATE).write_text(real)


@given(how=st.sampled_from(["tree", "pin folder", "state"]),
       command=st.sampled_from(["--continue", "--skip", "--abort"]))
def test_generated_symlinks_in_place_of_the_tree_or_the_state_change_nothing(capsys, generated, how,
                                                                            command):
    """The state is sound, but the composed tree (or build/next, or the state file itself)
    is a symbolic link: nothing is deleted or written through it."""
    project, real, outside = generated
    work = _work(project)
    aside = project.parent / "aside"
    moved = {"tree": work, "pin folder": work.parent, "state": project / STATE}[how]
    target = {"tree": outside / "plugin", "pin folder": outside, "state": outside / "state.json"}[how]
    if how == "state":
        target.write_text(real)
    shutil.move(str(moved), aside)
    moved.symlink_to(target)
    before, series, outside_before = snapshot(project), _stamp(project / "series.yaml"), _tree(outside)
    try:
        rc, out, err = rebase(capsys, project, command)
        assert "Traceback" not in err
        if command != "--abort":
            _one_line(rc, err)
        assert snapshot(project) == before and _stamp(project / "series.yaml") == series
        assert _tree(outside) == outside_before
    finally:
        if os.path.lexists(moved):
            moved.unlink()
        shutil.move(str(aside), moved)
        (project / STATE).write_text(real)
        if how == "state":
            target.unlink()


# ----------------------------------------------------------------------------- one at a time

def _stopped_proc(proc: subprocess.Popen, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                return True
        except OSError:
            return False
        time.sleep(0.01)
    return False


def test_two_rebases_cannot_start_at_once(capsys, project):  # noqa: F811
    """The first is stopped from outside after its checks, before it writes its state
    (where the file test used to let a second through): the second is refused."""
    first = subprocess.Popen([sys.executable, "-m", "overlay", "--root", str(project), "rebase",
                              "--pin", "base", "--onto", "plugin=u4", "--as", "next"],
                             env=dict(os.environ, OVERLAY_FAULT_INJECT="rebase-before-state:STOP"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _stopped_proc(first), first.communicate()
        assert not (project / STATE).exists()
        rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u1", "--as", "other")
        _one_line(rc, err)
        assert f"pid {first.pid} (overlay rebase" in err, err
        for argv in (["--abort"], ["--continue"]):
            rc, out, err = rebase(capsys, project, *argv)
            _one_line(rc, err)
            assert f"pid {first.pid}" in err, err
        assert not (project / "build" / "other").exists()
    finally:
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate()
    assert first.returncode == 1, err  # the first goes on to its conflict stop
    assert _state(project)["new_pin"] == "next"
