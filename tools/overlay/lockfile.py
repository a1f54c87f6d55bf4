"""`overlay lock`: record composed tree ids in the pin file, keeping its text and comments."""

from __future__ import annotations

import re
from pathlib import Path

from overlay import composed, paths
from overlay.compose import select_targets
from overlay.errors import OverlayError
from overlay.model import PinSet, Project, load_pinset
from overlay import yamldoc


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
    text = pin.path.read_text(encoding="utf-8")
    node = yamldoc.load(pin.path, f"pins/{pin.name}.yaml")
    new_text = set_tree_ids(text, node, trees)
    if new_text != text:
        tmp = pin.path.with_suffix(".yaml.tmp")
        tmp.write_text(new_text, encoding="utf-8")
        tmp.replace(pin.path)
    reloaded = load_pinset(pin.path, project.root)  # prove the file still validates
    assert all(reloaded.target(t).tree == tree for t, tree in trees.items())
    return trees
