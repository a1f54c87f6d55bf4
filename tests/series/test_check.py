"""overlay check: offline consistency of series, patches, provenance and pins."""

from __future__ import annotations

import json

import pytest

from test_bad_input import ABSOLUTE, BINARY, edit


def test_clean_project_passes(world, run):
    code, out, _ = run("check", root=world.project)
    assert code == 0
    assert out.startswith("check: ok")


def test_json(world, run):
    (world.project / "patches" / "0009-stray.patch").write_text("x")
    code, out, _ = run("check", "--json", root=world.project)
    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    assert data["findings"] == [{"path": "patches/0009-stray.patch", "line": None,
                                 "message": "not listed in series.yaml",
                                 "hint": "add an entry for it or delete the file"}]


@pytest.mark.parametrize("mutation, expected", [
    (("origin: backport\n    upstream: example/plugin#10935\n", "origin: backport\n"),
     "series.yaml:3: 0001-plugin-lora-args.patch: a backport needs 'upstream'"),
    (("upstream: example/plugin#10935", "upstream: example/plugin#10936"),
     "the patch's Upstream-PR: example/plugin#10935 is not in the entry's 'upstream' (example/plugin#10936)"),
    (("    original-author: Patch Author <patch.author@example.org>\n", ""),
     "a backport needs 'original-author'"),
    (("    forwarded: example/core#1\n", ""),
     "0002-core-rename-helper.patch: a local patch needs 'forwarded'"),
    (("    switch: PLUGIN_FAST_PATH\n", ""), "an experimental patch needs 'switch'"),
    (("evidence: evidence/fast-path", "evidence: evidence/nowhere"),
     "evidence folder 'evidence/nowhere' does not exist"),
    (("evidence: evidence/fast-path", "evidence: docs"),
     "evidence folder 'docs' is not under evidence/"),
    (("evidence: evidence/fast-path", "evidence: evidence/../pins"),
     "evidence folder 'evidence/../pins' is not under evidence/"),
    (("original-author: Patch Author <patch.author@example.org>", "original-author: Thor <thor@asgard.example>"),
     "original author 'Thor <thor@asgard.example>' is neither the patch's From:"),
    (("original-author: Patch Author <patch.author@example.org>",
      "original-author: Patch Author <someone.else@evil.example>"),
     "original author 'Patch Author <someone.else@evil.example>' is neither the patch's From:"),
    (("    target: plugin\n    origin: backport\n",
      "    target: plugin\n    origin: backport\n    subject: Something else\n"),
     "series subject 'Something else' differs from the patch's '[BugFix][MRV2] Accept lora_capture_cases in factory'"),
])
def test_provenance_and_header_findings(world, run, mutation, expected):
    edit(world.project / "series.yaml", *mutation)
    code, out, _ = run("check", root=world.project)
    assert code == 1
    assert expected in out, out


def test_same_address_or_same_name_satisfies_attribution(world, run):
    edit(world.project / "series.yaml", "original-author: Patch Author <patch.author@example.org>",
         "original-author: P. Author (old name) <patch.author@example.org>")
    assert run("check", root=world.project)[0] == 0
    edit(world.project / "series.yaml", "original-author: P. Author (old name) <patch.author@example.org>",
         "original-author: patch author")
    assert run("check", root=world.project)[0] == 0


def test_co_author_trailer_satisfies_backport_attribution(world, run):
    edit(world.project / "series.yaml", "original-author: Patch Author", "original-author: Orig Inal")
    p = world.project / "patches" / "0001-plugin-lora-args.patch"
    edit(p, "Upstream-PR: example/plugin#10935", "Upstream-PR: example/plugin#10935\nCo-authored-by: Orig Inal <o@example.org>")
    code, out, _ = run("check", root=world.project)
    assert code == 0, out


def test_unlisted_and_unsafe_patches_and_missing_target(world, run):
    (world.project / "patches" / "0009-stray.patch").write_text("x")
    p = world.project / "patches" / "0001-plugin-lora-args.patch"
    p.write_text(p.read_text() + BINARY + ABSOLUTE)
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    pin2 = world.project / "pins" / "p2.yaml"
    pin2.write_text(text[:text.index("  core:")].replace("default: true", "default: false")
                    + text[text.index("  plugin:"):])
    code, out, _ = run("check", root=world.project)
    assert code == 1
    assert "patches/0009-stray.patch: not listed in series.yaml" in out
    assert "unsafe patch: binary change to 'logo.png'" in out
    assert "unsafe patch: absolute path '/etc/cron.d/x'" in out
    assert "0002-core-rename-helper.patch: target 'core' is not in pin set 'p2'" in out


def test_two_default_pins(world, run):
    pin = world.project / "pins" / "p1.yaml"
    (world.project / "pins" / "p2.yaml").write_text(pin.read_text())
    code, out, _ = run("check", root=world.project)
    assert code == 1 and "2 pin sets are marked 'default: true'" in out


def test_malformed_series_is_one_finding(world, run):
    (world.project / "series.yaml").write_text("series: [\n")
    code, out, err = run("check", root=world.project)
    assert code == 1
    assert out.splitlines()[0].startswith("FAIL series.yaml:2: YAML syntax error")


def test_credentials_in_a_pin_url_are_refused_and_never_printed(world, run):
    """Issue 13 item 6: a token in a committed lockfile fails check; no output shows it."""
    pin = world.project / "pins" / "p1.yaml"
    pin.write_text(pin.read_text().replace("repo: file://", "repo: https://bot:ghp_T0KEN@example.invalid/", 1))
    code, out, err = run("check", root=world.project)
    assert code == 1
    assert "FAIL pins/p1.yaml:6: field 'repo' of target 'core': the URL https://***@example.invalid/" in out
    code, out, err = run("check", "--json", root=world.project)
    assert code == 1 and "carries credentials" in out
    assert "ghp_T0KEN" not in out + err


def test_redact_hides_user_info_in_any_url():
    from overlay.errors import redact, url_credentials

    line = "fatal: unable to access 'https://u:tok@h.example/r/': 403; also http://tok@x.example/y"
    assert redact(line) == "fatal: unable to access 'https://***@h.example/r/': 403; also http://***@x.example/y"
    assert url_credentials("https://tok@github.com/a/b") and url_credentials("HTTPS://u:p@h/x")
    assert not url_credentials("ssh://git@github.com/a/b") and not url_credentials("git@github.com:a/b")
    assert not url_credentials("https://github.com/a/b") and not url_credentials("file:///tmp/x@y")


def _creates(path: str, blob: str, line: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex {'0' * 40}..{blob}\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{line}\n")


def test_entries_that_create_one_file_must_create_the_same_blob(world, run):
    """A file two entries of one target create (shared guard code) must be one blob."""
    patches = world.project / "patches"
    same, other = "a" * 40, "b" * 40
    for name in ("0001-plugin-lora-args.patch", "0003-plugin-switch.patch"):
        (patches / name).write_text((patches / name).read_text() + _creates("shared/guard.py", same, "x = 1"))
    # The same path in another target's tree is another file.
    core = patches / "0002-core-rename-helper.patch"
    core.write_text(core.read_text() + _creates("shared/guard.py", other, "y = 2"))
    code, out, _ = run("check", root=world.project)
    assert code == 0, out

    edit(patches / "0003-plugin-switch.patch", f"..{same}", f"..{other}")
    code, out, _ = run("check", root=world.project)
    assert code == 1
    assert ("0003-plugin-switch.patch: creates shared/guard.py as blob bbbbbbbbbbbb, "
            "but 0001-plugin-lora-args.patch creates it as aaaaaaaaaaaa") in out, out
    assert out.count("shared/guard.py") == 1, out


def test_a_shared_new_file_without_an_index_line_is_not_proven_equal(world, run):
    patches = world.project / "patches"
    p1, p3 = patches / "0001-plugin-lora-args.patch", patches / "0003-plugin-switch.patch"
    p1.write_text(p1.read_text() + _creates("shared/guard.py", "a" * 40, "x = 1"))
    p3.write_text(p3.read_text() + _creates("shared/guard.py", "a" * 40, "x = 1").replace(
        f"index {'0' * 40}..{'a' * 40}\n", ""))
    code, out, _ = run("check", root=world.project)
    assert code == 1
    assert "creates shared/guard.py as blob unknown (no index line)" in out, out


def test_a_patchs_version_for_newer_pin_sets_may_create_the_file_differently(world, run):
    """`revises:` (written by overlay rebase when it splits a patch so pin sets stay
    independent) marks one patch's versions: they differ on purpose. Unrelated entries
    are still held to one blob."""
    patches = world.project / "patches"
    p1, p3 = patches / "0001-plugin-lora-args.patch", patches / "0003-plugin-switch.patch"
    p1.write_text(p1.read_text() + _creates("shared/guard.py", "a" * 40, "x = 1"))
    p3.write_text(p3.read_text() + _creates("shared/guard.py", "b" * 40, "x = 2"))
    code, _, _ = run("check", root=world.project)
    assert code == 1
    series = world.project / "series.yaml"
    series.write_text(series.read_text().replace(
        "    switch: PLUGIN_FAST_PATH\n", "    switch: PLUGIN_FAST_PATH\n    revises: 0001-plugin-lora-args.patch\n"))
    code, out, _ = run("check", root=world.project)
    assert "shared/guard.py" not in out, out
