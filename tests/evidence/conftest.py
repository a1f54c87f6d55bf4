from __future__ import annotations

import os
import secrets
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

FAKE_SERVER = str(Path(__file__).parent / "fake_server.py")
# This test session's mark, inherited by every fake server it starts (bench ab passes the
# environment on): another session running beside this one, even in the same checkout,
# starts servers without it, and they are neither counted as leftovers nor killed here.
SESSION_VAR = "OVERLAY_TEST_SESSION"
SESSION = f"{SESSION_VAR}={secrets.token_hex(8)}".encode()
os.environ[SESSION_VAR] = SESSION.decode().split("=", 1)[1]


def fake_servers() -> set[int]:
    """Pids of running fake_server.py processes this test session started."""
    out = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (FAKE_SERVER.encode() in (d / "cmdline").read_bytes()
                    and SESSION in (d / "environ").read_bytes().split(b"\0")):
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
