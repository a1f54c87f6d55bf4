"""`overlay refresh`: turn the composed branch back into patches/ and the series order.

Byte-stable: a composed tree refreshed without edits rewrites no byte. Patches are
exported with a pinned git configuration and pinned format-patch options, so the
result does not depend on the user's git config; series.yaml is edited as text
(entry blocks are moved, never re-serialised), so comments and layout survive.
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from overlay.trees import composed, lockfile, seriesswap, sources
from overlay import gitcmd, paths
from overlay.series import yamldoc
from overlay.trees.compose import select_targets
from overlay.errors import OverlayError
from overlay.series import model
from overlay.series.model import PinSet, Project, SeriesEntry, load_all_pins
from overlay.series.patchfile import parse_patch, read_patch, unsafe_reason

FORMAT_PATCH = ("format-patch", "-1", "--stdout", "--no-signature", "--zero-commit", "--full-index",
                "--no-stat", "--no-numbered", "--subject-prefix=PATCH", "--no-renames",
                "--no-binary", "--encode-email-headers", "--no-notes", "-O/dev/null",
                "--no-ext-diff", "--no-thread", "--no-cover-letter",
                # reset what the composed repository's own config could add
                "--no-to", "--no-cc", "--no-add-header", "--no-from", "--no-attach",
                "--no-force-in-body-from")


def export_patch(work: Path, commit: str) -> str:
    """The canonical mail for one commit, byte for byte: lines of a CRLF file keep
    their CR (text-mode pipes would translate them away). Bytes that are not UTF-8
    survive as surrogates; `_exact_bytes` turns them back into the same bytes."""
    raw = gitcmd.git([*FORMAT_PATCH, "--end-of-options", commit], cwd=work, text=False).stdout
    return raw.decode("utf-8", "surrogateescape")


_MAIL_START = b"From %s Mon Sep 17 00:00:00 2001\n"


def export_patches(work: Path, commits: list[str]) -> dict[str, str]:
    """export_patch for a whole linear branch in one git process (a refresh of 1,000
    patches would otherwise start 1,000 of them). Split where each mail's `From <id>`
    line names the next commit; anything unexpected (an empty commit is left out of a
    range) falls back to one process per commit."""
    if len(commits) < 2:
        return {c: export_patch(work, c) for c in commits}
    args = [a for a in FORMAT_PATCH if a not in ("-1", "--zero-commit")]
    raw = gitcmd.git([*args, "--end-of-options", f"{commits[0]}^..{commits[-1]}"], cwd=work, text=False).stdout
    spans: list[list[int]] = []  # [start, end) of each mail; git puts one "\n" between mails
    for commit in commits:
        marker = _MAIL_START % commit.encode()
        if not spans:
            found = 0 if raw.startswith(marker) else -1
        else:
            found = raw.find(b"\n\n" + marker, spans[-1][0])
            if found >= 0:
                spans[-1][1] = found + 1
                found += 2
        if found < 0:
            return {c: export_patch(work, c) for c in commits}
        spans.append([found, len(raw)])
    zero = _MAIL_START % (b"0" * 40)
    return {commit: (zero + raw[start + len(zero):end]).decode("utf-8", "surrogateescape")
            for commit, (start, end) in zip(commits, spans)}


def _read_exact(path: Path) -> str | None:
    return path.read_bytes().decode("utf-8", "surrogateescape") if path.is_file() else None


def _exact_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass
class RefreshResult:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reordered: bool = False  # the branch changed the order of patches that were already there
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (old, new): numbers follow the order
    order: list[str] = field(default_factory=list)  # the series order afterwards
    mentions: dict[str, list[str]] = field(default_factory=dict)  # renamed patch -> files naming it
    series_changed: bool = False  # series.yaml was rewritten
    stale_locks: list[str] = field(default_factory=list)  # pin/target whose recorded tree is now wrong
    unverified_locks: list[str] = field(default_factory=list)  # same target at another commit
    pin: str = ""

    def lines(self) -> list[str]:
        out = [f"  updated  {p}" for p in self.written]
        out += [f"  new      {p} (complete its provenance in series.yaml; `overlay check` lists what is missing)"
                for p in self.added]
        out += [f"  dropped  {p}" for p in self.removed]
        if self.reordered:
            out.append("  order    changed on the branch; series.yaml now reads: " + ", ".join(self.order))
        for old, new in self.renamed:
            also = self.mentions.get(old)
            out.append(f"  renamed  {old} -> {new} (its number follows the series order)"
                       + (f"; still named in {', '.join(also)}: update it" if also else ""))
        if self.stale_locks:
            out.append(f"  locks    now stale: {', '.join(self.stale_locks)} (run `overlay lock --pin "
                       f"{self.pin}`: it also updates the pin sets that pin the same commit)")
        if self.unverified_locks:
            out.append(f"  locks    may be stale: {', '.join(self.unverified_locks)} pin another commit "
                       f"(compose each with `overlay apply --pin NAME`, then `overlay lock --pin NAME`)")
        changed = (self.written or self.added or self.removed or self.reordered or self.renamed
                   or self.series_changed)
        out.append(f"refresh: {len(self.unchanged)} unchanged, {len(self.written)} updated, "
                   f"{len(self.added)} new, {len(self.removed)} dropped, {len(self.renamed)} renamed"
                   + (", order changed" if self.reordered else "")
                   + ("" if changed else " (nothing to do)"))
        return out

    def as_dict(self) -> dict:
        return {"written": self.written, "unchanged": self.unchanged, "added": self.added,
                "removed": self.removed, "reordered": self.reordered,
                "renamed": [{"from": a, "to": b} for a, b in self.renamed], "order": self.order,
                "stale_locks": self.stale_locks, "unverified_locks": self.unverified_locks}


# Letters NFKD does not take apart into an ASCII letter and accents.
_TRANSLIT = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o",
                           "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th", "Þ": "Th",
                           "ð": "d", "Ð": "D", "ı": "i"})
SLUG_MAX = 50


def slug(subject: str) -> str:
    """A readable file-name part for a subject: bracketed tags dropped, accents folded
    to ASCII (`Añadir módulo` -> `anadir-modulo`), cut only between words."""
    text = re.sub(r"\[[^\]]*\]", " ", subject).translate(_TRANSLIT)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    words = re.findall(r"[a-z0-9]+", text.encode("ascii", "ignore").decode().lower())
    out = ""
    for word in words:
        longer = f"{out}-{word}" if out else word
        if len(longer) > SLUG_MAX:
            break
        out = longer
    return out or (words[0][:SLUG_MAX] if words else "patch")


_NUMBERED = re.compile(r"^(\d+)-(.+)$")


def renumber(order: list[str]) -> dict[str, str]:
    """Pure: the renames that make patch numbers increase along the series order.

    A number that is already larger than the one before it stays (gaps are fine, so a
    dropped patch renames nothing); any other is replaced by the previous number + 1.
    New patches come in numbered 0 and so take the next number where they stand.
    Names without a number are left alone.
    """
    renames: dict[str, str] = {}
    last = 0
    for name in order:
        m = _NUMBERED.match(name)
        if not m:
            continue
        number = int(m.group(1))
        if number > last:
            last = number
            continue
        last += 1
        renames[name] = f"{last:0{max(4, len(m.group(1)))}d}-{m.group(2)}"
    return renames


def _mentions(root: Path, name: str) -> list[str]:
    """Files besides series.yaml that name a patch file (evidence protocols, docs)."""
    found = []
    for pattern in ("evidence/**/*.yaml", "docs/*.md"):
        for p in sorted(root.glob(pattern)):
            try:
                if name in p.read_text(encoding="utf-8", errors="replace"):
                    found.append(str(p.relative_to(root)))
            except OSError:
                continue
    return found


def _branch_commits(work: Path, base: str) -> list[str]:
    merges = gitcmd.out(["rev-list", "--merges", "--end-of-options", f"{base}..HEAD"], cwd=work)
    if merges:
        raise OverlayError(f"the composed branch has merge commits ({merges.split()[0][:12]})",
                           path=str(work), hint="make the branch linear (git rebase) and refresh again")
    listed = gitcmd.out(["rev-list", "--reverse", "--end-of-options", f"{base}..HEAD"], cwd=work)
    return listed.split() if listed else []


def _subject(work: Path, commit: str) -> str:
    return gitcmd.out(["log", "-1", "--format=%s", "--end-of-options", commit], cwd=work)


def refuse_uncarriable(work: Path, commit: str, subject: str, mail_text: str) -> None:
    """A commit apply could not carry (a path with a line break, a binary or symlink
    change, ...) is refused here, before anything is written, not at the next apply."""
    try:
        mail = parse_patch(mail_text, work, str(work))
    except OverlayError:
        return  # malformed mails are `overlay check`'s to report, in its words
    for change in mail.files:
        reason = unsafe_reason(change)
        if reason:
            raise OverlayError(f"commit {commit[:12]} ({subject}) cannot become a patch: {reason}",
                               path=str(work), hint="amend the commit on the composed branch "
                                                    "(rename the file) and refresh again")


def _subjects(work: Path, base: str) -> dict[str, str]:
    """_subject of every branch commit, in one git process."""
    fields = gitcmd.git(["log", "--format=%H%x00%s%x00", "--end-of-options", f"{base}..HEAD"],
                        cwd=work).stdout.split("\0")
    return {sha.strip(): subject.strip() for sha, subject in zip(fields[0::2], fields[1::2])}


def _notes(work: Path) -> dict[str, str]:
    """The patch file each composed commit's note names, in two git processes."""
    listed = gitcmd.git(["notes", "--ref", composed.NOTES_REF, "list"], cwd=work, check=False)
    pairs = [line.split() for line in listed.stdout.splitlines()] if listed.returncode == 0 else []
    pairs = [p for p in pairs if len(p) == 2]
    if not pairs:
        return {}
    raw = gitcmd.git(["cat-file", "--batch"], cwd=work, text=False,
                     input="".join(f"{blob}\n" for blob, _ in pairs).encode()).stdout
    out, at = {}, 0
    for _, commit in pairs:
        header_end = raw.index(b"\n", at)
        header = raw[at:header_end].split()
        if len(header) != 3:  # "<id> missing"
            at = header_end + 1
            continue
        size = int(header[2])
        body = raw[header_end + 1:header_end + 1 + size].decode("utf-8", "replace")
        at = header_end + 1 + size + 1
        m = re.search(r"^patch: (\S+)$", body, re.M)
        if m:
            out[commit] = m.group(1)
    return out


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
        proc = gitcmd.git(["cat-file", "--batch-check"], git_dir=gitcmd.data_view(store),
                          input="".join(c + "\n" for c in commits), check=False, data=True)
        # answers are "<sha> commit <size>" or "<sha> missing"
        known += [line.split()[0] for line in proc.stdout.splitlines() if line.split()[1:2] == ["commit"]]
    return [c for c in commits if c in known]


def refresh(project: Project, pin: PinSet, *, targets: list[str] | None,
            into: Path | None, mirror: Path | None = None) -> RefreshResult:
    """Read the composed branches back into patches/ and series.yaml (under the checkout lock)."""
    with seriesswap.checkout(project.root, f"refresh --pin {pin.name}") as recovered:
        if recovered:
            project = Project.load(project.root)
        return _refresh(project, pin, targets=targets, into=into, mirror=mirror)


def _refresh(project: Project, pin: PinSet, *, targets: list[str] | None,
             into: Path | None, mirror: Path | None) -> RefreshResult:
    result = RefreshResult(pin=pin.name)
    series_path = project.root / "series.yaml"
    text = series_path.read_text(encoding="utf-8")
    order = [e.patch for e in project.series.entries]
    new_blocks: dict[str, str] = {}
    new_subjects: dict[str, str] = {}
    # entries this pin set leaves out (upstream carries them) keep their place
    target_of = {e.patch: e.target if e.carried_at(pin.name) else "" for e in project.series.entries}
    pending_writes: dict[str, str] = {}  # patch file name -> new mail text
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
                path=str(work), hint=f"move the series with `overlay rebase --pin {pin.name} --onto "
                                     f"{target.name}=REF` instead (a new pin set), or bump the pin "
                                     f"in pins/{pin.name}.yaml, re-apply, and classify the series "
                                     f"with `overlay drift --pin {pin.name} --onto {target.name}=REF`")
        subjects = {e.patch: e.subject for e in entries}
        new_order_for_target: list[str] = []
        note_updates: list[tuple[str, str]] = []
        mails = export_patches(work, [c for c, _ in mapping])
        on_branch = _subjects(work, state.base)
        for commit, entry_name in mapping:
            mail_text = mails[commit]
            subject = on_branch[commit] if commit in on_branch else _subject(work, commit)
            refuse_uncarriable(work, commit, subject, mail_text)
            if entry_name is None:
                # numbered 0 for now: renumber() gives it the number of the place it stands
                entry_name = f"0000-{slug(subject)}.patch"
                n = 2
                while entry_name in order or entry_name in new_blocks:
                    entry_name = f"0000-{slug(subject)}-{n}.patch"
                    n += 1
                new_blocks[entry_name] = target.name
                result.added.append(entry_name)
            elif subjects.get(entry_name) and subjects[entry_name] != subject:
                new_subjects[entry_name] = subject  # reworded on the branch
            old = _read_exact(project.patches_dir / entry_name) if entry_name not in new_blocks else None
            if old != mail_text:
                pending_writes[entry_name] = mail_text
                if entry_name not in result.added:
                    result.written.append(entry_name)
            else:
                result.unchanged.append(entry_name)
            note_updates.append((commit, entry_name))
            new_order_for_target.append(entry_name)
        for e in entries:
            if e.patch not in new_order_for_target:
                result.removed.append(e.patch)
        # New entries are carried by this pin set (and those pinning the same upstream)
        # only: a pin set of another commit is touched only by changes to shared entries.
        kept = [n for n in new_order_for_target if n not in result.added]
        _note_stale_locks(result, project, pin, target.name, composed.tree_of(work),
                          [e.patch for e in entries] != kept or any(n in pending_writes for n in kept))
        order = _reorder(order, target_of, target.name, new_order_for_target)
        for name in new_order_for_target:
            target_of[name] = target.name
        updates.append((work, state, note_updates))
    before = [e.patch for e in project.series.entries]
    kept = set(before) & set(order)
    result.reordered = [p for p in before if p in kept] != [p for p in order if p in kept]
    # Names and order never disagree: renumber what the new order put out of sequence.
    renames = renumber(order)
    new_name = lambda name: renames.get(name, name)  # noqa: E731
    for old_name, name in renames.items():
        if old_name in new_blocks:
            continue
        result.renamed.append((old_name, name))
        result.mentions[old_name] = _mentions(project.root, old_name)
        if old_name not in pending_writes:
            pending_writes[old_name] = _read_exact(project.patches_dir / old_name) or ""
    renamed_away = [old for old, _ in result.renamed]
    order = [new_name(p) for p in order]
    result.order = order
    result.added = [new_name(p) for p in result.added]
    result.written = [new_name(p) for p in result.written if p not in renames]
    result.unchanged = [p for p in result.unchanged if p not in renames]
    pending_writes = {new_name(p): text_ for p, text_ in pending_writes.items()}
    # Pin sets are independent: a commit made on one pin set's branch is that pin set's
    # patch until someone says otherwise (extend only-pins, or drop it for every pin set).
    # Pin sets that pin exactly the same upstreams (every target) compose the same trees:
    # they share it. One that differs anywhere (the same plugin on another core) does not.
    others = [p for p in load_all_pins(project.root) if p.name != pin.name
              and any(t in p.target_names for t in new_blocks.values())]
    same = [p.name for p in others if sorted(p.target_names) == sorted(pin.target_names)
            and all(p.target(t).source == pin.target(t).source for t in pin.target_names)]
    sharing = [p.name for p in others if p.name not in same]
    new_text = rewrite_series_text(text, series_path, order,
                                   {new_name(p): t for p, t in new_blocks.items()},
                                   {new_name(p): s_ for p, s_ in new_subjects.items()},
                                   {old: new for old, new in renames.items() if old not in new_blocks},
                                   only_pins=[pin.name, *same] if sharing else None)
    result.series_changed = new_text != text
    refreshed = {work for work, _, _ in updates}
    followers = _trees_following_renames(project, into, renames, refreshed) if result.renamed else []
    # Side effects last, after everything was computed without error, as one swap:
    # a kill or a full disk leaves the old series or the new one, never a mix.
    removed = [n for n in result.removed + renamed_away if n not in pending_writes]
    trees = []
    for work, state, notes in updates:
        notes = [(commit, new_name(name)) for commit, name in notes]
        trees.append(seriesswap.TreeUpdate(work, dict(notes), composed.ComposedState(
            pin=state.pin, target=state.target, base=state.base, head=composed.head(work),
            tree=composed.tree_of(work), branch=state.branch,
            patches=tuple(name for _, name in notes))))
    for work, state in followers:  # same commits, new file names: still current
        trees.append(seriesswap.TreeUpdate(work, {}, dataclasses.replace(
            state, patches=tuple(renames.get(n, n) for n in state.patches))))
    seriesswap.write(project.root, {n: _exact_bytes(t) for n, t in pending_writes.items()},
                     removed, new_text if new_text != text else None, trees)
    return result


def _trees_following_renames(project: Project, into: Path | None, renames: dict[str, str],
                             refreshed: set[Path]) -> list[tuple[Path, composed.ComposedState]]:
    """Composed trees (any pin set) that were current and name a renamed patch: their
    recorded state follows the rename, so `lock` and `refresh` still accept them."""
    out = []
    for pin_name in model.pin_names(project.root):
        for work in sorted(paths.composed_root(project.root, into).joinpath(pin_name).glob("*")):
            state = composed.read_state(work)
            if work in refreshed or state is None or not set(state.patches) & set(renames):
                continue
            names = [e.patch for e in project.series.for_target(state.target)]
            if not composed.series_moved_on(state, project.patches_dir, names):
                out.append((work, state))
    return out


def _note_stale_locks(result: RefreshResult, project: Project, pin: PinSet, target: str,
                      tree: str, series_changed: bool) -> None:
    """Which recorded trees the refreshed branch makes wrong (or may make wrong)."""
    mine = pin.target(target).tree
    if mine and mine != tree:
        result.stale_locks.append(f"{pin.name}/{target}")
    for other, same in lockfile.other_locks(project.root, pin, target):
        if same and other.target(target).tree != tree:
            result.stale_locks.append(f"{other.name}/{target}")
        elif not same and series_changed:
            result.unverified_locks.append(f"{other.name}/{target}")


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
    notes, on_branch = _notes(work), _subjects(work, base)
    for commit in _branch_commits(work, base):
        name = notes.get(commit)
        if name not in names or name in used:
            subject = on_branch[commit] if commit in on_branch else _subject(work, commit)
            name = next((p for p, s in subjects.items() if s == subject and p not in used), None)
        if name:
            used.add(name)
        out.append((commit, name))
    return out


def _reorder(order: list[str], target_of: dict[str, str], target: str,
             new_for_target: list[str]) -> list[str]:
    """The series order after refreshing one target (pure).

    Entries of the target that survive keep the slots such entries held, filled in
    the branch's new order; dropped ones vanish; a new one goes after the entry before
    it on the branch, past the entries the branch does not carry (other pin sets' and
    other targets': their order against it changes nothing this pin set applies, and
    numbering it before them would renumber them), up to the next entry the branch
    carries (first of all: before the target's first entry). Other entries never move.
    """
    carried = set(new_for_target)
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
            while at < len(result) and result[at] not in carried:
                at += 1
        else:
            first = next((p for p in new_for_target if p in result), None)
            at = result.index(first) if first else len(result)
        result.insert(at, name)
    return result


def rewrite_series_text(text: str, path: Path, order: list[str], new: dict[str, str],
                        subjects: dict[str, str] | None = None,
                        renames: dict[str, str] | None = None,
                        only_pins: list[str] | None = None) -> str:
    """series.yaml text with entry blocks in `order`, new entries generated (carried only
    by `only_pins` when given), the `subject:` of reworded entries replaced and renamed
    entries' `patch:` rewritten; every other byte is kept."""
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
        if renames and name in renames:
            block = re.sub(rf"(?m)^(\s*-?\s*patch:[ \t]*['\"]?){re.escape(name)}",
                           lambda m, new_name=renames[name]: m.group(1) + new_name, block, count=1)
            name = renames[name]
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
        if only_pins:
            blocks[name] += (f"{indent}  only-pins: [{', '.join(json.dumps(p) for p in only_pins)}]"
                             "  # added by refresh: the pin set it was made on; other pin sets stay as they are\n")
    kept = [p for p in order if p in blocks]
    return header + "".join(blocks[p] for p in kept)
