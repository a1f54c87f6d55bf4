"""The side effects of a rebase: drift at REF, the composed tree, `git am -3` and its
resolution state, and the end (pin file, series records, refresh, lock, check, gate)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from overlay import checks, compose, composed, gitcmd, lockfile, paths, refresh, sources
from overlay.errors import OverlayError
from overlay.model import PIN_NAME, GitSource, Project, load_all_pins, load_pinset
from overlay.patchfile import read_patch
from overlay.rebase.plan import decide, new_pin_text, record_applied_upstream, summary, skip_record
from overlay.rebase.state import (CONFLICTED, DROPPED, KEPT, REFRESHED, SKIPPED, RebaseState,
                                  load_state, save_state, state_path)


def _progress(json_mode: bool):
    """Progress lines (fetching upstream) on a terminal only."""
    if json_mode or not sys.stderr.isatty():
        return None
    return lambda message: print(f"overlay rebase: {message}", file=sys.stderr, flush=True)


def _say(json_mode: bool, text: str) -> None:
    if not json_mode:
        print(text, flush=True)


def start(root: Path, args: argparse.Namespace) -> int:
    from overlay.drift.cli import load_patches, parse_pairs, resolve_ref, target_repo, target_slug
    from overlay.drift.report import overlap_line
    from overlay.drift.scan import Drift, commit_info, timed_onto

    pairs = parse_pairs(args.onto, "--onto")
    if len(pairs) != 1:
        raise OverlayError("--onto takes one TARGET=REF", hint="rebase one target at a time")
    (target, ref), = pairs
    project = Project.load(root)
    old = project.pin(args.pin)
    mirror = paths.mirror_root(args.mirror)
    git_dir, base = target_repo(root, old, target, mirror)
    head = resolve_ref(git_dir, target, ref)
    new_name = args.new_pin or head[:8]
    if not PIN_NAME.match(new_name):
        raise OverlayError(f"--as: '{new_name}' is not a pin set name",
                           hint="letters, digits, '.', '_' and '-', starting with a letter or digit")
    if (root / "pins" / f"{new_name}.yaml").exists():
        raise OverlayError(f"pin set '{new_name}' already exists", path=f"pins/{new_name}.yaml",
                           hint="choose another name with --as NEWPIN")
    work = paths.composed_dir(root, new_name, target)
    if work.exists():
        raise OverlayError("the composed tree of the new pin set already exists", path=str(work),
                           hint="remove it, or choose another name with --as NEWPIN")
    if head == base:
        raise OverlayError(f"{ref} is the pinned commit of {target}: nothing to move",
                           path=f"pins/{old.name}.yaml", hint="give a newer REF")

    patches, diffs = load_patches(project, target, old.name)
    engine = Drift(git_dir, base, patches, diffs, slug=target_slug(old.target(target).source))
    try:
        run_ = timed_onto(engine, target, ref, head)
    finally:
        engine.close()
    overlap = {}
    for o in run_.overlap:
        overlap.setdefault(o.patch, []).append((overlap_line(o), o))
    landed = {}
    for v in run_.verdicts:
        if v.landed:
            landed[v.patch] = commit_info(git_dir, v.landed)
    plans = decide(run_.verdicts, overlap, landed, target_slug(old.target(target).source))
    order = [p.patch for p in plans if p.action == "apply"]
    state = RebaseState(old.name, new_name, target, ref, head, str(git_dir), str(work),
                        new_pin_text(old, target, head, ref), plans, order)
    _say(args.json, f"rebasing pin set {old.name} onto {target} {ref} ({head[:12]}) as {new_name}")
    for p in plans:
        _say(args.json, f"  {p.patch}: drift says {p.drift}; "
                        + ("drop it (" + p.why + ")" if p.action == DROPPED else "apply it with 3-way"))

    save_state(root, state)  # first: an interrupted start is then undone by --abort
    scratch = root / ".overlay" / "rebase-pins"
    try:
        # The new pin set, loaded from a scratch file: pins/ is written only at the end.
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / f"{new_name}.yaml").write_text(state.pin_text, encoding="utf-8")
        new_pin = load_pinset(scratch / f"{new_name}.yaml", root)
        obtained = sources.obtain(root, new_pin.target(target), mirror, _progress(args.json))
        work.parent.mkdir(parents=True, exist_ok=True)
        compose._init_tree(work, obtained, paths.branch_name(new_name))
        # git am -3 finds each patch's preimage by the blob ids in its index lines:
        # the history drift read holds them (the cache holds only pinned snapshots).
        alternates = work / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(alternates.read_text() + str((git_dir / "objects").resolve()) + "\n")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        state_path(root).unlink(missing_ok=True)
        raise
    mails = [project.patches_dir / name for name in order]
    proc = _am(work, ["-3", "--keep-non-patch", "--committer-date-is-author-date",
                      "--whitespace=nowarn", *map(str, mails)]) if mails else None
    return _after_am(root, state, proc, args.json)


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
    try:
        index = int((apply_dir / "next").read_text().strip())
    except (OSError, ValueError):
        return state.apply_order[0] if state.apply_order else None
    return state.apply_order[min(index, len(state.apply_order)) - 1]


def _after_am(root: Path, state: RebaseState, proc, json_mode: bool) -> int:
    stopped = _am_stopped_at(state)
    if stopped is not None:
        if stopped not in state.conflicts:
            state.conflicts.append(stopped)
        save_state(root, state)
        files = [f for f in gitcmd.git(["diff", "--name-only", "-z", "--diff-filter=U"],
                                       cwd=Path(state.work), check=False).stdout.split("\0") if f]
        where = ", ".join(files) if files else "see git status"
        message = (f"{stopped} conflicts at {state.ref} ({where}): resolve it in {state.work} "
                   f"(edit, then git add), then `overlay rebase --continue`; "
                   f"`overlay rebase --skip` drops it; `overlay rebase --abort` gives up")
        plan = state.plan(stopped)
        if json_mode:
            print(json.dumps({"ok": False, "status": "conflict", "patch": stopped, "files": files,
                              "work": state.work, "drift": plan.drift, "overlap": plan.overlap},
                             indent=2))
        else:
            print(f"CONFLICT: {message}")
            for line in plan.overlap:
                print(f"  upstream overlap: {line}")
        return 1
    if proc is not None and proc.returncode != 0 and not (Path(state.work) / ".git" / "rebase-apply").exists():
        reason = (proc.stderr or proc.stdout or "").strip().splitlines()
        raise OverlayError(f"git am failed: {reason[-1] if reason else 'no message'}", path=state.work,
                           hint="overlay rebase --abort, then check the patches with overlay check")
    return finish(root, state, json_mode)


def resume(root: Path, state: RebaseState, *, skip: bool, json_mode: bool) -> int:
    work = Path(state.work)
    stopped = _am_stopped_at(state)
    if skip:
        if stopped is None:
            raise OverlayError("nothing to skip: git am is not stopped on a patch", path=str(work),
                               hint="overlay rebase --continue finishes the rebase")
        state.skipped.append(stopped)
        save_state(root, state)
        proc = _am(work, ["--skip"])
        return _after_am(root, state, proc, json_mode)
    if stopped is not None:
        unresolved = [f for f in gitcmd.git(["diff", "--name-only", "-z", "--diff-filter=U"], cwd=work,
                                            check=False).stdout.split("\0") if f]
        if unresolved:
            raise OverlayError(f"{stopped}: {', '.join(unresolved)} still has conflicts", path=str(work),
                               hint="resolve them, git add the files, then overlay rebase --continue")
        proc = _am(work, ["--continue"])
        return _after_am(root, state, proc, json_mode)
    return finish(root, state, json_mode)


def abort(root: Path, json_mode: bool) -> int:
    state = load_state(root)
    work = Path(state.work)
    if work.exists():
        shutil.rmtree(work)
    try:
        work.parent.rmdir()  # build/NEW, if the rebase made it and it is empty now
    except OSError:
        pass
    shutil.rmtree(root / ".overlay" / "rebase-pins", ignore_errors=True)
    state_path(root).unlink()
    if json_mode:
        print(json.dumps({"ok": True, "status": "aborted", "pin": state.old_pin}))
    else:
        print(f"rebase aborted: removed {work}; pins/{state.old_pin}.yaml, series.yaml and "
              "patches/ are as they were")
    return 0


# ----------------------------------------------------------------------------- the end


@dataclass
class _Snapshot:
    """The bytes of everything the end of a rebase may change, to put back on failure."""

    series: bytes
    patches: dict[str, bytes]
    new_pin: Path

    @classmethod
    def take(cls, root: Path, new_pin: str) -> "_Snapshot":
        patches_dir = root / "patches"
        return cls((root / "series.yaml").read_bytes(),
                   {p.name: p.read_bytes() for p in patches_dir.iterdir() if p.is_file()},
                   root / "pins" / f"{new_pin}.yaml")

    def restore(self, root: Path) -> None:
        (root / "series.yaml").write_bytes(self.series)
        patches_dir = root / "patches"
        for p in patches_dir.iterdir():
            if p.is_file() and p.name not in self.patches:
                p.unlink()
        for name, data in self.patches.items():
            path = patches_dir / name
            if not path.is_file() or path.read_bytes() != data:
                path.write_bytes(data)
        self.new_pin.unlink(missing_ok=True)


def finish(root: Path, state: RebaseState, json_mode: bool) -> int:
    work = Path(state.work)
    project = Project.load(root)
    by_subject = {}
    for name in state.apply_order:
        if name in state.skipped:
            continue
        by_subject[read_patch(project.patches_dir / name).subject] = name
    commits = gitcmd.out(["rev-list", "--reverse", f"{state.head}..HEAD"], cwd=work).split()
    mapping: dict[str, str] = {}
    for c in commits:
        subject = gitcmd.out(["log", "-1", "--format=%s", c], cwd=work)
        name = by_subject.get(subject)
        if name is None:
            raise OverlayError(f"commit {c[:12]} on the rebased branch matches no patch of the series",
                               path=str(work), hint="keep one commit per patch (amend, do not add)")
        mapping[c] = name
    carried = list(mapping.values())
    for name in state.apply_order:
        plan = state.plan(name)
        if name in state.skipped:
            plan.outcome, plan.why = SKIPPED, "its conflict was skipped (overlay rebase --skip)"
            plan.applied_upstream = skip_record(plan)
            if plan.upstream_version:
                plan.why += f"; upstream's own version: {plan.upstream_version['ref']}"
        elif name not in carried:
            plan.outcome = DROPPED
            plan.why = "git am -3 found nothing left to change: upstream already has it"
            plan.applied_upstream = {"ref": "upstream at " + state.ref, "rule": "3-way-empty"}

    snapshot = _Snapshot.take(root, state.new_pin)
    try:
        text = (root / "series.yaml").read_text(encoding="utf-8")
        entries = {e.patch: e for e in project.series.entries}
        for plan in sorted(state.plans, key=lambda p: -entries[p.patch].line):
            if plan.applied_upstream is not None:
                entry = entries[plan.patch]
                text = record_applied_upstream(text, entry.line, plan.applied_upstream, state.new_pin,
                                               entry.provenance.applied_upstream_pins)
        (root / "series.yaml").write_text(text, encoding="utf-8")
        pin_path = root / "pins" / f"{state.new_pin}.yaml"
        pin_path.write_text(state.pin_text, encoding="utf-8")
        project = Project.load(root)  # validates what was just written
        pin = project.pin(state.new_pin)
        composed.add_notes(work, mapping)
        names = tuple(carried)
        composed.write_state(work, composed.ComposedState(
            pin=pin.name, target=state.target, base=state.head, head=composed.head(work),
            tree=composed.tree_of(work), branch=paths.branch_name(pin.name), patches=names,
            series_digest=composed.series_digest(project.patches_dir, names)))
        before = {n: (project.patches_dir / n).read_bytes() for n in names}
        refreshed = refresh.refresh(project, pin, targets=[state.target], into=None)
        project = Project.load(root)
        trees = lockfile.lock(project, project.pin(state.new_pin), targets=[state.target], into=None)
    except BaseException:
        snapshot.restore(root)
        raise
    for name in carried:
        plan = state.plan(name)
        changed = before[name] != (project.patches_dir / name).read_bytes()
        if name in state.conflicts:
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
    gate = _gate(root, state)
    others = _other_pins(root, project, state)
    shutil.rmtree(root / ".overlay" / "rebase-pins", ignore_errors=True)
    state_path(root).unlink(missing_ok=True)
    result = {"ok": not findings and (gate is None or gate["ok"]), "status": "done",
              "pin": state.old_pin, "new_pin": state.new_pin, "target": state.target,
              "ref": state.ref, "head": state.head, "tree": trees.get(state.target),
              "patches": [asdict(p) for p in state.plans],
              "refresh": refreshed.as_dict(),
              "check": [f.as_dict() for f in findings], "gate": gate, "other_pins": others}
    if json_mode:
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(summary(state, result))
    return 0 if result["ok"] else 1


def _gate(root: Path, state: RebaseState) -> dict | None:
    """The contract gate on the new plugin tree against the pin set's composed core (the
    core did not move: the old pin set's composed core serves when the new one has none)."""
    from overlay.drift.cli import GatePlan

    if state.target != "plugin":
        return {"ok": True, "ran": False, "why": "the gate checks the plugin; core moved"}
    core = paths.composed_dir(root, state.new_pin, "core")
    if not core.is_dir():
        core = paths.composed_dir(root, state.old_pin, "core")
    if not core.is_dir():
        return {"ok": True, "ran": False,
                "why": f"no composed core tree (overlay apply --pin {state.new_pin} --targets core, "
                       f"then overlay gate --pin {state.new_pin})"}
    try:
        report = GatePlan(Path(state.work), core, allowlist=root / "gate-allowlist.yaml").run(state.new_pin)
    except OverlayError as exc:
        return {"ok": False, "ran": False, "why": exc.one_line()}
    return {"ok": report.ok, "ran": True, "findings": len(report.findings), "core": str(core)}


def _other_pins(root: Path, project: Project, state: RebaseState) -> list[dict]:
    """Whether the series, as it is now, still applies on every other pin set's commit of
    the target (drift, in memory): a shared series moved forward may leave them behind."""
    from overlay.drift.cli import load_patches
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
