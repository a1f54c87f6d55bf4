"""Issue 16, Why-4/7/11: paths as git writes them, decoded before every check.

git C-quotes a path with unusual bytes (`"b/\\056\\056/x"` is `b/../x`), in `---`/`+++`
headers, in `diff --git` lines and in `rename`/`copy` lines alike. Every one of them
is decoded before the escape checks. Names with `ü` or `"` round-trip through
apply -> refresh -> apply; a name with a line break is refused at refresh.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import COMPOSER, run_git


def _append_block(world, block: str) -> None:
    p = world.patch_file("0001-plugin-lora-args.patch")
    p.write_text(p.read_text() + block)


def _new_file(header_a: str, header_b: str, plus: str | None = None) -> str:
    plus = plus if plus is not None else header_b
    return (f"diff --git {header_a} {header_b}\nnew file mode 100644\nindex 0000000..3333333\n"
            f"--- /dev/null\n+++ {plus}\n@@ -0,0 +1 @@\n+x = 1\n")


QUOTED = {
    "dotdot-everywhere": (_new_file(r'"a/\056\056/x.py"', r'"b/\056\056/x.py"'),
                          "path '../x.py' escapes the tree with '..'"),
    "dotgit": (_new_file(r'"a/\056git/config"', r'"b/\056git/config"'),
               "path '.git/config' reaches into .git/"),
    "dotgit-any-case": (_new_file(r'"a/\056GIT/hooks/x"', r'"b/\056GIT/hooks/x"'),
                        "reaches into .git/"),
    "octal-slashes": (_new_file(r'"a/x\057\056\056\057\056\056\057y"', r'"b/x\057\056\056\057\056\056\057y"'),
                      "escapes the tree with '..'"),
    "only-the-diff-git-line": (r'diff --git "a/\056\056/e.py" "b/\056\056/e.py"' + "\n"
                               "new file mode 100644\nindex 0000000..e69de29\n",
                               "escapes the tree with '..'"),
    "rename-to": ("diff --git a/vllm_ascend/envs.py b/vllm_ascend/envs.py\nsimilarity index 100%\n"
                  "rename from vllm_ascend/envs.py\n" + r'rename to "\056\056/envs.py"' + "\n",
                  "escapes the tree with '..'"),
    "bad-escape": (_new_file(r'"a/\q.py"', r'"b/\q.py"'), "quoted the way git never writes it"),
}


@pytest.mark.parametrize("case", sorted(QUOTED))
def test_quoted_escapes_are_caught_by_check_and_apply(world, run, case):
    block, expected = QUOTED[case]
    _append_block(world, block)
    code, out, err = run("check", root=world.project)
    assert code != 0 and expected in out + err, out + err
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert "drift" not in err  # the patch is bad, not upstream
    assert not (world.project / "build" / "p1").exists()


@pytest.mark.parametrize("quoted,plain", [
    (r'"b/\056\056/x"', "b/../x"), (r'"b/\303\274.py"', "b/ü.py"), (r'"a\"b"', 'a"b'),
    (r'"a\\b"', "a\\b"), (r'"a\nb"', "a\nb"), (r'"a\tb"', "a\tb"), ('"b/ü"', "b/ü"),
    ("b/plain", "b/plain"),
])
def test_unquote_decodes_as_git_does(quoted, plain):
    from overlay.series.patchfile import unquote_path

    assert unquote_path(quoted) == plain


def test_diff_git_names_split_like_git():
    from overlay.series.patchfile import diff_git_names, unquote_path

    assert diff_git_names(r'"a/\056git/x" "b/\056git/x"') == ("a/.git/x", "b/.git/x")
    assert diff_git_names("a/with space.py b/with space.py") == ("a/with space.py", "b/with space.py")
    assert diff_git_names(r'a/x "b/\303\274"') == ("a/x", "b/ü")
    with pytest.raises(ValueError):
        unquote_path(r'"b/\x41"')


# ----------------------------------------------------------------------------- round trips

def _composed(world) -> Path:
    return world.project / "build" / "p1" / "plugin"


def _commit_file(work: Path, name: str, subject: str) -> None:
    """Add the file to the branch's last commit (the series' last plugin patch), reworded."""
    (work / name).write_text("odd = 1\n")
    run_git(["add", "--", name], work, COMPOSER)
    run_git(["commit", "-q", "--amend", "-m", subject], work, COMPOSER)


@pytest.mark.parametrize("name", ["vllm_ascend/uni ü.py", 'vllm_ascend/say "hi".py',
                                  "vllm_ascend/tab\there.py"])
def test_odd_names_round_trip_apply_refresh_apply(world, run, name):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    _commit_file(_composed(world), name, "[Misc] Add an oddly named module")
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    code, out, err = run("check", root=world.project)
    assert code == 0, out + err
    code, out, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0, err
    assert (_composed(world) / name).read_text() == "odd = 1\n"
    code, out, err = run("refresh", root=world.project)
    assert code == 0 and "(nothing to do)" in out, out + err  # byte-stable


def test_a_newline_in_a_name_is_refused_at_refresh(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    before = {p.name: p.read_bytes() for p in (world.project / "patches").iterdir()}
    series = (world.project / "series.yaml").read_bytes()
    _commit_file(_composed(world), "vllm_ascend/two\nlines.py", "[Misc] Add a two-line name")
    code, out, err = run("refresh", root=world.project)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "holds a line break" in err and "two\\nlines.py" in err
    assert {p.name: p.read_bytes() for p in (world.project / "patches").iterdir()} == before
    assert (world.project / "series.yaml").read_bytes() == series


def test_refresh_in_an_ascii_locale_with_a_non_ascii_subject(world, run):
    """Why-11: LC_ALL=C and no PYTHONIOENCODING; the subject and the file name are not ASCII."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    _commit_file(_composed(world), "vllm_ascend/módulo.py", "[Misc] Añadir módulo ünïcode")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO",
                                                                    "PYTHONUTF8"))}
    env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0")
    proc = subprocess.run([sys.executable, "-X", "utf8=0", "-m", "overlay", "--root",
                           str(world.project), "refresh"], capture_output=True, env=env, timeout=120)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0 and "Traceback" not in err, err
    patch = (world.project / "patches" / "0003-plugin-switch.patch").read_text(encoding="utf-8")
    assert "Subject: [PATCH] =?UTF-8?q?" in patch and "m\\303\\263dulo.py" in patch
    code, out, err = run("check", root=world.project)
    assert code == 0, out + err


def test_names_git_lists_are_read_nul_separated(world, run):
    """Names parsed from git's own listings (status, diff --name-only) come from -z output:
    the message names the file as it is, not in git's quoted form."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    (_composed(world) / "vllm_ascend" / "ünï code.py").write_text("x = 1\n")
    code, _, err = run("lock", root=world.project)
    assert code == 2 and "uncommitted edits (vllm_ascend/ünï code.py)" in err, err


def test_a_failing_binary_git_command_reports_text(world):
    """Why-7: `cat-file blob` runs with bytes output; its failure once reached redact() as
    bytes (a TypeError instead of one line)."""
    from overlay import gitcmd
    from overlay.errors import redact

    with pytest.raises(gitcmd.GitFailed) as failed:
        gitcmd.git(["cat-file", "blob", "0" * 40 + ':"b/uni'], cwd=world.plugin, text=False)
    assert isinstance(failed.value.stderr, str) and redact(failed.value.stderr)
