"""`overlay gate` on a real terminal (a pty): one progress line per phase on stderr,
none with --json, no colour codes with NO_COLOR (issue 22 item 3)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import gatekit

ROOT = Path(__file__).resolve().parents[2]


def _on_a_terminal(args: list[str], env: dict, cache: Path) -> tuple[int, str]:
    """Run `overlay` with stderr on a pty (stdout not); what the terminal showed. Each
    run has its own cache, so each is a cold run with every phase."""
    env = dict(env, OVERLAY_CACHE=str(cache))
    main, tty = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "overlay", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=tty, env=env)
    os.close(tty)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(main, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_gate_phases_on_a_terminal_and_quiet_with_json(tmp_path):
    core = gatekit.core(tmp_path / "core", new=True, version="0.25.0")
    plugin = gatekit.plugin(tmp_path / "plugin", fixed=False)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"), TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    args = ["--root", str(ROOT), "gate", "--core", str(core), "--plugin", str(plugin)]
    code, shown = _on_a_terminal(args, env, tmp_path / "c1")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
    assert code == 1
    for phase in ("indexing core", "scanning the plugin", "checking "):
        assert f"overlay gate: {phase}" in plain, shown
    assert "\x1b[" in shown  # colour is allowed here: the prefix is dimmed
    code, shown = _on_a_terminal(args + ["--json"], env, tmp_path / "c2")
    assert code == 1 and "overlay gate" not in shown
    code, shown = _on_a_terminal(args, dict(env, NO_COLOR="1"), tmp_path / "c3")
    assert "overlay gate: scanning the plugin" in shown and "\x1b" not in shown
