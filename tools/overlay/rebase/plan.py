"""What a rebase decides and writes, as pure functions: which patches to drop, the new
pin file, the `applied-upstream` record in series.yaml, and the pull-request summary."""

from __future__ import annotations

import json

from overlay.model import GitSource, PinSet
from overlay.rebase.state import DROPPED, PatchPlan, RebaseState



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


def skip_record(plan: PatchPlan) -> dict:
    """A skipped patch is left out at the new pin set: by the maintainer's judgement that
    upstream's own version suffices, when drift saw one."""
    if plan.upstream_version:
        return {**plan.upstream_version, "rule": "skipped (upstream's own version)"}
    return {"ref": "none found: dropped by the maintainer (overlay rebase --skip)", "rule": "skipped"}


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
