"""refresh's write phase: a new patches/ and series.yaml swapped in as one transaction.

Everything new is built aside, in `.overlay/refresh-<nonce>/` (marked as this run's,
overlay.trees.ownership). Writing `plan.json` there (atomically) is the commit point:
- before it, a killed or failing refresh has changed nothing the checkout holds, and
  the next run drops the folder;
- after it, the swap is finished, by this run or by the next one: one exchange of
  patches/ with the new folder (renameat2; two renames where the filesystem has no
  exchange), one replace of series.yaml, then the composed trees' records (notes
  and state) as the plan lists them, so the next refresh does not mistake its own
  new files for patches pulled from a teammate.
apply, refresh, lock and check finish an interrupted swap first (`recover`, under
the checkout lock), so no command reads a half-swapped series. The plan records the
digests of what the swap replaces and installs: where patches/ or series.yaml is
neither at its stage (a user's edit after the commit point), nothing is finished or
deleted; the one-line refusal says where each version is. plan.json is checked against
its exact schema before anything is done with it. A full disk fails
while building aside: nothing changed, and the message names the file and the space
needed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from overlay import paths
from overlay.trees import composed, ownership, runlock
from overlay.gitcmd import GitFailed
from overlay.errors import OverlayError, inject_fault

TX_PREFIX = "refresh-"  # under <root>/.overlay/
PLAN = "plan.json"
_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass(frozen=True)
class TreeUpdate:
    """A composed tree's records once the new series is in place."""

    work: Path
    notes: dict[str, str]  # commit -> patch file
    state: composed.ComposedState  # its series_digest is taken from the new patches/


class _WriteFailed(Exception):
    def __init__(self, shown: str, exc: OSError) -> None:
        super().__init__(shown)
        self.shown, self.exc = shown, exc


def write(root: Path, changes: dict[str, bytes], removed: list[str], series_text: str | None,
          trees: list[TreeUpdate]) -> None:
    """Replace the named patch files (and series.yaml) all at once, then the trees' records."""
    if not changes and not removed and series_text is None:
        _update_trees(root, trees)  # no file changes: nothing to swap
        return
    needed = _needed_bytes(changes, series_text)
    tx = None
    try:
        try:
            tx = ownership.make(root / ".overlay", TX_PREFIX)
        except OSError as exc:
            raise _WriteFailed(str(exc.filename or root / ".overlay"), exc) from None
        new_dir = tx / "patches" if changes or removed else None
        if new_dir is not None:
            _build_patches(root / "patches", new_dir, changes, removed)
        if series_text is not None:
            _write_file(tx / "series.yaml", series_text.encode("utf-8"), "series.yaml",
                        like=root / "series.yaml")
        inject_fault("refresh-before-commit")
        _fsync_dir(tx)
        _write_plan(root, tx, new_dir, series_text is not None, trees)
    except BaseException as exc:
        if tx is not None:
            ownership.remove(tx, ignore_errors=True)
        if isinstance(exc, _WriteFailed):
            raise _write_error(root, exc, needed) from None
        raise
    inject_fault("refresh-after-commit")
    try:
        _finish(root, tx)
    except (OSError, GitFailed) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else f"git {exc.args_[0]} failed"
        raise OverlayError(f"the new patches/ and series.yaml are in place, but finishing the refresh "
                           f"failed: {detail}", path=str(tx),
                           hint="fix that and run `overlay refresh` again: it finishes the swap first") from None


def _needed_bytes(changes: dict[str, bytes], series_text: str | None) -> int:
    """The new bytes the folder built aside takes (kept files are hard links)."""
    return sum(len(b) for b in changes.values()) + len((series_text or "").encode("utf-8"))


def _write_error(root: Path, failed: _WriteFailed, needed: int) -> OverlayError:
    exc = failed.exc
    if exc.errno in _FULL:
        try:
            free = shutil.disk_usage(root).free
        except OSError:
            free = None
        have = f", {_size(free)} are free" if free is not None else ""
        return OverlayError(
            f"no space left on the device while writing {failed.shown}: refresh builds the new "
            f"patches/ and series.yaml aside before swapping them in and needs about "
            f"{_size(needed)} free in {root}{have}; nothing was changed",
            path=failed.shown, hint="free some space and run `overlay refresh` again")
    return OverlayError(f"cannot write {failed.shown}: {exc.strerror or exc}; nothing was changed",
                        path=failed.shown, hint="check the folder's permissions and run `overlay refresh` again")


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{max(1, round(n / 1e3))} kB"


def _write_file(path: Path, data: bytes, shown: str, like: Path | None = None) -> None:
    """A new file, on disk before the commit point (a crash must not commit to a file
    whose data never landed: that is how 0-byte files appear)."""
    try:
        with open(path, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if like is not None and like.is_file() and not like.is_symlink():
            os.chmod(path, stat.S_IMODE(like.stat().st_mode))
    except OSError as exc:
        raise _WriteFailed(shown, exc) from None


def _link_or_copy(src: Path, dst: Path) -> None:
    """A file kept as it is: a second name for the same bytes (already on disk, nothing to
    copy or flush), or a copy where the filesystem has no hard links."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in _FULL:
            raise
        shutil.copy2(src, dst, follow_symlinks=False)
        with open(dst, "rb") as fh:
            os.fsync(fh.fileno())


def _build_patches(patches: Path, new_dir: Path, changes: dict[str, bytes], removed: list[str]) -> None:
    """The whole new patches/: every file kept as it is, every change written (a renamed
    patch whose bytes did not change is linked from its old name)."""
    new_dir.mkdir()
    skip = set(changes) | set(removed)
    going: dict[bytes, Path] = {}  # bytes of the files that leave under their old names
    if patches.is_dir():
        shutil.copymode(patches, new_dir)
        for child in sorted(patches.iterdir()):
            shown = f"patches/{child.name}"
            dst = new_dir / child.name
            try:
                if child.name in skip:
                    if child.is_file() and not child.is_symlink():
                        going.setdefault(child.read_bytes(), child)
                elif child.is_symlink():
                    os.symlink(os.readlink(child), dst)
                elif child.is_dir():
                    shutil.copytree(child, dst, symlinks=True)
                else:
                    _link_or_copy(child, dst)
            except shutil.Error as exc:  # copytree gathers its errors
                first = exc.args[0][0] if exc.args and exc.args[0] else None
                code = errno.ENOSPC if first and "No space" in str(first[-1]) else errno.EIO
                raise _WriteFailed(shown, OSError(code, os.strerror(code))) from None
            except OSError as exc:
                raise _WriteFailed(shown, exc) from None
    for name, data in changes.items():
        same = going.get(data)
        if same is not None and same.name != name:
            try:
                _link_or_copy(same, new_dir / name)
                continue
            except OSError as exc:
                raise _WriteFailed(f"patches/{name}", exc) from None
        _write_file(new_dir / name, data, f"patches/{name}", like=patches / name)
    _fsync_dir(new_dir)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_plan(root: Path, tx: Path, new_dir: Path | None, series: bool, trees: list[TreeUpdate]) -> None:
    replaces = {"patches": fingerprint(root / "patches"), "series": _digest(root / "series.yaml")}
    installs = {"patches": fingerprint(new_dir) if new_dir is not None else replaces["patches"],
                "series": _digest(tx / "series.yaml") if series else replaces["series"]}
    plan = {"patches_inode": new_dir.stat().st_ino if new_dir is not None else None,
            "series": series,
            "trees": [{"work": str(t.work), "notes": t.notes, "state": dataclasses.asdict(t.state)}
                      for t in trees],
            "replaces": replaces, "installs": installs}
    tmp = tx / (PLAN + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(plan, fh)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise _WriteFailed(str(tmp), exc) from None
    os.replace(tmp, tx / PLAN)  # the commit point
    _fsync_dir(tx)


def _digest(path: Path) -> str | None:
    """What one entry is, as a short string (lstat: a link is its target, not followed);
    None when there is nothing there."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return "link " + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
    if stat.S_ISDIR(mode):
        return "folder"
    if not stat.S_ISREG(mode):
        return "other"
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "file " + h.hexdigest()


def fingerprint(folder: Path) -> dict[str, str]:
    """Every entry under `folder` (its path below it -> `_digest`), links not followed;
    empty when the folder is not there."""
    out: dict[str, str] = {}
    top = _digest(folder)
    if top is None:
        return out
    if top != "folder":
        return {".": top}
    for child in sorted(os.listdir(folder)):
        path = folder / child
        kind = _digest(path)
        out[child] = kind
        if kind == "folder":
            out.update({f"{child}/{k}": v for k, v in fingerprint(path).items()})
    return out


def _inode(path: Path) -> int | None:
    try:
        return path.lstat().st_ino
    except OSError:
        return None


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the system cannot."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(a))


_HELD = {signal.SIGINT, signal.SIGTERM}


def _finish(root: Path, tx: Path) -> None:
    """Roll a committed transaction forward; every step may be repeated after a kill.
    Refused, with nothing changed, when patches/ or series.yaml is no longer what the
    swap expects at its stage (an edit made after the commit point): both versions stay."""
    plan = _read_plan(tx)
    wanted, trees = plan["patches_inode"], plan["trees"]
    patches, new_dir = root / "patches", tx / "patches"
    _refuse_later_edits(root, tx, plan)
    # Ctrl-C and SIGTERM wait: an interrupt never lands between the two swaps.
    signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        if wanted is not None and _inode(new_dir) == wanted:  # not swapped yet
            if _inode(patches) is None:
                os.rename(new_dir, patches)
            elif not _exchange(patches, new_dir):
                os.rename(patches, tx / "old-patches")
                inject_fault("refresh-mid-swap")
                os.rename(new_dir, patches)
            inject_fault("refresh-mid-swap")
        if (tx / "series.yaml").exists():
            os.replace(tx / "series.yaml", root / "series.yaml")
        inject_fault("refresh-after-swap")
        _update_trees(root, [_tree_from(t) for t in trees])
        (tx / PLAN).unlink()  # done: what is left is only deleted
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    ownership.remove(tx, ignore_errors=True)


_PLAN_MAX = 64 << 20  # bytes: the trees' notes of a few thousand patches, with room
_PLAN_KEYS = {"patches_inode", "series", "trees", "replaces", "installs"}
_STATE_KEYS = {f.name for f in dataclasses.fields(composed.ComposedState)}


def _read_plan(tx: Path) -> dict:
    """plan.json, checked against the exact schema `_write_plan` writes."""
    path = tx / PLAN
    try:
        data = json.loads(paths.read_capped(path, _PLAN_MAX).decode("utf-8"))
        why = _plan_problem(data)
    except (OSError, paths.NotARegularFile, ValueError, RecursionError):
        why = "it is not JSON"
    if why is not None:
        raise OverlayError(f"an interrupted refresh left a transaction that cannot be read ({why})",
                           path=str(path),
                           hint="check patches/ and series.yaml with git status, then remove the folder")
    return data


def _is_str_map(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in value.items())


def _plan_problem(data) -> str | None:
    """Why `data` is not a plan `_write_plan` writes, or None (pure)."""
    if not isinstance(data, dict) or set(data) != _PLAN_KEYS:
        return "its fields are not a refresh's"
    inode = data["patches_inode"]
    if inode is not None and (not isinstance(inode, int) or isinstance(inode, bool) or inode < 0):
        return "patches_inode is not an inode number"
    if not isinstance(data["series"], bool):
        return "series is not true or false"
    for key in ("replaces", "installs"):
        side = data[key]
        if (not isinstance(side, dict) or set(side) != {"patches", "series"}
                or not _is_str_map(side["patches"])
                or not (side["series"] is None or isinstance(side["series"], str))):
            return f"{key} is not a record of patches/ and series.yaml"
    if not isinstance(data["trees"], list):
        return "trees is not a list"
    for t in data["trees"]:
        if (not isinstance(t, dict) or set(t) != {"work", "notes", "state"}
                or not isinstance(t["work"], str) or not os.path.isabs(t["work"])
                or not _is_str_map(t["notes"]) or not isinstance(t["state"], dict)
                or set(t["state"]) != _STATE_KEYS):
            return "a tree's record is not a composed tree's"
        state = t["state"]
        patches = state["patches"]
        if (not all(isinstance(v, str) for k, v in state.items() if k != "patches")
                or not isinstance(patches, list) or not all(isinstance(n, str) for n in patches)):
            return "a tree's state is not a composed tree's"
    return None


def _refuse_later_edits(root: Path, tx: Path, plan: dict) -> None:
    """Raise, changing nothing, when patches/ or series.yaml is not what the swap left
    or found there at its stage: someone edited it after the commit point."""
    wanted = plan["patches_inode"]
    replaces, installs = plan["replaces"], plan["installs"]
    patches, new_dir, old_dir = root / "patches", tx / "patches", tx / "old-patches"
    theirs: list[str] = []  # where the refresh's own version is
    if wanted is None:
        found, expected = fingerprint(patches), installs["patches"]
    elif _inode(new_dir) == wanted:  # not swapped: the checkout's patches/ is the one it replaces
        before = patches if _inode(patches) is not None or _inode(old_dir) is None else old_dir
        found, expected = fingerprint(before), replaces["patches"]
        theirs.append(f"patches/ in {_shown(root, new_dir)}")
    elif _inode(patches) == wanted:  # swapped: patches/ is the one it installed
        found, expected = fingerprint(patches), installs["patches"]
        aside = old_dir if _inode(old_dir) is not None else new_dir
        theirs.append(f"patches/ in place under your edits (the ones it replaced in {_shown(root, aside)})")
    else:
        raise OverlayError("an interrupted refresh cannot be finished: patches/ was replaced after "
                           "its swap began; nothing was changed: yours is patches/, the refresh's "
                           f"folder is {_shown(root, tx)}", path=str(tx),
                           hint="check patches/ and series.yaml with git status, then remove that folder")
    changed = [f"patches/{name}" for name in sorted(set(found) | set(expected))
               if found.get(name) != expected.get(name)]
    series_now = _digest(root / "series.yaml")
    if not plan["series"]:
        series_expected = installs["series"]
    elif os.path.lexists(tx / "series.yaml"):
        series_expected = replaces["series"]
        theirs.append(f"series.yaml in {_shown(root, tx / 'series.yaml')}")
    else:
        series_expected = installs["series"]
        theirs.append("series.yaml in place under your edits")
    if series_now != series_expected:
        changed.append("series.yaml")
    if not changed:
        return
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    raise OverlayError(
        f"an interrupted refresh was not finished: {', '.join(changed[:3])}{more} changed since it was "
        f"interrupted; nothing was overwritten, both versions are kept: yours in patches/ and "
        f"series.yaml, the refresh's {'; '.join(theirs) or 'changes nothing more'}",
        path=_shown(root, tx), hint=f"compare them, keep what you want in patches/ and series.yaml, "
                                    f"then remove {_shown(root, tx)}")


def _shown(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _tree_from(data: dict) -> TreeUpdate:
    state = dict(data["state"])
    state["patches"] = tuple(state["patches"])
    return TreeUpdate(Path(data["work"]), dict(data["notes"]), composed.ComposedState(**state))


def _update_trees(root: Path, trees: list[TreeUpdate]) -> None:
    for t in trees:
        current = composed.read_state(t.work) if (t.work / ".git").is_dir() else None
        if current is None or (current.pin, current.target) != (t.state.pin, t.state.target):
            continue  # removed (or replaced) since: nothing to record
        if t.notes:
            composed.add_notes(t.work, t.notes)
        composed.write_state(t.work, dataclasses.replace(
            t.state, series_digest=composed.series_digest(root / "patches", t.state.patches)))


def recover(root: Path) -> bool:
    """Finish (or drop) the refreshes this checkout left interrupted; whether the series
    changed. Call it holding the checkout lock."""
    parent = root / ".overlay"
    if not parent.is_dir():
        return False
    changed = False
    for tx in sorted(parent.glob(TX_PREFIX + "*")):
        run = ownership.leftover(tx)
        if run is None:
            continue  # not ours (or its run is still live)
        if (tx / PLAN).is_file():
            _finish(root, tx)
            changed = True
            print(f"overlay: finished the refresh interrupted at {run.since} (pid {run.pid}): "
                  f"patches/ and series.yaml are its new state", file=sys.stderr)
        else:
            ownership.remove(tx, ignore_errors=True)  # nothing of it reached the checkout
    return changed


def pending(root: Path) -> bool:
    """Whether an interrupted refresh may be waiting to be finished (cheap; no lock)."""
    parent = root / ".overlay"
    return parent.is_dir() and any(parent.glob(TX_PREFIX + "*"))


@contextmanager
def checkout(root: Path, command: str) -> Iterator[bool]:
    """The checkout lock, with an interrupted refresh finished first; yields whether
    that changed the series (then what was loaded before is stale)."""
    with runlock.checkout(root, command) as first:
        yield recover(root) if first else False
