"""The one exception type the CLI turns into a single error line."""

from __future__ import annotations

import os
import re
import signal

# user[:password]@ in a URL (https://user:TOKEN@host/..., https://TOKEN@host/...)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")


def url_credentials(url: str) -> bool:
    """Whether a URL carries credentials: any user info in an http(s)/ftp URL (a lone
    user name there is how tokens are usually passed); ssh's `git@` is an account, not one."""
    m = re.match(r"(?i)^(https?|ftps?)://([^/@]+)@", url.strip())
    return bool(m)


def redact(text: str) -> str:
    """`text` with the user info of every URL in it replaced by `***`."""
    return _URL_USERINFO.sub(lambda m: m.group(1) + "***@", text)


class OverlayError(Exception):
    """A user-facing failure: one line naming the file and what to do.

    `path` and `line` locate the problem (when known); `hint` is the next step.
    The CLI prints `overlay: error: <path>:<line>: <message> (<hint>)` and exits
    with `exit_code`; no traceback is ever shown for these.
    """

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None,
                 line: int | None = None, hint: str | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def one_line(self) -> str:
        where = ""
        if self.path:
            where = self.path + (f":{self.line}" if self.line else "") + ": "
        text = where + self.message
        if self.hint:
            text += f" ({self.hint})"
        return redact(" ".join(text.split()))  # never more than one line, never a credential


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) with a sentence saying what state it left things in."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def inject_fault(point: str) -> None:
    """Test hook: OVERLAY_FAULT_INJECT=<point> kills the process there (SIGKILL, no
    cleanup runs); <point>:INT sends Ctrl-C instead (atomicity and interrupt tests);
    <point>:STOP stops the process there until SIGCONT (tests of overlapping runs)."""
    wanted = os.environ.get("OVERLAY_FAULT_INJECT")
    if wanted == point:
        os.kill(os.getpid(), signal.SIGKILL)
    elif wanted == point + ":INT":
        os.kill(os.getpid(), signal.SIGINT)
    elif wanted == point + ":STOP":
        os.kill(os.getpid(), signal.SIGSTOP)
