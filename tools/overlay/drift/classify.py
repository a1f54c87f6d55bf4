"""Classify each patch of a series against one upstream snapshot (pure).

Series semantics: patches are checked in order, each on top of the ones before it
that applied (their in-memory results), exactly as composing would stack them.

Decision order for one patch (the first rule that holds decides):

0. merged, rule `upstream-commit` (provenance, ahead of every text rule): every
   upstream commit the entry names (`upstream-commit:`) is an ancestor of the
   snapshot, so upstream carries the backport whatever its text became (the caller
   says which are); when only some are, the verdict names the missing ones and the
   text rules decide;
1. forward, exact: `clean` at the recorded lines, or `offset` when hunks moved;
2. merged, rule `reverse`: the patch reverse-applies exactly (its result is there);
3. merged, rule `patch-id`: an upstream commit in the checked range has the same
   `git patch-id --stable` (the caller says which);
4. `missing`: a file it modifies is absent (the caller supplies rename hints);
5. `fuzz`: forward applies only with reduced context (up to `max_fuzz` lines; 0, the
   default, is `git am`'s rule, which `overlay apply` uses: exact context, at any offset,
   so a patch this rule alone would pass is a `conflict` unless asked for);
6. merged, rule `likely`: per hunk, the added lines are present whitespace-
   insensitively, in order and together (however upstream wrapped them, black's
   trailing commas aside), near the hunk's place; at least one of them is
   distinctive (not `return None`, `pass`, a bracket); and something the hunk
   removes is gone, or, for a pure addition, the block sits next to its context:
   upstream merged it in a reformatted form. Clearly labelled "likely", since it
   is a heuristic;
7. `conflict`: none of the above.

`blocked`: a patch is not checked when an earlier patch *of the same series* that
touches one of its files failed (conflict, missing, or itself blocked): its input
would not be the text it was written against. Patches on other files are checked
normally: one failure must not hide the state of the rest of the series.
A merged patch does not block: upstream's text already carries its change.
A blocked patch is still checked *alone*: on the state without the failed patches
(upstream's text where they would have written), with its hunks moved to where they
sit without them (`lines.rebased`); the verdict carries that class as `alone`.
"""

from __future__ import annotations

import itertools
import keyword
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Hashable, Mapping

from overlay.drift.inmem_apply import (CLEAN, FAIL, FUZZ, OFFSET, FilePatch, FileResult, Hunk,
                                       apply_file, normalized, split_lines)
from overlay.drift.lines import rebased
from overlay.drift.patch import DriftPatch

CLASSES = ("clean", "offset", "fuzz", "merged", "conflict", "missing", "blocked")
APPLIES = frozenset({"clean", "offset", "fuzz"})
FAILED = frozenset({"conflict", "missing", "blocked"})
MERGED_RULES = ("upstream-commit", "reverse", "patch-id", "likely")

# "likely merged" looks this many lines around a hunk's recorded place (plus the
# hunk's own length): far enough for upstream's neighbouring edits, near enough
# that a common line elsewhere in the file does not count.
LIKELY_RADIUS = 60
# Upstream may put this many lines of its own inside the block it merged (a comment,
# a log call) and it still counts as the patch's block.
LIKELY_GAP = 2
# A pure addition must be found within this many (non-blank) lines of its context.
LIKELY_ANCHOR = 8
_WORD = re.compile(r"\w")
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+")
# Words whose lines say nothing by themselves: keywords and the most common constants.
_COMMON = frozenset(keyword.kwlist) | frozenset(
    {"self", "cls", "super", "print", "len", "0", "1", "args", "kwargs", "int", "str",
     "bool", "float", "list", "dict", "tuple", "set", "object", "Any", "Optional"})
_CLOSERS = (")", "]", "}")
_TRAILING_COMMA = re.compile(r",([)\]}])")


@dataclass(frozen=True)
class Verdict:
    patch: str
    cls: str  # one of CLASSES
    detail: str  # one human sentence
    rule: str | None = None  # merged: reverse | patch-id | likely
    shift: int = 0  # offset: largest hunk shift in lines
    fuzz: int = 0  # fuzz: context lines ignored
    blocked_by: str | None = None
    missing: tuple[str, ...] = ()
    moved_to: tuple[tuple[str, str], ...] = ()  # (old path, where it went)
    upstream_commit: str | None = None  # merged by patch-id: the matching commit
    landed: str | None = None  # the upstream commit that landed the change it carries
    # blocked: the class it gets on its own, checked as if the failed patches it builds
    # on were dropped (upstream's text in their place, which is upstream's own version
    # where upstream carries them)
    alone: str | None = None
    alone_rule: str | None = None
    alone_detail: str | None = None
    # provenance: the entry's upstream commits this snapshot holds, and those it lacks
    upstream_commits: tuple[str, ...] = ()
    missing_commits: tuple[str, ...] = ()
    superseded_by: str | None = None  # upstream's own version (PR), held by this snapshot
    superseded_commit: str | None = None

    @property
    def key(self) -> tuple:
        """What a scan reports a transition of: the class, the merged rule, and for a
        blocked patch its class alone. Alone, clean and offset count as one (it applies
        exactly either way): a blocked patch's hunks move whenever upstream edits
        around them, and each move would bury the changes that matter."""
        alone = "clean" if self.alone == "offset" else self.alone
        return (self.cls, self.rule, alone, self.alone_rule, self.superseded_by)

    def to_json(self) -> dict:
        out: dict = {"patch": self.patch, "class": self.cls, "detail": self.detail}
        if self.rule:
            out["rule"] = self.rule
        if self.cls == "offset":
            out["shift"] = self.shift
        if self.cls == "fuzz":
            out["fuzz"] = self.fuzz
        if self.blocked_by:
            out["blocked_by"] = self.blocked_by
        if self.missing:
            out["missing"] = list(self.missing)
        if self.moved_to:
            out["moved_to"] = {a: b for a, b in self.moved_to}
        if self.upstream_commit:
            out["upstream_commit"] = self.upstream_commit
        if self.landed:
            out["landed"] = self.landed
        if self.upstream_commits or self.missing_commits:
            out["upstream_commits"] = {"merged": list(self.upstream_commits),
                                       "missing": list(self.missing_commits)}
        if self.superseded_by:
            out["superseded_by"] = {"pr": self.superseded_by, "commit": self.superseded_commit}
        if self.alone:
            out["alone"] = {"class": self.alone, "detail": self.alone_detail or ""}
            if self.alone_rule:
                out["alone"]["rule"] = self.alone_rule
        return out


# A file version is named by a key: a blob id for upstream text, or a key the
# memo hands out for text a patch produced. `None` means the file is absent.
Key = Hashable
Reader = Callable[[Key], str]


@dataclass(frozen=True)
class _Check:
    cls: str
    detail: str
    rule: str | None
    shift: int
    fuzz: int
    missing: tuple[str, ...]
    outputs: tuple[tuple[str, Key | None], ...]  # new keys of the files it wrote
    upstream_commit: str | None


@dataclass
class Memo:
    """Results of checking one patch on given input versions, reused across commits.

    Upstream history changes a touched file rarely, so a scan re-checks a patch
    only on commits where one of its inputs changed.
    """

    checks: dict[tuple, _Check] = field(default_factory=dict)
    derived: dict[Key, str] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=itertools.count)
    hits: int = 0
    misses: int = 0

    def new_key(self, text: str) -> Key:
        key = ("derived", next(self._ids))
        self.derived[key] = text
        return key


def classify_series(patches: tuple[DriftPatch, ...], base: Mapping[str, Key | None],
                    read: Reader, *, merged_by_id: Mapping[str, str] | None = None,
                    renames: Mapping[str, str] | None = None,
                    memo: Memo | None = None,
                    held: frozenset[str] | None = None,
                    max_fuzz: int = 0) -> tuple[Verdict, ...]:
    """Verdicts for `patches` (in order) on the upstream snapshot `base`.

    `base` maps every path the patches touch to its upstream key (None: absent);
    `read(key)` returns upstream text; `merged_by_id[patch name]` is the upstream
    commit with the same patch-id, if any; `renames[path]` is where a missing path
    went; `held` is the set of the entries' upstream commits (`upstream-commit`,
    `superseded-by`) that are ancestors of the snapshot; `max_fuzz` the context lines a
    hunk may ignore (0: apply's rule). `memo` only caches: the verdicts do not depend on it.
    """
    memo = memo if memo is not None else Memo()
    merged_by_id = merged_by_id or {}
    renames = renames or {}
    held = held or frozenset()
    state: dict[str, Key | None] = dict(base)
    poisoned: dict[str, str] = {}  # path -> name of the failed patch that owns it
    failed: list[int] = []  # indexes of the patches that failed or were blocked
    verdicts: list[Verdict] = []

    def text_of(key: Key) -> str:
        derived = memo.derived.get(key)
        return derived if derived is not None else read(key)

    for index, patch in enumerate(patches):
        carried = tuple(c for c in patch.upstream_commits if c in held)
        lacking = tuple(c for c in patch.upstream_commits if c not in held)
        if carried and not lacking:
            # Provenance decides: upstream's text stays in place, and later patches
            # build on it (a merged patch blocks nothing).
            verdicts.append(_with_provenance(Verdict(
                patch.name, "merged", "carried upstream: its upstream-commit "
                + ", ".join(c[:12] for c in carried)
                + (" is an ancestor" if len(carried) == 1 else " are ancestors")
                + " of this commit", rule="upstream-commit"), patch, held))
            continue
        inputs = tuple(state.get(p) for p in patch.paths)
        upstream = merged_by_id.get(patch.name)
        blockers = [poisoned[p] for p in patch.paths if p in poisoned]
        # Blocked: check it alone, where it sits without the failed patches before it.
        dropped = tuple(patches[k].name for k in failed) if blockers else ()
        memo_key = (index, patch.name, inputs, upstream, dropped, max_fuzz)
        check = memo.checks.get(memo_key)
        if check is None:
            memo.misses += 1
            checked = rebased(patch, [patches[k] for k in failed]) if blockers else patch
            check = _check_patch(checked, dict(zip(patch.paths, inputs)), text_of, upstream, memo,
                                 max_fuzz)
            memo.checks[memo_key] = check
        else:
            memo.hits += 1
        if blockers:
            # The series verdict stays `blocked` (its input is not what it was written
            # against), but the check above ran on the state without the failed
            # patches: that is its class alone.
            blocker = blockers[0]
            verdicts.append(_with_provenance(Verdict(
                patch.name, "blocked", f"not checked in series: builds on {blocker}, which "
                f"failed; alone: {_alone_label(check)}", blocked_by=blocker, alone=check.cls,
                alone_rule=check.rule, alone_detail=check.detail), patch, held))
            for p in patch.paths:
                poisoned[p] = patch.name  # the nearest failed patch is the one to name
            failed.append(index)
            continue
        verdict = Verdict(patch.name, check.cls, check.detail, rule=check.rule, shift=check.shift,
                          fuzz=check.fuzz, missing=check.missing,
                          upstream_commit=check.upstream_commit)
        if check.cls == "missing":
            moved = tuple((p, renames[p]) for p in check.missing if p in renames)
            if moved:
                where = "; ".join(f"{a} was renamed to {b}" for a, b in moved)
                verdict = Verdict(patch.name, "missing", f"{check.detail}; {where}",
                                  missing=check.missing, moved_to=moved)
        verdicts.append(_with_provenance(verdict, patch, held))
        if check.cls in APPLIES:
            state.update(dict(check.outputs))
        elif check.cls in FAILED:
            for p in patch.paths:
                poisoned[p] = patch.name
            failed.append(index)
    return tuple(verdicts)


def _with_provenance(v: Verdict, patch: DriftPatch, held: frozenset[str]) -> Verdict:
    """The verdict with what the entry's provenance says at this snapshot: which of its
    upstream commits are there and which are not, and upstream's own version if the
    snapshot holds it."""
    carried = tuple(c for c in patch.upstream_commits if c in held)
    lacking = tuple(c for c in patch.upstream_commits if c not in held)
    detail = v.detail
    if carried and lacking:
        detail += (f"; upstream-commit: {', '.join(c[:12] for c in carried)} upstream, "
                   f"{', '.join(c[:12] for c in lacking)} not yet (the text rules decide)")
    superseded = pr = None
    if patch.superseded_by and patch.superseded_by[0] in held:
        superseded, pr = patch.superseded_by
        detail += (f"; superseded by upstream's own version {pr} ({superseded[:12]}): "
                   "port it on top of upstream's, or drop it")
    if detail == v.detail and not carried:
        return v
    return replace(v, detail=detail, upstream_commits=carried,
                   missing_commits=lacking if carried else (), superseded_by=pr,
                   superseded_commit=superseded)


def _alone_label(check: "_Check") -> str:
    text = f"{check.cls} ({check.rule})" if check.rule else check.cls
    return text if check.cls in ("clean",) else f"{text}, {check.detail}"


# ----------------------------------------------------------------------------- one patch

_RANK = {CLEAN: 0, OFFSET: 1, FUZZ: 2, FAIL: 3}


def _apply_sections(files: tuple[FilePatch, ...], inputs: Mapping[str, Key | None],
                    text_of: Reader, max_fuzz: int) -> list[tuple[FilePatch, FileResult]]:
    """Apply a patch's file sections in order. A section applies to the text the
    sections before it produced for its path (a patch may hold two `diff --git`
    sections for one file, as `git apply` accepts), else to the upstream input."""
    produced: dict[str, str | None] = {}

    def current(path: str | None) -> str | None:
        if path is None:
            return None
        if path in produced:
            return produced[path]
        key = inputs.get(path)
        return text_of(key) if key is not None else None

    out = []
    for fp in files:
        moves = fp.new_path is not None and fp.new_path != fp.old_path
        target_exists = moves and current(fp.new_path) is not None
        result = apply_file(current(fp.old_path), fp, max_fuzz, target_exists)
        out.append((fp, result))
        if result.status != FAIL:
            if fp.old_path and fp.old_path != fp.new_path:
                produced[fp.old_path] = None
            if fp.new_path:
                produced[fp.new_path] = result.text
    return out


def _forward(patch: DriftPatch, inputs: Mapping[str, Key | None], text_of: Reader,
             max_fuzz: int) -> list[tuple[FilePatch, FileResult]]:
    return _apply_sections(patch.files, inputs, text_of, max_fuzz)


def _check_patch(patch: DriftPatch, inputs: Mapping[str, Key | None], text_of: Reader,
                 upstream: str | None, memo: Memo, max_fuzz: int = 0) -> _Check:
    forward = _forward(patch, inputs, text_of, max_fuzz)
    worst = max((_RANK[r.status] for _, r in forward), default=0)
    shift = max((r.shift for _, r in forward), default=0)
    fuzz = max((r.fuzz for _, r in forward), default=0)

    def applied(cls: str, detail: str) -> _Check:
        outputs = []
        for fp, r in forward:
            if fp.old_path and fp.old_path != fp.new_path:
                outputs.append((fp.old_path, None))
            if fp.new_path:
                outputs.append((fp.new_path, memo.new_key(r.text or "")))
        return _Check(cls, detail, None, shift, fuzz, (), tuple(outputs), None)

    def moved_files() -> str:
        return ", ".join(fp.new_path or fp.old_path or "" for fp, r in forward if r.shift)

    if worst <= _RANK[OFFSET]:
        if worst == _RANK[CLEAN]:
            return applied("clean", "applies at the recorded lines")
        return applied("offset", f"applies exactly, hunks moved by up to {shift} "
                                 f"line{'s' if shift != 1 else ''} ({moved_files()})")
    if _reverse_applies(patch, inputs, text_of):
        return _Check("merged", "already upstream: the patch reverse-applies", "reverse",
                      0, 0, (), (), None)
    if upstream:
        return _Check("merged", f"already upstream: same patch-id as {upstream[:12]}",
                      "patch-id", 0, 0, (), (), upstream)
    missing = tuple(p for p in patch.modified if inputs.get(p) is None
                    and any(fp.old_path == p and fp.new_path for fp in patch.files))
    if missing:
        return _Check("missing", "gone upstream: " + ", ".join(missing), None, 0, 0, missing,
                      (), None)
    if worst == _RANK[FUZZ]:
        where = ", ".join(fp.new_path or fp.old_path or "" for fp, r in forward if r.fuzz)
        return applied("fuzz", f"applies only with fuzz {fuzz} (context changed in {where})")
    if _likely_merged(patch, inputs, text_of):
        return _Check("merged", "likely merged: the added lines are already present, in order, "
                                "near the same place (upstream reformatted them); verify, then drop",
                      "likely", 0, 0, (), (), None)
    fp, bad = next((fp, r) for fp, r in forward if r.status == FAIL)
    return _Check("conflict", f"{fp.new_path or fp.old_path}: {bad.reason}", None, 0, 0, (), (),
                  None)


def _reverse_applies(patch: DriftPatch, inputs: Mapping[str, Key | None],
                     text_of: Reader) -> bool:
    undo = tuple(fp.reversed() for fp in reversed(patch.files))
    return all(r.status != FAIL for _, r in _apply_sections(undo, inputs, text_of, 0))


def _window(lines: list[str], h: Hunk) -> list[str]:
    """Normalized non-blank lines near the hunk's place, in file order."""
    start = max(0, h.new_start - 1 - LIKELY_RADIUS)
    end = min(len(lines), h.new_start - 1 + len(h.new) + LIKELY_RADIUS)
    return [n for n in (normalized(line) for line in lines[start:end]) if n]


def _meaningful(line: str) -> bool:
    return len(_WORD.findall(line)) >= 3


def _distinctive(line: str) -> bool:
    """Whether finding this (raw, not normalized) line says something: `return None`, `pass`,
    `else:` or `)` occur everywhere, so their presence proves nothing."""
    return sum(len(w) for w in _TOKEN.findall(line) if w not in _COMMON) >= 3


def _canonical(norm: list[str]) -> list[str]:
    """Lines as formatters leave them comparable: no comma right before a closing
    bracket, on the same line or the next one (black's "magic trailing comma")."""
    out = []
    for k, line in enumerate(norm):
        line = _TRAILING_COMMA.sub(r"\1", line)
        if line.endswith(",") and k + 1 < len(norm) and norm[k + 1][:1] in _CLOSERS:
            line = line[:-1]
        out.append(line)
    return out


def _find_block(block: str, window: list[str]) -> tuple[int, int] | None:
    """Where `block` (the hunk's added lines, canonical and concatenated) sits in
    `window` as whole consecutive lines, however upstream wrapped or joined them, with
    at most LIKELY_GAP foreign lines inside: (first line, one past the last), or None.

    Whole lines: `v7=70` does not match inside `v7=70#merged`. Consecutive: lines
    scattered over the window, or in another order, are not the patch's code.
    """
    for s, first in enumerate(window):
        if not first or not block.startswith(first):
            continue
        at, gaps, k = len(first), 0, s + 1
        while at < len(block) and k < len(window):
            piece = window[k]
            if not piece:  # a lone trailing comma, dropped by _canonical
                pass
            elif block.startswith(piece, at):
                at += len(piece)
            elif gaps < LIKELY_GAP:
                gaps += 1
            else:
                break
            k += 1
        if at == len(block):
            return s, k
    return None


def _anchored(h: Hunk, window: list[str], where: tuple[int, int]) -> bool:
    """A pure addition must sit next to what is left of its context: with nothing
    removed, nothing else ties the found lines to the hunk."""
    lead = {normalized(line) for line in h.old[:h.lead]}
    trail = {normalized(line) for line in h.old[len(h.old) - h.trail:]}
    lead = {c for c in lead if _meaningful(c)}
    trail = {c for c in trail if _meaningful(c)}
    if not lead and not trail:
        return True  # no context worth naming (start of file, braces): the window decides
    s, e = where
    before = window[max(0, s - LIKELY_ANCHOR):s]
    after = window[e:e + LIKELY_ANCHOR]
    return any(c in lead for c in before) or any(c in trail for c in after)


def _likely_merged(patch: DriftPatch, inputs: Mapping[str, Key | None], text_of: Reader) -> bool:
    saw_change = False
    for fp in patch.files:
        path = fp.new_path or fp.old_path
        key = inputs.get(fp.new_path) if fp.new_path else None
        if key is None and fp.old_path:
            key = inputs.get(fp.old_path)
        if fp.new_path is None:  # a deletion is merged only when the file is gone
            if key is not None:
                return False
            continue
        if key is None or path is None:
            return False
        lines = split_lines(text_of(key))
        for h in fp.hunks:
            added = [normalized(line) for line in h.added if normalized(line)]
            removed = [normalized(line) for line in h.removed if normalized(line)]
            gone = [r for r in removed if r not in added]
            window = _window(lines, h)
            singles = set(window)
            if added:
                if not any(_distinctive(line) for line in h.added):
                    return False  # only common lines (`return None`, braces): proves nothing
                canon = _canonical(window)
                where = _find_block("".join(_canonical(added)), canon)
                if where is None:
                    return False
                if gone and all(r in singles for r in gone):
                    return False  # the old code is still there too
                if not gone and not _anchored(h, canon, where):
                    return False
            elif gone:
                context = [normalized(line) for line in h.old[:h.lead] + h.old[len(h.old) - h.trail:]]
                if any(r in singles for r in gone):
                    return False
                if not any(c in singles for c in context if c):
                    return False  # nothing left to tell where the hunk was
            else:
                continue
            saw_change = True
    return saw_change
