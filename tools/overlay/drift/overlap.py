"""Upstream overlap: which upstream commits changed the lines a patch's hunks touch (pure).

Input is the first-parent diff of every upstream commit between the pin and a head,
limited to the files the series touches: one `git log -p` (the one drift already
reads for patch-ids), i.e. the blob diffs of the touched files between consecutive
commits, only where a blob changed. No checkout, no extra git process.

Each hunk of each patch is a span of lines of the pinned upstream file: its recorded
old lines, taken back through the patches before it in the series (`lines.map_back`).
Walking the commits oldest first, a commit *overlaps* a hunk when it removes a line
inside the span or inserts lines strictly inside it; the span is then carried through
the commit's changes, so later commits are judged where the lines went. A hunk of a
file the patch (or an earlier patch) creates covers the whole file.

A commit *resembles* the patch ("upstream did this too") when, in a hunk it overlaps,
it adds at least one of the hunk's distinctive added lines (compared without
whitespace) and either also removes a line the hunk removes, or adds at least half of
the hunk's distinctive added lines. A commit that removes a (distinctive) line the
hunk removes, but adds other text, "rewrote the same lines": upstream's own version
of the change, or a change the patch must be fitted to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from overlay.drift.classify import DriftPatch, _distinctive
from overlay.drift.inmem_apply import normalized
from overlay.drift.lines import map_back, old_span

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
WHOLE = 1 << 60  # the end of a span that covers the whole file
NEAR = 10  # upstream lines this close to a span count when judging resemblance


@dataclass(frozen=True)
class Change:
    """One run of removed and/or added lines in an upstream file diff."""

    start: int  # first old line removed; for a pure insertion, the old line it goes before
    end: int  # one past the last old line removed (== start for a pure insertion)
    removed: tuple[str, ...]
    added: tuple[str, ...]


@dataclass(frozen=True)
class FileDiff:
    old_path: str | None  # None: the commit creates the file
    new_path: str | None  # None: the commit deletes it
    changes: tuple[Change, ...]


def _path(line: str, prefix: str) -> str | None:
    path = line.rstrip("\n").split("\t", 1)[0]
    if path == "/dev/null":
        return None
    if path.startswith('"'):
        from overlay.drift.inmem_apply import _unquote
        path = _unquote(path)
    return path[len(prefix):] if path.startswith(prefix) else path


def parse_log(text: str) -> list[tuple[str, tuple[FileDiff, ...]]]:
    """`git log -p --format='commit %H'` output as (commit, file diffs), in log order."""
    commits: list[tuple[str, list[FileDiff]]] = []
    lines = text.split("\n")
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("commit "):
            commits.append((line[7:].strip(), []))
            i += 1
            continue
        if not line.startswith("diff --git ") or not commits:
            i += 1
            continue
        i += 1
        old_path = new_path = None
        while i < n and not lines[i].startswith(("@@", "diff --git ", "commit ")):
            if lines[i].startswith("--- "):
                old_path = _path(lines[i][4:], "a/")
            elif lines[i].startswith("+++ "):
                new_path = _path(lines[i][4:], "b/")
            i += 1
        changes: list[Change] = []
        while i < n and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            i += 1
            if not m:
                continue
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            cur = int(m.group(1)) + (1 if old_len == 0 else 0)
            seen_old = seen_new = 0
            start = None
            removed: list[str] = []
            added: list[str] = []
            while i < n and (seen_old < old_len or seen_new < new_len):
                tag, body = lines[i][:1], lines[i][1:]
                if tag == "\\":
                    i += 1
                    continue
                if tag in ("-", "+"):
                    if start is None:
                        start = cur
                    if tag == "-":
                        removed.append(body)
                        cur += 1
                        seen_old += 1
                    else:
                        added.append(body)
                        seen_new += 1
                else:  # context (a blank context line may have lost its space)
                    if start is not None:
                        changes.append(Change(start, start + len(removed), tuple(removed), tuple(added)))
                        start, removed, added = None, [], []
                    cur += 1
                    seen_old += 1
                    seen_new += 1
                i += 1
            if start is not None:
                changes.append(Change(start, start + len(removed), tuple(removed), tuple(added)))
            while i < n and lines[i].startswith("\\"):
                i += 1
        commits[-1][1].append(FileDiff(old_path, new_path, tuple(changes)))
    return [(sha, tuple(files)) for sha, files in commits]


# ----------------------------------------------------------------------------- spans


@dataclass
class _Span:
    patch: int  # index in the series
    hunk: int  # 1-based, counted over the whole patch
    path: str
    start: int
    end: int
    added: frozenset[str]  # the hunk's distinctive added lines, normalized
    removed: frozenset[str]

    @property
    def whole(self) -> bool:
        return self.end >= WHOLE


def _norm(lines: Sequence[str], distinctive_only: bool) -> frozenset[str]:
    return frozenset(normalized(x) for x in lines
                     if normalized(x) and (not distinctive_only or _distinctive(x)))


def spans(patches: Sequence[DriftPatch], at_pin: Mapping[str, object | None]) -> list[_Span]:
    """Every hunk of every patch as a span of the pinned upstream file. `at_pin[path]`
    is None for a path upstream does not have at the pin."""
    out = []
    for j, patch in enumerate(patches):
        earlier = patches[:j]
        number = 0
        for fp in patch.files:
            for h in fp.hunks:
                number += 1
                path = fp.old_path or fp.new_path
                if path is None:
                    continue
                added, removed = _norm(h.added, True), _norm(h.removed, True)
                if fp.old_path is None or at_pin.get(path) is None:
                    out.append(_Span(j, number, path, 1, WHOLE, added, removed))
                    continue
                s, e = old_span(h)
                out.append(_Span(j, number, path, map_back(s, path, earlier),
                                 max(map_back(e, path, earlier), map_back(s, path, earlier)),
                                 added, removed))
    return out


def _touches(c: Change, s: _Span) -> bool:
    if s.whole:
        return True
    if c.end > c.start:
        return c.start < s.end and c.end > s.start
    return s.start < c.start < s.end or c.start == s.start == s.end


def _moved(x: int, changes: Sequence[Change], end: bool) -> int:
    """Where boundary `x` (just before old line x) is after `changes`. Insertions right at
    a span's edge stay outside it; a removed edge goes to the replacement's edge."""
    delta = 0
    for c in changes:
        if c.end < x or (c.end == x and (c.end > c.start or not end)):
            delta += len(c.added) - (c.end - c.start)
        elif c.start <= x < c.end:
            return c.start + delta + (len(c.added) if end else 0)
    return x + delta


# ----------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class Hit:
    """One upstream commit that changed lines of one patch."""

    patch: str
    commit: str
    index: int  # position in the walk (1 = first commit after the pin)
    hunks: tuple[int, ...]
    files: tuple[str, ...]
    resembles: bool
    shared: int  # the patch's distinctive added lines the commit also adds
    of: int  # distinctive added lines of the overlapped hunks
    same_lines: bool = False  # it removes (rewrites) a line the patch removes


def overlaps(patches: Sequence[DriftPatch], at_pin: Mapping[str, object | None],
             log: Sequence[tuple[str, tuple[FileDiff, ...]]]) -> list[Hit]:
    """Every (patch, commit) overlap along `log` (oldest first), in walk order."""
    live = spans(patches, at_pin)
    by_path: dict[str, list[_Span]] = {}
    for s in live:
        by_path.setdefault(s.path, []).append(s)
    hits: list[Hit] = []
    for index, (sha, files) in enumerate(log, 1):
        found: dict[int, dict] = {}
        for fd in files:
            path = fd.old_path if fd.old_path is not None else fd.new_path
            if path is None or path not in by_path:
                continue
            changes = sorted(fd.changes, key=lambda c: (c.start, c.end))
            for s in by_path[path]:
                if fd.old_path is None and not s.whole:
                    continue  # created where the patch edits an existing file: not its lines
                touching = [c for c in changes if _touches(c, s)]
                if fd.new_path is None and not touching:
                    touching = list(changes) or [Change(1, 1, (), ())]
                if touching:
                    near = [c for c in changes if s.whole or
                            (c.start < s.end + NEAR and c.end + NEAR > s.start)]
                    up_added = _norm([x for c in near for x in c.added], False)
                    up_removed = _norm([x for c in near for x in c.removed], False)
                    shared = s.added & up_added
                    alike = bool(shared) and (bool(s.removed & up_removed)
                                              or 2 * len(shared) >= len(s.added))
                    f = found.setdefault(s.patch, {"hunks": [], "files": [], "alike": False,
                                                   "shared": 0, "of": 0, "same": False})
                    f["same"] = f["same"] or bool(s.removed & up_removed)
                    f["hunks"].append(s.hunk)
                    if path not in f["files"]:
                        f["files"].append(path)
                    f["alike"] = f["alike"] or alike
                    f["shared"] += len(shared)
                    f["of"] += len(s.added)
                if not s.whole:
                    s.start, s.end = _moved(s.start, changes, False), _moved(s.end, changes, True)
            if fd.new_path is None:
                by_path.pop(path, None)  # the file is gone: nothing left to overlap
            elif fd.old_path is not None and fd.new_path != fd.old_path:
                by_path[fd.new_path] = by_path.pop(path)
        for j in sorted(found):
            f = found[j]
            hits.append(Hit(patches[j].name, sha, index, tuple(f["hunks"]), tuple(f["files"]),
                            f["alike"], f["shared"], f["of"], f["same"]))
    return hits
