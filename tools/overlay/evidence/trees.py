"""The composed trees an A/B protocol's servers run from, one set per (pin, series subset).

Each variant names a pin set and a series subset (`all`, `none` or patch files).
`bench ab` composes every distinct (pin, subset) once, before the first run, into
<results>/trees/<first variant with that pair>/<pin>/<target> (overlay.trees.compose,
atomic), and starts that variant's server from there. The tree ids go into every
run.json and into <results>/trees/trees.json; a resumed benchmark reuses trees
whose composed state still matches (same pin commit, same patch files and bytes,
untouched) and refuses when a recomposed tree differs from the one earlier runs
used, since those runs would no longer be comparable.

A variant without a pin runs whatever server is installed (no composed tree).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overlay.trees import compose, composed
from overlay import gitcmd
from overlay.errors import OverlayError
from overlay.evidence import bounded
from overlay.evidence.protocol import Protocol, Variant
from overlay.series.model import PinSet, Project, load_pin

TREES_DIR = "trees"
RECORD = "trees.json"


@dataclass(frozen=True)
class VariantTrees:
    variant: str
    folder: str  # <results>/trees/<folder>, shared by variants with the same (pin, subset)
    pin: str  # the resolved pin set name
    patches: tuple[str, ...] | None  # the patch files applied; None = the whole series
    dirs: tuple[tuple[str, Path], ...]  # (target, composed work tree)
    tree_ids: tuple[tuple[str, str], ...] = ()  # (target, git tree id), once composed
    reused: bool = False


def subset(variant: Variant) -> frozenset[str] | None:
    """The `only` argument of compose for a variant's series."""
    if variant.series == "all":
        return None
    if variant.series == "none":
        return frozenset()
    return frozenset(variant.series)


def _key(pin: str, only: frozenset[str] | None) -> tuple[str, tuple[str, ...] | None]:
    return pin, None if only is None else tuple(sorted(only))


def layout(protocol: Protocol, root: Path, results: Path) -> dict[str, VariantTrees]:
    """Where each pinned variant's trees go (nothing composed yet); pins are resolved."""
    folders: dict[tuple[str, tuple[str, ...] | None], str] = {}
    out: dict[str, VariantTrees] = {}
    for v in protocol.variants:
        if not v.pin:
            if v.series != "all":
                raise OverlayError(f"variant '{v.name}' selects series patches but has no pin to compose "
                                   "them on", path=str(protocol.path), line=v.line,
                                   hint="add `pin: <pin set>`, or drop `series` to run the installed server")
            continue
        pin = _pin(root, v)
        only = subset(v)
        folder = folders.setdefault(_key(pin.name, only), v.name)
        base = results.resolve() / TREES_DIR / folder / pin.name
        out[v.name] = VariantTrees(v.name, folder, pin.name, _patches(root, pin, only),
                                   tuple((t, base / t) for t in pin.target_names))
    return out


def _pin(root: Path, variant: Variant) -> PinSet:
    try:
        return load_pin(root, variant.pin)
    except OverlayError as exc:
        raise OverlayError(f"variant '{variant.name}': {exc.message}", path=exc.path, line=exc.line,
                           hint=exc.hint) from None


def _patches(root: Path, pin: PinSet, only: frozenset[str] | None) -> tuple[str, ...] | None:
    if only is None:
        return None
    series = Project.load(root).series
    return tuple(e.patch for e in series.entries if e.patch in only and e.target in pin.target_names)


def _expected(project: Project, pin: PinSet, target: str,
              only: frozenset[str] | None) -> tuple[str, ...]:
    return tuple(e.patch for e in project.series.for_target(target, pin.name)
                 if only is None or e.patch in only)


def _base_commit(pin: PinSet, target: str) -> str | None:
    return getattr(pin.target(target).source, "commit", None)


def _still_matches(project: Project, pin: PinSet, target: str, work: Path,
                   only: frozenset[str] | None) -> str | None:
    """The tree id of a composed tree that is still exactly what the variant needs, else None."""
    state = composed.read_state(work)
    if state is None or state.pin != pin.name or state.target != target:
        return None
    expected = _expected(project, pin, target, only)
    if tuple(state.patches) != expected:
        return None
    base = _base_commit(pin, target)
    if base and state.base != base:
        return None
    try:
        if state.series_digest != composed.series_digest(project.patches_dir, list(expected)):
            return None
        if composed.why_not_replaceable(work) is not None or composed.tree_of(work) != state.tree:
            return None
    except (OSError, gitcmd.GitFailed):
        return None
    return state.tree


def prepare(protocol: Protocol, root: Path, results: Path, mirror: Path | None,
            progress: Callable[[str], None], *, runs_recorded: bool) -> dict[str, VariantTrees]:
    """Compose (or reuse) every pinned variant's trees; raise OverlayError naming the variant."""
    planned = layout(protocol, root, results)
    if not planned:
        return {}
    project = Project.load(root)
    done: dict[str, VariantTrees] = {}  # by folder
    out: dict[str, VariantTrees] = {}
    for name, vt in planned.items():
        if vt.folder not in done:
            done[vt.folder] = _compose_one(project, protocol.variant(name), vt, mirror, progress)
        first = done[vt.folder]
        out[name] = VariantTrees(name, vt.folder, vt.pin, vt.patches, vt.dirs, first.tree_ids, first.reused)
    _check_runs(results, out)
    _check_record(results, out, runs_recorded)
    return out


def _check_runs(results: Path, trees: dict[str, VariantTrees]) -> None:
    """Complete runs already recorded the trees they ran from: a resumed start must use the same."""
    for meta in sorted((results / "runs").glob("*/run.json")):
        try:
            data = bounded.load_json(meta)
        except OverlayError:
            continue  # an unreadable run is not complete; bench ab sets it aside
        if not isinstance(data, dict):
            continue
        vt = trees.get(str(data.get("variant")))
        used = data.get("composed_trees")
        if vt is None or not used or used == dict(vt.tree_ids):
            continue
        target = next(t for t, i in vt.tree_ids if used.get(t) != i)
        raise OverlayError(f"variant '{vt.variant}': the composed {target} tree differs from the one run "
                           f"{meta.parent.name} used ({str(used.get(target))[:12]} -> "
                           f"{dict(vt.tree_ids)[target][:12]})", path=str(meta),
                           hint="the pin or the patches changed: restore them, or start a new results folder")


def _compose_one(project: Project, variant: Variant, vt: VariantTrees, mirror: Path | None,
                 progress: Callable[[str], None]) -> VariantTrees:
    pin = load_pin(project.root, vt.pin)
    only = subset(variant)
    into = vt.dirs[0][1].parent.parent
    ids = {t: _still_matches(project, pin, t, d, only) for t, d in vt.dirs}
    if all(ids.values()):
        for t, tree in ids.items():
            locked = pin.target(t).tree
            if locked and tree and locked != tree and _expected(project, pin, t, only) == _expected(project, pin, t, None):
                raise _mismatch(variant, pin, t, tree, locked)
        progress(f"variant {variant.name}: reusing composed trees under {into}")
        return VariantTrees(vt.variant, vt.folder, vt.pin, vt.patches, vt.dirs,
                            tuple((t, i) for t, i in ids.items() if i), reused=True)
    progress(f"variant {variant.name}: composing pin {pin.name} "
             f"({'whole series' if only is None else f'{len(only)} patch(es)'}) into {into}")
    try:
        outcomes = compose.compose(project, pin, targets=None, into=into, mirror=mirror, force=False,
                                   report=lambda _line: None, progress=progress, only=only)
    except OverlayError as exc:
        where = f"{exc.path}: " if exc.path else ""
        raise OverlayError(f"variant '{variant.name}': composing pin {pin.name} failed: {where}{exc.message}",
                           path=str(into), hint=_bench_hint(exc.hint, pin.name),
                           exit_code=exc.exit_code) from None
    finally:
        _drop_run_lock(into)
    trees = {o.target: o.tree for o in outcomes}
    if not all(trees.values()):
        raise OverlayError(f"variant '{variant.name}': composing pin {pin.name} gave no tree",
                           path=str(into))
    for o in outcomes:
        if o.tree_mismatch:
            raise _mismatch(variant, pin, o.target, o.tree or "", o.locked_tree or "")
    return VariantTrees(vt.variant, vt.folder, vt.pin, vt.patches, vt.dirs,
                        tuple((t, trees[t]) for t, _ in vt.dirs))


def _bench_hint(hint: str | None, pin: str) -> str:
    """compose's hints speak of `apply`; `bench ab` composes every target of the pin set
    and has no --targets."""
    if not hint:
        return "fix the series or the pin, then run again"
    if "--targets" in hint:
        return (f"put the sources under the mirror and pass --mirror or OVERLAY_MIRROR; `bench ab` composes "
                f"every target of pin set {pin} (give the variant a pin set with the targets you can reach)")
    return hint


def _mismatch(variant: Variant, pin: PinSet, target: str, tree: str, locked: str) -> OverlayError:
    """The same refusal as apply's TREE MISMATCH: evidence is at least as strict as apply."""
    return OverlayError(f"TREE MISMATCH for variant '{variant.name}', target {target}: composed tree "
                        f"{tree[:12]} but pins/{pin.name}.yaml records {locked[:12]}; refusing to benchmark "
                        "a tree the lock does not vouch for", path=f"pins/{pin.name}.yaml",
                        hint=f"if the series changed on purpose, run `overlay lock --pin {pin.name}`; "
                             "otherwise your inputs differ from the lock", exit_code=3)


def _drop_run_lock(into: Path) -> None:
    """compose leaves its run-lock file (and an empty folder when it failed early);
    neither belongs in an evidence folder. bench ab composes each folder once, alone."""
    try:
        (into / ".overlay.lock").unlink()
    except FileNotFoundError:
        pass
    for d in (into, into.parent):  # trees/<variant>, trees
        try:
            d.rmdir()  # only when empty
        except OSError:
            break


def _check_record(results: Path, trees: dict[str, VariantTrees], runs_recorded: bool) -> None:
    """Earlier runs must have used the same trees; record them for the next resume."""
    path = results / TREES_DIR / RECORD
    now = {name: {"folder": vt.folder, "pin": vt.pin,
                  "patches": None if vt.patches is None else list(vt.patches),
                  "trees": dict(vt.tree_ids)} for name, vt in trees.items()}
    if path.is_file() and runs_recorded:
        before = bounded.load_json(path)
        if not isinstance(before, dict):
            raise OverlayError("not a JSON object", path=str(path))
        for name, rec in now.items():
            old = (before.get(name) or {}).get("trees")
            if old is not None and old != rec["trees"]:
                target = next((t for t in rec["trees"] if old.get(t) != rec["trees"][t]), "?")
                raise OverlayError(f"variant '{name}': the composed {target} tree changed since runs were "
                                   f"recorded ({str(old.get(target))[:12]} -> {rec['trees'][target][:12]})",
                                   path=str(path), hint="the pin or the patches changed: restore them, "
                                                        "or start a new results folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(now, indent=2, sort_keys=True) + "\n", encoding="utf-8")
