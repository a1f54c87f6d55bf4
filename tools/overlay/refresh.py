"""`overlay refresh`: turn the composed branch back into patches/ and the series order.

Byte-stable: a composed tree refreshed without edits rewrites no byte. Patches are
exported with a pinned git configuration and pinned format-patch options, so the
result does not depend on the user's git config; series.yaml is edited as text
(entry blocks are moved, never re-serialised), so comments and layout survive.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from overlay import composed, gitcmd, paths, sources, yamldoc
from overlay.compose import select_targets
from overlay.errors import OverlayError
from overlay.model import PinSet, Project, SeriesEntry
from overlay.patchfile import read_patch

FORMAT_PATCH = ("format-patch", "-1", "--stdout", "--no-signature", "--zero-commit", "--full-index",
                "--no-stat", "--no-numbered", "--subject-prefix=PATCH", "--no-renames",
                "--no-binary", "--encode-email-headers", "--no-notes", "-O/dev/null",
                "--no-ext-diff", "--no-thread", "--no-cover-letter",
                # reset what the composed repository's own config could add
                "--no-to", "--no-cc", "--no-add-header", "--no-from", "--no-attach",
                "--no-force-in-body-from")


def export_patch(work: Path, commit: str) -> str:
    """The canonical mail for one commit."""
    return gitcmd.git([*FORMAT_PATCH, commit], cwd=work).stdout


@dataclass
class RefreshResult:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reordered: bool = False

    def lines(self) -> list[str]:
        out = [f"  updated  {p}" for p in self.written]
        out += [f"  new      {p} (complete its provenance in series.yaml; `overlay check` lists what is missing)"
                for p in self.added]
        out += [f"  dropped  {p}" for p in self.removed]
        if self.reordered:
            out.append("  reordered series.yaml")
        changed = self.written or self.added or self.removed or self.reordered
        out.append(f"refresh: {len(self.unchanged)} unchanged, {len(self.written)} updated, "
                   f"{len(self.added)} new, {len(self.removed)} dropped"
                   + ("" if changed else " (nothing to do)"))
        return out

    def as_dict(self) -> dict:
        return {"written": self.written, "unchanged": self.unchanged, "added": self.added,
                "removed": self.removed, "reordered": self.reordered}


def slug(subject: str) -> str:
    text = re.sub(r"\[[^\]]*\]", " ", subject).lower()
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return (text[:50].rstrip("-")) or "patch"


def _number(name: str) -> int:
    m = re.match(r"(\d+)-", name)
    return int(m.group(1)) if m else 0


def _branch_commits(work: Path, base: str) -> list[str]:
    merges = gitcmd.out(["rev-list", "--merges", f"{base}..HEAD"], cwd=work)
    if merges:
        raise OverlayError(f"the composed branch has merge commits ({merges.split()[0][:12]})",
                           path=str(work), hint="make the branch linear (git rebase) and refresh again")
    listed = gitcmd.out(["rev-list", "--reverse", f"{base}..HEAD"], cwd=work)
    return listed.split() if listed else []


def _note(work: Path, commit: str) -> str | None:
    proc = gitcmd.git(["notes", "--ref", composed.NOTES_REF, "show", commit], cwd=work, check=False)
    m = re.search(r"^patch: (\S+)$", proc.stdout, re.M) if proc.returncode == 0 else None
    return m.group(1) if m else None


def _subject(work: Path, commit: str) -> str:
    return gitcmd.out(["log", "-1", "--format=%s", commit], cwd=work)


def _readable_state(project: Project, pin: PinSet, target: str, work: Path) -> composed.ComposedState:
    """The composed state of one target, if its branch can be read back as the series now."""
    state = composed.read_state(work)
    assert state is not None
    reason = composed.why_not_readable(work, state)
    if reason:
        raise OverlayError(f"cannot read {target} back as patches: {reason}", path=str(work))
    names = [e.patch for e in project.series.for_target(target, pin.name)]
    if composed.series_moved_on(state, project.patches_dir, names):
        raise OverlayError(
            f"patches/ or series.yaml changed for {target} since {work} was composed "
            f"(e.g. patches pulled from a teammate); reading the branch back would undo those changes",
            path="series.yaml",
            hint=f"re-apply (`overlay apply --pin {pin.name}`; --force discards your branch edits) "
                 f"and redo your edits on top")
    return state


def _upstream_commits(project: Project, pin: PinSet, target: str, commits: list[str],
                      mirror: Path | None) -> list[str]:
    """Branch commits that upstream already has: the branch was rebased onto a newer base.

    Known only where upstream history is at hand (a mirror); the cache holds just the pin.
    """
    if not commits:
        return []
    source = pin.target(target).source
    stores = [sources.cache_repo(project.root, source.mirror_name)]
    if mirror is not None:
        found = paths.find_mirror_repo(mirror, source.mirror_name)
        if found is not None:
            stores.append(found)
    known = []
    for store in stores:
        proc = gitcmd.git(["cat-file", "--batch-check"], git_dir=store,
                          input="".join(c + "\n" for c in commits), check=False)
        # answers are "<sha> commit <size>" or "<sha> missing"
        known += [line.split()[0] for line in proc.stdout.splitlines() if line.split()[1:2] == ["commit"]]
    return [c for c in commits if c in known]


def refresh(project: Project, pin: PinSet, *, targets: list[str] | None,
            into: Path | None, mirror: Path | None = None) -> RefreshResult:
    result = RefreshResult()
    series_path = project.root / "series.yaml"
    text = series_path.read_text(encoding="utf-8")
    order = [e.patch for e in project.series.entries]
    new_blocks: dict[str, str] = {}
    new_subjects: dict[str, str] = {}
    # entries this pin set leaves out (upstream carries them) keep their place
    target_of = {e.patch: e.target if e.carried_at(pin.name) else "" for e in project.series.entries}
    pending_writes: dict[Path, str] = {}
    updates: list[tuple[Path, composed.ComposedState, list[tuple[str, str]]]] = []
    chosen = select_targets(pin, targets)
    composed_targets = []
    for target in chosen:
        work = paths.composed_dir(project.root, pin.name, target.name, into)
        if composed.read_state(work) is None:
            if targets:
                raise OverlayError(f"target '{target.name}' is not composed at {work}",
                                   hint=f"run `overlay apply --pin {pin.name}` first")
            continue
        composed_targets.append((target, work, _readable_state(project, pin, target.name, work)))
    if not composed_targets:
        raise OverlayError(f"nothing is composed for pin set '{pin.name}'",
                           hint=f"run `overlay apply --pin {pin.name}` first")
    for target, work, state in composed_targets:
        entries = list(project.series.for_target(target.name, pin.name))
        mapping = _map_commits(project, work, state.base, entries)
        upstream = _upstream_commits(project, pin, target.name,
                                     [c for c, name in mapping if name is None], mirror)
        if upstream:
            raise OverlayError(
                f"the composed {target.name} branch holds upstream commit {upstream[0][:12]}: it was "
                f"rebased onto a newer upstream, which refresh cannot turn into patches",
                path=str(work), hint=f"bump the pin in pins/{pin.name}.yaml instead, re-apply, and "
                                     f"check the series with `overlay drift`")
        subjects = {e.patch: e.subject for e in entries}
        new_order_for_target: list[str] = []
        note_updates: list[tuple[str, str]] = []
        used_numbers = [_number(p) for p in order] + [_number(p) for p in new_blocks]
        for commit, entry_name in mapping:
            mail_text = export_patch(work, commit)
            subject = _subject(work, commit)
            if entry_name is None:
                number = max(used_numbers + [0]) + 1
                used_numbers.append(number)
                entry_name = f"{number:04d}-{slug(subject)}.patch"
                new_blocks[entry_name] = target.name
                result.added.append(entry_name)
            elif subjects.get(entry_name) and subjects[entry_name] != subject:
                new_subjects[entry_name] = subject  # reworded on the branch
            dest = project.patches_dir / entry_name
            old = dest.read_text(encoding="utf-8") if dest.is_file() else None
            if old != mail_text:
                pending_writes[dest] = mail_text
                if entry_name not in result.added:
                    result.written.append(entry_name)
            else:
                result.unchanged.append(entry_name)
            note_updates.append((commit, entry_name))
            new_order_for_target.append(entry_name)
        for e in entries:
            if e.patch not in new_order_for_target:
                result.removed.append(e.patch)
        order = _reorder(order, target_of, target.name, new_order_for_target)
        for name in new_order_for_target:
            target_of[name] = target.name
        updates.append((work, state, note_updates))
    new_text = rewrite_series_text(text, series_path, order, new_blocks, new_subjects)
    result.reordered = (new_text != text) and not result.added and not result.removed
    # Side effects last, after everything was computed without error.
    project.patches_dir.mkdir(exist_ok=True)
    for dest, content in pending_writes.items():
        dest.write_text(content, encoding="utf-8")
    for name in result.removed:
        (project.patches_dir / name).unlink(missing_ok=True)
    if new_text != text:
        series_path.write_text(new_text, encoding="utf-8")
    for work, state, notes in updates:
        composed.add_notes(work, dict(notes))
        names = tuple(name for _, name in notes)
        composed.write_state(work, composed.ComposedState(
            pin=state.pin, target=state.target, base=state.base, head=composed.head(work),
            tree=composed.tree_of(work), branch=state.branch, patches=names,
            series_digest=composed.series_digest(project.patches_dir, names)))
    return result


def _map_commits(project: Project, work: Path, base: str,
                 entries: list[SeriesEntry]) -> list[tuple[str, str | None]]:
    """Each branch commit with the series entry it refreshes (None: a new patch)."""
    names = {e.patch for e in entries}
    subjects: dict[str, str] = {}
    for e in entries:
        try:
            subjects[e.patch] = read_patch(project.patches_dir / e.patch).subject
        except OverlayError:
            pass
    used: set[str] = set()
    out: list[tuple[str, str | None]] = []
    for commit in _branch_commits(work, base):
        name = _note(work, commit)
        if name not in names or name in used:
            subject = _subject(work, commit)
            name = next((p for p, s in subjects.items() if s == subject and p not in used), None)
        if name:
            used.add(name)
        out.append((commit, name))
    return out


def _reorder(order: list[str], target_of: dict[str, str], target: str,
             new_for_target: list[str]) -> list[str]:
    """The series order after refreshing one target (pure).

    Entries of the target that survive keep the slots such entries held, filled in
    the branch's new order; dropped ones vanish; a new one goes right after the
    entry before it on the branch (first of all: before the target's first entry).
    Other targets' entries never move.
    """
    kept = [p for p in new_for_target if p in order]
    slots = [i for i, p in enumerate(order) if target_of.get(p) == target and p in kept]
    out: list[str | None] = [None if target_of.get(p) == target else p for p in order]
    for i, name in zip(slots, kept):
        out[i] = name
    result = [p for p in out if p is not None]
    for i, name in enumerate(new_for_target):
        if name in order:
            continue
        if i > 0:
            at = result.index(new_for_target[i - 1]) + 1
        else:
            first = next((p for p in new_for_target if p in result), None)
            at = result.index(first) if first else len(result)
        result.insert(at, name)
    return result


def rewrite_series_text(text: str, path: Path, order: list[str], new: dict[str, str],
                        subjects: dict[str, str] | None = None) -> str:
    """series.yaml text with entry blocks in `order`, new entries generated, and the
    `subject:` of reworded entries replaced; every other byte is kept."""
    node = yamldoc.load(path, "series.yaml")
    items = node.value["series"].value or []
    lines = text.splitlines(keepends=True)
    starts = []
    for item in items:
        i = item.line - 1
        while i > 0 and not lines[i].lstrip().startswith("-"):
            i -= 1
        starts.append(i)
    blocks: dict[str, str] = {}
    for n, item in enumerate(items):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = "".join(lines[starts[n]:end])
        if not block.endswith("\n"):
            block += "\n"
        name = item.value["patch"].value
        if subjects and name in subjects:
            # a JSON string is a valid YAML double-quoted scalar
            block = re.sub(r"(?m)^(\s*subject:[ \t]*).*$",
                           lambda m: m.group(1) + json.dumps(subjects[name], ensure_ascii=False),
                           block, count=1)
        blocks[name] = block
    if starts:
        header = "".join(lines[:starts[0]])
        indent = re.match(r"\s*", lines[starts[0]]).group(0)
    else:
        header = re.sub(r"(?m)^series:\s*(\[\s*\])?\s*$", "series:", text)
        if not header.endswith("\n"):
            header += "\n"
        indent = "  "
    for name, target in new.items():
        blocks[name] = (f"{indent}- patch: {name}\n{indent}  target: {target}\n"
                        f"{indent}  origin: local  # added by refresh: set origin and provenance\n")
    kept = [p for p in order if p in blocks]
    return header + "".join(blocks[p] for p in kept)
