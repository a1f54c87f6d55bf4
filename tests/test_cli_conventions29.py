"""CLI conventions (issue 29, item 8): a description for every subcommand and help for
every option, --color, one error prefix, SIGPIPE, report file modes, --json errors for
report files, shell completion and the man page from the same parser."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from overlay import cli

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR",)}
    env["PYTHONPATH"] = os.pathsep.join([str(TOOLS), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _parsers():
    return list(cli._walk_parsers(cli.build_parser()))


@pytest.mark.parametrize("name,parser", _parsers(), ids=[n for n, _ in _parsers()])
def test_every_subcommand_has_a_description_and_every_option_its_help(name, parser):
    assert (parser.description or "").strip(), f"{name}: no description line in --help"
    undocumented = [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
                    if not isinstance(a, argparse._SubParsersAction)
                    and (a.help is None or not str(a.help).strip())]
    assert not undocumented, f"{name}: options without help: {undocumented}"


def test_color_always_marks_failed_and_errors_never_and_pipes_stay_plain(run, tmp_path):
    code, out, err = run("--color", "always", "check", root=tmp_path)
    assert code == 2 and err.startswith("\033[1;31moverlay: error:\033[0m ")
    code, out, err = run("--color", "never", "check", root=tmp_path)
    assert code == 2 and "\033" not in err and err.startswith("overlay: error: ")
    code, out, err = run("check", root=tmp_path)  # auto, captured (not a terminal)
    assert "\033" not in err


def test_color_auto_colours_a_terminal_only(tmp_path):
    """On a real terminal (a pty) the error is red; NO_COLOR turns it off."""
    def on_pty(**env) -> bytes:
        leader, follower = pty.openpty()
        proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(tmp_path), "check"],
                              stdout=subprocess.DEVNULL, stderr=follower, env=_env(TERM="xterm", **env),
                              timeout=60)
        os.close(follower)
        data = os.read(leader, 65536)
        os.close(leader)
        assert proc.returncode == 2
        return data

    assert b"\033[1;31moverlay: error:" in on_pty()
    assert b"\033" not in on_pty(NO_COLOR="1")


def test_failed_is_coloured_where_colour_is_on():
    from overlay.reporting.colour import highlight

    assert highlight("  FAILED   plugin 0002.patch\n") == "  \033[31mFAILED\033[0m   plugin 0002.patch\n"
    assert highlight("nothing UNFAILED here\n") == "nothing UNFAILED here\n"


def test_one_error_prefix_in_every_command():
    """Every error line the tool writes starts `overlay: error:` (composed-test,
    mutation-check, smoke and gate-eval had their own)."""
    own = []
    for path in (TOOLS / "overlay").rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"""["'](?:f?)([a-z][a-z-]*): error: """, line):
                if m.group(1) != "overlay":
                    own.append(f"{path.relative_to(ROOT)}:{n}")
    assert not own, own


def test_a_reader_that_leaves_makes_the_run_fail(tmp_path):
    """`overlay ... | head -0`: output that did not reach its reader is not a success."""
    proc = subprocess.Popen([sys.executable, "-m", "overlay", "--root", str(ROOT), "--help"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    proc.stdout.close()  # the reader is gone before the tool writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) != 0, err
    proc = subprocess.Popen([sys.executable, "-m", "overlay", "--root", str(ROOT),
                             "completion", "man"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env())
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err


def test_report_files_are_0644_like_any_new_file(tmp_path):
    from overlay.reporting.files import write_report

    old = os.umask(0o022)
    try:
        write_report(tmp_path / "r" / "drift.md", "# x\n", "--markdown")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r" / "drift.md").stat().st_mode) == 0o644
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["drift.md"]  # no temporary left


def test_an_unwritable_report_is_one_line_naming_it_and_a_json_error(run, tmp_path):
    from overlay.reporting.files import write_report
    from overlay.errors import OverlayError

    bad = tmp_path / ("x" * 300)  # a name longer than any file system takes
    with pytest.raises(OverlayError) as caught:
        write_report(bad, "text", "--junit")
    assert str(bad) in caught.value.one_line() and ".overlay-report-" not in caught.value.one_line()


def test_completion_and_man_page_come_from_the_parser(run):
    pytest.importorskip("shtab", reason="shtab (a dependency) is not installed in this environment")
    code, out, err = run("completion", "bash")
    assert code == 0 and "complete" in out
    for name, _ in _parsers()[1:]:
        assert name.split()[1] in out  # every subcommand completes
    assert "--color" in out and "--fuzz" in out
    code, page, _ = run("completion", "man")
    assert code == 0 and page.startswith(".TH OVERLAY 1")
    for name, parser in _parsers()[1:]:
        assert f".SS {name.replace('-', chr(92) + '-')}" in page
    with pytest.raises(SystemExit) as done:
        run("completion", "fish")
    assert done.value.code == 2
