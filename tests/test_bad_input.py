"""The bad-input corpus: each malformed input gives its one specific error line,
a non-zero exit, no traceback, and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SHA_RE = re.compile(r"commit: [0-9a-f]{40}")


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def series(w):
    return w.project / "series.yaml"


def pin(w):
    return w.project / "pins" / "p1.yaml"


def patch(w, name="0001-plugin-lora-args.patch"):
    return w.project / "patches" / name


def add_file_change(w, header: str, body: str = "") -> None:
    """Append one extra 'diff --git' block to patch 0001."""
    p = patch(w)
    p.write_text(p.read_text() + header + body)


BINARY = ("diff --git a/logo.png b/logo.png\nnew file mode 100644\nindex 0000000..1111111\n"
          "GIT binary patch\nliteral 3\nKcmZQzU|;|M00aO5\n\nliteral 0\nHcmV?d00001\n\n")
SYMLINK = ("diff --git a/link b/link\nnew file mode 120000\nindex 0000000..2222222\n--- /dev/null\n"
           "+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n")
TRAVERSAL = ("diff --git a/../outside.py b/../outside.py\nnew file mode 100644\nindex 0000000..3333333\n"
             "--- /dev/null\n+++ b/../outside.py\n@@ -0,0 +1 @@\n+x = 1\n")
ABSOLUTE = ("diff --git a//etc/cron.d/x b//etc/cron.d/x\nnew file mode 100644\nindex 0000000..4444444\n"
            "--- /dev/null\n+++ b//etc/cron.d/x\n@@ -0,0 +1 @@\n+x = 1\n")
GITLINK = ("diff --git a/third_party/x b/third_party/x\nnew file mode 160000\nindex 0000000..6666666\n"
           "--- /dev/null\n+++ b/third_party/x\n@@ -0,0 +1 @@\n+Subproject commit " + "6" * 40 + "\n")
DOTGIT = ("diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100644\n"
          "index 0000000..5555555\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+x\n")


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi")) + "series: *i\n"
TOKEN = "ghp_s3cr3tTOKEN"  # must never be printed


def _blob_id(data: bytes) -> str:
    import hashlib
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


CRLF_TEXT = b"one\r\ntwo\r\n"


def add_lost_cr_patch(w) -> None:
    """A new patch creating a CRLF file whose CR bytes were lost (what refresh used to write)."""
    mail = patch(w).read_text().split("diff --git", 1)[0].replace(
        "Accept lora_capture_cases in factory", "Add a CRLF file")
    mail += ("diff --git a/win.txt b/win.txt\nnew file mode 100644\n"
             f"index {'0' * 40}..{_blob_id(CRLF_TEXT)}\n"
             "--- /dev/null\n+++ b/win.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n-- \n2.39.5\n\n")
    (w.project / "patches" / "0004-crlf.patch").write_text(mail)
    series(w).write_text(series(w).read_text() + "  - patch: 0004-crlf.patch\n    target: plugin\n"
                         "    origin: local\n    forwarded: nowhere\n")


CASES = {
    # series.yaml
    "series-yaml-syntax": (lambda w: series(w).write_text("series:\n  - patch: [unclosed\n"),
                           "series.yaml:3: YAML syntax error"),
    "series-not-mapping": (lambda w: series(w).write_text("- a\n- b\n"),
                           "series.yaml:1: series.yaml must be a mapping, got a list"),
    "series-missing-list": (lambda w: series(w).write_text("patches: []\n"),
                            "series.yaml:1: unknown field 'patches' in series.yaml"),
    "series-wrong-type": (lambda w: series(w).write_text("series: 3\n"),
                          "field 'series' of series.yaml: expected a list of patch entries, got a number"),
    "entry-missing-patch": (lambda w: edit(series(w), "  - patch: 0001-plugin-lora-args.patch\n    target",
                                           "  - target"),
                            "field 'patch' of series entry 1: missing"),
    "entry-patch-number": (lambda w: edit(series(w), "patch: 0001-plugin-lora-args.patch", "patch: 17"),
                           "series.yaml:3: field 'patch' of series entry 1: expected a file name in patches/ "
                           "ending in .patch, got a number 17"),
    "entry-unknown-field": (lambda w: edit(series(w), "    origin: backport", "    origin: backport\n    author: x"),
                            "series.yaml:6: unknown field 'author' in series entry 1"),
    "entry-bad-origin": (lambda w: edit(series(w), "origin: backport", "origin: vendored"),
                         "field 'origin' of series entry 1: 'vendored' is not one of backport, local, experimental"),
    "entry-duplicate": (lambda w: edit(series(w), "0002-core-rename-helper.patch", "0001-plugin-lora-args.patch"),
                        "'0001-plugin-lora-args.patch' is listed twice (first at line 3)"),
    "entry-duplicate-key": (lambda w: edit(series(w), "    target: plugin\n", "    target: plugin\n    target: core\n"),
                            "series.yaml:5: duplicate key 'target'"),
    "entry-path-escape": (lambda w: edit(series(w), "patch: 0001-plugin-lora-args.patch", "patch: ../evil.patch"),
                          "'../evil.patch' is not a plain file name ending in .patch"),
    "entry-target-unknown": (lambda w: edit(series(w), "target: plugin", "target: kernel"),
                             "series entry 0001-plugin-lora-args.patch targets 'kernel', which pin set 'p1' does not define"),
    "patch-file-missing": (lambda w: patch(w).unlink(),
                           "patches/0001-plugin-lora-args.patch: patch file not found"),
    # patches
    "patch-empty": (lambda w: patch(w).write_text(""), "patches/0001-plugin-lora-args.patch: patch file is empty"),
    "patch-crlf": (lambda w: patch(w).write_bytes(patch(w).read_bytes().replace(b"\n", b"\r\n")),
                   "patch has CRLF line endings"),
    "patch-not-git": (lambda w: patch(w).write_text("just some text\n"), "no 'diff --git' section: not a git patch"),
    "patch-no-headers": (lambda w: patch(w).write_text(patch(w).read_text().split("\n\n", 1)[1]),
                         "mail header"),
    "patch-truncated-hunk": (lambda w: patch(w).write_text(patch(w).read_text().rsplit("\n", 4)[0] + "\n"),
                             "diff does not parse"),
    "patch-binary": (lambda w: add_file_change(w, BINARY), "unsafe patch: binary change to 'logo.png'"),
    "patch-symlink": (lambda w: add_file_change(w, SYMLINK), "unsafe patch: symlink change at 'link'"),
    "patch-traversal": (lambda w: add_file_change(w, TRAVERSAL), "escapes the tree with '..'"),
    "patch-absolute": (lambda w: add_file_change(w, ABSOLUTE), "unsafe patch: absolute path '/etc/cron.d/x'"),
    "patch-dotgit": (lambda w: add_file_change(w, DOTGIT), "reaches into .git/"),
    "patch-nul-bytes": (lambda w: patch(w).write_bytes(patch(w).read_bytes() + b"\0\0"), "NUL bytes"),
    "patch-is-directory": (lambda w: (patch(w).unlink(), patch(w).mkdir()),
                           "patches/0001-plugin-lora-args.patch: is a directory, expected a patch file"),
    "patch-two-mails": (lambda w: patch(w).write_text(patch(w).read_text() * 2),
                        "holds 2 mails; a patch file holds exactly one"),
    "patch-bad-date": (lambda w: patch(w).write_text(re.sub(r"(?m)^Date: .*$", "Date: yesterday-ish",
                                                            patch(w).read_text(), count=1)),
                       "'Date:' header 'yesterday-ish' is not an RFC 2822 date"),
    "patch-empty-subject": (lambda w: patch(w).write_text(re.sub(r"(?m)^Subject: .*$", "Subject: [PATCH]",
                                                                 patch(w).read_text(), count=1)),
                            "'Subject:' header is empty"),
    "patch-gitlink": (lambda w: add_file_change(w, GITLINK), "submodule (gitlink) change at 'third_party/x'"),
    "series-is-directory": (lambda w: (series(w).unlink(), series(w).mkdir()),
                            "series.yaml: is a directory, expected a YAML file"),
    "series-yaml-tag": (lambda w: series(w).write_text("series: !!python/object/apply:os.system [echo]\n"),
                        "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"),
    "series-deep-nesting": (lambda w: series(w).write_text("series: " + "[" * 3000 + "]" * 3000 + "\n"),
                            "series.yaml: nesting too deep"),
    "pin-impossible-date": (lambda w: edit(pin(w), "toolchain:\n", "toolchain:\n  verified: 2026-02-30\n"),
                            "pins/p1.yaml:12: bad value '2026-02-30': day is out of range for month"),
    "entry-target-list": (lambda w: edit(series(w), "target: plugin", "target: [plugin, core]"),
                          "field 'target' of series entry 1: expected a target name such as plugin, got a list"),
    "build-is-a-file": (lambda w: (w.project / "build").write_text("not a folder\n"),
                        "the composed-trees folder is a file, not a directory"),
    # a patch that lost the CR bytes of a new CRLF file (issue 13 item 1)
    "patch-lost-cr": (add_lost_cr_patch,
                      "patches/0004-crlf.patch: win.txt was composed as blob 814f4a422927 but the patch's "
                      "index line names", 1),
    # hostile YAML (issue 13 item 5): bounded work for every YAML input
    "series-alias-bomb": (lambda w: series(w).write_text(ALIAS_BOMB),
                          "series.yaml:2: YAML alias '*a' is not allowed"),
    "series-oversized": (lambda w: series(w).write_text(series(w).read_text() + ("# pad\n" * 200_000)),
                         "series.yaml: file is larger than 1048576 bytes, the cap for YAML inputs"),
    "pin-alias": (lambda w: edit(pin(w), "toolchain:\n  python: \"3.11\"\n",
                                 "toolchain: &tc\n  python: \"3.11\"\nother: *tc\n"),
                  "pins/p1.yaml:13: YAML alias '*tc' is not allowed"),
    # credentials in a pin URL (item 6): refused, and the token is never printed
    "pin-url-credentials": (lambda w: edit(pin(w), "repo: file://", f"repo: https://user:{TOKEN}@example.invalid/x/"),
                            "field 'repo' of target 'core': the URL https://***@example.invalid/x/"),
    "pin-url-token-user": (lambda w: edit(pin(w), "repo: file://", f"repo: https://{TOKEN}@example.invalid/x/"),
                           "carries credentials, which a committed lockfile must never hold"),
    # pins
    "pin-yaml-syntax": (lambda w: pin(w).write_text("targets: {core: [\n"), "pins/p1.yaml:2: YAML syntax error"),
    "pin-short-sha": (lambda w: pin(w).write_text(SHA_RE.sub(lambda m: m.group(0)[:16], pin(w).read_text(), 1)),
                      "pins/p1.yaml:7: field 'commit' of target 'core': "),
    "pin-not-hex": (lambda w: pin(w).write_text(SHA_RE.sub("commit: main", pin(w).read_text(), 1)),
                    "'main' is not a full 40-hex commit id"),
    "pin-sha-number": (lambda w: pin(w).write_text(SHA_RE.sub("commit: " + "1" * 40, pin(w).read_text(), 1)),
                       "expected a full 40-hex commit id, got a number"),
    "pin-no-targets": (lambda w: pin(w).write_text("description: x\ndefault: true\n"),
                       "field 'targets' of the pin set: missing; expected a mapping"),
    "pin-targets-list": (lambda w: pin(w).write_text("default: true\ntargets: [core, plugin]\n"),
                         "field 'targets' of the pin set: expected a mapping, got a list"),
    "pin-both-sources": (lambda w: edit(pin(w), "  core:\n", "  core:\n    pypi: vllm==0.23.0\n"),
                         "a target is either repo+commit or pypi+sha256, not both"),
    "pin-bad-sha256": (lambda w: pin(w).write_text(pin(w).read_text().split("  core:")[0]
                                                   + "  core:\n    pypi: vllm==0.23.0\n    sha256: abc\n"),
                       "'abc' is not a 64-hex sha256"),
    "pin-bad-requirement": (lambda w: pin(w).write_text(pin(w).read_text().split("  core:")[0]
                                                        + "  core:\n    pypi: vllm>=0.23\n    sha256: " + "a" * 64 + "\n"),
                            "'vllm>=0.23' is not 'name==version'"),
    "pin-name-mismatch": (lambda w: edit(pin(w), "description:", "name: p9\ndescription:"),
                          "'p9' differs from the file name 'p1'"),
    "pin-bad-tree": (lambda w: edit(pin(w), "  plugin:\n", "  plugin:\n    tree: 1234\n"),
                     "field 'tree' of target 'plugin': expected a 40-hex tree id, got a number"),
    "pin-unknown-field": (lambda w: edit(pin(w), "  plugin:\n", "  plugin:\n    branch: main\n"),
                          "unknown field 'branch' in target 'plugin'"),
    "pin-no-default": (lambda w: edit(pin(w), "default: true", "default: false"),
                       "expected exactly one pin set with 'default: true', found none"),
    "pin-default-not-bool": (lambda w: edit(pin(w), "default: true", "default: yes please"),
                             "field 'default' of the pin set: expected true or false"),
}


def _state(project: Path) -> dict[str, bytes]:
    """Every project file's bytes, less the cache and the composing run's (empty) lock file."""
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file() and ".overlay" not in p.relative_to(project).parts
            and p.name != ".overlay.lock"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_one_clear_line(world, run, case):
    mutate, expected, *exit_code = CASES[case]
    mutate(world)
    before = _state(world.project)
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == (exit_code[0] if exit_code else 2)
    assert "Traceback" not in err
    assert TOKEN not in out + err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("overlay: error: ")
    assert expected in lines[0], lines[0]
    assert _state(world.project) == before  # nothing written, nothing composed
    assert not (world.project / "build" / "p1").exists()


# A value from a file is quoted shortened in its error line (issue 26 case 12: a 900 kB
# `upstream-commit` was echoed whole): at most 80 characters of it, with its length.
HUGE = 900_000
LONG_VALUES = {
    "upstream-commit": (lambda w: edit(series(w), "    origin: backport",
                                       "    origin: backport\n    upstream-commit: " + "f" * HUGE),
                        "field 'upstream-commit' of series entry 1: 'fffff"),
    "origin": (lambda w: edit(series(w), "origin: backport", "origin: " + "v" * HUGE),
               "field 'origin' of series entry 1: 'vvvvv"),
    "patch-name": (lambda w: edit(series(w), "patch: 0001-plugin-lora-args.patch", "patch: " + "p" * HUGE),
                   "field 'patch' of series entry 1: 'ppppp"),
    # a key longer than 1024 characters is written as an explicit key (`? KEY`)
    "unknown-field": (lambda w: edit(series(w), "    origin: backport",
                                     "    origin: backport\n    ? " + "k" * HUGE + "\n    : x"),
                      "unknown field 'kkkkk"),
    "duplicate-key": (lambda w: edit(series(w), "    origin: backport", "    origin: backport"
                                     + "".join(f"\n    ? {'d' * (HUGE // 2)}\n    : {v}" for v in "xy")),
                      "duplicate key 'ddddd", HUGE // 2),
    "pin-commit": (lambda w: pin(w).write_text(SHA_RE.sub("commit: " + "g" * HUGE, pin(w).read_text(), 1)),
                   "field 'commit' of target 'core': 'ggggg"),
    "pin-name": (lambda w: edit(pin(w), "description:", "name: " + "n" * HUGE + "\ndescription:"),
                 "field 'name' of the pin set: 'nnnnn"),
    "pin-requirement": (lambda w: pin(w).write_text(pin(w).read_text().split("  core:")[0] + "  core:\n    pypi: "
                                                    + "r" * HUGE + "\n    sha256: " + "a" * 64 + "\n"),
                        "field 'pypi' of target 'core': 'rrrrr"),
    "patch-from": (lambda w: patch(w).write_text(re.sub(r"(?m)^From: .*$", "From: " + "m" * HUGE + " <>",
                                                        patch(w).read_text(), count=1)),
                   "'From:' header has no e-mail address: 'mmmmm", HUGE + 3),
    "patch-date": (lambda w: patch(w).write_text(re.sub(r"(?m)^Date: .*$", "Date: " + "y" * HUGE,
                                                        patch(w).read_text(), count=1)),
                   "'Date:' header 'yyyyy"),
    "patch-header-line": (lambda w: patch(w).write_text(patch(w).read_text().replace(
        "Subject:", "h" * HUGE + "\nSubject:", 1)), "malformed mail header line 'hhhhh"),
}


@pytest.mark.parametrize("case", sorted(LONG_VALUES))
def test_a_huge_value_from_a_file_is_shortened_in_its_error_line(world, run, case):
    mutate, expected, *size = LONG_VALUES[case]
    mutate(world)
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and "Traceback" not in err
    assert len(err.splitlines()) == 1 and len(err) < 500, err[:300] + "..."
    assert expected in err and f"…' ({size[0] if size else HUGE} characters)" in err, err


def test_corpus_is_large_enough():
    assert len(CASES) >= 25


EXTRA_ARGS = {
    "unknown-pin": (["--pin", "zzz"], "pins/zzz.yaml: unknown pin 'zzz' (known pins: p1)"),
    "unknown-target": (["--targets", "gpu"], "unknown target 'gpu' for pin set 'p1'"),
    "empty-targets": (["--targets", ","], "--targets needs at least one target name"),
}


@pytest.mark.parametrize("case", sorted(EXTRA_ARGS))
def test_bad_arguments(world, run, case):
    args, expected = EXTRA_ARGS[case]
    code, out, err = run("apply", "--mirror", world.mirror, *args, root=world.project)
    assert code == 2
    assert err.splitlines() == [f"overlay: error: {expected}"] or expected in err
    assert len(err.splitlines()) == 1
    assert not (world.project / "build" / "p1").exists()


def test_unreachable_remote(world, run):
    edit(pin(world), f"file://{world.core}", "https://unreachable.invalid/example/core")
    code, out, err = run("apply", root=world.project)
    assert code == 2 and len(err.splitlines()) == 1
    assert "target 'core' is unreachable: cannot fetch" in err
    assert not (world.project / "build" / "p1").exists()


def test_commit_absent_from_mirror(world, run):
    edit(pin(world), world.core_commits[1], "ab" * 20)
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"commit {'ab' * 20} is not in the mirror" in err


def test_missing_series_file(world, run):
    series(world).unlink()
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and f"series.yaml: file not found in {world.project}" in err and "--root" in err


def test_root_that_is_not_a_directory(world, run):
    code, _, err = run("apply", root=world.project / "series.yaml")
    assert code == 2 and len(err.splitlines()) == 1
    assert "the project root is not a directory" in err


def test_into_that_is_a_file(world, run, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run("apply", "--mirror", world.mirror, "--into", blocker, root=world.project)
    assert code == 2 and len(err.splitlines()) == 1 and "is a file, not a directory" in err


def test_duplicate_and_empty_arguments(world, run):
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "plugin, plugin", root=world.project)
    assert code == 0, err
    assert out.count("applied  plugin   0001") == 1
    code, _, err = run("apply", "--mirror", world.mirror, "--pin", "", root=world.project)
    assert code == 2 and "empty pin name" in err


def test_concurrent_run_refused(world, run):
    import fcntl

    build = world.project / "build"
    build.mkdir()
    with open(build / ".overlay.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and "another overlay run is composing here" in err


def test_json_mode_reports_the_error_on_stdout_too(world, run):
    import json

    code, out, err = run("apply", "--mirror", world.mirror, "--pin", "zzz", "--json", root=world.project)
    assert code == 2 and len(err.splitlines()) == 1
    data = json.loads(out)
    assert data["ok"] is False and data["error"] == "unknown pin 'zzz'" and data["path"] == "pins/zzz.yaml"


# Bad input met by a second `apply` over composed trees: what it would destroy. Each
# case: (mutation of the composed world, the one error line's text, exit code).
def _in_plugin(w, rel: str, text: str, exclude: str | None = None) -> None:
    tree = w.project / "build" / "p1" / "plugin"
    if exclude:
        (tree / ".git" / "info" / "exclude").write_text(exclude)
    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
    (tree / rel).write_text(text)


COMPOSED_CASES = {
    "ignored-venv": (lambda w: _in_plugin(w, ".venv/pyvenv.cfg", "home = x\n", ".venv/\n"),
                     "it holds git-ignored files that replacing it would delete (.venv/)", 2),
    "ignored-log": (lambda w: _in_plugin(w, "notes.log", "mine\n", "*.log\n"),
                    "it holds git-ignored files that replacing it would delete (notes.log)", 2),
    "untracked-file": (lambda w: _in_plugin(w, "scratch.py", "x = 1\n"),
                       "it holds uncommitted edits (scratch.py)", 2),
    "edited-file": (lambda w: _in_plugin(w, "README.md", "edited\n"),
                    "it holds uncommitted edits (README.md)", 2),
    "lost-cr-patch": (add_lost_cr_patch, "win.txt was composed as blob 814f4a422927", 1),
}


def _everything(project: Path) -> dict[str, bytes]:
    """Every file under the project, composed trees and their git directories included."""
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file() and ".overlay" not in p.relative_to(project).parts
            and p.name not in (".overlay.lock", "index")}


@pytest.mark.parametrize("case", sorted(COMPOSED_CASES))
def test_bad_input_over_composed_trees(world, run, case):
    mutate, expected, exit_code = COMPOSED_CASES[case]
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    mutate(world)
    before = _everything(world.project)
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == exit_code
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("overlay: error: ") and expected in err, err
    assert _everything(world.project) == before  # the composed trees are untouched
    assert [p.name for p in (world.project / "build").iterdir() if p.name.startswith(".")] == [".overlay.lock"]
