"""`overlay status`: per pin set, the patches it carries in order, each with its origin, its
upstream state at that pin and the lock state of its target, read from series.yaml, pins/
and build/ without composing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from overlay import gitcmd, paths
from overlay.errors import printable
from overlay.series.model import PinSet, Project, SeriesEntry
from overlay.trees import composed

# Upstream states of an entry at one pin set.
CARRIED, MERGED, PORTED, SUPERSEDED = "carried", "merged", "ported", "superseded"
# Lock states of a target at one pin set.
MATCHES, NOT_COMPOSED, MISMATCH, NOT_LOCKED, STALE = (
    "locked tree matches", "not composed", "mismatch", "not locked", "composed from another series")


@dataclass(frozen=True)
class PatchState:
    patch: str
    target: str
    subject: str
    origin: str
    state: str  # carried | merged | ported | superseded
    detail: str  # which rule merged it, what it revises, which upstream change supersedes it
    carried: bool  # whether the pin set applies it (merged ones are listed, not applied)
    lock: str

    def to_json(self) -> dict:
        return {"patch": self.patch, "target": self.target, "subject": self.subject,
                "origin": self.origin, "state": self.state, "detail": self.detail,
                "carried": self.carried, "lock": self.lock}


@dataclass(frozen=True)
class TargetLock:
    target: str
    locked_tree: str | None
    composed_tree: str | None
    state: str

    def to_json(self) -> dict:
        return {"target": self.target, "locked_tree": self.locked_tree,
                "composed_tree": self.composed_tree, "lock": self.state}


@dataclass(frozen=True)
class PinStatus:
    pin: str
    description: str
    targets: tuple[TargetLock, ...]
    patches: tuple[PatchState, ...]

    def to_json(self) -> dict:
        return {"pin": self.pin, "description": self.description,
                "targets": [t.to_json() for t in self.targets],
                "patches": [p.to_json() for p in self.patches]}


def upstream_state(entry: SeriesEntry, pin: str) -> tuple[str, str] | None:
    """(state, detail) of `entry` at pin set `pin`, or None when the pin set does not list
    it at all (`only-pins` names other pin sets). Pure."""
    prov = entry.provenance
    record = prov.record_at(pin)
    if record is not None:
        by = f" by {record.commit[:12]}" if record.commit else ""
        rule = f" (rule: {record.rule})" if record.rule else ""
        return MERGED, f"upstream carries it: {record.ref}{by}{rule}"
    if not entry.carried_at(pin):
        return None
    if prov.superseded_by_commit:
        return SUPERSEDED, (f"upstream has its own version: {prov.superseded_by_pr} "
                            f"({prov.superseded_by_commit[:12]})")
    if entry.revises:
        return PORTED, f"revises {entry.revises}"
    if entry.only_pins:
        return PORTED, "only-pins: " + ", ".join(entry.only_pins)
    return CARRIED, ""


def target_lock(root: Path, pin: PinSet, target: str, wanted: tuple[str, ...],
                into: Path | None = None) -> TargetLock:
    """The lock state of one target: the pin file's tree id against the composed tree in
    build/ (its HEAD's tree, when it was composed from today's series for this pin set)."""
    locked = pin.target(target).tree
    work = paths.composed_dir(root, pin.name, target, into)
    state = composed.read_state(work) if work.is_dir() else None
    if state is None or state.pin != pin.name:
        return TargetLock(target, locked, None, NOT_COMPOSED)
    try:
        tree = composed.tree_of(work)
    except gitcmd.GitFailed:
        return TargetLock(target, locked, None, NOT_COMPOSED)
    if state.patches != wanted or composed.series_moved_on(state, root / "patches", list(wanted)):
        return TargetLock(target, locked, tree, STALE)
    if locked is None:
        return TargetLock(target, locked, tree, NOT_LOCKED)
    return TargetLock(target, locked, tree, MATCHES if tree == locked else MISMATCH)


def pin_status(project: Project, pin: PinSet, into: Path | None = None) -> PinStatus:
    locks = {}
    for t in pin.target_names:
        wanted = tuple(e.patch for e in project.series.for_target(t, pin.name))
        locks[t] = target_lock(project.root, pin, t, wanted, into)
    rows = []
    for entry in project.series.entries:
        if entry.target not in pin.target_names:
            continue
        found = upstream_state(entry, pin.name)
        if found is None:
            continue
        state, detail = found
        carried = state != MERGED
        lock = locks[entry.target].state if carried else "not applied (upstream carries it)"
        rows.append(PatchState(entry.patch, entry.target, entry.subject or "", entry.origin,
                               state, detail, carried, lock))
    return PinStatus(pin.name, pin.description, tuple(locks.values()), tuple(rows))


def status(project: Project, pins: list[PinSet], into: Path | None = None) -> list[PinStatus]:
    """The status of each of `pins` (every pin set, or the one --pin chose), in their order."""
    return [pin_status(project, p, into) for p in pins]


def text(statuses: list[PinStatus]) -> str:
    out = []
    for s in statuses:
        out.append(f"pin set {s.pin}" + (f": {printable(s.description)}" if s.description else ""))
        for t in s.targets:
            tree = f" (locked {t.locked_tree[:12]})" if t.locked_tree else ""
            out.append(f"  {t.target}: {t.state}{tree}")
        if not s.patches:
            out.append("  (no patches)")
        n = 0
        for p in s.patches:
            n += p.carried
            mark = f"{n:>3}." if p.carried else "  -."
            detail = f" - {printable(p.detail)}" if p.detail else ""
            out.append(f"  {mark} {p.patch} [{p.target}, {p.origin}] {p.state}{detail}; lock: {p.lock}")
        out.append("")
    return "\n".join(out)
