"""`overlay range-diff A B`: two revisions of this repository, or two pin sets, compared patch
by patch with git range-diff over the composed branches (synthetic upstreams only)."""

from __future__ import annotations

import json
import re

from conftest import add_second_pin
from fixtures import PLUGIN_FILES, commit_all, make_patch, run_git


def _commit_project(world, message: str) -> str:
    if not (world.project / ".git").exists():
        run_git(["init", "-q"], world.project)
    return commit_all(world.project, message)


def _pairs(doc: dict, target: str) -> list[tuple]:
    t = next(t for t in doc["targets"] if t["target"] == target)
    return [(p["a"], p["status"], p["b"], p["subject"]) for p in t["pairs"]]


def test_two_revisions_compose_on_one_base_and_show_each_patch(world, run):
    old = _commit_project(world, "series v1")
    # 0003 changes its content, 0004 is new
    p1 = {"vllm_ascend/worker.py": PLUGIN_FILES["vllm_ascend/worker.py"].replace(
        "def factory(config, device):", "def factory(config, device, lora_capture_cases=None):")}
    make_patch(world.plugin, world.plugin_commits[1],
               {"vllm_ascend/envs.py": "VARS = {'PLUGIN_FAST_PATH': '0'}\n"},
               "[Perf] Add an opt-in fast path switch", "Off by default; see evidence/fast-path.",
               world.patch_file("0003-plugin-switch.patch"), previous=[p1])
    make_patch(world.plugin, world.plugin_commits[1], {"README.md": "plugin, patched\n"},
               "[Doc] Say it is patched", "Docs.", world.patch_file("0004-plugin-readme.patch"),
               previous=[p1, {"vllm_ascend/envs.py": "VARS = {'PLUGIN_FAST_PATH': '0'}\n"}])
    series = world.project / "series.yaml"
    series.write_text(series.read_text() + "  - patch: 0004-plugin-readme.patch\n    target: plugin\n"
                      "    origin: local\n")
    new = _commit_project(world, "series v2")
    code, out, err = run("range-diff", old, "HEAD", "--mirror", world.mirror, "--json", root=world.project)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["a"]["kind"] == doc["b"]["kind"] == "revision" and doc["b"]["name"] == new
    assert doc["pin"] == "p1"
    assert _pairs(doc, "plugin") == [
        (1, "=", 1, "[BugFix][MRV2] Accept lora_capture_cases in factory"),
        (2, "!", 2, "[Perf] Add an opt-in fast path switch"),
        (None, ">", 3, "[Doc] Say it is patched")]
    assert _pairs(doc, "core") == [(1, "=", 1, "[Core] Rename the global lse helper")]
    plugin = next(t for t in doc["targets"] if t["target"] == "plugin")
    assert plugin["a"]["base"] == plugin["b"]["base"] == world.plugin_commits[1]  # one shared base
    assert "+    Off by default; see evidence/fast-path." in plugin["range_diff"]
    code, out, err = run("range-diff", old, new, "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    assert "== plugin: 1 same, 1 changed, 0 only in" in out and ", 1 only in " in out
    assert not list(world.project.glob("build"))  # composed aside, nothing left in the checkout


def test_two_pin_sets_use_build_or_compose_aside(world, run):
    add_second_pin(world)
    code, out, err = run("range-diff", "p1", "p2", "--json", root=world.project)
    assert code == 0, err
    doc = json.loads(out)
    assert [(a, s, b) for a, s, b, _ in _pairs(doc, "plugin")] == [(1, "<", None), (2, "<", None)]
    plugin = next(t for t in doc["targets"] if t["target"] == "plugin")
    assert plugin["a"]["from"] == "composed aside"
    assert run("apply", "--pin", "p1", "--mirror", world.mirror, root=world.project)[0] == 0
    doc = json.loads(run("range-diff", "p1", "p2", "--json", root=world.project)[1])
    plugin = next(t for t in doc["targets"] if t["target"] == "plugin")
    assert plugin["a"]["from"] == "build/" and plugin["b"]["from"] == "composed aside"


def test_hostile_sides_are_one_line_exit_2(world, run):
    _commit_project(world, "series v1")
    for argv, says in ((("range-diff", "--", "--output=x", "HEAD"), "is neither a pin set nor a revision"),
                       (("range-diff", "nope", "HEAD"), "'nope' is neither a pin set nor a revision"),
                       (("range-diff", "p1", "HEAD"), "is a pin and 'HEAD' a revision"),
                       (("range-diff", "HEAD~5", "HEAD"), "is neither")):
        code, out, err = run(*argv, root=world.project)
        assert code == 2 and out == "", argv
        assert len(err.strip().splitlines()) == 1 and says in err, (argv, err)
    assert not (world.project / "x").exists()


def test_a_revision_whose_series_is_broken_is_named(world, run):
    from fixtures import break_patch_two

    good = _commit_project(world, "series v1")
    break_patch_two(world)
    _commit_project(world, "0003 no longer applies")
    code, out, err = run("range-diff", good, "HEAD", "--mirror", world.mirror, root=world.project)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "at revision HEAD (" in err and "0003-plugin-switch.patch" in err
    (world.project / "series.yaml").write_text("series: 3\n")
    _commit_project(world, "series.yaml broken")
    code, out, err = run("range-diff", good, "HEAD", root=world.project)
    assert code == 2 and "at revision HEAD (" in err and "series.yaml" in err
    assert len(err.strip().splitlines()) == 1


def test_targets_limit_what_is_composed(world, run):
    old = _commit_project(world, "series v1")
    code, out, err = run("range-diff", old, "HEAD", "--targets", "plugin", "--mirror", world.mirror,
                         "--json", root=world.project)
    assert code == 0, err
    assert [t["target"] for t in json.loads(out)["targets"]] == ["plugin"]
    code, out, err = run("range-diff", old, "HEAD", "--targets", "gpu", root=world.project)
    assert code == 2 and "unknown target 'gpu'" in err


def _edit_the_branch(world):
    """In build/p1/plugin: the top patch's message amended and a new patch on top."""
    from fixtures import PATCH_AUTHOR, write

    tree = world.project / "build" / "p1" / "plugin"
    message = run_git(["log", "-1", "--format=%B"], tree).strip()
    run_git(["commit", "-q", "--amend", "-m", message + "\n\nAmended: measured on two nodes."], tree,
            author=PATCH_AUTHOR)
    write(tree, {"vllm_ascend/new_feature.py": "ENABLED = False\n"})
    commit_all(tree, "[Feature] Add a new feature flag\n\nWhy: because.", author=PATCH_AUTHOR)


def _masked(text: str) -> list[str]:
    """range-diff lines with the commit ids and the side names left out."""
    text = re.sub(r"\b[0-9a-f]{7,40}\b", "<id>", text)
    return [re.sub(r"only in [^,\s]+( refresh)?", "only in <side>", line) for line in text.splitlines()]


def test_refresh_ends_with_the_summary_range_diff_prints(world, run):
    """Issue 29: refresh prints, at its end, the summary `overlay range-diff` prints for the
    series before and after it (here: the two commits of the repository around it)."""
    old = _commit_project(world, "series before")
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    _edit_the_branch(world)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    head, _, rest = out.partition("range-diff before refresh -> after refresh on pin set p1\n")
    assert rest, out
    shown, totals = rest.rstrip("\n").rsplit("\n", 1)
    assert totals.startswith("refresh: ") and totals == out.rstrip().splitlines()[-1]
    assert shown.startswith("== plugin: 1 same, 1 changed, 0 only in before refresh, 1 only in after refresh\n")
    assert "+    Amended: measured on two nodes." in shown  # each patch's change, as git range-diff shows it
    assert "== core" not in shown  # its branch did not change
    _commit_project(world, "series after")
    code, same, err = run("range-diff", old, "HEAD", "--targets", "plugin", "--mirror", world.mirror,
                          root=world.project)
    assert code == 0, err
    assert _masked(same.split("\n", 1)[1]) == _masked(shown)  # one summary, the same lines
    code, out, _ = run("refresh", root=world.project)  # nothing changed since: no summary
    assert code == 0 and "range-diff" not in out


def test_refresh_json_has_the_range_diff_as_a_field(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    _edit_the_branch(world)
    code, out, err = run("refresh", "--json", root=world.project)
    assert code == 0, err
    doc = json.loads(out)
    diff = doc["range_diff"]
    assert (diff["a"]["given"], diff["b"]["given"], diff["pin"]) == ("before refresh", "after refresh", "p1")
    assert [t["target"] for t in diff["targets"]] == ["plugin"]
    assert _pairs(diff, "plugin") == [(1, "=", 1, "[BugFix][MRV2] Accept lora_capture_cases in factory"),
                                      (2, "!", 2, "[Perf] Add an opt-in fast path switch"),
                                      (None, ">", 3, "[Feature] Add a new feature flag")]
    assert "written" in doc  # refresh's own fields stay
    code, out, _ = run("refresh", "--json", root=world.project)
    assert code == 0 and json.loads(out)["range_diff"]["targets"] == []
