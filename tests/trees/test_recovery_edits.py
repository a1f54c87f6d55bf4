"""Issue 26, case 5: finishing an interrupted refresh never loses a later edit.

A refresh killed after its commit point is finished by the next command. If patches/
or series.yaml changed since that point (the user edited them meanwhile), it is not
finished: both versions are kept, and one line says where each is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import run_git

PATCH = "0003-plugin-switch.patch"


def _refresh_killed_at(world, point: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(world.project), "refresh"],
                          env=dict(os.environ, OVERLAY_FAULT_INJECT=point), capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


@pytest.fixture
def killed(world, run, request):
    """A refresh (0003's subject reworded on the branch) killed at `request.param`."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = world.project / "build" / "p1" / "plugin"
    run_git(["commit", "-q", "--amend", "-m", "[Perf] Add an opt-in fast path switch, reworded"], plugin)
    _refresh_killed_at(world, request.param)
    tx = list((world.project / ".overlay").glob("refresh-*"))
    assert len(tx) == 1
    return tx[0]


def _edit(world) -> dict[Path, bytes]:
    """The user's edits after the kill: series.yaml, and 0003 where patches/ is there
    (a filesystem without renameat2 is killed between its two renames)."""
    edited = {}
    series = world.project / "series.yaml"
    edited[series] = series.read_bytes() + b"# the user's note, added after the kill\n"
    patch = world.project / "patches" / PATCH
    if patch.parent.is_dir():
        edited[patch] = patch.read_bytes().replace(b"\n\n", b"\n\nThe user's words.\n", 1)
        assert edited[patch] != patch.read_bytes()
    for path, data in edited.items():
        path.write_bytes(data)
    return edited


@pytest.mark.parametrize("killed", ["refresh-after-commit", "refresh-mid-swap", "refresh-after-swap"],
                         indirect=True)
@pytest.mark.parametrize("command", [["check"], ["refresh"], ["lock"]])
def test_edits_made_after_a_killed_refresh_survive_and_both_versions_are_named(world, run, killed,
                                                                             command):
    tx = killed
    edited = _edit(world)
    kept = {p.relative_to(tx): p.read_bytes() for p in sorted(tx.rglob("*")) if p.is_file()}
    code, out, err = run(*command, root=world.project)
    assert code == 2, (out, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for path, data in edited.items():  # the edits are where the user made them
        assert path.read_bytes() == data, path
    assert tx.is_dir()  # and the refresh's version is kept, where the line says
    assert {p.relative_to(tx): p.read_bytes() for p in sorted(tx.rglob("*")) if p.is_file()} == kept
    shown = str(tx.relative_to(world.project))
    assert shown in err and "patches/" in err and "series.yaml" in err, err
    assert "changed" in err, err
    # and again: it still refuses, it never finishes over the edits later
    code, out, err = run(*command, root=world.project)
    assert code == 2 and tx.is_dir()
    for path, data in edited.items():
        assert path.read_bytes() == data, path


@pytest.mark.parametrize("killed", ["refresh-after-commit"], indirect=True)
def test_the_refreshs_own_version_is_the_one_in_the_folder_named(world, run, killed):
    tx = killed
    _edit(world)
    code, out, err = run("check", root=world.project)
    assert code == 2
    assert b"reworded" in (tx / "patches" / PATCH).read_bytes()
    assert b"The user's words." in (world.project / "patches" / PATCH).read_bytes()
    assert b"The user's words." not in (tx / "patches" / PATCH).read_bytes()


@pytest.mark.parametrize("killed", ["refresh-after-commit", "refresh-mid-swap", "refresh-after-swap"],
                         indirect=True)
def test_with_no_edit_the_interrupted_refresh_is_still_finished(world, run, killed):
    code, out, err = run("check", root=world.project)
    assert code == 0, err
    assert "finished the refresh interrupted" in err
    assert b"reworded" in (world.project / "patches" / PATCH).read_bytes()
    assert not killed.exists()


@pytest.mark.parametrize("point", ["refresh-after-commit", "refresh-mid-swap"])
def test_a_killed_refresh_that_adds_an_entry_keeps_its_series_aside(world, run, point):
    from fixtures import PATCH_AUTHOR, commit_all, write

    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = world.project / "build" / "p1" / "plugin"
    write(plugin, {"vllm_ascend/new_feature.py": "ENABLED = False\n"})
    commit_all(plugin, "[Feature] Add a new feature flag\n\nWhy: because.", author=PATCH_AUTHOR)
    _refresh_killed_at(world, point)
    (tx,) = (world.project / ".overlay").glob("refresh-*")
    assert b"0004-add-a-new-feature-flag.patch" in (tx / "series.yaml").read_bytes()
    edited = _edit(world)
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"series.yaml in {tx.relative_to(world.project)}/series.yaml" in err, err
    for path, data in edited.items():
        assert path.read_bytes() == data, path
    assert b"0004-add-a-new-feature-flag.patch" in (tx / "series.yaml").read_bytes()


def _tampered(plan: dict, how: str):
    import copy

    plan = copy.deepcopy(plan)
    if how == "not json":
        return "{"
    if how == "nested":
        return "[" * 100_000
    if how == "an extra key":
        plan["run"] = "rm -rf /"
    elif how == "no installs":
        del plan["installs"]
    elif how == "a tree state of other fields":
        plan["trees"][0]["state"] = {"pin": 1}
    elif how == "a tree state of other types":
        plan["trees"][0]["state"]["patches"] = 5
    elif how == "notes not a mapping":
        plan["trees"][0]["notes"] = ["x"]
    elif how == "a relative tree":
        plan["trees"][0]["work"] = "../../elsewhere"
    elif how == "inode a string":
        plan["patches_inode"] = "1"
    return json.dumps(plan)


@pytest.mark.parametrize("how", ["not json", "nested", "an extra key", "no installs",
                                 "a tree state of other fields", "a tree state of other types",
                                 "notes not a mapping", "a relative tree", "inode a string"])
@pytest.mark.parametrize("killed", ["refresh-after-commit"], indirect=True)
def test_a_tampered_transaction_plan_is_one_line_and_changes_nothing(world, run, killed, how):
    tx = killed
    plan = tx / "plan.json"
    plan.write_text(_tampered(json.loads(plan.read_text()), how))
    before = {p: p.read_bytes() for p in [world.project / "series.yaml",
                                          *sorted((world.project / "patches").iterdir())]}
    code, out, err = run("check", root=world.project)
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "cannot be read" in err and str(plan) in err, err
    assert {p: p.read_bytes() for p in before} == before and tx.is_dir()
