"""`.pre-commit-hooks.yaml` is a valid pre-commit manifest (issue 20 item 6).

The schema is cut from pre-commit 4.7.0's own `pre_commit/clientlib.py` (MANIFEST_HOOK_DICT:
required id, name, entry, language; the optional keys and their types) and
`pre_commit/all_languages.py` (the language names). pre-commit itself is not installed for
this: it would bring virtualenv, nodeenv, identify and cfgv into every test environment.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

REQUIRED = {"id": str, "name": str, "entry": str, "language": str}
OPTIONAL = {"minimum_pre_commit_version": str, "alias": str, "files": str, "exclude": str,
            "types": list, "types_or": list, "exclude_types": list,
            "additional_dependencies": list, "args": list, "always_run": bool,
            "fail_fast": bool, "pass_filenames": bool, "description": str,
            "language_version": str, "log_file": str, "require_serial": bool, "stages": list,
            "verbose": bool}
LANGUAGES = {"conda", "coursier", "dart", "docker", "docker_image", "dotnet", "fail", "golang",
             "haskell", "julia", "lua", "node", "perl", "pygrep", "python", "r", "ruby", "rust",
             "swift", "unsupported", "unsupported_script",
             "system", "script"}  # the two older names pre-commit still migrates
STAGES = {"commit-msg", "post-checkout", "post-commit", "post-merge", "post-rewrite", "pre-commit",
          "pre-merge-commit", "pre-push", "pre-rebase", "prepare-commit-msg", "manual"}


def manifest_problems(hooks) -> list[str]:
    if not isinstance(hooks, list) or not hooks:
        return ["the manifest must be a non-empty list of hooks"]
    problems = []
    for i, hook in enumerate(hooks):
        if not isinstance(hook, dict):
            problems.append(f"hook {i}: not a mapping")
            continue
        where = f"hook {hook.get('id', i)}"
        for key, kind in REQUIRED.items():
            if not isinstance(hook.get(key), kind):
                problems.append(f"{where}: missing or non-{kind.__name__} required key {key!r}")
        for key, value in hook.items():
            kind = REQUIRED.get(key) or OPTIONAL.get(key)
            if kind is None:
                problems.append(f"{where}: unknown key {key!r}")
            elif not isinstance(value, kind):
                problems.append(f"{where}: {key!r} must be a {kind.__name__}")
        if hook.get("language") not in LANGUAGES:
            problems.append(f"{where}: unknown language {hook.get('language')!r}")
        for key in ("files", "exclude"):
            if isinstance(hook.get(key), str):
                try:
                    re.compile(hook[key])
                except re.error as exc:
                    problems.append(f"{where}: {key!r} is not a regex: {exc}")
        problems += [f"{where}: unknown stage {s!r}" for s in hook.get("stages", []) if s not in STAGES]
    ids = [h.get("id") for h in hooks if isinstance(h, dict)]
    problems += [f"hook id {i!r} appears twice" for i in set(ids) if ids.count(i) > 1]
    return problems


def _hooks() -> list[dict]:
    return yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())


def test_hooks_file_is_a_valid_pre_commit_manifest():
    assert manifest_problems(_hooks()) == []


def test_the_check_catches_a_broken_manifest():
    assert manifest_problems({"id": "x"}) == ["the manifest must be a non-empty list of hooks"]
    broken = [{"id": "a", "name": "a", "entry": "overlay check", "language": "pyhton",
               "files": "(", "stages": ["commit"], "pass_filename": False}]
    text = "\n".join(manifest_problems(broken))
    for expected in ("unknown language 'pyhton'", "'files' is not a regex", "unknown stage 'commit'",
                     "unknown key 'pass_filename'"):
        assert expected in text


def test_hooks_run_overlay_check_and_gate_on_the_project_files(run):
    by_id = {h["id"]: h for h in _hooks()}
    assert shlex.split(by_id["overlay-check"]["entry"]) == ["overlay", "check"]
    assert shlex.split(by_id["overlay-gate"]["entry"]) == ["overlay", "gate", "--compose", "--baseline", "declared"]
    for hook in by_id.values():
        assert hook["pass_filenames"] is False  # the commands read the whole project
        for path in ("series.yaml", "patches/0001-x.patch", "pins/p.yaml"):
            assert re.search(hook["files"], path), (hook["id"], path)
        assert not re.search(hook["files"], "README.md")
    # the entry is a command that exists: its --help works
    import pytest
    from overlay.cli import main
    for hook in by_id.values():
        with pytest.raises(SystemExit) as done:
            main(shlex.split(hook["entry"])[1:] + ["--help"])
        assert done.value.code == 0
    assert "pre-commit" in (ROOT / "README.md").read_text() and "overlay-gate" in (ROOT / "README.md").read_text()


def test_a_commit_that_breaks_overlay_check_under_evidence_runs_the_hook(world, run):
    """Issue 26 case 17: the hook's `files` missed evidence/, so removing an experimental
    patch's evidence folder broke `overlay check` and no hook ran."""
    import shutil

    hook = {h["id"]: h for h in _hooks()}["overlay-check"]
    assert run("check", root=world.project)[0] == 0
    folder = world.project / "evidence" / "fast-path"
    changed = [p.relative_to(world.project).as_posix() for p in folder.rglob("*") if p.is_file()]
    shutil.rmtree(folder)  # the commit: the folder's files deleted
    code, out, _ = run("check", root=world.project)
    assert code == 1 and "evidence folder 'evidence/fast-path' does not exist" in out
    assert changed and all(re.search(hook["files"], path) for path in changed), changed


def test_the_check_hook_watches_what_overlay_check_reads_from_one_list():
    """The pattern is made from overlay.series.checks.INPUTS; each input is watched."""
    from overlay.series.checks import INPUTS, files_pattern

    hook = {h["id"]: h for h in _hooks()}["overlay-check"]
    assert hook["files"] == files_pattern()
    for name in INPUTS:
        path = name + "x/y.yaml" if name.endswith("/") else name
        assert re.search(hook["files"], path), path
    for outside in ("README.md", "docs/evidence/x.md", "tools/overlay/cli.py", "pinsx.yaml"):
        assert not re.search(hook["files"], outside), outside
