"""overlay apply: composition, attribution, failure reporting, atomicity, guards, caching."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import COMPOSER, PATCH_AUTHOR, break_patch_two, commit_all, make_patch, run_git, write


def git(repo: Path, *args: str) -> str:
    return run_git(list(args), repo)


def composed(world, target: str, pin: str = "p1") -> Path:
    return world.project / "build" / pin / target


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under path with its bytes (to prove nothing was touched)."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(path).parts}


def test_compose_both_targets_from_mirror(world, run):
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    plugin, core = composed(world, "plugin"), composed(world, "core")
    assert "applied  plugin   0001-plugin-lora-args.patch" in out
    assert "applied  core     0002-core-rename-helper.patch" in out
    assert "lora_capture_cases" in (plugin / "vllm_ascend/worker.py").read_text()
    assert "_compute_global_logsumexp" in (core / "vllm/sampler.py").read_text()
    # one commit per patch, in series order, on a branch named after the pin, on the pinned base
    assert git(plugin, "rev-parse", "--abbrev-ref", "HEAD") == "overlay/p1"
    subjects = git(plugin, "log", "--format=%s", f"{world.plugin_commits[1]}..HEAD").splitlines()
    assert subjects == ["[Perf] Add an opt-in fast path switch",
                        "[BugFix][MRV2] Accept lora_capture_cases in factory"]
    assert git(plugin, "rev-parse", "HEAD~2") == world.plugin_commits[1]
    assert git(core, "rev-parse", "HEAD~1") == world.core_commits[1]
    assert git(plugin, "status", "--porcelain") == ""


def test_attribution_preserved(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = composed(world, "plugin")
    line = git(plugin, "log", "-1", "--format=%an|%ae|%aI|%cn|%ce", "HEAD~1")
    an, ae, ad, cn, ce = line.split("|")
    assert (an, ae) == PATCH_AUTHOR  # author comes from the patch
    assert ad == "2026-07-10T12:00:00+08:00"
    assert (cn, ce) == COMPOSER  # committer is whoever composed
    body = git(plugin, "log", "-1", "--format=%B", "HEAD~1")
    assert "Upstream-PR: example/plugin#10935" in body
    core_author = git(composed(world, "core"), "log", "-1", "--format=%an")
    assert core_author == "Another Author"


def test_targets_subset_and_no_patch_target_checked_out(world, run):
    # A series with no core patches still checks core out at its pin.
    series = world.project / "series.yaml"
    text = series.read_text()
    start = text.index("  - patch: 0002")
    end = text.index("  - patch: 0003")
    series.write_text(text[:start] + text[end:])
    (world.project / "patches" / "0002-core-rename-helper.patch").unlink()
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    core = composed(world, "core")
    assert git(core, "rev-parse", "HEAD") == world.core_commits[1]
    shutil.rmtree(world.project / "build")
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "plugin", root=world.project)
    assert code == 0, err
    assert not composed(world, "core").exists()
    assert composed(world, "plugin").is_dir()


def test_json_output(world, run):
    code, out, err = run("apply", "--mirror", world.mirror, "--json", root=world.project)
    assert code == 0, err
    data = json.loads(out)
    assert data["pin"] == "p1"
    by_target = {t["target"]: t for t in data["targets"]}
    assert [p["status"] for p in by_target["plugin"]["patches"]] == ["applied", "applied"]
    assert by_target["plugin"]["base"] == world.plugin_commits[1]
    assert len(by_target["core"]["tree"]) == 40


def test_failure_report_names_file_and_hunk(world, run):
    break_patch_two(world)
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 1
    assert "applied  plugin   0001-plugin-lora-args.patch" in out
    assert "FAILED   plugin   0003-plugin-switch.patch: vllm_ascend/envs.py: hunk 1/1 (@@ -1 +1 @@)" in out
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "overlay drift --pin p1" in err and "overlay refresh --pin p1" in err


def test_failure_leaves_previous_good_tree(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = composed(world, "plugin")
    before_head = git(plugin, "rev-parse", "HEAD")
    before_files = snapshot(world.project / "build")
    break_patch_two(world)
    code, _, _ = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 1
    assert git(plugin, "rev-parse", "HEAD") == before_head
    assert snapshot(world.project / "build") == before_files
    assert not [p for p in (world.project / "build").iterdir() if p.name.startswith(".staging")]


@pytest.mark.parametrize("point", ["after-target-core", "before-swap", "mid-swap"])
def test_killed_run_leaves_previous_good_tree(world, run, point):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    # change the series so a successful run would produce a different plugin tree
    p = world.patch_file("0003-plugin-switch.patch")
    p.write_text(p.read_text().replace("'PLUGIN_FAST_PATH': '0'", "'PLUGIN_FAST_PATH': '1'"))
    good = snapshot(world.project / "build" / "p1")
    env = dict(os.environ, OVERLAY_FAULT_INJECT=point)
    proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(world.project), "apply",
                           "--mirror", str(world.mirror)], env=env, capture_output=True, text=True)
    assert proc.returncode == -9  # SIGKILL: no cleanup ran
    if point != "mid-swap":
        assert snapshot(world.project / "build" / "p1") == good
    # the next run recovers and composes the new series
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    assert "'PLUGIN_FAST_PATH': '1'" in (composed(world, "plugin") / "vllm_ascend/envs.py").read_text()
    leftovers = [q.name for q in (world.project / "build").iterdir() if q.name.startswith(".")]
    assert leftovers == [".overlay.lock"]


def test_mid_swap_kill_restores_moved_tree(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    good = snapshot(world.project / "build" / "p1")
    env = dict(os.environ, OVERLAY_FAULT_INJECT="mid-swap")
    subprocess.run([sys.executable, "-m", "overlay", "--root", str(world.project), "apply",
                    "--mirror", str(world.mirror), "--targets", "plugin"], env=env, capture_output=True)
    from overlay.trees.compose import _remove_leftovers
    _remove_leftovers(world.project / "build")
    assert snapshot(world.project / "build" / "p1") == good


def test_refuses_dirty_tree_then_force(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = composed(world, "plugin")
    (plugin / "vllm_ascend/envs.py").write_text("VARS = {'EDITED': 1}\n")
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2
    assert "uncommitted edits (vllm_ascend/envs.py)" in err and "overlay refresh --pin p1" in err
    assert (plugin / "vllm_ascend/envs.py").read_text() == "VARS = {'EDITED': 1}\n"
    code, _, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0, err
    assert "EDITED" not in (plugin / "vllm_ascend/envs.py").read_text()


def test_refuses_extra_commits(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = composed(world, "plugin")
    write(plugin, {"new.txt": "x\n"})
    commit_all(plugin, "my local work")
    head = git(plugin, "rev-parse", "HEAD")
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and "commits not in the series" in err
    assert git(plugin, "rev-parse", "HEAD") == head


def test_refuses_untracked_file(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    (composed(world, "plugin") / "scratch.py").write_text("print(1)\n")
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and "scratch.py" in err


def test_network_fetch_is_cached(world, run):
    """Without a mirror the pin URL is fetched once; a second apply fetches nothing."""
    code, out, err = run("apply", root=world.project)
    assert code == 0, err
    assert "(network)" in out
    # make the remotes unreachable: a second apply must not need them
    world.core.rename(world.core.with_name("core-gone"))
    world.plugin.rename(world.plugin.with_name("plugin-gone"))
    code, out, err = run("apply", root=world.project)
    assert code == 0, err
    assert out.count("(cache)") == 2
    # the cached fetch is shallow: just the pinned commit
    cache = world.project / ".overlay" / "cache" / "git" / "example+plugin.git"
    assert (cache / "shallow").read_text().split() == [world.plugin_commits[1]]


@pytest.mark.parametrize("url", ["ssh://evil.invalid/example/plugin", "git@evil.invalid:example/plugin",
                                 "--upload-pack=evil"])
def test_a_pin_url_reaches_git_only_as_https_or_a_path(world, run, url, tmp_path, monkeypatch):
    """Issue 26 case 2: a fetch allows one protocol, the pinned URL's (https, or file for a
    path), and a URL is never an option: no ssh (here a fake one that leaves a marker)."""
    marker = tmp_path / "ssh-ran"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(f"#!/bin/sh\necho \"$*\" >> '{marker}'\nexit 1\n")
    (bin_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    pin = world.project / "pins" / "p1.yaml"
    pin.write_text(pin.read_text().replace(f"file://{world.plugin}", f'"{url}"'))
    code, out, err = run("apply", "--targets", "plugin", root=world.project)
    assert not marker.exists(), marker.read_text()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "only https URLs and local paths are fetched" in err


def test_offline_mirror_needs_no_remote(world, run):
    world.core.rename(world.core.with_name("core-gone"))
    world.plugin.rename(world.plugin.with_name("plugin-gone"))
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    assert out.count("(mirror)") == 2


def test_mirror_from_environment_and_bare_repo_layout(world, run, monkeypatch):
    # owner+name/repo: a bare git directory one level down (the `fetch` snapshot layout)
    inner = world.mirror / "example+core"
    tmp = world.mirror / "tmp-core"
    inner.rename(tmp)
    inner.mkdir()
    tmp.rename(inner / "repo")
    monkeypatch.setenv("OVERLAY_MIRROR", str(world.mirror))
    code, out, err = run("apply", root=world.project)
    assert code == 0, err
    assert out.count("(mirror)") == 2


def test_unreachable_core_names_both_ways_forward(world, run):
    world.core.rename(world.core.with_name("core-gone"))
    shutil.rmtree(world.mirror / "example+core")
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2
    assert err.count("\n") == 1
    assert "pins/p1.yaml:6: target 'core' is unreachable" in err
    assert "<mirror>/example+core" in err and "--targets" in err
    assert not (world.project / "build" / "p1").exists()
    code, _, err = run("apply", "--mirror", world.mirror, "--targets", "plugin", root=world.project)
    assert code == 0, err


def test_lock_then_verify_and_mismatch(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    code, out, _ = run("lock", root=world.project)
    assert code == 0
    pin_text = (world.project / "pins" / "p1.yaml").read_text()
    tree = git(composed(world, "plugin"), "rev-parse", "HEAD^{tree}")
    assert f"    tree: {tree}\n" in pin_text
    assert pin_text.startswith("# fixture pin set\n")  # comments survive
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0 and out.count("(matches lock)") == 2
    p = world.patch_file("0003-plugin-switch.patch")
    p.write_text(p.read_text().replace("'PLUGIN_FAST_PATH': '0'", "'PLUGIN_FAST_PATH': '1'"))
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 3
    assert "TREE MISMATCH for plugin" in err and "overlay lock --pin p1" in err
    # locking again records the new tree
    assert run("lock", root=world.project)[0] == 0
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0


def test_pin_prefix_and_default(world, run):
    shutil.copy(world.project / "pins" / "p1.yaml", world.project / "pins" / "p2-other.yaml")
    text = (world.project / "pins" / "p2-other.yaml").read_text().replace("default: true", "default: false")
    (world.project / "pins" / "p2-other.yaml").write_text(text)
    code, out, err = run("apply", "--mirror", world.mirror, "--pin", "p2", root=world.project)
    assert code == 0, err
    assert (world.project / "build" / "p2-other" / "plugin").is_dir()
    assert git(composed(world, "plugin", "p2-other"), "rev-parse", "--abbrev-ref", "HEAD") == "overlay/p2-other"
    code, _, err = run("apply", "--mirror", world.mirror, "--pin", "p", root=world.project)
    assert code == 2 and "ambiguous" in err and "p1, p2-other" in err


def test_archive_source_composes_like_git(world, run, tmp_path):
    """A PyPI-style source archive pinned by sha256 is imported as one deterministic commit."""
    import tarfile

    src, archive = _pin_core_to_an_archive(world, tmp_path, {".gitignore": "vllm/\n"})
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    core = composed(world, "core")
    assert (core / "vllm/graph.py").read_text() == "X = 1\n"  # .gitignore'd files still imported
    first = git(core, "rev-parse", "HEAD")
    # deterministic: a fresh cache imports the same commit id
    shutil.rmtree(world.project / ".overlay")
    assert run("apply", "--mirror", world.mirror, "--force", root=world.project)[0] == 0
    assert git(core, "rev-parse", "HEAD") == first
    # a tampered archive is refused by its sha256
    shutil.rmtree(world.project / ".overlay")
    with tarfile.open(archive, "w:gz") as tf:
        write(src, {"vllm/graph.py": "X = 2\n"})
        tf.add(src, arcname="core-1.0")
    code, _, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 2 and "has sha256" in err and "the pin says" in err


def test_into_directory_and_lock_needs_a_composed_tree(world, run, tmp_path):
    code, _, err = run("lock", root=world.project)
    assert code == 2 and "nothing is composed for pin set 'p1'" in err and "overlay apply --pin p1" in err
    code, _, err = run("lock", "--targets", "core", root=world.project)
    assert code == 2 and "target 'core' is not composed" in err
    into = tmp_path / "elsewhere"
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, root=world.project)
    assert code == 0, err
    assert (into / "p1" / "plugin" / "vllm_ascend" / "worker.py").is_file()
    assert not (world.project / "build").exists()
    code, out, err = run("lock", "--into", into, root=world.project)
    assert code == 0, err
    assert "locked p1/plugin: tree " in out


def test_lock_refuses_an_edited_tree(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    pin_before = (world.project / "pins" / "p1.yaml").read_text()
    (composed(world, "core") / "vllm" / "graph.py").write_text("edited\n")
    code, _, err = run("lock", root=world.project)
    assert code == 2 and "cannot lock core: it holds uncommitted edits (vllm/graph.py)" in err
    assert (world.project / "pins" / "p1.yaml").read_text() == pin_before


def test_apply_gate_runs_the_contract_gate_on_the_composed_trees(world, run):
    code, out, err = run("apply", "--mirror", world.mirror, "--gate", root=world.project)
    assert code == 0, out + err
    # a plugin patch importing the helper under the name the core patch renamed away
    make_patch(world.plugin, world.plugin_commits[1],
               {"vllm_ascend/sampler.py": "from vllm.sampler import _compute_global_lse\n"},
               "[Misc] Use the global lse helper", "Why: test.",
               world.patch_file("0004-plugin-old-helper.patch"))
    series = world.project / "series.yaml"
    series.write_text(series.read_text() + "  - patch: 0004-plugin-old-helper.patch\n"
                      "    target: plugin\n    origin: local\n    forwarded: nowhere\n")
    code, out, err = run("apply", "--mirror", world.mirror, "--gate", root=world.project)
    assert code == 1
    assert "_compute_global_lse" in out + err
    assert "vllm_ascend/sampler.py:1" in out + err


def test_archive_not_in_mirror_and_not_downloadable(world, run, monkeypatch):
    """No archive in <mirror>/pypi and the package index has none: one line, nothing composed."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(world.tmp / "no-such-links"))
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    core_block = text[text.index("  core:"):text.index("  plugin:")]
    pin.write_text(text.replace(core_block, "  core:\n    pypi: core-never-released==9.9\n"
                                            f"    sha256: {'c' * 64}\n"))
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and len(err.splitlines()) == 1
    assert "pins/p1.yaml:6: target 'core' is unreachable: cannot download core-never-released==9.9" in err
    assert "<mirror>/pypi/" in err
    assert not (world.project / "build" / "p1").exists()
    assert not list((world.project / ".overlay" / "cache" / "archives").glob("*"))


def test_lock_records_only_the_composed_targets(world, run):
    """Offline, only the plugin composes: lock records it and leaves core alone."""
    assert run("apply", "--mirror", world.mirror, "--targets", "plugin", root=world.project)[0] == 0
    code, out, err = run("lock", root=world.project)
    assert code == 0, err
    text = (world.project / "pins" / "p1.yaml").read_text()
    assert text.count("tree:") == 1 and "locked p1/plugin" in out and "core" not in out


def test_lock_refuses_a_tree_older_than_the_series(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    p = world.patch_file("0003-plugin-switch.patch")
    p.write_text(p.read_text().replace("'PLUGIN_FAST_PATH': '0'", "'PLUGIN_FAST_PATH': '1'"))
    code, _, err = run("lock", root=world.project)
    assert code == 2 and "the series changed since it was composed" in err


def test_named_mirror_that_is_not_a_directory(world, run, monkeypatch):
    code, _, err = run("apply", "--mirror", world.tmp / "nope", root=world.project)
    assert code == 2 and "the mirror given by --mirror is not a directory" in err
    monkeypatch.setenv("OVERLAY_MIRROR", str(world.project / "series.yaml"))
    code, _, err = run("apply", root=world.project)
    assert code == 2 and "the mirror given by OVERLAY_MIRROR is not a directory" in err
    assert not (world.project / "build" / "p1").exists()


def test_am_making_more_commits_than_patch_files_is_an_error(world, tmp_path):
    """Defence behind patchfile's one-mail check: git am itself splits mboxes."""
    from overlay.trees import compose as compose_mod, sources
    from overlay.errors import OverlayError
    from overlay.series.model import Project

    project = Project.load(world.project)
    pin = project.pin(None)
    got = sources.obtain(project.root, pin.target("plugin"), world.mirror)
    work = tmp_path / "tree"
    compose_mod._init_tree(work, got, "overlay/p1")
    both = tmp_path / "both.patch"
    both.write_text(world.patch_file("0001-plugin-lora-args.patch").read_text()
                    + world.patch_file("0003-plugin-switch.patch").read_text())
    mail = compose_mod.read_patch(world.patch_file("0001-plugin-lora-args.patch"))
    import dataclasses
    with pytest.raises(OverlayError, match="git am made 2 commits from 1 patch files"):
        compose_mod._apply_series(work, [dataclasses.replace(mail, path=both)], got.commit,
                                  ("C", "c@example.org"))


@pytest.mark.parametrize("ignored", ["notes.log", ".venv/bin/python"])
def test_refuses_git_ignored_files(world, run, ignored):
    """Issue 13 item 2: apply replaces the whole folder, so ignored files (a .venv/, a log)
    block it like untracked files; Python's own caches do not."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = composed(world, "plugin")
    (plugin / ".git" / "info" / "exclude").write_text("*.log\n.venv/\n__pycache__/\n")
    (plugin / "vllm_ascend" / "__pycache__").mkdir()
    (plugin / "vllm_ascend" / "__pycache__" / "envs.cpython-311.pyc").write_bytes(b"\0")
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err  # caches alone are no reason to refuse
    (plugin / "vllm_ascend" / "__pycache__").mkdir()
    (plugin / ".git" / "info" / "exclude").write_text("*.log\n.venv/\n__pycache__/\n")
    (plugin / ignored).parent.mkdir(parents=True, exist_ok=True)
    (plugin / ignored).write_text("mine\n")
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and len(err.splitlines()) == 1
    shown = ignored.split("/")[0] + ("/" if "/" in ignored else "")
    assert f"refusing to replace the composed tree: it holds git-ignored files that replacing it " \
           f"would delete ({shown})" in err
    assert "move them out of the tree first, or pass --force to delete them" in err
    assert (plugin / ignored).read_text() == "mine\n"
    code, _, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0 and not (plugin / ignored).exists()


def test_tree_mismatch_says_the_new_tree_is_in_place(world, run):
    """Issue 13 item 4: a TREE MISMATCH installs the new tree (so it can be locked) and says so."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run("lock", root=world.project)[0] == 0
    p = world.patch_file("0003-plugin-switch.patch")
    p.write_text(p.read_text().replace("'PLUGIN_FAST_PATH': '0'", "'PLUGIN_FAST_PATH': '1'"))
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 3 and len(err.splitlines()) == 1
    plugin = composed(world, "plugin")
    tree = git(plugin, "rev-parse", "HEAD^{tree}")
    assert f"TREE MISMATCH for plugin: the newly composed tree {tree} is now in place at {plugin}" in err
    assert "'PLUGIN_FAST_PATH': '1'" in (plugin / "vllm_ascend/envs.py").read_text()
    code, out, err = run("apply", "--mirror", world.mirror, "--json", root=world.project)
    data = json.loads(out)
    assert code == 3 and data["installed"] is True
    assert [t["tree_matches_lock"] for t in data["targets"]] == [True, False]


def _overlay(world, fault: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OVERLAY_FAULT_INJECT=fault)
    return subprocess.run([sys.executable, "-m", "overlay", "--root", str(world.project), *args],
                          env=env, capture_output=True, text=True)


def _change_the_series(world) -> None:
    p = world.patch_file("0003-plugin-switch.patch")
    p.write_text(p.read_text().replace("'PLUGIN_FAST_PATH': '0'", "'PLUGIN_FAST_PATH': '1'"))


def _envs(world) -> str:
    return (composed(world, "plugin") / "vllm_ascend/envs.py").read_text()


@pytest.mark.parametrize("point", ["after-swap", "mid-swap"])
def test_ctrl_c_after_or_during_the_swap_says_the_new_trees_are_in_place(world, run, point):
    """Issue 13 item 3: Ctrl-C during the swap waits for the renames; after it, the message
    says the new trees are installed, and the next run removes the replaced ones."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    _change_the_series(world)
    proc = _overlay(world, f"{point}:INT", "apply", "--mirror", str(world.mirror))
    assert proc.returncode == 130 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"overlay: error: interrupted after the new trees were installed in {world.project / 'build' / 'p1'} "
        f"(composed); the replaced trees left in {world.project / 'build'}/.discard-{proc.stderr.split('.discard-')[1].split()[0]} "
        f"are removed by the next run"]
    assert "'PLUGIN_FAST_PATH': '1'" in _envs(world)
    assert composed(world, "core").is_dir()
    leftover = next((world.project / "build").glob(".discard-*"))
    shutil.rmtree(leftover / "p1" / "plugin" / "vllm_ascend")  # as if half deleted
    code, out, err = run("lock", root=world.project)  # the installed trees are good trees
    assert code == 0, err
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    assert [q.name for q in (world.project / "build").iterdir() if q.name.startswith(".")] == [".overlay.lock"]
    assert "'PLUGIN_FAST_PATH': '1'" in _envs(world)


def test_ctrl_c_before_the_swap_leaves_the_old_trees(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    good = snapshot(world.project / "build" / "p1")
    _change_the_series(world)
    proc = _overlay(world, "before-swap:INT", "apply", "--mirror", str(world.mirror))
    assert proc.returncode == 130
    assert proc.stderr.splitlines() == [
        f"overlay: error: interrupted before the new trees were installed: {world.project / 'build' / 'p1'} "
        f"is as it was (run the command again)"]
    assert snapshot(world.project / "build" / "p1") == good
    assert [q.name for q in (world.project / "build").iterdir() if q.name.startswith(".")] == [".overlay.lock"]


def test_ctrl_c_at_start_up_is_one_line_not_a_traceback(world):
    proc = _overlay(world, "startup:INT", "check")
    assert proc.returncode == 130
    assert proc.stderr == "overlay: error: interrupted (run the command again)\n"


def test_lock_brings_along_the_pin_sets_it_made_stale_and_refresh_names_them(world, run):
    """Issue 13 item 10: pin sets sharing the plugin commit share its composed tree; after a
    refresh changes it, refresh names every stale lock, and lock updates the sharing ones."""
    pins = world.project / "pins"
    p1 = (pins / "p1.yaml").read_text().replace("default: true", "default: false")
    (pins / "p2.yaml").write_text(p1)  # same commits as p1
    (pins / "p3.yaml").write_text(p1.replace(world.plugin_commits[1], world.plugin_commits[2]))
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run("lock", root=world.project)[0] == 0
    assert run("apply", "--mirror", world.mirror, "--pin", "p2", root=world.project)[0] == 0
    code, out, err = run("lock", "--pin", "p2", root=world.project)
    assert code == 0 and "was" not in out  # p1 already records the same trees
    (pins / "p3.yaml").write_text((pins / "p3.yaml").read_text().replace(
        "  plugin:\n", "  plugin:\n    tree: " + "e" * 40 + "\n"))
    plugin = composed(world, "plugin")
    write(plugin, {"vllm_ascend/extra.py": "X = 1\n"})
    commit_all(plugin, "[Misc] Add extra\n\nWhy: test.", author=PATCH_AUTHOR)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert ("locks    now stale: p1/plugin, p2/plugin (run `overlay lock --pin p1`: it also updates "
            "the pin sets that pin the same commit)") in out
    # p3 pins another commit: the new entry is carried by p1 and p2 only (pin sets are
    # independent), so p3's lock is untouched
    assert "p3/plugin" not in out
    assert 'only-pins: ["p1", "p2"]' in (world.project / "series.yaml").read_text()
    (world.project / "series.yaml").write_text((world.project / "series.yaml").read_text().replace(
        "origin: local  # added by refresh: set origin and provenance", "origin: local\n    forwarded: x"))
    before_p3 = (pins / "p3.yaml").read_text()
    code, out, err = run("lock", root=world.project)
    assert code == 0, err
    tree = git(plugin, "rev-parse", "HEAD^{tree}")
    assert f"locked p1/plugin: tree {tree}" in out
    assert f"locked p2/plugin: tree {tree} (was " in out and "so its lock was stale" in out
    assert f"tree: {tree}" in (pins / "p2.yaml").read_text()
    assert (pins / "p3.yaml").read_text() == before_p3  # another commit: not ours to guess
    code, out, err = run("apply", "--mirror", world.mirror, "--pin", "p2", root=world.project)
    assert code == 0, err
    assert out.count("(matches lock)") == 2


def _pin_core_to_an_archive(world, tmp_path, extra: dict | None = None):
    """Pin p1's core to a PyPI-style archive in the mirror (and drop the core patch);
    returns the archive's source folder and the archive."""
    import hashlib
    import tarfile

    src = tmp_path / "pkg" / "core-1.0"
    write(src, {"vllm/__init__.py": "__version__ = '1.0'\n", "vllm/graph.py": "X = 1\n", **(extra or {})})
    (world.mirror / "pypi").mkdir()
    archive = world.mirror / "pypi" / "core-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="core-1.0")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    core_block = text[text.index("  core:"):text.index("  plugin:")]
    pin.write_text(text.replace(core_block, f"  core:\n    pypi: core==1.0\n    sha256: {digest}\n"))
    series = world.project / "series.yaml"
    s = series.read_text()
    series.write_text(s[:s.index("  - patch: 0002")] + s[s.index("  - patch: 0003"):])
    world.patch_file("0002-core-rename-helper.patch").unlink()
    return src, archive


def test_composing_from_an_archive_shows_progress_on_a_terminal_only(world, run, tmp_path, monkeypatch):
    """Issue 13 item 11: each slow step of an archive compose says what it is doing on a
    terminal; --json (and a pipe) stay quiet."""
    _pin_core_to_an_archive(world, tmp_path)
    code, out, err = run("apply", "--mirror", world.mirror, "--json", root=world.project)
    assert code == 0 and err == "" and json.loads(out)["pin"] == "p1"
    shutil.rmtree(world.project / ".overlay")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")  # plain lines (the prefix is dimmed where colour is allowed)
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0, err
    steps = [line for line in err.splitlines() if line.startswith("overlay apply: core: ")]
    assert [s.split(": ", 2)[2].split(" ")[0] for s in steps] == ["verifying", "reading", "importing",
                                                                   "checking"]
    assert "overlay apply: core: importing 2 files into the object cache" in steps
    assert "overlay apply: plugin: checking out " in err and "applying 2 patch(es)" in err


def test_ctrl_c_while_the_modules_import_is_one_line_not_a_traceback(world):
    proc = _overlay(world, "import:INT", "check")
    assert proc.returncode == 130
    assert proc.stderr == "overlay: error: interrupted (run the command again)\n"


def test_lock_does_not_bring_along_a_pin_set_of_the_same_commit_that_carries_other_patches(world, run):
    """Pin sets are independent (issue 30 item 4): the same plugin on another core (v0.30.0
    and v0.31.0 share the plugin release) composes another tree once one of them carries
    patches of its own (only-pins), so locking one never rewrites the other's lock."""
    pins = world.project / "pins"
    p1 = (pins / "p1.yaml").read_text().replace("default: true", "default: false")
    (pins / "p2.yaml").write_text(p1)
    assert run("apply", "--mirror", world.mirror, "--pin", "p2", root=world.project)[0] == 0
    assert run("lock", "--pin", "p2", root=world.project)[0] == 0
    before = (pins / "p2.yaml").read_text()
    series = world.project / "series.yaml"
    series.write_text(series.read_text().replace(
        "    switch: PLUGIN_FAST_PATH\n", "    switch: PLUGIN_FAST_PATH\n    only-pins: [\"p2\"]\n"))  # p1 no longer carries 0003
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    code, out, err = run("lock", root=world.project)
    assert code == 0, err
    assert "p2/plugin" not in out
    assert (pins / "p2.yaml").read_text() == before
