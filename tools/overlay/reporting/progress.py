"""Progress lines for a person at a terminal: `overlay <command>: <message>` on stderr.

Shown only when stderr is a terminal and the command is not in `--json` mode, so piped
and machine-readable runs stay byte-for-byte quiet. The prefix is dimmed where colour
is allowed: never with `NO_COLOR` set (https://no-color.org) or `TERM=dumb`, and then no
escape sequence at all is written. A `live` progress rewrites one line in place (a long
walk with a message per step) and ends it with `close()`.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, TextIO

from overlay.reporting.text import printable

PROGRAM = "overlay"
_DIM, _RESET, _CLEAR_TO_END = "\033[2m", "\033[0m", "\033[K"


def is_terminal(stream: TextIO | None) -> bool:
    """True when `stream` is a terminal; a stream that cannot tell is not one."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


COLOUR_MODES = ("auto", "always", "never")
_colour_mode = ["auto"]  # the command line's --color, set once by the CLI


def set_colour_mode(mode: str) -> None:
    """`--color auto|always|never`: auto is the rule below, the others force it."""
    if mode not in COLOUR_MODES:
        raise ValueError(mode)
    _colour_mode[0] = mode


def colour_allowed(stream: TextIO | None) -> bool:
    """With `--color auto` (the default): escape sequences only on a terminal, without
    NO_COLOR (any non-empty value) and unless TERM says the terminal understands none;
    `--color always` / `never` decide alone."""
    if _colour_mode[0] != "auto":
        return _colour_mode[0] == "always"
    return (is_terminal(stream) and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM", "") != "dumb")


class Progress:
    """A callable taking one message; each becomes `overlay <command>: <message>`."""

    def __init__(self, command: str, stream: TextIO, *, live: bool = False,
                 clean: Callable[[str], str] | None = None) -> None:
        self.prefix = f"{PROGRAM} {command}: " if command else f"{PROGRAM}: "
        self.stream = stream
        self.live = live
        self.colour = colour_allowed(stream)
        self._clean = clean
        self._open = 0  # length of the live line on screen, 0 when none is

    def _text(self, message: str) -> str:
        message = printable(self._clean(message) if self._clean else message)
        return (f"{_DIM}{self.prefix}{_RESET}{message}" if self.colour else self.prefix + message)

    def __call__(self, message: str) -> None:
        text = self._text(message)
        if not self.live:
            self.stream.write(text + "\n")
        elif self.colour:
            self.stream.write("\r" + text + _CLEAR_TO_END)
            self._open = 1
        else:  # no escape sequences: blank out the rest of the previous line with spaces
            shown = len(text)
            self.stream.write("\r" + text + " " * max(self._open - shown, 0))
            self._open = max(shown, 1)
        self.stream.flush()

    def close(self) -> None:
        """End a live line (a no-op otherwise)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = 0


def progress(command: str, *, quiet: bool = False, live: bool = False,
             clean: Callable[[str], str] | None = None,
             stream: TextIO | None = None) -> Progress | None:
    """A progress writer for `command` on stderr, or None where nothing is to be shown:
    with `quiet` (the command's --json) or when stderr is not a terminal. `clean`: a
    caller's redaction (credentials in URLs) applied to each message first."""
    stream = stream if stream is not None else sys.stderr
    if quiet or not is_terminal(stream):
        return None
    return Progress(command, stream, live=live, clean=clean)
