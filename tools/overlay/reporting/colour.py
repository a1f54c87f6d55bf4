"""Colour for what needs a reader's eye: `FAILED` and the `overlay: error:` prefix, in
red, on a stream where colour is allowed (`progress.colour_allowed`: a terminal with
`--color auto`, or `--color always`). Elsewhere the text passes through byte for byte.

Standard library only. Upstream text reaching these streams has already been made
printable, so the only escape sequences written are these."""

from __future__ import annotations

import re
from typing import TextIO

from overlay.reporting.progress import colour_allowed

_RED, _BOLD_RED, _RESET = "\033[31m", "\033[1;31m", "\033[0m"
_MARKED = re.compile(r"\bFAILED\b|^overlay: error:", re.M)


def highlight(text: str) -> str:
    """`text` with each `FAILED` and a line's leading `overlay: error:` in red."""
    return _MARKED.sub(lambda m: (_BOLD_RED if m.group().startswith("overlay") else _RED)
                       + m.group() + _RESET, text)


class Highlighted:
    """A text stream that writes through `highlight` and is otherwise the stream it wraps
    (fileno, isatty, buffer, encoding ...)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(highlight(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def coloured(stream: TextIO) -> TextIO:
    """`stream` itself where colour is not allowed, else a `Highlighted` wrapper of it."""
    return Highlighted(stream) if colour_allowed(stream) else stream  # type: ignore[return-value]
