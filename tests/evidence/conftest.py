from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

FAKE_SERVER = str(Path(__file__).parent / "fake_server.py")


def fake_servers() -> set[int]:
    """Pids of running fake_server.py processes (any owner we can see)."""
    out = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if FAKE_SERVER.encode() in (d / "cmdline").read_bytes():
                out.add(int(d.name))
        except OSError:
            pass
    return out


@pytest.fixture(autouse=True)
def _no_orphan_servers():
    """Every test stops the fake servers it started: a leftover fails the test (and is killed)."""
    before = fake_servers()
    yield
    left = fake_servers() - before
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"fake_server.py processes left running: {sorted(left)}"


@pytest.fixture
def evroot(tmp_path: Path) -> Path:
    """A project root (series.yaml) for CLI runs."""
    (tmp_path / "series.yaml").write_text("series: []\n")
    return tmp_path
