"""Line coordinates across a patch series (pure).

A patch's hunks are recorded against the text the patches before it produced.
Two questions need them in other coordinates:

- a blocked patch checked *alone*: as if the failed patches before it were
  dropped, its hunks sit where they would have been written without them;
- upstream overlap: which upstream lines a hunk covers, in the coordinates of the
  pinned upstream file, before any patch of the series.

Both take the hunks back through earlier patches: every hunk of an earlier patch
that lies wholly before a line moves it by that hunk's size difference.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from overlay.drift.inmem_apply import FilePatch, Hunk
from overlay.drift.patch import DriftPatch


def old_span(h: Hunk) -> tuple[int, int]:
    """The hunk's old side as 1-based half-open lines [start, end). A hunk with no
    old lines (`@@ -5,0 ...`) inserts after line 5: the empty span [6, 6)."""
    if h.old:
        return h.old_start, h.old_start + len(h.old)
    return h.old_start + 1, h.old_start + 1


def _new_span(h: Hunk) -> tuple[int, int]:
    if h.new:
        return h.new_start, h.new_start + len(h.new)
    return h.new_start + 1, h.new_start + 1


def back_through(hunks: Sequence[Hunk], line: int) -> int:
    """Where `line` (of the text after `hunks`) was before them."""
    delta = 0
    for h in sorted(hunks, key=lambda g: g.new_start):
        start, end = _new_span(h)
        if end <= line and not (start == end == line):
            delta += len(h.new) - len(h.old)
        elif start <= line < end:  # inside what the hunk wrote: its old start
            return old_span(h)[0] + min(line - start, len(h.old))
        else:
            break
    return line - delta


def _hunks_writing(patch: DriftPatch, path: str) -> list[Hunk]:
    return [h for fp in patch.files if fp.new_path == path for h in fp.hunks]


def map_back(line: int, path: str, earlier: Sequence[DriftPatch]) -> int:
    """`line` of `path` as the patches `earlier` (in series order) left it, taken back
    to before all of them (later ones first)."""
    for p in reversed(earlier):
        hunks = _hunks_writing(p, path)
        if hunks:
            line = back_through(hunks, line)
    return line


def rebased(patch: DriftPatch, dropped: Sequence[DriftPatch]) -> DriftPatch:
    """`patch` with its hunks moved to where they sit without `dropped` underneath."""
    if not dropped:
        return patch
    files = []
    for fp in patch.files:
        path = fp.old_path
        if path is None:
            files.append(fp)
            continue
        hunks = []
        for h in fp.hunks:
            moved = map_back(old_span(h)[0], path, dropped) - old_span(h)[0]
            hunks.append(replace(h, old_start=h.old_start + moved, new_start=h.new_start + moved))
        files.append(FilePatch(fp.old_path, fp.new_path, tuple(hunks), fp.binary))
    return replace(patch, files=tuple(files))
