"""`overlay lock`: record composed tree ids in the pin file, keeping its text and comments."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from overlay.trees import composed, seriesswap
from overlay import paths
from overlay.trees.compose import select_targets
from overlay.errors import OverlayError
from overlay.series.model import ArchiveSource, GitSource, PinSet, Project, Source, load_all_pins, load_pinset, load_series
from overlay.series import yamldoc


def same_source(a: Source, b: Source) -> bool:
    """Whether two pinned targets start from the same content: a commit id (or an
    archive's sha256) names it, whichever URL or mirror it is fetched from."""
    if isinstance(a, GitSource) and isinstance(b, GitSource):
        return a.commit == b.commit
    if isinstance(a, ArchiveSource) and isinstance(b, ArchiveSource):
        return a.sha256 == b.sha256
    return False


def other_locks(root: Path, pin: PinSet, target: str) -> list[tuple[PinSet, bool]]:
    """The other pin sets that record a tree for `target`, each with whether it pins the
    same source as `pin` and carries the same patches for it (then the series composes it
    into the very same tree)."""
    mine = pin.target(target).source
    series = load_series(root)
    carried = [e.patch for e in series.for_target(target, pin.name)]
    out = []
    for other in load_all_pins(root):
        if other.name == pin.name or target not in other.target_names:
            continue
        theirs = other.target(target)
        if theirs.tree:
            # The same source composes the same tree only if the pin sets carry the same
            # patches for it (only-pins and applied-upstream are per pin set).
            same = same_source(mine, theirs.source) and \
                carried == [e.patch for e in series.for_target(target, other.name)]
            out.append((other, same))
    return out


@dataclass(frozen=True)
class SiblingUpdate:
    """A pin set whose lock `overlay lock` brought along: same target source, so same tree."""

    pin: str
    target: str
    old_tree: str
    tree: str


@dataclass(frozen=True)
class LockOutcome:
    trees: dict[str, str]  # target -> tree, in the pin set locked
    siblings: tuple[SiblingUpdate, ...] = field(default_factory=tuple)


def set_tree_ids(text: str, node: yamldoc.Node, trees: dict[str, str]) -> str:
    """Pure: the pin file text with `tree: <id>` set for each target in `trees`."""
    lines = text.splitlines(keepends=True)
    targets = node.value["targets"].value
    # Edit bottom-up so earlier line numbers stay valid.
    for name in sorted(trees, key=lambda n: targets[n].line, reverse=True):
        fields = targets[name].value
        tree_line = f"tree: {trees[name]}"
        if "tree" in fields:
            i = fields["tree"].line - 1
            lines[i] = re.sub(r"tree:\s*\S*", tree_line, lines[i], count=1)
        else:
            last = max(f.line for f in fields.values()) - 1
            first = min(f.line for f in fields.values()) - 1
            indent = re.match(r"\s*", lines[first]).group(0)
            newline = "\n" if not lines[last].endswith("\n") else ""
            lines[last] = lines[last] + newline
            lines.insert(last + 1, f"{indent}{tree_line}\n")
    return "".join(lines)


def lock(project: Project, pin: PinSet, *, targets: list[str] | None,
         into: Path | None) -> dict[str, str]:
    """Lock the composed targets (and the pin sets sharing their sources); the trees."""
    return lock_with_siblings(project, pin, targets=targets, into=into).trees


def lock_with_siblings(project: Project, pin: PinSet, *, targets: list[str] | None,
                       into: Path | None) -> LockOutcome:
    """Record the composed trees in the pin file, and in every other pin set that pins
    the same target source to a different tree: that lock would be stale now."""
    with seriesswap.checkout(project.root, f"lock --pin {pin.name}") as recovered:
        if recovered:
            project = Project.load(project.root)
        return _lock_with_siblings(project, pin, targets=targets, into=into)


def _lock_with_siblings(project: Project, pin: PinSet, *, targets: list[str] | None,
                        into: Path | None) -> LockOutcome:
    trees: dict[str, str] = {}
    for target in select_targets(pin, targets):
        work = paths.composed_dir(project.root, pin.name, target.name, into)
        state = composed.read_state(work)
        if state is None:
            if targets is None:
                continue  # lock what is composed (e.g. plugin only, offline)
            raise OverlayError(f"target '{target.name}' is not composed at {work}",
                               path=f"pins/{pin.name}.yaml",
                               hint=f"run `overlay apply --pin {pin.name} --targets {target.name}` first")
        reason = composed.why_not_replaceable(work)
        if reason:
            raise OverlayError(f"cannot lock {target.name}: {reason}", path=str(work),
                               hint=f"run `overlay refresh --pin {pin.name}` or re-apply first")
        names = [e.patch for e in project.series.for_target(target.name, pin.name)]
        if composed.series_moved_on(state, project.patches_dir, names):
            raise OverlayError(f"cannot lock {target.name}: the series changed since it was composed",
                               path=str(work), hint=f"run `overlay apply --pin {pin.name}` first")
        trees[target.name] = composed.tree_of(work)
    if not trees:
        raise OverlayError(f"nothing is composed for pin set '{pin.name}'", path=f"pins/{pin.name}.yaml",
                           hint=f"run `overlay apply --pin {pin.name}` first")
    siblings: list[SiblingUpdate] = []
    for target, tree in trees.items():
        for other, same in other_locks(project.root, pin, target):
            recorded = other.target(target).tree
            if same and recorded != tree:
                assert recorded is not None
                siblings.append(SiblingUpdate(other.name, target, recorded, tree))
    _write_trees(project, pin, trees)
    for other_name in dict.fromkeys(s.pin for s in siblings):
        other = load_pinset(project.root / "pins" / f"{other_name}.yaml", project.root)
        _write_trees(project, other, {s.target: s.tree for s in siblings if s.pin == other_name})
    return LockOutcome(trees, tuple(siblings))


def _write_trees(project: Project, pin: PinSet, trees: dict[str, str]) -> None:
    text = pin.path.read_text(encoding="utf-8")
    node = yamldoc.load(pin.path, f"pins/{pin.name}.yaml")
    new_text = set_tree_ids(text, node, trees)
    if new_text != text:
        tmp = pin.path.with_suffix(".yaml.tmp")
        tmp.write_text(new_text, encoding="utf-8")
        tmp.replace(pin.path)
    reloaded = load_pinset(pin.path, project.root)  # prove the file still validates
    assert all(reloaded.target(t).tree == tree for t, tree in trees.items())
