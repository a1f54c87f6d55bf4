"""overlay refresh: byte-stable round trip and the edit workflows."""

from __future__ import annotations

import os
from pathlib import Path


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
    assert "3 unchanged, 0 updated, 0 new, 0 dropped, 0 renamed (nothing to do)" in out
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


def _second_pin_set(world, run) -> None:
    """p2: the same plugin commit through another URL spelling (another pin of the target),
    composed and locked; then p1 composed."""
    p1 = world.project / "pins" / "p1.yaml"
    text = p1.read_text().replace("default: true", "default: false")
    url = next(line.split("repo: ", 1)[1] for line in text.splitlines() if "example/plugin" in line)
    (world.project / "pins" / "p2.yaml").write_text(text.replace(url, url + ".git"))
    assert run("apply", "--pin", "p2", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run("lock", "--pin", "p2", root=world.project)[0] == 0
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0


def test_a_new_commit_on_one_pin_set_is_that_pin_sets_only(world, run):
    """Pin sets are independent (issue 30 item 4): with a second pin set of the same
    target, the entry refresh makes for a new commit is carried by the pin set it was made
    on, and the other composes exactly as before."""
    _second_pin_set(world, run)
    tree = plugin_tree(world)
    write(tree, {"vllm_ascend/new_feature.py": "ENABLED = False\n"})
    commit_all(tree, "[Feature] Add a new feature flag\n\nWhy: because.", author=PATCH_AUTHOR)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    series = (world.project / "series.yaml").read_text()
    assert '  only-pins: ["p1"]' in series.split("0004-add-a-new-feature-flag.patch", 1)[1]
    code, out, err = run("apply", "--pin", "p2", "--mirror", world.mirror, "--json", root=world.project)
    import json
    assert code == 0 and all(t["tree_matches_lock"] for t in json.loads(out)["targets"]), (out, err)


def test_the_same_commit_on_a_second_pin_set_is_shared_not_copied(world, run):
    """Issue 30: the same change made on a second pin set's branch (byte for byte the
    first's patch) extends the entry's only-pins; it never becomes a second entry."""
    import json

    _second_pin_set(world, run)
    tree = plugin_tree(world)
    write(tree, {"vllm_ascend/new_feature.py": "ENABLED = False\n"})
    commit_all(tree, "[Feature] Add a new feature flag\n\nWhy: because.", author=PATCH_AUTHOR)
    assert run("refresh", root=world.project)[0] == 0
    assert run("lock", "--pin", "p1", root=world.project)[0] == 0
    patches = sorted(p.name for p in (world.project / "patches").iterdir())
    # the same commit on p2's branch
    from overlay import paths

    other = paths.composed_dir(world.project, "p2", "plugin")
    mail = world.project / "patches" / "0004-add-a-new-feature-flag.patch"
    run_git(["am", "-q", "--keep-non-patch", "--committer-date-is-author-date", str(mail)], other)
    code, out, err = run("refresh", "--pin", "p2", root=world.project)
    assert code == 0, err
    assert "shared   0004-add-a-new-feature-flag.patch" in out and " 0 new" in out
    assert sorted(p.name for p in (world.project / "patches").iterdir()) == patches
    series = (world.project / "series.yaml").read_text()
    assert series.count("add-a-new-feature-flag") == 1
    assert 'only-pins: ["p1", "p2"]' in series.split("0004-add-a-new-feature-flag.patch", 1)[1]
    assert run("lock", "--pin", "p2", root=world.project)[0] == 0
    for pin in ("p1", "p2"):
        code, out, err = run("apply", "--pin", pin, "--mirror", world.mirror, "--json", root=world.project)
        assert code == 0 and all(t["tree_matches_lock"] for t in json.loads(out)["targets"]), (pin, out, err)


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


def test_refuses_when_the_series_moved_on_since_apply(world, run):
    """A teammate's new patch pulled after apply must not be 'dropped' by refresh."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    src = world.project / "patches" / "0003-plugin-switch.patch"
    (world.project / "patches" / "0004-teammate.patch").write_text(
        src.read_text().replace("[Perf] Add an opt-in fast path switch", "[Misc] Teammate change"))
    series = world.project / "series.yaml"
    series.write_text(series.read_text() + "  - patch: 0004-teammate.patch\n    target: plugin\n"
                      "    origin: local\n    forwarded: x\n")
    before = project_bytes(world.project)
    code, _, err = run("refresh", root=world.project)
    assert code == 2 and "patches/ or series.yaml changed for plugin since" in err
    assert project_bytes(world.project) == before
    code, _, err = run("lock", root=world.project)
    assert code == 2 and "the series changed since it was composed" in err


def test_refuses_mid_rebase_and_detached_head(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    before = project_bytes(world.project)
    env_editor = "sed -i '1s/^pick/edit/'"
    import subprocess
    subprocess.run(["git", "rebase", "-i", "refs/overlay/base"], cwd=tree, check=True, capture_output=True,
                   env={**os.environ, "GIT_SEQUENCE_EDITOR": env_editor,
                        "GIT_CONFIG_GLOBAL": os.devnull})
    code, _, err = run("refresh", root=world.project)
    assert code == 2 and "a rebase is in progress" in err
    code, _, err = run("lock", root=world.project)
    assert code == 2 and "a rebase is in progress" in err
    run_git(["rebase", "--abort"], tree)
    run_git(["checkout", "-q", "--detach", "HEAD~1"], tree)
    code, _, err = run("refresh", root=world.project)
    assert code == 2 and "HEAD is on a detached commit, not overlay/p1" in err
    assert project_bytes(world.project) == before


def test_commit_inserted_mid_series_keeps_its_place(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    last = run_git(["rev-parse", "HEAD"], tree)
    run_git(["reset", "-q", "--hard", "HEAD~1"], tree)
    write(tree, {"vllm_ascend/fast.py": "FAST = True\n"})
    commit_all(tree, "[Perf] Add the fast module", author=PATCH_AUTHOR)
    run_git(["-c", "notes.rewriteRef=refs/notes/overlay", "cherry-pick", last], tree)
    run_git(["notes", "--ref=refs/notes/overlay", "copy", "-f", last, "HEAD"], tree)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    text = (world.project / "series.yaml").read_text()
    # numbers follow the order: the new patch goes after the core entry (another target's:
    # its order against plugin patches changes nothing) and takes 0003; the plugin patch
    # after it moves up, the core patch keeps its name
    assert text.index("0001-plugin") < text.index("0003-add-the-fast-module") < text.index("0004-plugin-switch")
    assert "renamed  0003-plugin-switch.patch -> 0004-plugin-switch.patch" in out
    assert "0002-core-rename-helper.patch ->" not in out
    assert sorted(p.name for p in (world.project / "patches").iterdir()) == [
        "0001-plugin-lora-args.patch", "0002-core-rename-helper.patch",
        "0003-add-the-fast-module.patch", "0004-plugin-switch.patch"]
    before = project_bytes(world.project)
    assert run("refresh", root=world.project)[0] == 0  # settles in one run
    assert project_bytes(world.project) == before
    edit_forwarded = text.replace("origin: local  # added by refresh: set origin and provenance",
                                  "origin: local\n    forwarded: example/plugin#2")
    (world.project / "series.yaml").write_text(edit_forwarded)
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0, out + err


def test_refuses_a_branch_rebased_onto_newer_upstream(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    run_git(["fetch", "-q", str(world.mirror / "example+plugin"), "main"], tree)
    run_git(["-c", "notes.rewriteRef=refs/notes/overlay", "rebase", "-q", "--onto", "FETCH_HEAD",
             "refs/overlay/base"], tree)
    before = project_bytes(world.project)
    code, _, err = run("refresh", "--mirror", world.mirror, root=world.project)
    assert code == 2 and "holds upstream commit" in err and "bump the pin" in err
    assert project_bytes(world.project) == before


def test_reworded_subject_updates_the_series_entry(world, run):
    series = world.project / "series.yaml"
    series.write_text(series.read_text().replace(
        "    origin: experimental\n", "    origin: experimental\n    subject: \"[Perf] Add an opt-in fast path switch\"\n"))
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    run_git(["-c", "notes.rewriteRef=refs/notes/overlay", "commit", "-q", "--amend", "-m",
             "[Perf] Add an opt-in \"fast\" path switch\n\nOff by default."], tree, author=PATCH_AUTHOR)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert '    subject: "[Perf] Add an opt-in \\"fast\\" path switch"\n' in series.read_text()
    assert run("check", root=world.project)[0] == 0


def test_round_trip_ignores_the_composed_repos_own_config(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run("refresh", root=world.project)[0] == 0
    canonical = project_bytes(world.project)
    tree = plugin_tree(world)
    for key, value in (("format.from", "Hostile <h@example.org>"), ("format.headers", "X-Evil: 1"),
                       ("format.to", "t@example.org"), ("format.cc", "c@example.org"),
                       ("format.attach", "true"), ("format.forceInBodyFrom", "true"),
                       ("format.signOff", "true"), ("diff.noprefix", "true"), ("format.mboxrd", "true")):
        run_git(["config", key, value], tree)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "(nothing to do)" in out
    assert project_bytes(world.project) == canonical


def test_crlf_files_round_trip_byte_exact(world, run):
    """Issue 13 item 1: a change to a CRLF file keeps its CR bytes in the patch, and apply
    reproduces the exact blob the patch's index line names (new and modified CRLF files)."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    cmake = tree / "csrc" / "CMakeLists.txt"
    cmake.parent.mkdir()
    cmake.write_bytes(b"project(x)\r\nset(A 1)\r\nset(B 2)\r\n")
    commit_all(tree, "[Build] Add the kernel build file\n\nWhy: CRLF as upstream writes it.",
               author=PATCH_AUTHOR)
    cmake.write_bytes(b"project(x)\r\nset(A 10)\r\nset(B 2)\r\n")
    commit_all(tree, "[Build] Raise A\n\nWhy: test.", author=PATCH_AUTHOR)
    branch_tree = run_git(["rev-parse", "HEAD^{tree}"], tree)
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    added = sorted(p for p in (world.project / "patches").iterdir() if p.name.startswith(("0004", "0005")))
    assert len(added) == 2
    new_file, modified = (p.read_bytes() for p in added)
    assert b"+set(A 1)\r\n" in new_file and b"+project(x)\r\n" in new_file
    assert b"-set(A 1)\r\n+set(A 10)\r\n" in modified and b" set(B 2)\r\n" in modified
    assert b"Subject: [PATCH] [Build] Raise A\n" in modified  # headers stay LF
    code, out, _ = run("check", root=world.project)
    assert "CRLF" not in out
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0, err
    assert cmake.read_bytes() == b"project(x)\r\nset(A 10)\r\nset(B 2)\r\n"
    assert run_git(["rev-parse", "HEAD^{tree}"], tree) == branch_tree
    # and refreshing again changes no byte
    before = project_bytes(world.project)
    assert run("refresh", root=world.project)[0] == 0
    assert project_bytes(world.project) == before


def test_apply_verifies_the_blob_named_in_the_index_line(world, run):
    """A patch that lost its CR bytes (the old refresh) still applies as a new file, but
    the composed blob differs from the index line: apply says so instead of composing it."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    (tree / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    commit_all(tree, "[Misc] Add a CRLF file\n\nWhy: test.", author=PATCH_AUTHOR)
    assert run("refresh", root=world.project)[0] == 0
    patch = next((world.project / "patches").glob("0004-*.patch"))
    patch.write_bytes(patch.read_bytes().replace(b"\r\n", b"\n"))
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 1
    assert len(err.splitlines()) == 1
    assert f"patches/{patch.name}: win.txt was composed as blob " in err
    assert "the same text with CRLF line endings: the patch lost the CR bytes of its CRLF lines" in err
    assert not list((world.project / "build").glob(".staging-*"))


def test_a_patch_without_the_cr_bytes_of_a_crlf_file_is_not_blamed_on_upstream(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    (tree / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    commit_all(tree, "[Misc] Add a CRLF file\n\nWhy: test.", author=PATCH_AUTHOR)
    (tree / "win.txt").write_bytes(b"one\r\nTWO\r\n")
    commit_all(tree, "[Misc] Shout\n\nWhy: test.", author=PATCH_AUTHOR)
    assert run("refresh", root=world.project)[0] == 0
    patch = next((world.project / "patches").glob("0005-*.patch"))
    patch.write_bytes(patch.read_bytes().replace(b"\r\n", b"\n"))
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 1
    assert ("win.txt: the file has CRLF line endings but the patch's lines carry no CR bytes: "
            "the patch lost the CR bytes of its CRLF lines") in out
    assert "not an upstream change" in err and "overlay drift" not in err


def test_reorder_says_so_and_renumbers_the_files(world, run):
    """Issue 13 item 13: after a reorder, refresh says the order changed, and the file
    numbers follow the new order (no 0004 listed before 0003)."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    base = world.plugin_commits[1]
    first, second = run_git(["rev-list", "--reverse", f"{base}..HEAD"], tree).split()
    run_git(["reset", "-q", "--hard", base], tree)  # swap the two plugin patches
    for commit in (second, first):
        run_git(["cherry-pick", commit], tree)
        run_git(["notes", "--ref=refs/notes/overlay", "copy", "-f", commit, "HEAD"], tree)
    lora = (world.project / "patches" / "0001-plugin-lora-args.patch").read_bytes()
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    # the plugin patches swap their slots; the core patch between them keeps its place
    assert ("order    changed on the branch; series.yaml now reads: 0003-plugin-switch.patch, "
            "0004-core-rename-helper.patch, 0005-plugin-lora-args.patch") in out
    assert "renamed  0002-core-rename-helper.patch -> 0004-core-rename-helper.patch" in out
    assert "renamed  0001-plugin-lora-args.patch -> 0005-plugin-lora-args.patch" in out
    assert out.rstrip().endswith("1 unchanged, 0 updated, 0 new, 0 dropped, 2 renamed, order changed")
    names = [line.split("patch: ")[1] for line in (world.project / "series.yaml").read_text().splitlines()
             if "- patch: " in line]
    assert names == ["0003-plugin-switch.patch", "0004-core-rename-helper.patch", "0005-plugin-lora-args.patch"]
    assert sorted(p.name for p in (world.project / "patches").iterdir()) == names
    assert (world.project / "patches" / "0005-plugin-lora-args.patch").read_bytes() == lora
    assert run("check", root=world.project)[0] == 0
    before = project_bytes(world.project)
    code, out, err = run("refresh", root=world.project)
    assert code == 0 and "(nothing to do)" in out  # the composed state follows the new names
    assert project_bytes(world.project) == before
    assert run("apply", "--mirror", world.mirror, "--force", root=world.project)[0] == 0


def test_renames_keep_other_composed_trees_current(world, run):
    """A refresh of the plugin that renumbers the core patch leaves the composed core
    tree (and another pin set's trees) lockable: their state follows the new names."""
    import shutil as _shutil

    pins = world.project / "pins"
    (pins / "p2.yaml").write_text((pins / "p1.yaml").read_text().replace("default: true", "default: false"))
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert run("apply", "--mirror", world.mirror, "--pin", "p2", root=world.project)[0] == 0
    tree = plugin_tree(world)
    base = world.plugin_commits[1]
    first, second = run_git(["rev-list", "--reverse", f"{base}..HEAD"], tree).split()
    run_git(["reset", "-q", "--hard", base], tree)
    for commit in (second, first):
        run_git(["cherry-pick", commit], tree)
        run_git(["notes", "--ref=refs/notes/overlay", "copy", "-f", commit, "HEAD"], tree)
    code, out, err = run("refresh", "--targets", "plugin", root=world.project)
    assert code == 0, err
    assert "0002-core-rename-helper.patch -> 0004-core-rename-helper.patch" in out
    code, out, err = run("lock", "--targets", "core", root=world.project)
    assert code == 0, err
    code, out, err = run("lock", "--pin", "p2", "--targets", "core", root=world.project)
    assert code == 0, err
    _shutil.rmtree(world.project / "build" / "p2" / "plugin")
    code, out, err = run("refresh", "--pin", "p2", root=world.project)
    assert code == 0 and "(nothing to do)" in out, out + err


def test_refresh_never_renumbers_another_pin_sets_patch(world, run):
    """Issue 29: an entry only another pin set carries (0004, `only-pins: [p2]`) keeps its
    name when a patch is added on top of p1's branch; before, the new entry took 0004 and
    p2's became 0005 (0011 -> 0012 in this repository)."""
    p1 = world.project / "pins" / "p1.yaml"
    text = p1.read_text().replace("default: true", "default: false")
    url = next(line.split("repo: ", 1)[1] for line in text.splitlines() if "example/plugin" in line)
    (world.project / "pins" / "p2.yaml").write_text(text.replace(url, url + ".git"))
    other = world.patch_file("0004-p2-only.patch")
    other.write_bytes(world.patch_file("0001-plugin-lora-args.patch").read_bytes())
    series = world.project / "series.yaml"
    series.write_text(series.read_text() + "  - patch: 0004-p2-only.patch\n    target: plugin\n"
                      "    origin: local\n    forwarded: not yet\n    only-pins: [p2]\n")
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    tree = plugin_tree(world)
    write(tree, {"vllm_ascend/new_feature.py": "ENABLED = False\n"})
    commit_all(tree, "[Feature] Add a new feature flag\n\nWhy: because.", author=PATCH_AUTHOR)
    before = other.read_bytes()
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "renamed" not in out.replace("0 renamed", "")
    assert other.read_bytes() == before
    names = sorted(p.name for p in (world.project / "patches").iterdir())
    assert "0004-p2-only.patch" in names and "0005-add-a-new-feature-flag.patch" in names, names
    text = series.read_text()
    assert text.index("0004-p2-only.patch") < text.index("0005-add-a-new-feature-flag.patch")
    # p1 still composes its series in its order, p2's entry is not in it
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
