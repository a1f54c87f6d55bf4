"""`overlay rebase`: move the series of a pin set onto newer upstream, as a new pin set.

    overlay rebase --pin OLD --onto plugin=REF [--as NEW]
    overlay rebase --continue | --skip | --abort

1. drift classifies the series at REF (no checkout) and lists the upstream overlap;
2. patches drift shows merged upstream are dropped at NEW and recorded in series.yaml
   (`applied-upstream:` with the commit, the rule that fired and the pin sets that
   leave the patch out: DEP-3's Applied-Upstream, Yocto's Upstream-Status);
3. the rest are applied on REF with `git am -3` in the composed tree build/NEW/TARGET;
   a conflict stops there, in git's own resolution state, for the user to resolve
   (then --continue), drop (--skip) or give up (--abort);
4. at the end: pins/NEW.yaml is written, `refresh` turns the branch back into
   patches, then `check`, `lock` and the contract gate run, and a summary fit for a
   pull request says per patch what happened and why.

Atomic like `apply`: nothing under pins/, patches/ or series.yaml changes before the
end, and a failure there puts back every byte it changed. --abort removes only the
composed tree the rebase made. The in-progress state lives in .overlay/rebase.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from overlay import checks, compose, composed, gitcmd, lockfile, paths, refresh, sources
from overlay.errors import OverlayError
from overlay.model import PIN_NAME, GitSource, PinSet, Project, load_all_pins, load_pinset
from overlay.patchfile import read_patch

STATE = "rebase.json"  # under .overlay/

# What happened to each patch (the summary's words).
DROPPED, KEPT, REFRESHED, CONFLICTED, SKIPPED = "dropped", "kept", "refreshed", "conflicted", "skipped"


@dataclass
class PatchPlan:
    patch: str
    drift: str  # the drift class at REF, with its rule: "merged (reverse)", "fuzz"
    detail: str
    action: str  # dropped | apply
    overlap: list[str] = field(default_factory=list)  # one line per upstream commit
    applied_upstream: dict | None = None  # what series.yaml records for a dropped patch
    upstream_version: dict | None = None  # upstream's own version, if drift saw one
    outcome: str = ""  # kept | refreshed | conflicted | skipped | dropped (at the end)
    why: str = ""


@dataclass
class RebaseState:
    old_pin: str
    new_pin: str
    target: str
    ref: str
    head: str
    git_dir: str  # where drift read upstream history (its objects serve git am -3)
    work: str  # the composed tree being rebased
    pin_text: str  # pins/NEW.yaml, written at the end
    plans: list[PatchPlan]
    apply_order: list[str]  # patches handed to git am, in order
    conflicts: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def plan(self, patch: str) -> PatchPlan:
        return next(p for p in self.plans if p.patch == patch)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "RebaseState":
        data = json.loads(text)
        data["plans"] = [PatchPlan(**p) for p in data["plans"]]
        return cls(**data)


def _state_path(root: Path) -> Path:
    return root / ".overlay" / STATE


def _load_state(root: Path) -> RebaseState:
    path = _state_path(root)
    if not path.is_file():
        raise OverlayError("no rebase is in progress", path=".overlay/" + STATE,
                           hint="start one with overlay rebase --pin NAME --onto TARGET=REF")
    try:
        return RebaseState.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, TypeError, KeyError) as exc:
        raise OverlayError(f"the rebase state is unreadable ({exc})", path=".overlay/" + STATE,
                           hint="remove it and the composed tree it names, then start again") from None


def _save_state(root: Path, state: RebaseState) -> None:
    path = _state_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.to_json(), encoding="utf-8")
    tmp.replace(path)


# ----------------------------------------------------------------------------- planning (pure)


def decide(verdicts, overlap, landed_pr, slug: str = "") -> list[PatchPlan]:
    """Per patch: drop it when drift shows upstream merged it, else apply it with 3-way.

    `overlap[patch]` lists `(line, Overlap)`; `landed_pr[patch]` is the CommitInfo of the
    commit that landed the upstream change the entry names, if any.
    """
    plans = []
    from overlay.drift.report import _label

    for v in verdicts:
        label = _label(v)
        lines = [line for line, _ in overlap.get(v.patch, [])]
        if v.cls == "merged":
            carrier = _carrier(v, overlap.get(v.patch, []), landed_pr.get(v.patch), slug)
            record = {"ref": carrier["ref"], "rule": v.rule}
            if carrier["commit"]:
                record["commit"] = carrier["commit"]
            why = {"reverse": "the patch reverse-applies at REF: its change is there",
                   "patch-id": "an upstream commit has the same patch-id",
                   "likely": "its added lines are there, reformatted (likely merged: verify)"}[v.rule]
            plans.append(PatchPlan(v.patch, label, v.detail, "dropped", lines, applied_upstream=record,
                                   outcome=DROPPED, why=f"{why}; carried by {carrier['ref']}"))
        else:
            own = _own_version(overlap.get(v.patch, []), landed_pr.get(v.patch), slug)
            plans.append(PatchPlan(v.patch, label, v.detail, "apply", lines, upstream_version=own))
    return plans


def _own_version(overlap, landed, slug: str) -> dict | None:
    """Upstream's own version of a patch that is not merged: the commit that landed
    the change its entry names, else the last overlap that did the same or rewrote
    the same lines."""
    info = landed
    if info is None:
        mine = [o for _, o in overlap if o.resembles or o.same_lines]
        info = mine[-1].commit if mine else None
    if info is None:
        return None
    return {"ref": f"{slug}#{info.pr}" if info.pr else info.sha, "commit": info.sha}


def _carrier(v, overlap, landed, slug: str) -> dict:
    """The upstream commit that carries a merged patch: patch-id's match, else the
    commit the entry names as landed, else the last overlap that did the same."""
    commit = v.upstream_commit
    info = None
    for _, o in overlap:
        if commit and o.commit.sha == commit:
            info = o.commit
    if info is None and landed is not None:
        info = landed
    if info is None:
        alike = [o for _, o in overlap if o.resembles]
        if alike:
            info = alike[-1].commit
    if info is not None:
        ref = f"{slug}#{info.pr}" if info.pr else info.sha
        return {"ref": ref, "commit": info.sha}
    return {"ref": commit or "upstream at REF", "commit": commit}


def new_pin_text(old: PinSet, target: str, head: str, ref: str) -> str:
    """pins/NEW.yaml: the old pin set with `target` at `head`. Other targets keep their
    commit and locked tree (their series did not move); not the default."""
    lines = [f"# Written by `overlay rebase` from pin set {old.name}: {target} moved to {ref}.",
             f"description: {json.dumps(f'{old.description} ({target} rebased onto {ref} {head[:12]})')}",
             "targets:"]
    for t in old.targets:
        lines.append(f"  {t.name}:")
        src = t.source
        if isinstance(src, GitSource):
            lines.append(f"    repo: {json.dumps(src.url)}")
            lines.append(f"    commit: {head if t.name == target else src.commit}")
        else:
            lines.append(f"    pypi: {json.dumps(src.requirement)}")
            lines.append(f"    sha256: {src.sha256}")
        if t.tree and t.name != target:
            lines.append(f"    tree: {t.tree}")
    if old.toolchain:
        lines.append("toolchain:")
        lines += [f"  {k}: {json.dumps(v)}" for k, v in old.toolchain.items()]
    return "\n".join(lines) + "\n"


def record_applied_upstream(text: str, entry_line: int, record: dict, pin: str,
                            existing_pins: tuple[str, ...]) -> str:
    """series.yaml text with the entry at `entry_line` carrying `applied-upstream:` as
    a mapping (ref, commit, rule, pins); an older applied-upstream field is replaced
    (its pins kept). Every other byte is kept."""
    lines = text.splitlines(keepends=True)
    start = entry_line - 1
    while start > 0 and not lines[start].lstrip().startswith("-"):
        start -= 1
    item_indent = len(lines[start]) - len(lines[start].lstrip())
    field_indent = item_indent + 2
    end = start + 1
    while end < len(lines):
        stripped = lines[end].strip()
        indent = len(lines[end]) - len(lines[end].lstrip())
        if stripped and (indent <= item_indent):
            break
        end += 1
    block = lines[start:end]
    out: list[str] = []
    k = 0
    while k < len(block):
        line = block[k]
        if line.strip().startswith("applied-upstream:") and k > 0:
            k += 1
            while k < len(block) and (not block[k].strip() or
                                      len(block[k]) - len(block[k].lstrip()) > field_indent):
                k += 1
            continue
        out.append(line)
        k += 1
    gap: list[str] = []  # blank lines before the next entry stay after the record
    while out and not out[-1].strip():
        gap.insert(0, out.pop())
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    pad = " " * field_indent
    pins = list(dict.fromkeys([*existing_pins, pin]))
    out.append(f"{pad}applied-upstream:  # recorded by overlay rebase\n")
    out.append(f"{pad}  ref: {json.dumps(record['ref'])}\n")
    if record.get("commit"):
        out.append(f"{pad}  commit: {record['commit']}\n")
    if record.get("rule"):
        out.append(f"{pad}  rule: {json.dumps(record['rule'])}\n")
    out.append(f"{pad}  pins: [{', '.join(json.dumps(p) for p in pins)}]\n")
    return "".join(lines[:start] + out + gap + lines[end:])


# ----------------------------------------------------------------------------- the command


def register(sub) -> None:
    p = sub.add_parser("rebase", help="move the series of a pin set onto newer upstream as a new pin set",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--pin", metavar="NAME", help="the pin set to move (default: the default one)")
    p.add_argument("--onto", metavar="TARGET=REF", help="the target and the upstream ref to move to")
    p.add_argument("--as", dest="new_pin", metavar="NEWPIN",
                   help="name of the new pin set (default: the first 8 hex digits of REF's commit)")
    p.add_argument("--mirror", type=Path, metavar="DIR",
                   help="directory of upstream clones <owner+name> (default: $OVERLAY_MIRROR)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--continue", dest="cont", action="store_true",
                       help="after resolving a conflict (git add), go on")
    group.add_argument("--skip", action="store_true",
                       help="drop the patch that conflicts and go on")
    group.add_argument("--abort", action="store_true",
                       help="give up: remove the new composed tree; pins and series stay as they were")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.root
    resuming = args.cont or args.skip or args.abort
    if resuming and (args.onto or args.pin or args.new_pin):
        raise OverlayError("--continue, --skip and --abort take no --pin, --onto or --as",
                           hint="overlay rebase --continue")
    if args.abort:
        return abort(root, args.json)
    if resuming:
        state = _load_state(root)
        return resume(root, state, skip=args.skip, json_mode=args.json)
    if not args.onto:
        raise OverlayError("give --onto TARGET=REF", hint="overlay rebase --pin NAME --onto plugin=main")
    if _state_path(root).is_file():
        raise OverlayError("a rebase is already in progress", path=".overlay/" + STATE,
                           hint="overlay rebase --continue, --skip or --abort")
    return start(root, args)


def _progress(json_mode: bool):
    """Progress lines (fetching upstream) on a terminal only."""
    if json_mode or not sys.stderr.isatty():
        return None
    return lambda message: print(f"overlay rebase: {message}", file=sys.stderr, flush=True)


def _say(json_mode: bool, text: str) -> None:
    if not json_mode:
        print(text, flush=True)


def start(root: Path, args: argparse.Namespace) -> int:
    from overlay.drift.cli import _slug, load_patches, parse_pairs, resolve_ref, target_repo
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
    engine = Drift(git_dir, base, patches, diffs, slug=_slug(old.target(target).source))
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
    plans = decide(run_.verdicts, overlap, landed, _slug(old.target(target).source))
    order = [p.patch for p in plans if p.action == "apply"]
    state = RebaseState(old.name, new_name, target, ref, head, str(git_dir), str(work),
                        new_pin_text(old, target, head, ref), plans, order)
    _say(args.json, f"rebasing pin set {old.name} onto {target} {ref} ({head[:12]}) as {new_name}")
    for p in plans:
        _say(args.json, f"  {p.patch}: drift says {p.drift}; "
                        + ("drop it (" + p.why + ")" if p.action == DROPPED else "apply it with 3-way"))

    # The new pin set, loaded from a scratch file: pins/ is written only at the end.
    scratch = root / ".overlay" / "rebase-pins"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / f"{new_name}.yaml").write_text(state.pin_text, encoding="utf-8")
    new_pin = load_pinset(scratch / f"{new_name}.yaml", root)
    obtained = sources.obtain(root, new_pin.target(target), mirror, _progress(args.json))
    _save_state(root, state)  # first: an interrupted start is then undone by --abort
    try:
        work.parent.mkdir(parents=True, exist_ok=True)
        compose._init_tree(work, obtained, paths.branch_name(new_name))
        # git am -3 finds each patch's preimage by the blob ids in its index lines:
        # the history drift read holds them (the cache holds only pinned snapshots).
        alternates = work / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(alternates.read_text() + str((git_dir / "objects").resolve()) + "\n")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        _state_path(root).unlink(missing_ok=True)
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
        _save_state(root, state)
        files = gitcmd.git(["diff", "--name-only", "--diff-filter=U"], cwd=Path(state.work),
                           check=False).stdout.split()
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
        _save_state(root, state)
        proc = _am(work, ["--skip"])
        return _after_am(root, state, proc, json_mode)
    if stopped is not None:
        unresolved = gitcmd.git(["diff", "--name-only", "--diff-filter=U"], cwd=work,
                                check=False).stdout.split()
        if unresolved:
            raise OverlayError(f"{stopped}: {', '.join(unresolved)} still has conflicts", path=str(work),
                               hint="resolve them, git add the files, then overlay rebase --continue")
        proc = _am(work, ["--continue"])
        return _after_am(root, state, proc, json_mode)
    return finish(root, state, json_mode)


def abort(root: Path, json_mode: bool) -> int:
    state = _load_state(root)
    work = Path(state.work)
    if work.exists():
        shutil.rmtree(work)
    try:
        work.parent.rmdir()  # build/NEW, if the rebase made it and it is empty now
    except OSError:
        pass
    shutil.rmtree(root / ".overlay" / "rebase-pins", ignore_errors=True)
    _state_path(root).unlink()
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
            plan.applied_upstream = _skip_record(plan)
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
    _state_path(root).unlink(missing_ok=True)
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


def _skip_record(plan: PatchPlan) -> dict:
    """A skipped patch is left out at the new pin set: by the maintainer's judgement that
    upstream's own version suffices, when drift saw one."""
    if plan.upstream_version:
        return {**plan.upstream_version, "rule": "skipped (upstream's own version)"}
    return {"ref": "none found: dropped by the maintainer (overlay rebase --skip)", "rule": "skipped"}


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


def summary(state: RebaseState, result: dict) -> str:
    """Markdown for a pull request description."""
    out = [f"## Rebase of pin set `{state.old_pin}` onto {state.target} `{state.ref}` "
           f"(`{state.head[:12]}`) as `{state.new_pin}`", ""]
    counts: dict[str, int] = {}
    for p in state.plans:
        counts[p.outcome] = counts.get(p.outcome, 0) + 1
    out.append(", ".join(f"{n} {k}" for k, n in counts.items()) + "; "
               f"composed tree `{result['tree']}` locked in `pins/{state.new_pin}.yaml`.")
    out += ["", "| Patch | Outcome | Drift at REF | Why |", "| --- | --- | --- | --- |"]
    for p in state.plans:
        out.append(f"| `{p.patch}` | {p.outcome} | {p.drift} | {p.why.replace('|', '/')} |")
    notes = [(p.patch, line) for p in state.plans for line in p.overlap]
    if notes:
        out += ["", "Upstream commits on the lines each patch touches:", ""]
        out += [f"- `{patch}`: {line}" for patch, line in notes]
    out += ["", "After the rebase:", ""]
    r = result["refresh"]
    out.append(f"- refresh: {len(r['written'])} patch file(s) rewritten, {len(r['unchanged'])} unchanged")
    out.append(f"- check: {'ok' if not result['check'] else str(len(result['check'])) + ' problem(s)'}")
    for f in result["check"]:
        out.append(f"  - {f['path']}: {f['message']}")
    g = result["gate"]
    if g is not None:
        out.append(f"- gate: {'ok' if g['ok'] else 'FAIL'} ({g['findings']} finding(s))"
                   if g.get("ran") else f"- gate: not run: {g['why']}")
    dropped = [p for p in state.plans if p.applied_upstream is not None]
    if dropped:
        out.append(f"- series.yaml records `applied-upstream` (pins: `{state.new_pin}`) for "
                   + ", ".join(f"`{p.patch}`" for p in dropped))
    for o in result["other_pins"]:
        out.append(f"- pin set `{o['pin']}` ({state.target} `{o['commit'][:12]}`): the series "
                   + ("still applies there" if o["applies"] else
                      "no longer applies exactly there: " + ", ".join(o["problems"])))
    return "\n".join(out) + "\n"
