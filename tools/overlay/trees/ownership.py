"""Proof that a folder was made by an overlay run: a marker file naming that run.

Cleaning up after a killed run removes or restores only folders whose marker is
valid; a folder that merely has a familiar name (a user's `.staging-area`) is never
touched. The marker names the run (pid and the process's start time, so a reused pid
is told apart) and a random nonce that the folder's own name ends with, so a marker
copied into another folder proves nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = ".overlay-owner.json"
_MARKER_MAX = 4096  # bytes: a marker is a few fields; anything larger is not ours


def proc_stat(pid: int) -> tuple[int, int, str, int] | None:
    """(ppid, process group, state, start time in clock ticks since boot) from
    /proc/<pid>/stat, or None; the one parser of that file (bench ab uses it too)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        fields = raw[raw.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
        return int(fields[1]), int(fields[2]), fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def process_start(pid: int) -> int | None:
    """A live process's start time in clock ticks since boot, or None (gone or a zombie)."""
    st = proc_stat(pid)
    return None if st is None or st[2] == "Z" else st[3]


@dataclass(frozen=True)
class Owner:
    pid: int
    started: int | None  # clock ticks since boot, None where /proc is unavailable
    nonce: str
    since: str  # when the folder was made (UTC), for messages

    def alive(self) -> bool:
        """Whether the run that made the folder is still running (same pid, same start)."""
        return self.started is not None and process_start(self.pid) == self.started


def make(parent: Path, prefix: str) -> Path:
    """A new folder `parent/<prefix><nonce>` carrying this run's marker."""
    parent.mkdir(parents=True, exist_ok=True)
    nonce = secrets.token_hex(8)
    folder = parent / f"{prefix}{nonce}"
    folder.mkdir()
    record = {"tool": "overlay", "pid": os.getpid(), "started": process_start(os.getpid()),
              "nonce": nonce, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = folder / (MARKER + ".tmp")
    try:
        tmp.write_text(json.dumps(record) + "\n")
        tmp.replace(folder / MARKER)  # never a half-written marker
    except BaseException:
        tmp.unlink(missing_ok=True)  # not yet provably ours: undo it here and now
        folder.rmdir()
        raise
    return folder


def owner(folder: Path) -> Owner | None:
    """The run that made `folder`, when its marker is valid; None proves nothing is ours."""
    try:
        if folder.is_symlink() or not folder.is_dir():
            return None
        marker = folder / MARKER
        if marker.is_symlink() or not marker.is_file() or marker.stat().st_size > _MARKER_MAX:
            return None
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "overlay":
        return None
    pid, started, nonce = data.get("pid"), data.get("started"), data.get("nonce")
    if not isinstance(pid, int) or not (started is None or isinstance(started, int)):
        return None
    if not isinstance(nonce, str) or len(nonce) != 16 or not folder.name.endswith(nonce):
        return None
    return Owner(pid, started, nonce, str(data.get("since", "")))


def leftover(folder: Path) -> Owner | None:
    """The owner of a folder left behind (None: not ours, or another run still live).

    Call it holding the lock that guards the folder's parent: then no run of this very
    process is still using the folder either (an in-process caller's earlier run that
    failed to clean up), and it counts as left behind too."""
    found = owner(folder)
    if found is None or (found.alive() and found.pid != os.getpid()):
        return None
    return found


def remove(folder: Path, *, ignore_errors: bool = False) -> None:
    """Delete an owned folder, its marker last: a kill midway leaves a folder that is
    still provably ours, so the next run finishes the job."""
    try:
        for child in folder.iterdir():
            if child.name == MARKER:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        (folder / MARKER).unlink(missing_ok=True)
        folder.rmdir()
    except OSError:
        if not ignore_errors:
            raise
