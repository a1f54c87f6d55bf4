"""The one exception type the CLI turns into a single error line, and the one way any
layer shows untrusted text: `printable` (the sanitiser), `quoted` and `shortened` (a
value from a file, cut to a few dozen characters), `redact` (credentials in URLs) and `clean_line` (all three, on one bounded line).

Foundation: the standard library only; every layer imports it.
"""

from __future__ import annotations

import os
import re
import signal

# user[:password]@ in a URL (https://user:TOKEN@host/..., https://TOKEN@host/...). The user
# info is everything before the LAST '@' of the authority, which ends at the first '/',
# '?', '#' or blank (RFC 3986, as urllib.parse reads it): a password may hold an '@'.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")


def url_credentials(url: str) -> bool:
    """Whether a URL carries credentials: any user info in an http(s)/ftp URL (a lone
    user name there is how tokens are usually passed); ssh's `git@` is an account, not one."""
    m = re.match(r"(?i)^(https?|ftps?)://([^/?#@]+)@", url.strip())
    return bool(m)


def redact(text: str) -> str:
    """`text` with the user info of every URL in it replaced by `***`."""
    return _URL_USERINFO.sub(lambda m: m.group(1) + "***@", text)


# Upstream writes commit subjects, author names and file names, and a campaign's nodes
# write their outcomes: an escape sequence in one must not recolour, retitle or hyperlink
# a maintainer's terminal, nor hide in a Markdown summary. Control characters (C0, DEL,
# C1), lone surrogates (what surrogateescape decoding leaves of odd bytes: unprintable),
# line and paragraph separators, and the bidirectional controls that reorder text on
# screen are written as visible escapes.
_OTHER_UNSAFE = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f{_OTHER_UNSAFE}]")
_UNSAFE_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHER_UNSAFE}]")


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """`text` with every unsafe character written as a visible escape (\\x1b, \\u202e);
    `newlines`: keep line breaks (a multi-line report), every other one escaped."""
    return (_UNSAFE_BUT_NEWLINE if newlines else _UNSAFE).sub(_escape, text)


SHOWN_MAX = 80  # characters of a value from a file that a message quotes


def shortened(text: str, limit: int = SHOWN_MAX) -> str:
    """`text` printable, and at most `limit` characters of it, with its length where it
    is longer: `ffff… (900000 characters)`."""
    if len(text) <= limit:
        return printable(text)
    return f"{printable(text[:limit])}… ({len(text)} characters)"


def quoted(value: object, limit: int = SHOWN_MAX) -> str:
    """A value from a file as a message quotes it: a string in quotes, anything else as
    its repr, printable, at most `limit` characters: `'ffff…' (900000 characters)`."""
    if not isinstance(value, str):
        return shortened(repr(value), limit)
    if len(value) <= limit:
        return f"'{printable(value)}'"
    return f"'{printable(value[:limit])}…' ({len(value)} characters)"


LINE_MAX = 1000  # an error line longer than this keeps its start and its end
_HEAD, _TAIL = 600, 300


def clean_line(text: str) -> str:
    """`text` as one line a terminal can show: blanks and line breaks folded to one space,
    unsafe characters escaped, credentials redacted, and at most LINE_MAX characters (the
    middle of a longer one is cut, so the message's start and its hint stay)."""
    line = redact(printable(" ".join(text.split())))
    if len(line) > LINE_MAX:
        cut = len(line) - _HEAD - _TAIL
        line = f"{line[:_HEAD]} …({cut} characters cut)… {line[-_TAIL:]}"
    return line


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
        return clean_line(text)  # one printable line, bounded, never a credential


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
