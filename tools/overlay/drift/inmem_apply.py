"""Apply unified-diff hunks to text in memory, the way patch(1) judges them.

A hunk applies *exactly at the recorded line* (clean), *exactly elsewhere* (offset,
with the shift in lines), or only once up to `max_fuzz` leading and trailing
context lines are ignored (fuzz, like `patch --fuzz`). Reverse application swaps
the two sides of every hunk; it is how "already merged" is recognised.

Everything here is pure: text in, text out, no git, no files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from overlay.errors import OverlayError
from overlay.series.patchfile import unquote_path

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_GIT = "diff --git "


def split_lines(text: str) -> list[str]:
    """Lines with their '\\n' kept; only '\\n' ends a line (form feeds stay inside)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # last line without a newline
    return lines


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based line of the hunk's first old line (0: empty old side)
    new_start: int
    old: tuple[str, ...]  # context and removed lines, in order
    new: tuple[str, ...]  # context and added lines, in order
    lead: int  # leading context lines (common to both sides)
    trail: int  # trailing context lines

    def reversed(self) -> "Hunk":
        return Hunk(self.new_start, self.old_start, self.new, self.old, self.lead, self.trail)

    @property
    def added(self) -> tuple[str, ...]:
        return self.new[self.lead:len(self.new) - self.trail]

    @property
    def removed(self) -> tuple[str, ...]:
        return self.old[self.lead:len(self.old) - self.trail]


@dataclass(frozen=True)
class FilePatch:
    old_path: str | None  # None: the patch creates the file
    new_path: str | None  # None: the patch deletes the file
    hunks: tuple[Hunk, ...]
    binary: bool = False

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))

    def reversed(self) -> "FilePatch":
        return FilePatch(self.new_path, self.old_path,
                         tuple(h.reversed() for h in self.hunks), self.binary)


# ----------------------------------------------------------------------------- parsing


def _unquote(path: str) -> str:
    # git C-quotes unusual paths; the mail was vetted by patchfile, which decodes them alike
    try:
        return unquote_path(path)
    except ValueError:
        return path


def _strip(path: str, prefix: str) -> str | None:
    path = _unquote(path.split("\t", 1)[0].rstrip("\n"))
    if path == "/dev/null":
        return None
    return path[len(prefix):] if path.startswith(prefix) else path


def parse_diff(diff: str, shown: str = "<patch>") -> tuple[FilePatch, ...]:
    """The file patches of a `git diff` text (what follows a mail's headers)."""
    lines = split_lines(diff)
    files: list[FilePatch] = []
    i = 0
    n = len(lines)
    while i < n:
        if not lines[i].startswith(_DIFF_GIT):
            i += 1
            continue
        header = lines[i][len(_DIFF_GIT):].rstrip("\n")
        old_path: str | None = None
        new_path: str | None = None
        created = deleted = binary = False
        if header.startswith("a/") and " b/" in header:
            a, b = header[2:].split(" b/", 1)
            old_path, new_path = a, b
        i += 1
        while i < n and not lines[i].startswith(("@@", _DIFF_GIT)):
            line = lines[i]
            if line.startswith("--- "):
                old_path = _strip(line[4:], "a/")
            elif line.startswith("+++ "):
                new_path = _strip(line[4:], "b/")
            elif line.startswith("rename from "):
                old_path = _unquote(line[12:].rstrip("\n"))
            elif line.startswith("rename to "):
                new_path = _unquote(line[10:].rstrip("\n"))
            elif line.startswith("new file mode"):
                created = True
            elif line.startswith("deleted file mode"):
                deleted = True
            elif line.startswith(("Binary files ", "GIT binary patch")):
                binary = True
            i += 1
        if created:
            old_path = None
        if deleted:
            new_path = None
        hunks: list[Hunk] = []
        while i < n and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise OverlayError(f"malformed hunk header {lines[i].strip()!r}", path=shown)
            old_start, new_start = int(m.group(1)), int(m.group(3))
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            i += 1
            old: list[str] = []
            new: list[str] = []
            kinds: list[str] = []
            while len(old) < old_len or len(new) < new_len:
                if i >= n:
                    raise OverlayError(f"hunk at -{old_start} of {new_path or old_path} is truncated",
                                       path=shown)
                line = lines[i]
                tag, body = line[:1], line[1:]
                if line == "\n":  # a mailer stripped a blank context line's space
                    tag, body = " ", "\n"
                if tag == " ":
                    old.append(body)
                    new.append(body)
                elif tag == "-":
                    old.append(body)
                elif tag == "+":
                    new.append(body)
                elif tag == "\\":
                    _no_newline(kinds, old, new)
                    i += 1
                    continue
                else:
                    raise OverlayError(f"unexpected line in hunk at -{old_start} of "
                                       f"{new_path or old_path}: {line.rstrip()!r}", path=shown)
                kinds.append(tag)
                i += 1
            if i < n and lines[i].startswith("\\"):
                _no_newline(kinds, old, new)
                i += 1
            lead = 0
            while lead < len(kinds) and kinds[lead] == " ":
                lead += 1
            trail = 0
            while trail < len(kinds) - lead and kinds[len(kinds) - 1 - trail] == " ":
                trail += 1
            hunks.append(Hunk(old_start, new_start, tuple(old), tuple(new), lead, trail))
        files.append(FilePatch(old_path, new_path, tuple(hunks), binary))
    return tuple(files)


def _no_newline(kinds: list[str], old: list[str], new: list[str]) -> None:
    """'\\ No newline at end of file' applies to the line just before it."""
    if not kinds:
        return
    last = kinds[-1]
    if last in (" ", "-") and old:
        old[-1] = old[-1].rstrip("\n")
    if last in (" ", "+") and new:
        new[-1] = new[-1].rstrip("\n")


# ----------------------------------------------------------------------------- applying

CLEAN, OFFSET, FUZZ, FAIL = "clean", "offset", "fuzz", "fail"


@dataclass(frozen=True)
class FileResult:
    status: str  # clean | offset | fuzz | fail
    text: str | None = None  # the file after the patch (None: deleted or failed)
    shift: int = 0  # largest |shift| of a hunk from its recorded line
    fuzz: int = 0  # largest context reduction used
    failed_hunk: int | None = None  # 1-based hunk number that did not apply
    reason: str = ""


def _positions(src: list[str], line: str, lo: int) -> list[int]:
    """Every index of `line` in `src` at or after `lo` (list.index scans at C speed)."""
    out = []
    k = lo - 1
    try:
        while True:
            k = src.index(line, k + 1)
            out.append(k)
    except ValueError:
        return out


def _find(src: list[str], old: tuple[str, ...], guess: int, lo: int) -> int | None:
    """The match of `old` at or after `lo` nearest to `guess` (ties: the earlier one)."""
    if not old:
        return min(max(guess, lo), len(src))
    n = len(old)
    if 0 <= guess and lo <= guess and tuple(src[guess:guess + n]) == old:
        return guess
    # Anchor on the hunk's longest line: the likeliest to be rare in the file.
    k = max(range(n), key=lambda i: len(old[i]))
    starts = [p - k for p in _positions(src, old[k], lo + k) if p - k + n <= len(src)]
    starts.sort(key=lambda s: (abs(s - guess), s))
    for s in starts:
        if tuple(src[s:s + n]) == old:
            return s
    return None


def apply_hunks(text: str, hunks: tuple[Hunk, ...], max_fuzz: int = 2) -> FileResult:
    """Apply hunks in order to `text`; the result's status is the worst hunk's."""
    src = split_lines(text)
    out: list[str] = []
    cur = 0
    last_shift = 0
    worst_shift = 0
    worst_fuzz = 0
    for number, h in enumerate(hunks, 1):
        placed = None
        for fuzz in range(0, max_fuzz + 1):
            a, b = min(fuzz, h.lead), min(fuzz, h.trail)
            if fuzz and (a, b) == (min(fuzz - 1, h.lead), min(fuzz - 1, h.trail)):
                continue  # no more context to drop: same search as before
            old = h.old[a:len(h.old) - b]
            new = h.new[a:len(h.new) - b]
            recorded = (h.old_start - 1 if h.old else h.old_start) + a
            pos = _find(src, old, recorded + last_shift, cur)
            if pos is not None:
                placed = (pos, old, new, fuzz, recorded)
                break
        if placed is None:
            return FileResult(FAIL, failed_hunk=number,
                              reason=f"hunk #{number} (line {h.old_start}) does not apply")
        pos, old, new, fuzz, recorded = placed
        out.extend(src[cur:pos])
        out.extend(new)
        cur = pos + len(old)
        last_shift = pos - recorded
        worst_shift = max(worst_shift, abs(last_shift))
        worst_fuzz = max(worst_fuzz, fuzz)
    out.extend(src[cur:])
    status = FUZZ if worst_fuzz else OFFSET if worst_shift else CLEAN
    return FileResult(status, "".join(out), worst_shift, worst_fuzz)


def apply_file(current: str | None, fp: FilePatch, max_fuzz: int = 2,
               target_exists: bool = False) -> FileResult:
    """Apply one file patch to the current text of its old path (None: absent).

    `target_exists` says whether a file already sits at a rename's or creation's
    new path (which makes the patch fail, as `git apply` would).
    """
    if fp.binary:
        return FileResult(FAIL, reason="binary change: cannot be checked as text")
    if fp.old_path is None:  # creation
        if current is not None or target_exists:
            return FileResult(FAIL, reason=f"{fp.new_path} already exists")
        return apply_hunks("", fp.hunks, 0)
    if current is None:
        return FileResult(FAIL, reason=f"{fp.old_path} does not exist")
    if fp.new_path is not None and fp.new_path != fp.old_path and target_exists:
        return FileResult(FAIL, reason=f"rename target {fp.new_path} already exists")
    result = apply_hunks(current, fp.hunks, max_fuzz)
    if fp.new_path is None and result.status != FAIL:
        if result.text:  # a deletion must remove everything, as git apply insists
            return FileResult(FAIL, reason=f"{fp.old_path} has content the deletion does not remove")
        return FileResult(result.status, None, result.shift, result.fuzz)
    return result


def normalized(line: str) -> str:
    """A line with all whitespace removed: survives re-indentation and re-spacing."""
    return "".join(line.split())
