"""The side effects of a rebase: drift at REF, the composed tree, `git am -3` and its
resolution state, and the end (pin file, series records, refresh, lock, check, gate)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from overlay.series import checks
from overlay.trees import baseline_trees, compose, composed, lockfile, ownership, refresh, runlock, seriesswap, sources
from overlay import gitcmd, paths
from overlay import reporting
from overlay.errors import OverlayError, inject_fault, printable
from overlay.series.model import (REQUIREMENT, ArchiveSource, GitSource, PinSet, Project, load_all_pins,
                           load_pinset)
from overlay.series.patchfile import read_patch
from overlay.series.upstream import commit_infos
from overlay.rebase.plan import (DECLARED_CORE_FILES, decide, residue_mail, new_pin_text, pairing,
                                 record_applied_upstream, set_only_pins, skip_record, split_entry,
                                 split_name, summary)
from overlay.rebase.state import (APPLY, CONFLICTED, DECIDE, DROPPED, KEPT, PORTED, REFRESHED, SHOWN,
                                  SKIPPED, BadState, RebaseState, bad_state, load_state,
                                  pin_name_problem, save_state, state_path)


def _progress(json_mode: bool):
    """Progress lines (fetching upstream) on a terminal only."""
    return reporting.progress("rebase", quiet=json_mode)


def _say(json_mode: bool, text: str) -> None:
    """A line for the maintainer; upstream's text in it (subjects, authors) made printable."""
    if not json_mode:
        print(printable(text), flush=True)


def _clock(state: RebaseState, phase: str, since: float) -> float:
    """Add the time since `since` to `phase`; the new `since`."""
    now = time.perf_counter()
    state.timings[phase] = round(state.timings.get(phase, 0.0) + now - since, 3)
    return now


def parse_moves(values: list[str]) -> list[tuple[str, str]]:
    """`--onto` values (repeatable, each a comma list of TARGET=REF) as (target, ref)."""
    from overlay.drift.targets import parse_pairs

    pairs: list[tuple[str, str]] = []
    for value in values:
        for target, ref in parse_pairs(value, "--onto"):
            if any(t == target for t, _ in pairs):
                raise OverlayError(f"--onto: target '{target}' is given twice")
            pairs.append((target, ref))
    return pairs


_ARCHIVE_REF = re.compile(r"^pypi:([^#]+?)(?:#sha256=([0-9a-fA-F]{64}))?$")


def archive_move(root: Path, pin, target: str, ref: str, mirror: Path | None,
                 progress) -> ArchiveSource:
    """`TARGET=pypi:NAME==VERSION[#sha256=HEX]`: the release's source archive (mirror
    pypi/, the cache, or a download with pip's configuration), with the sha256 computed
    from its bytes (and compared with the one given)."""
    m = _ARCHIVE_REF.match(ref)
    req = REQUIREMENT.match(m.group(1).strip()) if m else None
    if not m or not req:
        raise OverlayError(f"--onto {target}={ref}: expected pypi:NAME==VERSION[#sha256=HEX]",
                           hint=f"e.g. --onto {target}=pypi:vllm==0.27.1")
    if target not in pin.target_names:
        raise OverlayError(f"unknown target '{target}'", path=f"pins/{pin.name}.yaml",
                           hint="targets of this pin set: " + ", ".join(pin.target_names))
    wanted = ArchiveSource(req.group(1), req.group(2), "0" * 64)
    archive = ((sources.find_archive(mirror / "pypi", wanted) if mirror else None)
               or sources.find_archive(paths.cache_dir(root) / "archives", wanted))
    if archive is None:
        archive = sources.download_archive(wanted, paths.cache_dir(root) / "archives", progress)
    digest = sources.sha256_of(archive)
    if m.group(2) and m.group(2).lower() != digest:
        raise OverlayError(f"--onto {target}: {archive.name} has sha256 {digest}, not the "
                           f"{m.group(2).lower()} given", path=str(archive),
                           hint="the archive is not the release you named: remove it, or fix the digest")
    return ArchiveSource(wanted.name, wanted.version, digest), archive


def _pinned_words(src) -> str:
    return f"PyPI {src.requirement}" if isinstance(src, ArchiveSource) else f"commit {src.commit[:12]}"


def _history_of(src) -> str | None:
    """The git URL of the history a carrier's source comes from."""
    return src.url if isinstance(src, GitSource) else src.history


def _history_source(src):
    return src if isinstance(src, GitSource) else src.history_source


def declared_core(git_dir: Path, head: str) -> dict[str, str | None]:
    """What the plugin at `head` declares as its cores (its CI files), by kind."""
    out: dict[str, str | None] = {}
    for kind, path in DECLARED_CORE_FILES.items():
        proc = gitcmd.git(["show", "--end-of-options", f"{head}:{path}"], git_dir=git_dir,
                          check=False, data=True)
        value = proc.stdout.strip().split()[0] if proc.returncode == 0 and proc.stdout.strip() else None
        out[kind] = value
    return out


@contextmanager
def _locked(root: Path, command: str) -> Iterator[None]:
    """The checkout lock (apply, refresh and lock take it too), held for the whole of a
    rebase command: two rebases never start, continue or abort at once."""
    (root / ".overlay").mkdir(parents=True, exist_ok=True)
    with seriesswap.checkout(root, command):
        yield


# What the command adds at the end of a finished rebase: given the result and the mirror,
# the fields it adds to the result and the text printed after the summary.
After = Callable[[dict, Path | None], tuple[dict, str]]


def start(root: Path, args: argparse.Namespace, after: After | None = None) -> int:
    with _locked(root, "rebase"):
        if os.path.lexists(state_path(root)):
            raise OverlayError("a rebase is already in progress", path=SHOWN,
                               hint="overlay rebase --continue, --skip or --abort")
        return _start(root, args, after)


def _real_dir_or_absent(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except FileNotFoundError:
        return True


def _pin_from_text(root: Path, name: str, text: str) -> PinSet:
    """The pin set `text` describes, loaded as pins/NAME.yaml would be, from a fresh
    private folder under .overlay/ (pins/ is written only at the end)."""
    with tempfile.TemporaryDirectory(prefix="rebase-pin-", dir=root / ".overlay") as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        return load_pinset(path, root)


def _start(root: Path, args: argparse.Namespace, after: After | None) -> int:
    from overlay.drift.targets import (carrier_repo, import_release, load_patches, resolve_ref, target_slug,
                                       with_objects)
    from overlay.drift.report import overlap_line
    from overlay.drift.scan import Drift, commit_info, timed_onto

    began = time.perf_counter()
    moves = parse_moves(args.onto)
    project = Project.load(root)
    old = project.pin(args.pin)
    mirror = paths.mirror_root(args.mirror)
    for name, _ in moves:
        if name not in old.target_names:
            raise OverlayError(f"unknown target '{name}'", path=f"pins/{old.name}.yaml",
                               hint="targets of this pin set: " + ", ".join(old.target_names))
    carriers_at_old = [t for t in old.target_names if project.series.for_target(t, old.name)]
    moving = [t for t, _ in moves if t in carriers_at_old]
    if len(moving) > 1:
        raise OverlayError("--onto: rebase one target with patches at a time "
                           f"({', '.join(moving)} carry patches)", hint="move each in its own rebase")
    if not moving and len(carriers_at_old) != 1:
        raise OverlayError("--onto: the pin set has no single target with patches to carry "
                           f"({', '.join(carriers_at_old) or 'none carries patches'})",
                           hint="overlay rebase --onto plugin=REF [--onto core=pypi:vllm==X.Y.Z]")
    target = moving[0] if moving else carriers_at_old[0]
    ref = dict(moves).get(target, "")
    git_dir, base, drift_dir = carrier_repo(root, old, target, mirror, _progress(args.json))
    moved: dict = {}
    if ref.startswith("pypi:"):
        src, archive = archive_move(root, old, target, ref, mirror, _progress(args.json))
        src = replace(src, history=_history_of(old.target(target).source))
        head = import_release(root, src, archive, _progress(args.json))
        drift_dir = with_objects(drift_dir, sources.cache_repo(root, src.mirror_name))
        moved[target] = src
        words = {target: f"PyPI `{src.requirement}` (sha256 `{src.sha256}`)"}
    elif ref:
        head = resolve_ref(drift_dir, target, ref)
        moved[target] = GitSource(old.target(target).source.url, head)
        words = {target: f"`{head[:12]}` ({ref})"}
    else:  # the carrier stays where it is; the others move (core alone)
        head, ref = base, "its pinned " + ("archive" if isinstance(old.target(target).source, ArchiveSource)
                                           else "commit")
        moved[target] = old.target(target).source
        words = {target: f"unchanged ({_pinned_words(old.target(target).source)})"}
    for other, other_ref in moves:
        if other == target:
            continue
        if project.series.for_target(other, old.name):
            raise OverlayError(f"--onto {other}: target '{other}' carries patches; rebase one "
                               "target with patches at a time", hint=f"move {other} in its own rebase")
        if other_ref.startswith("pypi:"):
            src, _ = archive_move(root, old, other, other_ref, mirror, _progress(args.json))
            words[other] = f"PyPI `{src.requirement}` (sha256 `{src.sha256}`)"
        else:
            other_dir, _ = target_repo(root, old, other, mirror)
            src = GitSource(old.target(other).source.url, resolve_ref(other_dir, other, other_ref))
            words[other] = f"`{src.commit[:12]}` ({other_ref})"
        moved[other] = src
    new_name = args.new_pin or (moved[target].version if isinstance(moved[target], ArchiveSource)
                                else head[:8])
    if pin_name_problem(new_name):
        raise OverlayError(f"--as: {pin_name_problem(new_name)}",
                           hint="letters, digits, '.', '_' and '-', starting with a letter or digit")
    if os.path.lexists(root / "pins" / f"{new_name}.yaml"):
        raise OverlayError(f"pin set '{new_name}' already exists", path=f"pins/{new_name}.yaml",
                           hint="choose another name with --as NEWPIN")
    work = paths.composed_dir(root, new_name, target)
    if os.path.lexists(work):
        raise OverlayError("the composed tree of the new pin set already exists", path=str(work),
                           hint="remove it, or choose another name with --as NEWPIN")
    if not _real_dir_or_absent(work.parent):
        raise OverlayError("the folder of the new pin set's composed trees is not a directory (a "
                           "symbolic link?)", path=str(work.parent), hint="remove it, or choose another "
                           "name with --as NEWPIN")
    if head == base and len(moved) == 1:
        raise OverlayError(f"{ref} is the pinned commit of {target}: nothing to move",
                           path=f"pins/{old.name}.yaml", hint="give a newer REF")

    slug = target_slug(_history_source(old.target(target).source))
    patches, diffs = load_patches(project, target, old.name)
    # The plan's classes: rebase moves patches with `git am -3`, so a patch whose context
    # changed is labelled `fuzz` (and merged 3-way), not `conflict`. Whether a series
    # applies as `overlay apply` would (other pin sets, below) uses apply's rule, no fuzz.
    engine = Drift(drift_dir, base, patches, diffs, slug=slug, max_fuzz=2)
    try:
        run_ = timed_onto(engine, target, ref, head)
    finally:
        engine.close()
    overlap = {}
    for o in run_.overlap:
        overlap.setdefault(o.patch, []).append((printable(overlap_line(o)), o))  # kept, shown, summarised
    landed = {}
    carriers = {}
    infos = commit_infos(drift_dir, [c for v in run_.verdicts if v.rule == "upstream-commit"
                                   for c in v.upstream_commits])  # one batch, however many
    for v in run_.verdicts:
        if v.landed:
            landed[v.patch] = commit_info(drift_dir, v.landed)
        if v.rule == "upstream-commit":  # the last of its commits to land carries it
            carriers[v.patch] = max((infos[c] for c in v.upstream_commits), key=lambda i: i.date)
    core = moved.get("core", old.target("core").source) if "core" in old.target_names else None
    paired = pairing(declared_core(drift_dir, head), core) if target == "plugin" else (True, "")
    residue = _residue(drift_dir, head, patches, run_.verdicts)
    plans = decide(run_.verdicts, overlap, landed, slug, carriers, paired, residue)
    order = [p.patch for p in plans if p.action == APPLY]
    state = RebaseState(old.name, new_name, target, ref, head, str(git_dir), str(work),
                        new_pin_text(old, moved, ref), plans, order,
                        others=[t for t in moved if t != target], moves=words,
                        mirror=str(mirror) if mirror else None,
                        decisions=[p.patch for p in plans if p.action == DECIDE],
                        owner=ownership.new_nonce())
    began = _clock(state, "drift", began)
    _say(args.json, f"rebasing pin set {old.name} onto {target} {ref} ({head[:12]}) as {new_name}"
         + "".join(f"; {t} to {w}" for t, w in words.items() if t != target))
    for p in plans:
        _say(args.json, f"  {p.patch}: drift says {p.drift}; "
                        + {DROPPED: f"drop it ({p.why})", DECIDE: "superseded upstream: decide",
                           APPLY: "apply it with 3-way" + (f" ({p.note})" if p.note else "")}[p.action])

    inject_fault("rebase-before-state")
    save_state(root, state)  # first: an interrupted start is then undone by --abort
    try:
        new_pin = _pin_from_text(root, new_name, state.pin_text)
        obtained = sources.obtain(root, new_pin.target(target), mirror, _progress(args.json))
        work.parent.mkdir(parents=True, exist_ok=True)
        # made here, with the marker --abort checks before it deletes anything
        ownership.make_tree(work, state.owner)
        compose._init_tree(work, obtained, paths.branch_name(new_name))
        # git am -3 finds each patch's preimage by the blob ids in its index lines:
        # the history drift read holds them (the cache holds only pinned snapshots).
        alternates = work / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(alternates.read_text() + str((git_dir / "objects").resolve()) + "\n")
    except BaseException:
        if ownership.tree_owner(work, state.owner)[0] is not None:
            ownership.remove_tree(work)
        state_path(root).unlink(missing_ok=True)
        raise
    began = _clock(state, "compose", began)
    # A patch upstream carries only in part is applied as its residue (paired pin sets only:
    # elsewhere upstream's version is unproven and the whole patch is kept).
    partial = {n for n, (_, kept, _) in residue.items() if kept and paired[0]}
    with tempfile.TemporaryDirectory(prefix="rebase-residue-", dir=root / ".overlay") as tmp:
        mails = [_residue_mail(Path(tmp), project.patches_dir / name, residue[name][2]) if name in partial
                 else project.patches_dir / name for name in order]
        proc = _am(work, ["-3", "--keep-non-patch", "--committer-date-is-author-date",
                          "--whitespace=nowarn", *map(str, mails)]) if mails else None
    _clock(state, "git am -3", began)
    return _after_am(root, state, proc, args.json, after)


def _am(work: Path, args: list[str]):
    name, email = gitcmd.user_identity()
    return gitcmd.git(["am", *args], cwd=work, check=False,
                      env={"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
                           "GIT_EDITOR": "true"})


def _am_stopped_at(state: RebaseState) -> str | None:
    """The patch `git am` stopped on, or None when it is not in progress."""
    apply_dir = Path(state.work) / ".git" / "rebase-apply"
    if not apply_dir.is_dir():
        return None
    if not state.apply_order:
        return None
    try:
        index = int((apply_dir / "next").read_text().strip())
    except (OSError, ValueError):
        index = 1
    return state.apply_order[max(1, min(index, len(state.apply_order))) - 1]


def _stop(root: Path, state: RebaseState) -> None:
    state.stopped_at = time.time()
    save_state(root, state)


def _after_am(root: Path, state: RebaseState, proc, json_mode: bool, after: After | None = None) -> int:
    stopped = _am_stopped_at(state)
    if stopped is not None:
        if stopped not in state.conflicts:
            state.conflicts.append(stopped)
        _stop(root, state)
        files = [f for f in gitcmd.git(["diff", "--name-only", "-z", "--diff-filter=U"],
                                       cwd=Path(state.work), check=False).stdout.split("\0") if f]
        where = ", ".join(files) if files else "see git status"
        message = (f"{stopped} conflicts at {state.ref} ({where}): resolve it in {state.work} "
                   f"(edit, then git add), then `overlay rebase --continue`; "
                   f"`overlay rebase --skip` drops it; `overlay rebase --abort` gives up")
        return _report_stop(state, stopped, "conflict", message, {"files": files}, json_mode)
    if proc is not None and proc.returncode != 0 and not (Path(state.work) / ".git" / "rebase-apply").exists():
        reason = (proc.stderr or proc.stdout or "").strip().splitlines()
        raise OverlayError(f"git am failed: {reason[-1] if reason else 'no message'}", path=state.work,
                           hint="overlay rebase --abort, then check the patches with overlay check")
    if state.decisions:
        return _ask(root, state, json_mode)
    return finish(root, state, json_mode, after)


def _ask(root: Path, state: RebaseState, json_mode: bool) -> int:
    """Stop for a superseded patch: the maintainer drops it or ports it on top."""
    patch = state.decisions[0]
    plan = state.plan(patch)
    own = plan.upstream_version or {}
    state.decision_base = composed.head(Path(state.work))
    _stop(root, state)
    message = (f"{patch} is superseded at {state.ref} by upstream's own version {own.get('ref')} "
               f"({(own.get('commit') or '')[:12]}). Port it on top of upstream's: commit the port "
               f"in {state.work} (git am --keep-non-patch PORT.patch, or edit and git commit), then "
               f"`overlay rebase --continue`; or drop it: `overlay rebase --skip`")
    return _report_stop(state, patch, "decision", message, {"superseded_by": own}, json_mode)


def _report_stop(state: RebaseState, patch: str, status: str, message: str, extra: dict,
                 json_mode: bool) -> int:
    """Say where the rebase stopped (a conflict, a decision) and what to do; exit 1."""
    plan = state.plan(patch)
    if json_mode:
        print(json.dumps({"ok": False, "status": status, "patch": patch, **extra,
                          "work": state.work, "drift": plan.drift, "overlap": plan.overlap},
                         indent=2))
    else:
        _say(json_mode, f"{status.upper()}: {message}")
        for line in plan.overlap:
            _say(json_mode, f"  upstream overlap: {line}")
    return 1


def _decide(root: Path, state: RebaseState, *, skip: bool, json_mode: bool,
            after: After | None = None) -> int:
    """--continue (the commits added since the stop are the port) or --skip (drop it)."""
    work = Path(state.work)
    patch = state.decisions[0]
    plan = state.plan(patch)
    own = plan.upstream_version or {}
    if (work / ".git" / "rebase-apply").exists():
        raise OverlayError(f"{patch}: a git am is in progress in the composed tree", path=str(work),
                           hint="finish it (git am --continue) or abort it (git am --abort) first")
    dirty = gitcmd.git(["status", "--porcelain", "--untracked-files=no"], cwd=work).stdout.strip()
    if dirty:
        raise OverlayError(f"{patch}: the composed tree has uncommitted changes", path=str(work),
                           hint="commit the port (git commit), or discard them (git checkout -- .)")
    added = gitcmd.out(["rev-list", "--reverse", "--end-of-options", f"{state.decision_base}..HEAD"],
                       cwd=work).split()
    record = {"ref": own.get("ref") or "upstream", "commit": own.get("commit"), "rule": "superseded-by"}
    if skip:
        if added:
            raise OverlayError(f"{patch}: {len(added)} commit(s) were added since the stop",
                               path=str(work), hint="`overlay rebase --continue` keeps them as the "
                               f"port; to drop the patch, git reset --hard {state.decision_base[:12]} first")
        plan.outcome, plan.why = DROPPED, f"superseded by upstream's own version {record['ref']}: dropped"
    else:
        if not added:
            raise OverlayError(f"{patch}: nothing was ported (no commit since the stop)", path=str(work),
                               hint="commit the port in the composed tree, or drop the patch with "
                                    "`overlay rebase --skip`")
        state.ports[patch] = added
        record["rule"] = "superseded-by (ported)"
        plan.outcome = PORTED
        plan.why = f"superseded by upstream's own version {record['ref']}: ported on top of it"
    plan.applied_upstream = record
    state.decisions.pop(0)
    save_state(root, state)
    if state.decisions:
        return _ask(root, state, json_mode)
    return finish(root, state, json_mode, after)


def _not_ours(state: RebaseState) -> str | None:
    """Why the composed tree the state names is not provably the one this rebase made
    (None: it is): its folders real ones, not links, and the marker of the state's nonce."""
    work = Path(state.work)
    if not _real_dir_or_absent(work.parent):
        return f"{work.parent} is not a directory (a symbolic link?)"
    return ownership.tree_owner(work, state.owner)[1]


def _sound(root: Path, state: RebaseState) -> None:
    """What the schema cannot tell: the state fits this checkout. Raises, before anything
    is done, when it does not."""
    project = Project.load(root)
    if not os.path.lexists(root / "pins" / f"{state.old_pin}.yaml"):
        raise bad_state(f"old_pin '{state.old_pin}' is no pin set of this checkout")
    listed = {e.patch for e in project.series.entries}
    stray = [p.patch for p in state.plans if p.patch not in listed]
    if stray:
        raise OverlayError(f"the rebase state plans {stray[0]}, which series.yaml does not list",
                           path=SHOWN, hint="put the entry back in series.yaml, or give up with "
                                            "`overlay rebase --abort`")
    try:
        pin = _pin_from_text(root, state.new_pin, state.pin_text)
    except OverlayError as exc:
        raise bad_state(f"its pin_text is not a pin set ({exc.message})") from None
    missing = [t for t in (state.target, *state.others) if t not in pin.target_names]
    if missing:
        raise bad_state(f"its pin_text has no target '{missing[0]}'")
    src = pin.target(state.target).source
    if isinstance(src, ArchiveSource):  # its head is the release's import in the cache
        imported = gitcmd.resolve(sources.cache_repo(root, src.mirror_name), sources.archive_ref(src))
        if imported != state.head:
            raise bad_state(f"its pin_text does not pin {state.target} at its head {state.head[:12]}")
    elif src.commit != state.head:
        raise bad_state(f"its pin_text does not pin {state.target} at its head {state.head[:12]}")
    if os.path.lexists(root / "pins" / f"{state.new_pin}.yaml"):
        raise _pin_exists(state.new_pin)
    why = _not_ours(state)
    if why is not None:
        raise OverlayError(f"the composed tree is not provably this rebase's: {why}", path=state.work,
                           hint="nothing was changed; give up with `overlay rebase --abort` (it leaves "
                                "that folder as it is)")
    if isinstance(src, GitSource):
        try:
            held = gitcmd.has_commit(Path(state.git_dir), state.head)
        except OverlayError:
            held = False
        if not held:
            raise bad_state(f"git_dir {state.git_dir} does not hold its head {state.head[:12]}")


def _pin_exists(name: str) -> OverlayError:
    return OverlayError(f"pin set '{name}' already exists: it appeared since the rebase started, and "
                        "the rebase never overwrites it; nothing was written", path=f"pins/{name}.yaml",
                        hint="move it aside and run `overlay rebase --continue` again, or give up with "
                             "`overlay rebase --abort`")


def resume(root: Path, *, skip: bool, json_mode: bool, after: After | None = None) -> int:
    with _locked(root, "rebase --skip" if skip else "rebase --continue"):
        state = load_state(root)
        _sound(root, state)
        return _resume(root, state, skip=skip, json_mode=json_mode, after=after)


def _resume(root: Path, state: RebaseState, *, skip: bool, json_mode: bool,
            after: After | None = None) -> int:
    if state.stopped_at is not None:
        state.waited = round(state.waited + max(0.0, time.time() - state.stopped_at), 1)
        state.stopped_at = None
    work = Path(state.work)
    stopped = _am_stopped_at(state) if state.decision_base is None else None
    if stopped is None and state.decision_base is not None and state.decisions:
        return _decide(root, state, skip=skip, json_mode=json_mode, after=after)
    if skip:
        if stopped is None:
            raise OverlayError("nothing to skip: git am is not stopped on a patch", path=str(work),
                               hint="overlay rebase --continue finishes the rebase")
        state.skipped.append(stopped)
        save_state(root, state)
        began = time.perf_counter()
        proc = _am(work, ["--skip"])
        _clock(state, "git am -3", began)
        return _after_am(root, state, proc, json_mode, after)
    if stopped is not None:
        unresolved = [f for f in gitcmd.git(["diff", "--name-only", "-z", "--diff-filter=U"], cwd=work,
                                            check=False).stdout.split("\0") if f]
        if unresolved:
            raise OverlayError(f"{stopped}: {', '.join(unresolved)} still has conflicts", path=str(work),
                               hint="resolve them, git add the files, then overlay rebase --continue")
        began = time.perf_counter()
        proc = _am(work, ["--continue"])
        _clock(state, "git am -3", began)
        return _after_am(root, state, proc, json_mode, after)
    if state.decisions:
        return _ask(root, state, json_mode)
    return finish(root, state, json_mode, after)


def abort(root: Path, json_mode: bool) -> int:
    """Give up: remove the state, and the composed tree only where it is provably the one
    this rebase made; a state that is not one overlay wrote proves no tree, and only it
    is removed."""
    with _locked(root, "rebase --abort"):
        try:
            state = load_state(root)
        except BadState as exc:
            _drop_state(root)
            return _aborted(json_mode, None, None, f"{SHOWN} was not a state overlay wrote "
                            f"({exc.why}): removed it, and no composed tree (none is provably this "
                            "rebase's: remove one you do not want yourself)")
        work = Path(state.work)
        why = _not_ours(state)
        if why is None:
            ownership.remove_tree(work)
            try:
                work.parent.rmdir()  # build/NEW, if the rebase made it and it is empty now
            except OSError:
                pass
            left = f"removed {work}"
        elif os.path.lexists(work) or not _real_dir_or_absent(work.parent):
            left = f"left {work} as it is: {why}"
        else:
            left = "no composed tree was made"
        _drop_state(root)
        return _aborted(json_mode, state.old_pin, work if why is None else None, left)


def _drop_state(root: Path) -> None:
    scratch = root / ".overlay" / "rebase-pins"  # where an older version loaded the new pin file
    if not os.path.islink(scratch) and scratch.is_dir():
        shutil.rmtree(scratch, ignore_errors=True)
    state_path(root).unlink(missing_ok=True)  # a link there: the link, never what it names


def _aborted(json_mode: bool, pin: str | None, removed: Path | None, said: str) -> int:
    if json_mode:
        print(json.dumps({"ok": True, "status": "aborted", "pin": pin,
                          "removed": str(removed) if removed else None, "said": said}))
    else:
        kept = f"pins/{pin}.yaml, series.yaml" if pin else "pins/, series.yaml"
        print(f"rebase aborted: {said}; {kept} and patches/ are as they were")
    return 0


# ----------------------------------------------------------------------------- the end


@dataclass
class _Snapshot:
    """The bytes of everything the end of a rebase may change, to put back on failure."""

    series: bytes
    patches: dict[str, bytes]
    new_pin: Path
    created: bool = False  # whether this run made the new pin file (only then is it removed)

    @classmethod
    def take(cls, root: Path, new_pin: str) -> "_Snapshot":
        patches_dir = root / "patches"
        return cls((root / "series.yaml").read_bytes(),
                   {p.name: p.read_bytes() for p in patches_dir.iterdir() if p.is_file()},
                   root / "pins" / f"{new_pin}.yaml")

    def restore(self, root: Path) -> None:
        if (root / "series.yaml").read_bytes() != self.series:
            (root / "series.yaml").write_bytes(self.series)
        patches_dir = root / "patches"
        for p in patches_dir.iterdir():
            if p.is_file() and p.name not in self.patches:
                p.unlink()
        for name, data in self.patches.items():
            path = patches_dir / name
            if not path.is_file() or path.read_bytes() != data:
                path.write_bytes(data)
        if self.created:
            self.new_pin.unlink(missing_ok=True)


def _carriage(text: str, project: Project, state: RebaseState) -> str:
    """The new pin set carries what the old one carried: entries its upstream already
    carries at the old pin set stay out (their `applied-upstream` pins gain the new one),
    and entries only some pin sets carry (`only-pins`) stay in where the old one was."""
    for entry in sorted(project.series.entries, key=lambda e: -e.line):
        prov = entry.provenance
        held = prov.record_at(state.old_pin)
        if held is not None:
            text = record_applied_upstream(text, entry.line, carried_record(held, state), state.new_pin,
                                           prov.applied_upstream_records)
        elif state.old_pin in entry.only_pins:
            text = set_only_pins(text, entry.line, [*entry.only_pins, state.new_pin])
    return text


def carried_record(held, state: RebaseState) -> dict:
    """The record the new pin set gets for an entry the old one left out. Where the
    carrier moved to a release archive, no ancestry can be re-proven there (a release has
    no history, and backports rarely match upstream's text): the record says it was
    carried from the old pin set, by which rule, rather than claim that rule again."""
    record = held.as_dict()
    if state.ref.startswith("pypi:") and not (record.get("rule") or "").startswith("carried from"):
        record["rule"] = f"carried from {state.old_pin} ({record.get('rule') or 'recorded'}); " \
                         "not re-proven at the release"
    return record


def _create_pin(path: Path, name: str, text: str) -> None:
    """pins/NEW.yaml, created exclusively: one that appeared meanwhile is never overwritten."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except FileExistsError:
        raise _pin_exists(name) from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def finish(root: Path, state: RebaseState, json_mode: bool, after: After | None = None) -> int:
    _sound(root, state)  # again: the checkout may have moved on while the rebase was stopped
    began = time.perf_counter()
    work = Path(state.work)
    project = Project.load(root)
    by_subject = {}
    for name in state.apply_order:
        if name in state.skipped:
            continue
        by_subject[read_patch(project.patches_dir / name).subject] = name
    ported = {c: patch for patch, commits in state.ports.items() for c in commits}
    commits = gitcmd.out(["rev-list", "--reverse", "--end-of-options", f"{state.head}..HEAD"],
                         cwd=work).split()
    mapping: dict[str, str] = {}
    own = [c for c in commits if c not in ported]  # a port: refresh makes it a new entry
    expected = [n for n in state.apply_order if n not in state.skipped]
    for c in own:
        subject = gitcmd.out(["log", "-1", "--format=%s", "--end-of-options", c], cwd=work)
        name = by_subject.get(subject)
        if name is not None:
            mapping[c] = name
    if len(mapping) < len(own):
        # A reworded commit (its message amended while resolving): the commits are the
        # remaining patches in the order they were applied, one each, or nothing matches.
        left = [n for n in expected if n not in mapping.values()]
        unmatched = [c for c in own if c not in mapping]
        if len(left) != len(unmatched):
            raise OverlayError(f"commit {unmatched[0][:12]} on the rebased branch matches no patch of the series",
                               path=str(work), hint="keep one commit per patch (amend, do not add)")
        mapping.update(zip(unmatched, left))
        mapping = {c: mapping[c] for c in own}
    carried = list(mapping.values())
    for name in state.apply_order:
        plan = state.plan(name)
        if name in state.skipped:
            plan.outcome, plan.why = SKIPPED, "its conflict was skipped (overlay rebase --skip)"
            plan.applied_upstream = skip_record(plan)
            if plan.upstream_version:
                plan.why += f"; upstream's own version: {plan.upstream_version['ref']}"
        elif name not in carried:
            # Not on the branch: only upstream's content may account for that (a raw
            # `git am --skip` or a dropped commit is not upstream carrying it).
            if not _reverse_applies(work, project.patches_dir / name):
                raise OverlayError(f"{name} is not on the rebased branch, and upstream's content at "
                                   f"{state.ref} does not carry it (it does not reverse-apply)",
                                   path=str(work), hint="apply it (git am the patch), or drop it for "
                                   "this pin set with `overlay rebase --skip` while git am stops on it")
            plan.outcome = DROPPED
            plan.why = "git am -3 found nothing left to change: upstream's content carries it (reverse-applies)"
            plan.applied_upstream = {"ref": "upstream at " + state.ref, "rule": "3-way-empty (reverse)"}

    snapshot = _Snapshot.take(root, state.new_pin)
    try:
        pin_path = root / "pins" / f"{state.new_pin}.yaml"
        _create_pin(pin_path, state.new_pin, state.pin_text)  # first: nothing is written if it is there
        snapshot.created = True
        text = (root / "series.yaml").read_text(encoding="utf-8")
        text = _carriage(text, project, state)
        (root / "series.yaml").write_text(text, encoding="utf-8")
        project = Project.load(root)
        entries = {e.patch: e for e in project.series.entries}
        for plan in sorted(state.plans, key=lambda p: -entries[p.patch].line):
            if plan.applied_upstream is not None:
                entry = entries[plan.patch]
                text = record_applied_upstream(text, entry.line, plan.applied_upstream, state.new_pin,
                                               entry.provenance.applied_upstream_records)
        (root / "series.yaml").write_text(text, encoding="utf-8")
        project = Project.load(root)  # validates what was just written
        pin = project.pin(state.new_pin)
        composed.add_notes(work, mapping)
        names = tuple(carried)
        composed.write_state(work, composed.ComposedState(
            pin=pin.name, target=state.target, base=state.head, head=composed.head(work),
            tree=composed.tree_of(work), branch=paths.branch_name(pin.name), patches=names,
            series_digest=composed.series_digest(project.patches_dir, names)))
        before = {n: (project.patches_dir / n).read_bytes() for n in names}
        began = _clock(state, "finish: records", began)
        refreshed = refresh.refresh(project, pin, targets=[state.target], into=None)
        if refreshed.added:
            # the ports: carried by the new pin set only (the old ones keep the patch
            # upstream superseded)
            text = (root / "series.yaml").read_text(encoding="utf-8")
            project = Project.load(root)
            for entry in sorted(project.series.entries, key=lambda e: -e.line):
                if entry.patch in refreshed.added:
                    text = set_only_pins(text, entry.line, [state.new_pin])
            (root / "series.yaml").write_text(text, encoding="utf-8")
            _name_ports(root, state, refreshed.added)
        splits, restored = _split_shared(root, state, before, names, work, mapping)
        if splits or restored:
            carried = [splits.get(n, n) for n in carried]
            mapping = {c: splits.get(n, n) for c, n in mapping.items()}
            _retie(work, state, mapping, root)
        began = _clock(state, "refresh", began)
        project = Project.load(root)
        pin = project.pin(state.new_pin)
        for other in state.others:  # moved without patches of their own: compose them now
            compose.compose(project, pin, targets=[other], into=None,
                            mirror=_mirror_of(state), force=False, report=lambda _: None,
                            progress=_progress(json_mode))
        if state.others:
            began = _clock(state, "compose " + ", ".join(state.others), began)
        trees = lockfile.lock(project, pin, targets=[state.target, *state.others], into=None)
        began = _clock(state, "lock", began)
    except BaseException:
        snapshot.restore(root)
        raise
    for name in carried:
        source = next((o for o, n in splits.items() if n == name), name)
        plan = state.plan(source)
        changed = source != name or before[name] != (project.patches_dir / name).read_bytes()
        if source != name:
            plan.split_as = name
        if source in state.conflicts:
            plan.outcome, plan.why = CONFLICTED, "conflicted; resolved by hand and refreshed"
        elif changed:
            plan.outcome = REFRESHED
            plan.why = {"fuzz": "its context changed upstream: applied by 3-way merge, refreshed",
                        "conflict": "applied by 3-way merge, refreshed",
                        "blocked": "applied on top of the patches it builds on, refreshed",
                        }.get(plan.drift.split()[0],
                              "applied; refreshed to the new line numbers and blob ids")
        else:
            plan.outcome, plan.why = KEPT, "applies as it is"
    findings = checks.run_checks(root)
    began = _clock(state, "check", began)
    gate = _gate(root, state)
    began = _clock(state, "gate", began)
    others = _other_pins(root, project, state)
    _clock(state, "other pin sets", began)
    ownership.unmark_tree(work)  # an ordinary composed tree now: --abort no longer applies to it
    _drop_state(root)
    result = {"ok": not findings and (gate is None or gate["ok"]) and all(o["applies"] for o in others),
              "status": "done",
              "pin": state.old_pin, "new_pin": state.new_pin, "target": state.target,
              "ref": state.ref, "head": state.head, "tree": trees.get(state.target),
              "trees": trees, "moves": state.moves,
              "patches": [asdict(p) for p in state.plans],
              "refresh": refreshed.as_dict(),
              "check": [f.as_dict() for f in findings], "gate": gate, "other_pins": others,
              "timings": state.timings, "waited_s": state.waited}
    fields, epilogue = after(result, _mirror_of(state)) if after is not None else ({}, "")
    result.update(fields)
    if json_mode:
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(printable(summary(state, result) + epilogue, newlines=True))
    return 0 if result["ok"] else 1


def _split_shared(root: Path, state: RebaseState, before: dict[str, bytes],
                  names: tuple[str, ...], work: Path, commits: dict[str, str]) -> dict[str, str]:
    """Pin sets are independent: a patch the rebase rewrote that another pin set still
    carries keeps its bytes for that pin set, and the new version becomes an entry of its
    own carried by the new pin set only (or joins an entry already holding those bytes).
    Returns ({old name: new name} for the entries it split, the entries whose old bytes
    it put back because they make the same tree)."""
    project = Project.load(root)
    pins = [p for p in load_all_pins(root) if p.name != state.new_pin and state.target in p.target_names]
    entries = {e.patch: e for e in project.series.entries}
    splits: dict[str, str] = {}
    restored: list[str] = []
    for name in names:
        path = project.patches_dir / name
        new_bytes = path.read_bytes()
        if new_bytes == before[name]:
            continue
        entry = entries[name]
        others = [p.name for p in pins if entry.carried_at(p.name)]
        if not others:
            continue
        path.write_bytes(before[name])  # the other pin sets' version stays as it was
        commit = next((c for c, n in commits.items() if n == name), None)
        if commit is not None and _same_result(work, commit, path):
            restored.append(name)
            continue  # the old bytes make the same tree here: one entry serves both
        text = (root / "series.yaml").read_text(encoding="utf-8")
        twin = next((e for e in project.series.entries if e.patch != name and e.target == entry.target
                     and e.only_pins and (project.patches_dir / e.patch).read_bytes() == new_bytes), None)
        if twin is not None:  # an entry already holds these bytes: it is carried here too
            text = set_only_pins(text, twin.line, [*twin.only_pins, state.new_pin])
            keep = [p for p in (entry.only_pins or others) if p != state.new_pin]
            text = set_only_pins(text, _line_of(text, name), keep)
            splits[name] = twin.patch
        else:
            scratch = project.patches_dir / f".split-{name}"
            scratch.write_bytes(new_bytes)
            try:
                mail = read_patch(scratch)
            finally:
                scratch.unlink()
            new_name = split_name(name, {p.name for p in project.patches_dir.iterdir()},
                                  refresh.slug(mail.subject))
            (project.patches_dir / new_name).write_bytes(new_bytes)
            keep = [p for p in (entry.only_pins or others) if p != state.new_pin]
            touched = {f.path for f in mail.files if f.target}
            listed = [t for t in entry.tests if t in touched]
            tests = listed if listed == list(entry.tests) else sorted(
                set(listed) | {f.path for f in mail.files if f.created and f.path.startswith("tests/")})
            text = split_entry(text, entry.line, new_name, mail.subject, state.new_pin, keep,
                               old_subject=read_patch(path).subject, tests=tests)
            splits[name] = new_name
        (root / "series.yaml").write_text(text, encoding="utf-8")
        project = Project.load(root)
        entries = {e.patch: e for e in project.series.entries}
    return splits, restored


def _line_of(text: str, patch: str) -> int:
    """The 1-based line of `- patch: NAME` in series.yaml text."""
    for k, line in enumerate(text.splitlines(), 1):
        if line.strip() == f"- patch: {patch}":
            return k
    raise OverlayError(f"series entry {patch} is gone", path="series.yaml")


def _retie(work: Path, state: RebaseState, mapping: dict[str, str], root: Path) -> None:
    """After a split: the composed commits' notes and state name the new entries."""
    project = Project.load(root)
    composed.add_notes(work, mapping)
    names = tuple(mapping.values())  # in the order the commits were applied
    composed.write_state(work, composed.ComposedState(
        pin=state.new_pin, target=state.target, base=state.head, head=composed.head(work),
        tree=composed.tree_of(work), branch=paths.branch_name(state.new_pin), patches=names,
        series_digest=composed.series_digest(project.patches_dir, names)))


def _mirror_of(state: RebaseState) -> Path | None:
    """The mirror the rebase started with (else OVERLAY_MIRROR now)."""
    return Path(state.mirror) if state.mirror else paths.mirror_root(None)


def _same_result(work: Path, commit: str, patch: Path) -> bool:
    """Whether `patch` applied on `commit`'s parent gives `commit`'s tree (in a scratch
    index: the work tree is not touched)."""
    with tempfile.TemporaryDirectory(prefix="overlay-same-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        gitcmd.git(["read-tree", f"{commit}^"], cwd=work, env=env)
        proc = gitcmd.git(["apply", "--cached", str(patch)], cwd=work, env=env, check=False)
        if proc.returncode != 0:
            return False
        return gitcmd.out(["write-tree"], cwd=work, env=env) == composed.tree_of(work, commit)


def _residue(git_dir: Path, head: str, patches, verdicts) -> dict:
    """patch -> (carried, kept, keep) for each patch drift merged by provenance
    (upstream-commit): what upstream's content at REF carries of it, hunk by hunk."""
    from overlay.drift.scan import carried_by_upstream_all

    by_name = {p.name: p for p in patches}
    return carried_by_upstream_all(git_dir, head, [by_name[v.patch] for v in verdicts if v.cls == "merged"
                                                   and v.rule == "upstream-commit" and v.patch in by_name])


def _residue_mail(folder: Path, mail: Path, keep: set) -> Path:
    """The residue of a patch upstream carries in part, as a mail for git am (git am keeps
    its own copy: the folder goes when am returns)."""
    out = folder / mail.name
    out.write_text(residue_mail(mail.read_text(encoding="utf-8"), keep), encoding="utf-8")
    return out


def _reverse_applies(work: Path, patch: Path) -> bool:
    """Whether the patch's change is already in the work tree's HEAD (it applies in
    reverse), checked against the index only: nothing is written."""
    proc = gitcmd.git(["apply", "--check", "--cached", "-R", str(patch)], cwd=work, check=False)
    return proc.returncode == 0


def _name_ports(root: Path, state: RebaseState, added: list[str]) -> None:
    """Which new entries port which superseded patch (by the order of the commits)."""
    pending = list(added)
    for patch, commits in state.ports.items():
        take, pending = pending[:len(commits)], pending[len(commits):]
        plan = state.plan(patch)
        plan.ported_as = take
        if take:
            plan.why += " as " + ", ".join(take)


def _gate(root: Path, state: RebaseState) -> dict | None:
    """The contract gate on the new plugin tree against the pin set's composed core (the
    core did not move: the old pin set's composed core serves when the new one has none),
    counting only what is new against the baseline: upstream's plugin at the new commit
    or release, without the series, against the core it declares. Findings upstream ships
    with at its own pairing are not the series' (issue 30 item 5). Without a baseline every
    error counts (fail closed)."""
    from overlay.drift.targets import GatePlan, new_gate_findings

    if state.target != "plugin":
        return {"ok": True, "ran": False, "why": "the gate checks the plugin; core moved"}
    core = paths.composed_dir(root, state.new_pin, "core")
    if not core.is_dir():
        core = paths.composed_dir(root, state.old_pin, "core")
    if not core.is_dir():
        return {"ok": True, "ran": False,
                "why": f"no composed core tree (overlay apply --pin {state.new_pin} --targets core, "
                       f"then overlay gate --pin {state.new_pin})"}
    allowlist = root / "gate-allowlist.yaml"
    try:
        report = GatePlan(Path(state.work), core, allowlist=allowlist).run(state.new_pin)
    except OverlayError as exc:
        return {"ok": False, "ran": False, "why": exc.one_line()}
    out = {"ok": report.ok, "ran": True, "findings": len(report.findings), "errors": len(report.failing),
           "core": str(core)}
    try:
        with baseline_trees.declared_pairing(root, state.new_pin, core, _mirror_of(state)) as (
                plugin_dir, core_dir, said):
            baseline = GatePlan(plugin_dir, core_dir, allowlist=allowlist).run(state.new_pin)
    except OverlayError as exc:
        out["baseline"] = f"none ({exc.one_line()}): every error counts"
        return out
    new = new_gate_findings(report, baseline)
    out.update(ok=not new, baseline=said, upstream_errors=len(baseline.failing),
               new=[f"{f.plugin_path}:{f.plugin_line}: {f.short()}" for f in new])
    return out


def _other_pins(root: Path, project: Project, state: RebaseState) -> list[dict]:
    """Whether the series, as it is now, still applies on every other pin set's commit of
    the target (drift, in memory): a shared series moved forward may leave them behind."""
    from overlay.drift.targets import load_patches
    from overlay.drift.scan import Drift

    out = []
    for other in load_all_pins(root):
        if other.name == state.new_pin or state.target not in other.target_names:
            continue
        src = other.target(state.target).source
        if not isinstance(src, GitSource):
            continue
        patches, diffs = load_patches(project, state.target, other.name)
        if not patches or not gitcmd.has_commit(Path(state.git_dir), src.commit):
            continue
        engine = Drift(Path(state.git_dir), src.commit, patches, diffs)
        try:
            verdicts = engine.onto(src.commit)
        finally:
            engine.close()
        bad = [f"{v.patch} {v.cls}" for v in verdicts if v.cls not in ("clean", "offset")]
        out.append({"pin": other.name, "commit": src.commit, "applies": not bad, "problems": bad})
    return out
