"""Report files (`--markdown`, `--junit`): written whole or not at all, readable as
ordinary files are (0644 under the usual umask, whatever a temporary file's mode was),
and a failure is one error naming the report the user asked for, never the temporary
file beside it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from overlay.errors import OverlayError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_report(path: Path | None, option: str) -> None:
    """Before any work: `path` can be a report file (its folder is created, as test tools
    do for reports/ in CI), else one error naming it."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OverlayError(f"{option}: cannot create folder {path.parent}: {exc.strerror or exc}",
                           hint="write elsewhere") from None
    try:
        if path.is_dir():
            raise OverlayError(f"{option} {path} is a directory", hint="give a file name")
        path.lstat()
    except FileNotFoundError:
        pass  # to be created
    except OSError as exc:
        raise OverlayError(f"{option}: cannot write the report: {exc.strerror or exc}",
                           path=str(path), hint="give a writable file name") from None


def write_report(path: Path, text: str, option: str) -> None:
    """`text` into `path` atomically (a temporary file beside it, then a rename), with the
    mode a newly created file gets (0666 less the umask); `option` names it in errors."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".overlay-report-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OverlayError(f"{option}: cannot write the report: {exc.strerror or exc}",
                           path=str(path), hint="give a writable file name") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
