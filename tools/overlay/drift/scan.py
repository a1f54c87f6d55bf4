"""Drift against upstream: one snapshot (`onto`), a first-parent history (`scan`), or
the first failing commit by bisection (`bisect`).

The side effects live here: reading blobs, asking git for patch-ids and renames,
timing. The judging is `classify.classify_series`, which is pure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from overlay import gitcmd, reporting
from overlay.drift.blobs import BlobReader
from overlay.drift.classify import (APPLIES, DriftPatch, Memo, Verdict, classify_series)
from overlay.drift.overlap import overlaps, parse_log
from overlay.errors import OverlayError
from overlay.gitcmd import GitFailed
from overlay.series.model import FULL_SHA
from overlay.series.upstream import CommitInfo, commit_info, refs_in  # noqa: F401 - drift's callers import them here

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Transition:
    """A change of class, or of the rule that proves a patch merged (reverse ->
    patch-id when upstream edits the merged lines again: the evidence got weaker)."""

    before: str  # class before this commit
    after: Verdict  # verdict at this commit
    commit: CommitInfo
    index: int  # position in the first-parent walk (1 = first commit after the pin)
    before_rule: str | None = None  # merged rule before this commit
    before_alone: str | None = None  # blocked before this commit: its class alone
    before_alone_rule: str | None = None

    def to_json(self) -> dict:
        out = {"from": self.before, "to": self.after.cls, "index": self.index,
               **self.commit.to_json(), "verdict": self.after.to_json()}
        if self.before_rule:
            out["from_rule"] = self.before_rule
        if self.before_alone:
            out["from_alone"] = self.before_alone
        if self.before_alone_rule:
            out["from_alone_rule"] = self.before_alone_rule
        return out


@dataclass(frozen=True)
class Overlap:
    """An upstream commit that changed lines one patch's hunks touch."""

    patch: str
    commit: CommitInfo
    index: int  # position in the first-parent walk
    hunks: tuple[int, ...]  # the patch's hunks it touched (1-based, over the whole patch)
    files: tuple[str, ...]
    resembles: bool  # "upstream did this too": same lines, similar added text
    shared: int = 0  # the patch's distinctive added lines it also adds
    of: int = 0
    same_lines: bool = False  # it rewrote a line the patch removes

    def to_json(self) -> dict:
        return {**self.commit.to_json(), "index": self.index, "hunks": list(self.hunks),
                "files": list(self.files), "upstream_did_this_too": self.resembles,
                "rewrote_the_same_lines": self.same_lines,
                "shared_added_lines": self.shared, "patch_added_lines": self.of}


@dataclass(frozen=True)
class PatchHistory:
    patch: str
    at_pin: Verdict
    at_head: Verdict
    transitions: tuple[Transition, ...]


@dataclass(frozen=True)
class BisectResult:
    patch: str
    status: str  # "found" | "applies-at-head" | "fails-at-pin"
    checks: int  # snapshots this patch's search looked at
    commit: CommitInfo | None = None  # first commit where it stops applying
    index: int | None = None
    before: str | None = None  # class just before that commit
    verdict: Verdict | None = None


@dataclass(frozen=True)
class TargetRun:
    """One target checked against one ref: `onto` fills `verdicts`; `scan` also the rest."""

    target: str
    ref: str
    base: str  # the pinned commit
    head: str  # the resolved ref
    verdicts: tuple[Verdict, ...]  # at head
    commits: int = 0  # commits walked after the pin (scan)
    history: tuple[PatchHistory, ...] = ()
    bisect: tuple[BisectResult, ...] = ()
    seconds: float = 0.0
    snapshots: int = 0  # upstream snapshots classified
    stats: dict = field(default_factory=dict)
    overlap: tuple[Overlap, ...] = ()  # upstream commits on the patches' lines, pin..head


# ----------------------------------------------------------------------------- git helpers


def range_log(git_dir: Path, base: str, head: str, first_parent: bool = True) -> list[CommitInfo]:
    """Commits after `base` up to `head`, oldest first."""
    fmt = "%H%x00%cI%x00%an%x00%s"
    text = gitcmd.git(["log", *(["--first-parent"] if first_parent else []), "--reverse",
                       f"--format={fmt}", "--end-of-options", f"{base}..{head}"],
                      git_dir=gitcmd.data_view(git_dir), data=True).stdout
    commits = []
    for line in text.splitlines():
        sha, date, author, subject = line.split("\0", 3)
        commits.append(CommitInfo(sha, date, subject, author))
    return commits


def commit_log(git_dir: Path, base: str, head: str) -> list[CommitInfo]:
    """First-parent commits after `base` up to `head`, oldest first."""
    commits = range_log(git_dir, base, head)
    if not commits and head != base:
        raise OverlayError(f"{head[:12]} is not after the pinned commit {base[:12]}: nothing to walk",
                           hint="scan to a descendant of the pinned commit, or use --onto to "
                                "compare with an older or unrelated commit")
    if commits:
        # A root commit (a release archive's import) has no parent: no line of history.
        parent = gitcmd.git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{commits[0].sha}^"],
                            git_dir=gitcmd.data_view(git_dir), data=True, check=False).stdout.strip()
        if parent != base:
            raise OverlayError(f"{head[:12]} does not descend from the pinned commit {base[:12]} "
                               "along first parents", hint="scan to a ref on the pinned commit's "
                               "main line, or use --onto for a single comparison")
    return commits


def patch_ids(diffs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`git patch-id --stable` of each (name, diff text), in one process."""
    feed = []
    names = {}
    for k, (name, diff) in enumerate(diffs):
        fake = f"{k + 1:040x}"
        names[fake] = name
        feed.append(f"commit {fake}\n\n{diff if diff.endswith(chr(10)) else diff + chr(10)}")
    if not feed:
        return {}
    out = gitcmd.git(["patch-id", "--stable"], input="".join(feed)).stdout
    result = {}
    for line in out.splitlines():
        pid, commit = line.split()
        result[names[commit]] = pid
    return result


def upstream_log(git_dir: Path, base: str, head: str, paths: Sequence[str]) -> str:
    """The first-parent diffs of base..head limited to `paths` (newest first): the blob
    diffs of the touched files between consecutive commits, where a blob changed."""
    if not paths:
        return ""
    # Blob diffs as stored: no textconv, no external diff (a mirror's drivers never run).
    return gitcmd.git(["log", "--first-parent", "-p", "--no-color", "--no-renames", "--no-textconv",
                       "--no-ext-diff", "--format=commit %H", "--end-of-options",
                       f"{base}..{head}", "--", *paths],
                      git_dir=gitcmd.data_view(git_dir), data=True).stdout


def upstream_patch_ids(git_dir: Path, base: str, head: str, paths: Sequence[str],
                       log: str | None = None) -> list[tuple[str, str]]:
    """(patch-id, commit) of first-parent commits in base..head, diffs limited to `paths`.

    Limiting the diff to the patch's paths lets a patch match an upstream commit
    that also changed other files (a squash of a larger PR).
    """
    if log is None:
        log = upstream_log(git_dir, base, head, paths)
    if not log.strip():
        return []
    out = gitcmd.git(["patch-id", "--stable"], input=log).stdout
    return [tuple(line.split()) for line in out.splitlines()]  # type: ignore[misc]


def rename_hints(git_dir: Path, old: str, new: str, paths: Sequence[str]) -> dict[str, str]:
    """Where each of `paths` went between two commits, by git's rename detection."""
    if not paths:
        return {}
    out = gitcmd.git(["diff", "-M", "--name-status", "-z", "--diff-filter=R", "--no-textconv",
                      "--no-ext-diff", "--end-of-options", old, new],
                     git_dir=gitcmd.data_view(git_dir), data=True).stdout
    fields = out.split("\0")
    hints: dict[str, str] = {}
    k = 0
    while k + 2 < len(fields):
        status, src, dst = fields[k], fields[k + 1], fields[k + 2]
        if status.startswith("R") and src in paths:
            hints[src] = dst
        k += 3
    return hints


# ----------------------------------------------------------------------------- declared upstream

def declared_refs(patch: DriftPatch, slug: str) -> tuple[frozenset[int], tuple[str, ...]]:
    """PR numbers (of this target's repository) and commit ids a series entry names."""
    return refs_in(patch.upstream, slug)


def landed_in(patches: Sequence[DriftPatch], commits: Sequence[CommitInfo],
              slug: str) -> dict[str, int]:
    """Per patch, the walk position (1-based) of the first commit that lands the
    upstream change its series entry names (by PR number in the subject, or commit id)."""
    found: dict[str, int] = {}
    for patch in patches:
        prs, shas = declared_refs(patch, slug)
        if not prs and not shas:
            continue
        for i, c in enumerate(commits, 1):
            if (c.pr is not None and c.pr in prs) or any(c.sha.startswith(s) for s in shas):
                found[patch.name] = i
                break
    return found


def annotate(verdicts: tuple[Verdict, ...], landed: dict[str, CommitInfo]) -> tuple[Verdict, ...]:
    """Say so when the upstream change a patch carries has landed and it is not merged."""
    out = []
    for v in verdicts:
        c = landed.get(v.patch)
        if c is None or v.cls == "merged":
            out.append(v)
            continue
        pr = f" (#{c.pr})" if c.pr else ""
        out.append(replace(v, landed=c.sha, detail=f"{v.detail}; the upstream change it carries "
                           f"landed at {c.sha[:12]}{pr}: refresh it, or drop it if upstream's "
                           "version suffices"))
    return tuple(out)


# ----------------------------------------------------------------------------- the engine


class Drift:
    """Classifies a series for one target at any commit of its repository."""

    def __init__(self, git_dir: Path, base: str, patches: tuple[DriftPatch, ...],
                 diffs: dict[str, str], reader: BlobReader | None = None, slug: str = "",
                 max_fuzz: int = 0) -> None:
        self.git_dir = gitcmd.data_view(git_dir)  # a mirror is data: read it through a view
        self.slug = slug  # owner/name of the target: which PR numbers are its own
        self.max_fuzz = max_fuzz  # 0: `overlay apply`'s rule (git am: exact context, any offset)
        self.base = base
        self.patches = patches
        self.paths = tuple(dict.fromkeys(p for patch in patches for p in patch.paths))
        self.modified = tuple(dict.fromkeys(p for patch in patches for p in patch.modified))
        self.reader = reader or BlobReader(self.git_dir)
        self.memo = Memo()
        self.own_ids = patch_ids([(p.name, diffs[p.name]) for p in patches])
        self.snapshots = 0
        self._logs: dict[str, str] = {}
        self._held: dict[str, frozenset[str]] = {}

    def close(self) -> None:
        self.reader.close()

    # -- provenance: the upstream commits series entries name --------------------

    @property
    def named_commits(self) -> tuple[str, ...]:
        """Every upstream commit the entries name (`upstream-commit`, `superseded-by`)."""
        return tuple(dict.fromkeys(
            [c for p in self.patches for c in p.upstream_commits]
            + [p.superseded_by[0] for p in self.patches if p.superseded_by]))

    def held(self, head: str) -> frozenset[str]:
        """The named upstream commits that are ancestors of `head` (a commit the repository
        lacks is not): one `git rev-list` walk per head, whatever their number."""
        if head not in self._held:
            named = set(self.named_commits)
            self._held[head] = frozenset() if not named else frozenset(
                c for c in gitcmd.git(["rev-list", "--end-of-options", head], git_dir=self.git_dir,
                                      data=True).stdout.split() if c in named)
        return self._held[head]

    def arrivals(self, shas: Sequence[str]) -> dict[str, int]:
        """Per named commit, the first walk position (0 = the pin) whose commit holds it; a
        commit that never arrives is left out. `shas` is the first-parent walk: each commit
        holds what its first parent holds plus what its other parents bring in, so one read
        of the walk's commit graph (`rev-list --parents`) dates every commit in it."""
        if not shas or not self.named_commits:
            return {}
        out = dict.fromkeys(self.held(shas[0]), 0)
        if len(shas) == 1 or len(out) == len(set(self.named_commits)):
            return out
        graph = {}
        for line in gitcmd.git(["rev-list", "--parents", "--end-of-options", shas[-1], f"^{shas[0]}"],
                               git_dir=self.git_dir, data=True).stdout.splitlines():
            sha, *parents = line.split()
            graph[sha] = parents
        step: dict[str, int] = {}
        for i, sha in enumerate(shas[1:], 1):  # what walk position i brings in
            todo = [sha]
            while todo:
                c = todo.pop()
                if c in step or c not in graph:  # dated already, or held at the pin
                    continue
                step[c] = i
                todo.extend(graph[c])
        for c in self.named_commits:
            if c not in out and c in step:
                out[c] = step[c]
        return out

    def log(self, head: str) -> str:
        """`upstream_log` from the pin to `head`, read once per head (patch-ids and
        overlap both read it)."""
        if head not in self._logs:
            self._logs[head] = upstream_log(self.git_dir, self.base, head, self.paths)
        return self._logs[head]

    def overlap(self, head: str, commits: Sequence[CommitInfo]) -> tuple[Overlap, ...]:
        """Upstream commits among `commits` (the first-parent walk from the pin to
        `head`) that changed the lines each patch's hunks touch."""
        if not commits:
            return ()
        walk = list(reversed(parse_log(self.log(head))))
        at_pin = self.reader.oids(self.base, self.paths)
        info = {c.sha: (i, c) for i, c in enumerate(commits, 1)}
        found = []
        for hit in overlaps(self.patches, at_pin, walk):
            if hit.commit not in info:
                continue
            index, commit = info[hit.commit]
            found.append(Overlap(hit.patch, commit, index, hit.hunks, hit.files, hit.resembles,
                                 hit.shared, hit.of, hit.same_lines))
        return tuple(found)

    def merged_ids(self, head: str) -> dict[str, list[str]]:
        """Per patch, the upstream commits in base..head (oldest first) with its patch-id."""
        found: dict[str, list[str]] = {}
        by_id: dict[str, list[str]] = {}
        for name, pid in self.own_ids.items():
            by_id.setdefault(pid, []).append(name)
        if not by_id:
            return found
        for pid, commit in reversed(upstream_patch_ids(self.git_dir, self.base, head, self.paths,
                                                       self.log(head))):
            for name in by_id.get(pid, ()):
                found.setdefault(name, []).append(commit)
        return found

    def classify(self, commit: str, oids: dict[str, str | None] | None = None,
                 merged: dict[str, str] | None = None,
                 renames: dict[str, str] | None = None,
                 held: frozenset[str] | None = None) -> tuple[Verdict, ...]:
        if oids is None:
            oids = self.reader.oids(commit, self.paths)
        # Changed blobs are about to be read: fetch them in one round trip.
        self.reader.prefetch(oids.values())
        self.snapshots += 1
        return classify_series(self.patches, oids, self.reader.text, merged_by_id=merged,
                               renames=renames, memo=self.memo, held=held,
                               max_fuzz=self.max_fuzz)

    def hints_for(self, old: str, new: str, oids: dict[str, str | None]) -> dict[str, str]:
        gone = [p for p in self.modified if oids.get(p) is None]
        return rename_hints(self.git_dir, old, new, gone) if gone else {}

    # -- one snapshot ----------------------------------------------------------

    def onto(self, head: str) -> tuple[Verdict, ...]:
        merged = {n: c[0] for n, c in self.merged_ids(head).items()}
        oids = self.reader.oids(head, self.paths)
        verdicts = self.classify(head, oids, merged, self.hints_for(self.base, head, oids),
                                 self.held(head))
        if any(p.upstream for p in self.patches):
            commits = range_log(self.git_dir, self.base, head, first_parent=False)
            landed = landed_in(self.patches, commits, self.slug)
            verdicts = annotate(verdicts, {n: commits[i - 1] for n, i in landed.items()})
        return verdicts

    # -- linear scan -----------------------------------------------------------

    def scan(self, commits: Sequence[CommitInfo], head: str,
             progress: Progress | None = None) -> tuple[tuple[Verdict, ...], list[tuple[Verdict, ...]]]:
        """Verdicts at the pin and at every commit (oldest first)."""
        index_of = {c.sha: i for i, c in enumerate(commits, 1)}
        merged_sha = self.merged_ids(head)
        shas = [self.base] + [c.sha for c in commits]
        landed = landed_in(self.patches, commits, self.slug)
        arrived = self.arrivals(shas)
        renames: dict[str, str] = {}
        previous_oids: dict[str, str | None] | None = None
        previous_key = None
        previous: tuple[Verdict, ...] = ()
        results: list[tuple[Verdict, ...]] = []
        for i, sha in enumerate(shas):
            oids = self.reader.oids(sha, self.paths)
            merged = {n: c for n, cs in merged_sha.items()
                      if (c := _first_at(cs, index_of, i)) is not None}
            if previous_oids is not None:
                for p in self.modified:
                    if oids.get(p) is None and previous_oids.get(p) is not None:
                        renames.update(rename_hints(self.git_dir, shas[i - 1], sha, [p]))
                    elif oids.get(p) is not None:
                        renames.pop(p, None)
            held = frozenset(c for c, at in arrived.items() if at <= i)
            key = (tuple(oids.values()), tuple(sorted(merged.items())), tuple(sorted(renames.items())),
                   held)
            if key == previous_key:
                verdicts = previous  # nothing the series reads changed
            else:
                verdicts = self.classify(sha, oids, merged, renames, held)
            previous_oids, previous_key, previous = oids, key, verdicts
            results.append(annotate(verdicts, {n: commits[at - 1] for n, at in landed.items()
                                               if at <= i}))
            if progress and (i % 50 == 0 or i == len(shas) - 1):
                progress(f"scanned {i}/{len(shas) - 1} commits")
        return results[0], results[1:]

    # -- bisection -------------------------------------------------------------

    def bisect(self, commits: Sequence[CommitInfo], head: str,
               progress: Progress | None = None) -> tuple[list[BisectResult], tuple[Verdict, ...]]:
        """Per patch, the first commit where it stops applying; and the verdicts at head.

        One shared search over the walk: an interval is split only while some patch
        applies at its start and not at its end, so k breaking patches cost about
        2 + k*log2(n) snapshots, and each patch's own search log2(n) + 2.
        Assumes what bisection always assumes: once a patch stops applying it does
        not start again (the linear scan shows every transition when it does).
        """
        index_of = {c.sha: i for i, c in enumerate(commits, 1)}
        merged_sha = self.merged_ids(head)
        shas = [self.base] + [c.sha for c in commits]
        n = len(shas) - 1
        count = len(self.patches)
        cache: dict[int, tuple[Verdict, ...]] = {}
        looked: list[set[int]] = [set() for _ in range(count)]

        arrived = self.arrivals(shas)

        def merged_at(i: int) -> dict[str, str]:
            return {name: c for name, cs in merged_sha.items()
                    if (c := _first_at(cs, index_of, i)) is not None}

        def held_at(i: int) -> frozenset[str]:
            return frozenset(c for c, at in arrived.items() if at <= i)

        def at(i: int) -> tuple[Verdict, ...]:
            if i not in cache:
                cache[i] = self.classify(shas[i], None, merged_at(i), None, held_at(i))
                if progress:
                    progress(f"bisect: {len(cache)} snapshots")
            return cache[i]

        def applies(i: int, who: Sequence[int]) -> tuple[bool, ...]:
            for j in who:
                looked[j].add(i)
            return tuple(v.cls in APPLIES for v in at(i))

        everyone = range(count)
        first_fail: dict[int, int] = {}
        stack = [(0, n, applies(0, everyone), applies(n, everyone))]
        while stack:
            lo, hi, ok_lo, ok_hi = stack.pop()
            pending = [j for j in everyone if ok_lo[j] and not ok_hi[j]]
            if not pending:
                continue
            if hi - lo == 1:
                for j in pending:
                    first_fail[j] = hi
                continue
            mid = (lo + hi) // 2
            ok_mid = applies(mid, pending)
            stack.append((mid, hi, ok_mid, ok_hi))
            stack.append((lo, mid, ok_lo, ok_mid))

        def with_hints(i: int) -> tuple[Verdict, ...]:
            """Re-check a snapshot with rename hints when a file is missing, as the scan does."""
            verdicts = at(i)
            if i == 0 or not any(v.cls == "missing" for v in verdicts):
                return verdicts
            oids = self.reader.oids(shas[i], self.paths)
            prev = self.reader.oids(shas[i - 1], self.paths)
            gone = [p for p in self.modified if oids.get(p) is None and prev.get(p) is not None]
            renames = rename_hints(self.git_dir, shas[i - 1], shas[i], gone) if gone else {}
            return self.classify(shas[i], oids, merged_at(i), renames, held_at(i))

        landed = landed_in(self.patches, commits, self.slug)

        def noted(i: int, verdicts: tuple[Verdict, ...]) -> tuple[Verdict, ...]:
            return annotate(verdicts, {name: commits[k - 1] for name, k in landed.items() if k <= i})

        results = []
        for j, patch in enumerate(self.patches):
            if j in first_fail:
                hi = first_fail[j]
                results.append(BisectResult(patch.name, "found", len(looked[j]), commits[hi - 1], hi,
                                            at(hi - 1)[j].cls, noted(hi, with_hints(hi))[j]))
            elif at(0)[j].cls not in APPLIES:
                results.append(BisectResult(patch.name, "fails-at-pin", len(looked[j]), None, 0,
                                            None, at(0)[j]))
            else:
                results.append(BisectResult(patch.name, "applies-at-head", len(looked[j])))
        end_line(progress)
        oids = self.reader.oids(head, self.paths)
        at_head = (self.classify(head, oids, merged_at(n), self.hints_for(self.base, head, oids),
                                 held_at(n))
                   if any(v.cls == "missing" for v in at(n)) else at(n))
        return results, noted(n, at_head)


def _first_at(commits: Sequence[str], index_of: dict[str, int], i: int) -> str | None:
    """The first of `commits` (oldest first) at or before walk position `i`."""
    for c in commits:
        at = index_of.get(c)
        if at is not None and at <= i:
            return c
    return None


def histories(patches: tuple[DriftPatch, ...], at_pin: tuple[Verdict, ...],
              walk: Sequence[tuple[Verdict, ...]], commits: Sequence[CommitInfo]) -> tuple[PatchHistory, ...]:
    """Per patch, each commit where its class, its merged rule, or (blocked) its class
    alone changed."""
    out = []
    for j, patch in enumerate(patches):
        before = at_pin[j]
        changes = []
        for i, verdicts in enumerate(walk):
            v = verdicts[j]
            if v.key != before.key:
                changes.append(Transition(before.cls, v, commits[i], i + 1, before.rule,
                                          before.alone, before.alone_rule))
                before = v  # "from" names what the last transition reported
        out.append(PatchHistory(patch.name, at_pin[j], walk[-1][j] if walk else at_pin[j],
                                tuple(changes)))
    return tuple(out)


def stderr_progress(enabled: bool) -> Progress | None:
    """One live progress line on a terminal only; machine-readable runs stay quiet."""
    return reporting.progress("drift", quiet=not enabled, live=True)


def end_line(progress: Progress | None) -> None:
    """End a live progress line (so the next output starts on its own line)."""
    close = getattr(progress, "close", None)
    if close is not None:
        close()


def timed_scan(engine: Drift, target: str, ref: str, head: str, commits: Sequence[CommitInfo],
               bisect: bool, progress: Progress | None = None) -> TargetRun:
    started = time.perf_counter()
    if bisect:
        found, at_head = engine.bisect(commits, head, progress)
        overlap = engine.overlap(head, commits)
        seconds = time.perf_counter() - started
        return TargetRun(target, ref, engine.base, head, at_head, len(commits), (), tuple(found),
                         seconds, engine.snapshots, _stats(engine), overlap)
    at_pin, walk = engine.scan(commits, head, progress)
    overlap = engine.overlap(head, commits)
    seconds = time.perf_counter() - started
    end_line(progress)
    hist = histories(engine.patches, at_pin, walk, commits)
    return TargetRun(target, ref, engine.base, head, walk[-1] if walk else at_pin, len(commits),
                     hist, (), seconds, engine.snapshots, _stats(engine), overlap)


def timed_onto(engine: Drift, target: str, ref: str, head: str) -> TargetRun:
    """One snapshot at `head`; the overlap too when `head` descends from the pin along
    first parents (otherwise there is no single line of history to walk)."""
    started = time.perf_counter()
    verdicts = engine.onto(head)
    try:
        commits = commit_log(engine.git_dir, engine.base, head)
    except OverlayError:
        commits = []
    overlap = engine.overlap(head, commits)
    return TargetRun(target, ref, engine.base, head, verdicts,
                     seconds=time.perf_counter() - started, snapshots=engine.snapshots,
                     overlap=overlap)


def _stats(engine: Drift) -> dict:
    return {"paths": len(engine.paths), "path_lookups": engine.reader.requests,
            "blob_reads": engine.reader.reads, "patch_checks": engine.memo.misses,
            "reused_checks": engine.memo.hits}


def changed_paths(git_dir: Path, commits) -> dict[str, set[str]]:
    """commit -> the paths it changed (against its first parent; a root commit against the
    empty tree; a merge: none), for all `commits` in one `git diff-tree --stdin`. A
    commit git cannot read fails as `git diff-tree COMMIT` would (GitFailed)."""
    wanted = list(dict.fromkeys(commits))
    if not wanted:
        return {}
    for commit in wanted:
        if not FULL_SHA.match(commit):  # a line git would not read as a commit
            raise GitFailed(["diff-tree", commit], 128, "", f"fatal: bad object {commit}\n")
    # --always: every commit prints its id, an empty change too, so each section is known
    out = gitcmd.out(["diff-tree", "--stdin", "--always", "--name-only", "-r", "-z", "--root"],
                     git_dir=git_dir, input="".join(c + "\n" for c in wanted))
    found: dict[str, set[str]] = {}
    current: set[str] | None = None
    at = 0
    for chunk in out.split("\0"):
        if at < len(wanted) and chunk == wanted[at]:  # the next commit's id
            current = found[wanted[at]] = set()
            at += 1
        elif chunk and current is not None:
            current.add(chunk)
    missing = [c for c in wanted if c not in found]
    if missing:
        raise GitFailed(["diff-tree", missing[0]], 128, "", f"fatal: bad object {missing[0]}\n")
    return found


def carried_by_upstream_all(git_dir: Path, head: str, patches) -> dict[str, tuple[list[str], list[str], set]]:
    """patch name -> carried_by_upstream for each of `patches`, with one `git diff-tree
    --stdin` for all their upstream commits and one reader for REF's files."""
    patches = list(patches)
    if not patches:
        return {}
    changed = changed_paths(git_dir, [c for p in patches for c in p.upstream_commits])
    with BlobReader(git_dir) as reader:
        return {p.name: carried_by_upstream(git_dir, head, p, changed, reader) for p in patches}


def carried_by_upstream(git_dir: Path, head: str, patch: DriftPatch, changed: dict[str, set[str]] | None = None,
                        reader: BlobReader | None = None) -> tuple[list[str], list[str], set]:
    """drift.residue.carried_hunks for `patch` at `head` of drift's history: REF's files, and
    the files its upstream commits (patch.upstream_commits) changed. `changed`: those
    commits' paths, read already (changed_paths, one call for every patch); `reader`: an
    open BlobReader to read REF's files through (else one of its own)."""
    from overlay.drift.residue import carried_hunks

    if changed is None or any(c not in changed for c in patch.upstream_commits):
        changed = changed_paths(git_dir, patch.upstream_commits)
    paths: set[str] = set()
    for commit in patch.upstream_commits:
        paths.update(changed[commit])
    own = reader is None
    reader = reader or BlobReader(git_dir)
    try:
        texts = reader.texts(reader.oids(head, patch.paths))
    finally:
        if own:
            reader.close()
    return carried_hunks(patch.files, lambda path: texts.get(path), paths)
