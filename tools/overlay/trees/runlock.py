"""Advisory locks that say which run holds them.

The checkout lock (`<root>/.overlay/checkout.lock`) is shared by apply, refresh and
lock: they read and write the same patches/, series.yaml and pins/, so a second run
is refused at once (exit 2) with the pid, command and start of the run holding it.
The object cache has its own lock, which runs wait for instead: several checkouts
may share one cache (OVERLAY_CACHE), and a fetch into it is short.

The kernel drops a lock when its process dies, so a killed run never leaves one
behind; the holder record inside the file is only there to name the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Callable, Iterator

from overlay.trees import ownership
from overlay.errors import OverlayError

CHECKOUT_LOCK = "checkout.lock"  # under <root>/.overlay/
CACHE_LOCK = "cache.lock"  # under the cache folder
_RECORD_MAX = 4096

_held: dict[str, int] = {}  # lock file -> how deeply this process holds it (reentrant)
_commands: list[str] = []  # the commands of the locks held, outermost first (for records)


def _record(command: str) -> bytes:
    return (json.dumps({"pid": os.getpid(), "started": ownership.process_start(os.getpid()),
                        "command": command,
                        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n").encode()


def holder(fd: int) -> str:
    """Who holds the lock open on `fd`, in words, from the record its holder wrote."""
    try:
        data = json.loads(os.pread(fd, _RECORD_MAX, 0).decode("utf-8", "replace") or "null")
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return "another overlay run (it has not said which yet)"
    return f"pid {data['pid']} (overlay {data.get('command', '?')}) since {data.get('since', '?')}"


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise OverlayError(f"cannot open the lock file: {exc.strerror}", path=str(path),
                           hint="it must be a regular file you may write; remove whatever is there") from None


@contextmanager
def held(path: Path, command: str, *, wait: bool, busy: str, hint: str,
         waiting: Callable[[str], None] | None = None) -> Iterator[bool]:
    """Hold the lock at `path`; yields True when this call took it (False: this process
    already held it). Busy: wait (telling `waiting` once) or raise OverlayError."""
    key = os.path.realpath(path)
    if _held.get(key):
        _held[key] += 1
        try:
            yield False
        finally:
            _held[key] -= 1
        return
    fd = _open(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = holder(fd)
            if not wait:
                raise OverlayError(f"{busy}: held by {who}", path=str(path), hint=hint) from None
            (waiting or _say)(f"waiting for {busy}: held by {who}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _record(command), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, it just cannot say whose it is
        _held[key] = 1
        _commands.append(command)
        try:
            yield True
        finally:
            del _held[key]
            _commands.pop()
            try:
                os.ftruncate(fd, 0)  # a record never outlives its holder
            except OSError:
                pass
    finally:
        os.close(fd)  # releases the lock


def _say(message: str) -> None:
    print(f"overlay: {message}", file=sys.stderr, flush=True)


def checkout(root: Path, command: str) -> AbstractContextManager[bool]:
    """The checkout lock: apply, refresh and lock never overlap in one checkout."""
    return held(root / ".overlay" / CHECKOUT_LOCK, command, wait=False,
                busy="another overlay run is using this checkout",
                hint="wait for it to finish and run the command again")


def cache(cache_dir: Path, what: str,
          waiting: Callable[[str], None] | None = None) -> AbstractContextManager[bool]:
    """The object cache's lock: runs sharing a cache take turns fetching into it."""
    outer = next((c for c in reversed(_commands) if c), "")
    return held(cache_dir / CACHE_LOCK, f"{outer}: {what}" if outer else what, wait=True,
                busy=f"the object cache {cache_dir}", hint="", waiting=waiting)
