"""What a rebase decides and writes, as pure functions: which patches to drop, the new
pin file, the `applied-upstream` record in series.yaml, and the pull-request summary."""

from __future__ import annotations

import json
import re

from overlay.drift.residue import item_path
from overlay.testing.mutation import is_test_path  # a residue of only these is the patch's own test
from overlay.series.model import GitSource, PinSet
from overlay.series.yamldoc import entry_block, set_only_pins  # noqa: F401 - rebase's callers import them here
from overlay.rebase.state import APPLY, DECIDE, DROPPED, PatchPlan, RebaseState



# Where vllm-ascend records the cores it declares, at each of its commits (its CI reads
# them): the vLLM release it is tested with, and the vLLM main commit it was verified on.
DECLARED_CORE_FILES = {"release": ".github/vllm-release-tag.commit",
                       "main-verified": ".github/vllm-main-verified.commit"}


def pairing(declared: dict[str, str | None], core) -> tuple[bool, str]:
    """Whether the new pin set pairs the plugin with a core it declares (pure): its
    release tag names the core archive's version, or its main-verified commit is the
    core commit. `core` is the new pin set's core source, None when it has no core.
    Upstream's version of a backport is proven only on such a pairing."""
    if core is None:
        return True, "the pin set has no core target"
    release, verified = declared.get("release"), declared.get("main-verified")
    said = ", ".join(f"{k} {v}" for k, v in (("release", release), ("main-verified", verified)) if v)
    if isinstance(core, GitSource):
        if verified and len(verified) >= 7 and core.commit.startswith(verified.lower()):
            return True, f"core {core.commit[:12]} is the plugin's main-verified commit"
        shown = f"core {core.commit[:12]}"
    else:
        if release and release.lstrip("v") == core.version:
            return True, f"core {core.requirement} is the plugin's release ({release})"
        shown = f"core {core.requirement}"
    return False, (f"{shown} is not a core the new plugin declares "
                   f"({said or 'it declares none'}): upstream's version is proven only there")


def decide(verdicts, overlap, landed, slug: str = "", carriers=None,
           paired: tuple[bool, str] = (True, ""), residue=None) -> list[PatchPlan]:
    """Per patch: drop it when drift shows upstream merged it, stop for a decision when
    upstream's own version supersedes it, else apply it with 3-way.

    `overlap[patch]` lists `(line, Overlap)`; `landed_pr[patch]` is the CommitInfo of the
    commit that landed the upstream change the entry names, if any; `carriers[patch]`
    the CommitInfo of the last of its upstream commits (merged by provenance); `paired`
    whether the new pin set pairs the plugin with a core it declares, and why; `residue[patch]`
    (carried, kept) hunk lines of carried_hunks: provenance drops only what upstream's
    content carries, and a patch that does more is kept for its residue.
    """
    plans = []
    from overlay.drift.report import _label

    carriers = carriers or {}
    residue = residue or {}
    for v in verdicts:
        label = _label(v)
        lines = [line for line, _ in overlap.get(v.patch, [])]
        if v.cls == "merged" and v.rule == "upstream-commit":
            info = carriers.get(v.patch)
            ref = f"{slug}#{info.pr}" if info is not None and info.pr else v.upstream_commits[-1]
            commits = ", ".join(c[:12] for c in v.upstream_commits)
            carried, kept = residue.get(v.patch, ([], [], set()))[:2]
            kept_paths = sorted({item_path(item) for item in kept})
            tests_only = kept_paths if kept_paths and all(map(is_test_path, kept_paths)) else []
            if paired[0] and kept and not tests_only:
                plans.append(PatchPlan(v.patch, label, v.detail, APPLY, lines,
                                       note=f"upstream carries it ({commits}, {ref}) only in part: "
                                            f"{', '.join(carried) or 'no hunk'}; the residue, "
                                            f"{', '.join(kept)}, is kept as the patch"))
                continue
            if paired[0]:
                record = {"ref": ref, "commit": info.sha if info else v.upstream_commits[-1],
                          "rule": v.rule}
                plans.append(PatchPlan(v.patch, label, v.detail, DROPPED, lines,
                                       applied_upstream=record, outcome=DROPPED,
                                       why=f"its upstream-commit {commits} "
                                           f"{'is' if len(v.upstream_commits) == 1 else 'are'} upstream "
                                           f"(carried by {ref}) and {paired[1]}"
                                           + (f"; its own test{'s' if len(tests_only) > 1 else ''} "
                                              f"{', '.join(tests_only)}, which upstream lacks, "
                                              f"{'go' if len(tests_only) > 1 else 'goes'} with it: "
                                              "the code tested is upstream's" if tests_only else "")))
                continue
            plans.append(PatchPlan(v.patch, label, v.detail, APPLY, lines,
                                   note=f"upstream carries it ({commits}, {ref}), but {paired[1]}: kept"))
        elif v.cls == "merged":
            carrier = _carrier(v, overlap.get(v.patch, []), landed.get(v.patch), slug)
            record = {"ref": carrier["ref"], "rule": v.rule}
            if carrier["commit"]:
                record["commit"] = carrier["commit"]
            why = {"reverse": "the patch reverse-applies at REF: its change is there",
                   "patch-id": "an upstream commit has the same patch-id",
                   "likely": "its added lines are there, reformatted (likely merged: verify)"}[v.rule]
            plans.append(PatchPlan(v.patch, label, v.detail, "dropped", lines, applied_upstream=record,
                                   outcome=DROPPED, why=f"{why}; carried by {carrier['ref']}"))
        elif v.superseded_by:
            plans.append(PatchPlan(v.patch, label, v.detail, DECIDE, lines,
                                   upstream_version={"ref": v.superseded_by,
                                                     "commit": v.superseded_commit}))
        else:
            own = _own_version(overlap.get(v.patch, []), landed.get(v.patch), slug)
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


def new_pin_text(old: PinSet, moved: dict, ref: str) -> str:
    """pins/NEW.yaml: the old pin set with each target of `moved` at its new source (a
    GitSource or ArchiveSource). Other targets keep their source and locked tree (their
    series did not move); not the default."""
    said = ", ".join(f"{name} {_source_words(src)}" for name, src in moved.items())
    lines = [f"# Written by `overlay rebase` from pin set {old.name}: {said}.",
             f"description: {json.dumps(f'{said} (rebased from pin set {old.name})')}",
             "targets:"]
    for t in old.targets:
        lines.append(f"  {t.name}:")
        src = moved.get(t.name, t.source)
        if isinstance(src, GitSource):
            lines.append(f"    repo: {json.dumps(src.url)}")
            lines.append(f"    commit: {src.commit}")
        else:
            lines.append(f"    pypi: {json.dumps(src.requirement)}")
            lines.append(f"    sha256: {src.sha256}")
            if src.history:
                lines.append(f"    history: {json.dumps(src.history)}")
        if t.tree and t.name not in moved:
            lines.append(f"    tree: {t.tree}")
    if old.toolchain:
        lines.append("toolchain:")
        lines += [f"  {k}: {json.dumps(v)}" for k, v in old.toolchain.items()]
    return "\n".join(lines) + "\n"


def _source_words(src) -> str:
    return src.commit[:12] if isinstance(src, GitSource) else f"PyPI {src.requirement}"


def applied_records(existing, record: dict, pin: str) -> list[dict]:
    """The entry's records once pin set `pin` holds `record`: `pin` leaves whichever
    record it was in, joins an identical claim, or gets a record of its own. No other pin
    set's record changes. Pure."""
    out = []
    for r in existing:
        pins = [p for p in r.pins if p != pin]
        if pins or not r.pins:
            kept = {"ref": r.ref, "commit": r.commit, "rule": r.rule, "pins": pins}
            if r.not_upstream:
                kept["not-upstream"] = r.not_upstream
            out.append(kept)
    same = next((r for r in out if (r["ref"], r.get("commit"), r.get("rule")) ==
                 (record["ref"], record.get("commit"), record.get("rule"))), None)
    if same is not None:
        same["pins"] = list(dict.fromkeys([*same["pins"], pin]))
    else:
        out.append({"ref": record["ref"], "commit": record.get("commit"), "rule": record.get("rule"),
                    "pins": [pin]})
    return out


def record_applied_upstream(text: str, entry_line: int, record: dict, pin: str,
                            existing=()) -> str:
    """series.yaml text with the entry at `entry_line` recording that pin set `pin`'s
    upstream carries it (`record`: ref, commit, rule). The other pin sets' records are
    kept as they are (`existing`: the entry's AppliedRecords): one record is written as a
    mapping, several as a list. Every other byte of the file is kept."""
    lines = text.splitlines(keepends=True)
    start, end, item_indent = entry_block(lines, entry_line)
    field_indent = item_indent + 2
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
    records = applied_records(existing, record, pin)

    def fields(r: dict, first: str, rest: str) -> list[str]:
        got = [f"{first}ref: {json.dumps(r['ref'])}\n"]
        if r.get("commit"):
            got.append(f"{rest}commit: {r['commit']}\n")
        if r.get("rule"):
            got.append(f"{rest}rule: {json.dumps(r['rule'])}\n")
        if r.get("not-upstream"):
            got.append(f"{rest}not-upstream: {json.dumps(r['not-upstream'])}\n")
        got.append(f"{rest}pins: [{', '.join(json.dumps(p) for p in r['pins'])}]\n")
        return got

    if len(records) == 1:
        out.append(f"{pad}applied-upstream:  # recorded by overlay rebase\n")
        out += fields(records[0], pad + "  ", pad + "  ")
    else:
        out.append(f"{pad}applied-upstream:  # recorded by overlay rebase, one record per claim\n")
        for r in records:
            out += fields(r, pad + "  - ", pad + "    ")
    return "".join(lines[:start] + out + gap + lines[end:])


def skip_record(plan: PatchPlan) -> dict:
    """A skipped patch is left out at the new pin set: by the maintainer's judgement that
    upstream's own version suffices, when drift saw one."""
    if plan.upstream_version:
        return {**plan.upstream_version, "rule": "skipped (upstream's own version)"}
    return {"ref": "none found: dropped by the maintainer (overlay rebase --skip)", "rule": "skipped"}


_FLAGS = ("upstream did this too", "upstream rewrote the same lines")


def summary(state: RebaseState, result: dict) -> str:
    """Markdown for a pull request description."""
    moved = ", ".join(f"{t} {w}" for t, w in state.moves.items()) or f"{state.target} `{state.ref}`"
    out = [f"## Rebase of pin set `{state.old_pin}` onto {state.target} `{state.ref}` "
           f"(`{state.head[:12]}`) as `{state.new_pin}`", "", f"Moved: {moved}.", ""]
    counts: dict[str, int] = {}
    for p in state.plans:
        counts[p.outcome] = counts.get(p.outcome, 0) + 1
    trees = ", ".join(f"{t} `{tree}`" for t, tree in result["trees"].items())
    out.append(", ".join(f"{n} {k}" for k, n in counts.items()) + "; "
               f"composed trees {trees} locked in `pins/{state.new_pin}.yaml`.")
    out += ["", "| Patch | Outcome | Drift at REF | Upstream commit (rule) | Why |",
            "| --- | --- | --- | --- | --- |"]
    for p in state.plans:
        record = p.applied_upstream or {}
        carrier = (f"`{record['commit'][:12]}` ({record.get('rule', '')})" if record.get("commit")
                   else f"({record['rule']})" if record.get("rule") else "")
        why = p.why + (f"; {p.note}" if p.note else "")
        out.append(f"| `{p.patch}` | {p.outcome} | {p.drift} | {carrier} | {why.replace('|', '/')} |")
    notes = []
    for p in state.plans:  # the commits that did the same or rewrote the lines; a count of the rest
        flagged = [line for line in p.overlap if line.endswith(_FLAGS)]
        notes += [f"- `{p.patch}`: {line}" for line in flagged]
        if len(p.overlap) > len(flagged):
            notes.append(f"- `{p.patch}`: {len(p.overlap) - len(flagged)} "
                         f"{'other ' if flagged else ''}commit(s) on its lines (--json lists them)")
    if notes:
        out += ["", "Upstream commits on the lines each patch touches:", ""] + notes
    out += ["", "After the rebase:", ""]
    r = result["refresh"]
    out.append(f"- refresh: {len(r['written'])} patch file(s) rewritten, {len(r['unchanged'])} unchanged"
               + (f", new: {', '.join(r['added'])}" if r.get("added") else ""))
    out.append(f"- check: {'ok' if not result['check'] else str(len(result['check'])) + ' problem(s)'}")
    for f in result["check"]:
        out.append(f"  - {f['path']}: {f['message']}")
    g = result["gate"]
    if g is not None:
        if not g.get("ran"):
            out.append(f"- gate: not run: {g['why']}")
        elif "new" in g:
            out.append(f"- gate: {'ok' if g['ok'] else 'FAIL'}: {len(g['new'])} new error(s); "
                       f"{g['errors']} error(s) in all, {g['upstream_errors']} of them upstream's own "
                       f"(baseline: {g['baseline']})")
            out += [f"  - new: {line}" for line in g["new"]]
        else:
            out.append(f"- gate: {'ok' if g['ok'] else 'FAIL'} ({g['findings']} finding(s)"
                       + (f"; baseline {g['baseline']}" if g.get("baseline") else "") + ")")
    dropped = [p for p in state.plans if p.applied_upstream is not None]
    if dropped:
        out.append(f"- series.yaml records `applied-upstream` (pins: `{state.new_pin}`) for "
                   + ", ".join(f"`{p.patch}`" for p in dropped))
    ported = [name for p in state.plans for name in p.ported_as]
    if ported:
        out.append(f"- series.yaml records `only-pins: [{state.new_pin}]` for "
                   + ", ".join(f"`{n}`" for n in ported))
    split = [p for p in state.plans if p.split_as]
    if split:
        out.append(f"- pin sets are independent: the new versions are entries carried by `{state.new_pin}` "
                   "only, the other pin sets keep theirs byte for byte: "
                   + ", ".join(f"`{p.patch}` -> `{p.split_as}`" for p in split))
    for o in result["other_pins"]:
        out.append(f"- pin set `{o['pin']}` ({state.target} `{o['commit'][:12]}`): the series "
                   + ("still applies there" if o["applies"] else
                      "no longer applies exactly there: " + ", ".join(o["problems"])))
    if state.timings:
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in state.timings.items())
        out += ["", f"Time: {phases}; total {sum(state.timings.values()):.1f} s of tool time"
                    + (f", plus {state.waited / 60:.1f} min stopped for the maintainer"
                       if state.waited else "") + "."]
    return "\n".join(out) + "\n"


_NUMBER = re.compile(r"^(\d+)-(.*)$")


def split_name(old: str, taken: set[str], slug: str | None = None) -> str:
    """A file name for the new pin set's own version of patch `old`: the next number not
    taken by another patch file, with `slug` (of the new version's subject) or the old
    one's. Pure."""
    m = _NUMBER.match(old)
    number, old_slug, width = (int(m.group(1)), m.group(2), len(m.group(1))) if m else (0, old, 4)
    slug = f"{slug}.patch" if slug else old_slug
    used = {int(n.group(1)) for n in map(_NUMBER.match, taken) if n}
    candidate = number + 1
    while candidate in used:
        candidate += 1
    return f"{candidate:0{width}d}-{slug}"


def split_entry(text: str, entry_line: int, new_patch: str, subject: str | None, new_pin: str,
                old_pins: list[str], old_subject: str | None = None,
                tests: list[str] | None = None) -> str:
    """series.yaml text where the entry at `entry_line` is carried by `old_pins` only (with
    `old_subject`, its own patch's), and a copy of it right after, `new_patch` carried by
    `new_pin` only (its own version of the patch at that pin set): the same provenance, no
    applied-upstream record, the subject and `tests` of the new version. Every other byte
    is kept. Pure."""
    lines = text.splitlines(keepends=True)
    start, end, item_indent = entry_block(lines, entry_line)
    block = lines[start:end]
    gap: list[str] = []
    while block and not block[-1].strip():
        gap.insert(0, block.pop())
    field_indent = item_indent + 2
    copy: list[str] = []
    k = 0
    while k < len(block):
        line = block[k]
        stripped = line.strip()
        deeper = lambda j: j < len(block) and (not block[j].strip() or  # noqa: E731
                                               len(block[j]) - len(block[j].lstrip()) > field_indent)
        if k > 0 and stripped.startswith(("applied-upstream:", "only-pins:")):
            k += 1
            while deeper(k):
                k += 1
            continue
        if k == 0:
            line = line[:line.index("patch:")] + f"patch: {new_patch}\n"
        elif stripped.startswith("subject:") and subject:
            line = " " * field_indent + f"subject: {json.dumps(subject)}\n"
        elif stripped.startswith("tests:") and tests is not None:
            k += 1
            while deeper(k):
                k += 1
            copy.append(" " * field_indent + "tests:\n")
            copy += [" " * (field_indent + 2) + f"- {t}\n" for t in tests]
            continue
        copy.append(line)
        k += 1
    pad = " " * field_indent
    old_patch = block[0][block[0].index("patch:") + len("patch:"):].strip()
    copy = [line for line in copy if not line.strip().startswith("revises:")]
    copy.append(f"{pad}revises: {old_patch}  # recorded by overlay rebase: its version for newer pin sets\n")
    copy.append(f"{pad}only-pins: [{json.dumps(new_pin)}]"
                "  # recorded by overlay rebase: only these pin sets carry it\n")
    if old_subject:
        block = [" " * field_indent + f"subject: {json.dumps(old_subject)}\n"
                 if k and line.strip().startswith("subject:") else line for k, line in enumerate(block)]
    updated = set_only_pins("".join(block), 1, old_pins).splitlines(keepends=True)
    return "".join(lines[:start] + updated + copy + gap + lines[end:])


# ----------------------------------------------------------------------------- content, not history


def residue_mail(text: str, keep: set) -> str:
    """The patch mail `text` with only what `keep` names, for `git am` (pure): (file index,
    hunk index) pairs, the file index counting the `diff --git` blocks in order, and (file
    index, None) for a file kept whole as it is written (a binary patch, a rename alone).
    The header stays (its diffstat may overstate; git am ignores it)."""
    from overlay.series.patchfile import patch_set

    m = re.search(r"^diff --git ", text, re.M)
    if m is None:
        return text
    out = []
    for k, block in enumerate(re.split(r"(?m)^(?=diff --git )", text[m.start():])[1:]):
        if (k, None) in keep:
            out.append(block)
            continue
        wanted = {i for f, i in keep if f == k and i is not None}
        if not wanted:
            continue
        pf = patch_set(block)[0]
        pf[:] = [h for i, h in enumerate(pf) if i in wanted]
        out.append(str(pf))
    return text[:m.start()] + "".join(out)
