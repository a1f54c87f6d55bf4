"""Proof that a folder was made by an overlay run: a marker file naming that run.

Cleaning up after a killed run removes or restores only folders whose marker is
valid; a folder that merely has a familiar name (a user's `.staging-area`) is never
touched. The marker names the run (pid and the process's start time, so a reused pid
is told apart) and a random nonce that the folder's own name ends with, so a marker
copied into another folder proves nothing.

A marker proves something only when it parses to the exact schema `make` writes (one
written where /proc is unavailable has no start time, and proves nothing); a folder
whose marker does not is left as it is, and the run says so. Nothing is ever moved or
deleted through a symbolic link.

The folder exists unmarked for two moments: made, not yet marked (the marker itself is
given its name only once whole, so the folder is empty then), and its marker deleted,
the folder not yet. A kill there leaves an empty folder of the name shape `make` gives;
`leftover` removes that with rmdir, which cannot remove anything else.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overlay import paths
from overlay.errors import inject_fault

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
    started: int  # clock ticks since boot
    nonce: str
    since: str  # when the folder was made (UTC), for messages

    def alive(self) -> bool:
        """Whether the run that made the folder is still running (same pid, same start)."""
        return process_start(self.pid) == self.started


def new_nonce() -> str:
    return secrets.token_hex(8)


def make(parent: Path, prefix: str) -> Path:
    """A new folder `parent/<prefix><nonce>` carrying this run's marker."""
    parent.mkdir(parents=True, exist_ok=True)
    nonce = new_nonce()
    folder = parent / f"{prefix}{nonce}"
    folder.mkdir()
    inject_fault("owner-unmarked")
    _mark(folder, nonce, undo=folder.rmdir)
    return folder


def _mark(folder: Path, nonce: str, undo: Callable[[], None]) -> None:
    record = {"tool": "overlay", "pid": os.getpid(), "started": process_start(os.getpid()),
              "nonce": nonce, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    data = (json.dumps(record) + "\n").encode("utf-8")
    try:
        if not _link_whole(folder, data):
            tmp = folder / (MARKER + ".tmp")
            try:
                tmp.write_bytes(data)
                tmp.replace(folder / MARKER)  # never a half-written marker
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    except BaseException:
        undo()  # not yet provably ours: undo it here and now
        raise


def _link_whole(folder: Path, data: bytes) -> bool:
    """Write the marker as a nameless file in `folder` and give it its name only once it
    is whole (Linux's O_TMPFILE), so a kill leaves the folder empty or marked, never with
    a half-made marker file in it; False where the system or file system cannot."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not Path("/proc/self/fd").is_dir():
        return False
    try:
        fd = os.open(folder, flag | os.O_WRONLY, 0o644)
    except OSError:
        return False
    try:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:  # a full disk: name the file it was writing, as open() would
            raise OSError(exc.errno, exc.strerror, str(folder / MARKER)) from None
        # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N names the open file itself; a dir
        # fd for the source makes Python call linkat, not link, which would not follow
        procfd = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.link(str(fd), folder / MARKER, src_dir_fd=procfd, follow_symlinks=True)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise
            return False  # the file system cannot: the caller writes it by rename instead
        finally:
            os.close(procfd)
    finally:
        os.close(fd)
    return True


def make_tree(work: Path, nonce: str) -> None:
    """Make the folder `work` of a git work tree whose name is not the run's to choose
    (a composed tree, build/PIN/TARGET), with this run's marker in `work/.git/`, where
    git shows nothing, before anything else is in it. `work` must not exist (a folder of
    that name is never taken over); the caller records `nonce`, which binds the marker."""
    work.mkdir()
    try:
        (work / ".git").mkdir()
    except BaseException:
        work.rmdir()
        raise

    def undo() -> None:
        (work / ".git").rmdir()
        work.rmdir()

    _mark(work / ".git", nonce, undo=undo)


def tree_owner(work: Path, nonce: str) -> tuple[Owner | None, str | None]:
    """(the run that made the tree `work` with `make_tree`, else why it is not provably
    that run's): `work` and its `.git/` real folders, the marker there of that nonce."""
    try:
        mode = work.lstat().st_mode
    except FileNotFoundError:
        return None, "it is not there"
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror})"
    if stat.S_ISLNK(mode):
        return None, "it is a symbolic link"
    if not stat.S_ISDIR(mode):
        return None, f"it is {paths.file_kind(mode)}"
    found, why = examine(work / ".git", nonce)
    if found is None:
        return None, why or "it carries no marker of this run"
    return found, None


def remove_tree(work: Path) -> None:
    """Delete a tree `make_tree` made (`tree_owner` proved it), its marker last."""
    mode = work.lstat().st_mode
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory (or a symbolic link)", str(work))
    for child in work.iterdir():
        if child.name == ".git":
            continue
        if stat.S_ISDIR(child.lstat().st_mode):
            shutil.rmtree(child)
        else:
            child.unlink()
    remove(work / ".git")
    work.rmdir()


def unmark_tree(work: Path) -> None:
    """The tree is no longer the run's to delete: an ordinary composed tree from now on."""
    (work / ".git" / MARKER).unlink(missing_ok=True)


_NONCE = re.compile(r"[0-9a-f]{16}")
_SINCE = re.compile(r"[ -~]{1,64}")  # printed in messages: printable ASCII, short
_FIELDS = frozenset({"tool", "pid", "started", "nonce", "since"})
_PID_MAX = 1 << 22  # the kernel's largest pid_max


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse(data) -> Owner | str:
    """The marker's record as `make` writes it, or why it is not one (pure). The schema
    is exact: every field present with its type, nothing else; a record with no start
    time (`started: null`, where /proc was unavailable) cannot tell its run from another
    with the same pid, so it proves nothing either."""
    if not isinstance(data, dict):
        return "it is not a JSON object"
    if set(data) != _FIELDS:
        extra, missing = sorted(set(data) - _FIELDS), sorted(_FIELDS - set(data))
        return ("it has unknown fields " + ", ".join(map(repr, extra[:3])) if extra
                else "it lacks " + ", ".join(missing))
    if data["tool"] != "overlay":
        return "its tool is not overlay"
    pid, started, nonce, since = data["pid"], data["started"], data["nonce"], data["since"]
    if not _is_int(pid) or not 0 < pid <= _PID_MAX:
        return "its pid is not a process id"
    if not _is_int(started):
        return "its start time is not a number of clock ticks"
    if not isinstance(nonce, str) or not _NONCE.fullmatch(nonce):
        return "its nonce is not 16 hex digits"
    if not isinstance(since, str) or not _SINCE.fullmatch(since):
        return "its time is not a short printable string"
    return Owner(pid, started, nonce, since)


def examine(folder: Path, nonce: str | None = None) -> tuple[Owner | None, str | None]:
    """(the run that made `folder`, why a marker there proves nothing). Both are None
    when the folder has no marker at all (a user's folder of a familiar name). The
    marker is bound to the folder by the nonce its name ends with, or by `nonce` where
    the caller recorded it (a folder whose name is fixed, such as a composed tree)."""
    try:
        st = folder.lstat()
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            return None, None
        marker = folder / MARKER
        try:
            mst = marker.lstat()
        except FileNotFoundError:
            return None, None
        if not stat.S_ISREG(mst.st_mode):
            return None, "its marker is not a regular file"
        if mst.st_size > _MARKER_MAX:
            return None, "its marker is larger than any overlay writes"
        data = json.loads(paths.read_capped(marker, _MARKER_MAX).decode("utf-8"))
    except (OSError, paths.NotARegularFile):
        return None, "its marker cannot be read"
    except (ValueError, RecursionError):
        return None, "its marker is not JSON"
    found = _parse(data)
    if isinstance(found, str):
        return None, f"its marker is not one overlay writes ({found})"
    if nonce is not None and found.nonce != nonce:
        return None, "its marker names another run"
    if nonce is None and not folder.name.endswith(found.nonce):
        return None, None  # a marker copied from another folder: this one is simply not ours
    return found, None


def owner(folder: Path, nonce: str | None = None) -> Owner | None:
    """The run that made `folder`, when its marker is valid; None proves nothing is ours."""
    return examine(folder, nonce)[0]


def _say(message: str) -> None:
    print(f"overlay: {message}", file=sys.stderr, flush=True)


def refuse(folder: Path, why: str) -> None:
    """Say that `folder` is left as it is, and why (one line on stderr)."""
    _say(f"left {folder} as it is: {why}")


def leftover(folder: Path) -> Owner | None:
    """The owner of a folder left behind (None: not ours, or another run still live).

    Call it holding the lock that guards the folder's parent: then no run of this very
    process is still using the folder either (an in-process caller's earlier run that
    failed to clean up), and it counts as left behind too. A run killed between making
    its folder and marking it (or between deleting the marker and the folder) leaves an
    empty folder of its own name shape with no marker: that one is removed here, by
    rmdir, which removes an empty folder and nothing else; no other run can be making
    one under the lock."""
    found, why = examine(folder)
    if why is not None:
        refuse(folder, why)
    if found is None and why is None and _unmarked_and_empty(folder):
        try:
            folder.rmdir()
        except OSError:
            pass  # something is in it after all (or it went): not ours to touch
    if found is None or (found.alive() and found.pid != os.getpid()):
        return None
    return found


def _unmarked_and_empty(folder: Path) -> bool:
    """A real, empty folder whose name ends as `make` names folders (`-<16 hex>`)."""
    name = folder.name
    if len(name) < 17 or name[-17] != "-" or not _NONCE.fullmatch(name[-16:]):
        return False
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):
            return False
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def remove(folder: Path, *, ignore_errors: bool = False) -> None:
    """Delete an owned folder, its marker last: a kill midway leaves a folder that is
    still provably ours (or, after the marker, an empty one), so the next run finishes
    the job. Never through a symbolic
    link: a folder that is one is refused (OSError), and links inside are unlinked."""
    try:
        st = folder.lstat()
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory (or a symbolic link)", str(folder))
        for child in folder.iterdir():
            if child.name == MARKER:
                continue
            if stat.S_ISDIR(child.lstat().st_mode):
                shutil.rmtree(child)
            else:
                child.unlink()
        (folder / MARKER).unlink(missing_ok=True)
        inject_fault("owner-unmarking")
        folder.rmdir()
    except OSError:
        if not ignore_errors:
            raise
