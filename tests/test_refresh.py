"""overlay refresh: byte-stable round trip and the edit workflows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures import PATCH_AUTHOR, commit_all, run_git, write


def project_bytes(project: Path) -> dict[str, bytes]:
    files = [project / "series.yaml", *sorted((project / "patches").iterdir())]
    return {p.name: p.read_bytes() for p in files}


def plugin_tree(world) -> Path:
    return world.project / "build" / "p1" / "plugin"


HOSTILE_GITCONFIG = """\
[diff]
    noprefix = true
    mnemonicPrefix = true
    renames = copies
    algorithm = patience
    context = 5
    interHunkContext = 9
    orderFile = /nonexistent
[format]
    signature = hostile-signature
    subjectPrefix = HOSTILE
    numbered = always
    coverLetter = true
    signOff = true
    useAutoBase = true
[core]
    abbrev = 7
    autocrlf = true
    quotePath = false
[am]
    keepcr = true
    threeWay = true
[log]
    showSignature = true
[color]
    ui = always
"""


def test_apply_then_refresh_changes_no_byte(world, run):
    before = project_bytes(world.project)
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "3 unchanged, 0 updated, 0 new, 0 dropped (nothing to do)" in out
    assert project_bytes(world.project) == before


def test_round_trip_ignores_hostile_user_git_config(world, run, monkeypatch, tmp_path):
    cfg = tmp_path / "gitconfig"
    cfg.write_text(HOSTILE_GITCONFIG)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".gitconfig").write_text(HOSTILE_GITCONFIG)
    # the patches were written with plain format-patch; canonicalise once, then prove stability
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run("refresh", root=world.project)[0] == 0
    canonical = project_bytes(world.project)
    assert all(b"hostile" not in v.lower() for v in canonical.values())
    assert run("apply", "--mirror", world.mirror, "--force", root=world.project)[0] == 0
    assert run("refresh", root=world.project)[0] == 0
    assert project_bytes(world.project) == canonical


def test_bracketed_subjects_survive(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    subject = run_git(["log", "-1", "--format=%s", "HEAD~1"], plugin_tree(world))
    assert subject == "[BugFix][MRV2] Accept lora_capture_cases in factory"
    assert run("refresh", root=world.project)[0] == 0
    text = (world.project / "patches" / "0001-plugin-lora-args.patch").read_text()
    assert "Subject: [PATCH] [BugFix][MRV2] Accept lora_capture_cases in factory\n" in text


def test_amend_updates_only_that_patch(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    before = project_bytes(world.project)
    tree = plugin_tree(world)
    # amend the first plugin patch (an interactive-rebase 'edit'), keeping its author
    run_git(["checkout", "-q", "HEAD~1"], tree)
    write(tree, {"vllm_ascend/worker.py": (tree / "vllm_ascend/worker.py").read_text()
                 .replace("lora_capture_cases=None", "lora_capture_cases=None, **kwargs")})
    run_git(["add", "-A"], tree)
    run_git(["-c", "notes.rewriteRef=refs/notes/overlay", "commit", "-q", "--amend", "--no-edit"],
            tree, author=PATCH_AUTHOR)
    amended = run_git(["rev-parse", "HEAD"], tree)
    run_git(["cherry-pick", "overlay/p1"], tree)
    run_git(["branch", "-f", "overlay/p1", "HEAD"], tree)
    run_git(["checkout", "-q", "overlay/p1"], tree)
    assert amended
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "updated  0001-plugin-lora-args.patch" in out
    after = project_bytes(world.project)
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"0001-plugin-lora-args.patch"}
    assert "**kwargs" in after["0001-plugin-lora-args.patch"].decode()
    # authorship kept in the refreshed mail
    assert f"From: {PATCH_AUTHOR[0]} <{PATCH_AUTHOR[1]}>" in after["0001-plugin-lora-args.patch"].decode()
    # the tree is now consistent: apply is allowed again without --force and gives the same tree
    head_tree = run_git(["rev-parse", "HEAD^{tree}"], tree)
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run_git(["rev-parse", "HEAD^{tree}"], tree) == head_tree


def test_new_commit_becomes_entry_that_check_flags(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    write(tree, {"vllm_ascend/new_feature.py": "ENABLED = False\n"})
    commit_all(tree, "[Feature] Add a new feature flag\n\nWhy: because.", author=PATCH_AUTHOR)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "new      0004-add-a-new-feature-flag.patch" in out
    series = (world.project / "series.yaml").read_text()
    assert series.endswith("  - patch: 0004-add-a-new-feature-flag.patch\n    target: plugin\n"
                           "    origin: local  # added by refresh: set origin and provenance\n")
    assert series.startswith("# fixture series\n")  # comments survive
    code, out, _ = run("check", root=world.project)
    assert code == 1
    assert "0004-add-a-new-feature-flag.patch: a local patch needs 'forwarded'" in out
    # refreshing again is a no-op
    before = project_bytes(world.project)
    assert run("refresh", root=world.project)[0] == 0
    assert project_bytes(world.project) == before


def test_reorder_and_drop(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    base = world.plugin_commits[1]
    first, second = run_git(["rev-list", "--reverse", f"{base}..HEAD"], tree).split()
    # keep only the second plugin patch (drop the first): the two touch different files
    run_git(["reset", "-q", "--hard", base], tree)
    run_git(["-c", "notes.rewriteRef=refs/notes/overlay", "cherry-pick", second], tree)
    run_git(["notes", "--ref=refs/notes/overlay", "copy", second, "HEAD"], tree)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "dropped  0001-plugin-lora-args.patch" in out
    assert not (world.project / "patches" / "0001-plugin-lora-args.patch").exists()
    series = (world.project / "series.yaml").read_text()
    assert "0001-plugin-lora-args.patch" not in series
    assert series.index("0002-core") < series.index("0003-plugin")
    assert run("check", root=world.project)[0] == 0


def test_refresh_refuses_uncommitted_edits(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    (plugin_tree(world) / "README.md").write_text("edited\n")
    before = project_bytes(world.project)
    code, _, err = run("refresh", root=world.project)
    assert code == 2 and "uncommitted edits (README.md)" in err and "git commit" in err
    assert project_bytes(world.project) == before


def test_refresh_refuses_merge_commits(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    run_git(["checkout", "-q", "-b", "side", "HEAD~1"], tree)
    write(tree, {"side.txt": "s\n"})
    commit_all(tree, "side")
    run_git(["checkout", "-q", "overlay/p1"], tree)
    run_git(["merge", "-q", "--no-ff", "-m", "merge side", "side"], tree)
    code, _, err = run("refresh", root=world.project)
    assert code == 2 and "merge commits" in err


def test_refresh_without_composed_tree(world, run):
    code, _, err = run("refresh", root=world.project)
    assert code == 2 and "nothing is composed for pin set 'p1'" in err
