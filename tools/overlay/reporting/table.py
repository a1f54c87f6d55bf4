"""Aligned plain-text tables (pure): columns padded to their widest cell, two spaces
apart, no trailing spaces; the last column wraps when a width is given."""

from __future__ import annotations

import shutil
import sys
import textwrap
from typing import Sequence

from overlay.reporting.progress import is_terminal

MIN_LAST = 24  # narrower than this, the last column is left long rather than wrapped


def terminal_width() -> int | None:
    """The width to wrap tables to: the terminal's when stdout is one, else None (a pipe
    or a file gets whole lines, so tools that read them see every cell on one line)."""
    if not is_terminal(sys.stdout):
        return None
    return shutil.get_terminal_size((100, 24)).columns


def render(rows: Sequence[Sequence[object]], *, header: Sequence[str] | None = None,
           align: str = "", indent: str = "", gap: int = 2, width: int | None = None) -> list[str]:
    """The lines of a table. `align`: one letter per column, `l` (default) or `r`;
    `width`: wrap the last column so that lines fit (continuations start under it)."""
    table = [list(map(str, header))] if header is not None else []
    table += [list(map(str, row)) for row in rows]
    if not table:
        return []
    columns = max(len(row) for row in table)
    for row in table:
        row.extend([""] * (columns - len(row)))
    widths = [max(len(row[i]) for row in table) for i in range(columns)]
    kinds = align.ljust(columns, "l")
    spacer = " " * gap
    start = len(indent) + sum(widths[:-1]) + gap * (columns - 1)
    room = width - start if width is not None else None
    lines = []
    for row in table:
        cells = [row[i].rjust(widths[i]) if kinds[i] == "r" else row[i].ljust(widths[i])
                 for i in range(columns - 1)]
        last = row[-1].rjust(widths[-1]) if kinds[-1] == "r" else row[-1]
        parts = [last]
        if room is not None and room >= MIN_LAST and len(last) > room:
            parts = textwrap.wrap(last, room, break_on_hyphens=False) or [last]
        lines.append((indent + spacer.join([*cells, parts[0]])).rstrip())
        lines.extend((" " * start + more).rstrip() for more in parts[1:])
    return lines
