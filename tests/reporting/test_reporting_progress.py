"""overlay.reporting.progress: shown on a terminal only, quiet with --json, no colour
with NO_COLOR or TERM=dumb, one prefix (`overlay <command>: `); and its call sites."""

from __future__ import annotations

import io
import re
import sys

import pytest

from overlay import reporting

SGR = re.compile(r"\x1b\[[0-9;]*m")  # a colour or style code


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def colour_env(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_lines_on_a_terminal_with_one_prefix(colour_env):
    out = Tty()
    show = reporting.progress("gate", stream=out)
    show("indexing core (vllm)")
    show("checking 3 imports")
    text = SGR.sub("", out.getvalue())
    assert text == "overlay gate: indexing core (vllm)\noverlay gate: checking 3 imports\n"
    assert SGR.search(out.getvalue())  # the prefix is dimmed where colour is allowed


def test_nothing_with_json_or_when_piped(colour_env):
    assert reporting.progress("gate", quiet=True, stream=Tty()) is None
    assert reporting.progress("gate", stream=io.StringIO()) is None  # not a terminal


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_no_escape_sequences_with_no_color_or_a_dumb_terminal(colour_env, monkeypatch, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = Tty()
    show = reporting.progress("drift", stream=out)
    show("fetching plugin")
    live = reporting.progress("drift", live=True, stream=out)
    live("scanned 50/200 commits")
    live("scanned 9/9")
    live.close()
    assert "\x1b" not in out.getvalue()
    # without escapes a shorter live message blanks the rest of the longer one with spaces
    assert out.getvalue().endswith("\roverlay drift: scanned 9/9"
                                   + " " * (len("scanned 50/200 commits") - len("scanned 9/9")) + "\n")


def test_an_empty_no_color_does_not_turn_colour_off(colour_env, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: only a non-empty value counts
    assert reporting.colour_allowed(Tty())


def test_messages_are_made_safe_and_redacted(colour_env, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = Tty()
    show = reporting.progress("apply", stream=out, clean=lambda m: m.replace("secret", "***"))
    show("fetching https://user:secret@host/x \x1b]0;title\x07")
    assert out.getvalue() == "overlay apply: fetching https://user:***@host/x \\x1b]0;title\\x07\n"


def test_apply_gate_shows_the_gate_phases_on_a_terminal_only(world, run, monkeypatch):
    """`overlay apply --gate` ran the gate silently: its phases now show on a terminal."""
    code, out, err = run("apply", "--mirror", world.mirror, "--gate", "--json", root=world.project)
    assert code == 0 and err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")
    code, out, err = run("apply", "--mirror", world.mirror, "--gate", "--force", root=world.project)
    assert code == 0, err
    phases = [line.split(": ", 1)[1].split(" ")[0] for line in err.splitlines()
              if line.startswith("overlay gate: ")]
    assert phases[:3] == ["indexing", "scanning", "checking"], err
    assert "\x1b" not in err
