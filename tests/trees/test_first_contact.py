"""Issue 29: the first README command offline (`make apply`, core unreachable) answers
in one short line that spells out `TARGETS=plugin` and the mirror way."""

from __future__ import annotations

import shutil


def test_unreachable_core_is_short_and_names_targets_plugin(world, run):
    world.core.rename(world.core.with_name("core-gone"))
    shutil.rmtree(world.mirror / "example+core")
    code, _, err = run("apply", root=world.project)
    assert code == 2 and err.count("\n") == 1
    assert "make apply TARGETS=plugin" in err and "OVERLAY_MIRROR=DIR" in err
    url = err.split(" from ", 1)[1].split(": ", 1)[0]  # the pin's URL (a long temporary path here)
    assert len(err) - len(url) < 270, err  # about 400 before
    assert err.count("(") == 1  # the hint's, nothing nested


def test_the_backport_recipe_fetches_the_upstream_commit_into_the_shallow_tree(world, run):
    """README "Add a backport": the composed tree is shallow (history stops at the pin); the
    documented fetch brings one upstream commit and its parent, and cherry-pick -x works."""
    import subprocess
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Add a backport with attribution", 1)[1].split("\n### ", 1)[0]
    assert "git fetch --depth=2 " in section and "git cherry-pick -x" in section
    code, _, err = run("apply", "--targets", "plugin", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    tree = world.project / "build" / "p1" / "plugin"
    upstream = world.plugin_commits[2]  # a later upstream change, not in the shallow tree

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                               *args], cwd=tree, capture_output=True, text=True)

    assert git("cat-file", "-e", upstream).returncode != 0
    assert git("fetch", "-q", "--depth=2", str(world.mirror / "example+plugin"), upstream).returncode == 0
    picked = git("cherry-pick", "-x", upstream)
    assert picked.returncode == 0, picked.stderr
    assert (tree / "docs" / "note1.md").is_file()
    assert f"(cherry picked from commit {upstream})" in git("log", "-1", "--format=%B").stdout


def test_drift_without_a_mirror_says_what_is_missing_not_the_cache(world, run, monkeypatch):
    """After `make apply` the object cache holds the pinned snapshot; `drift` without a
    mirror used to say `'main' is not a commit in <the cache's path>`."""
    from overlay import paths

    monkeypatch.delenv("OVERLAY_MIRROR", raising=False)
    assert run("apply", "--targets", "plugin", root=world.project)[0] == 0  # from the pinned URL
    code, out, err = run("drift", "--onto", "plugin=main", root=world.project)
    assert code == 2 and err.count("\n") == 1
    assert str(paths.cache_dir(world.project)) not in err and "cache" not in err
    assert "OVERLAY_MIRROR=DIR" in err and "example+plugin" in err
