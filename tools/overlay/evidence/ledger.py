"""Tuning ledgers (evidence/<name>/ledger.yaml): each step a re-runnable variant.

A ledger records a sequence of changes, each measured before/after by its source,
plus the changes that did not help. Positive steps are cumulative: the variant of
step N is the base plus every positive step up to N; a negative or neutral step is
tried on top of the step it was measured at (`tried-at`). `protocol_yaml` turns
step N into an A/B protocol (step N's predecessor vs step N) the harness can run.

ledger.yaml:
  source / status (must say "not re-measured") / model / hardware
  workload: {input-len, output-len, concurrency: [1, 4, 8], num-prompts: [..], warmups}
  base: <variant delta>
  steps: [{step, layer, change, variant: <delta>, tpot-ms: {c1: [before, after]},
           tpot-delta-ms: {c1: -0.1}, result: positive|negative|neutral|unmeasured, tried-at, note}]
A variant delta: {env: {NAME: "value"}, server-args: [...], additional-config: {...},
  compilation-config: {...}, series: [patch files], source-change: text, image: text, pin: name}
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from overlay.series import yamldoc
from overlay.errors import OverlayError
from overlay.series.model import _Fields, _rel
from overlay.series.yamldoc import Node

RESULTS = ("positive", "negative", "neutral", "unmeasured")
DELTA_FIELDS = ("env", "server-args", "additional-config", "compilation-config", "series",
                "source-change", "image", "pin")
STEP_FIELDS = ("step", "layer", "change", "variant", "tpot-ms", "tpot-delta-ms", "result", "tried-at",
               "note", "other-model", "runs")
SINGLE_RUN = "INCONCLUSIVE (single run)"


def _plain(node: Node) -> Any:
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.value


@dataclass(frozen=True)
class Step:
    id: str
    layer: str
    change: str
    delta: dict
    tpot_ms: dict  # cN -> [before, after]
    tpot_delta_ms: dict  # cN -> delta, when only the delta is reported
    result: str
    tried_at: str | None
    note: str
    line: int
    runs: int = 1  # measurements per side behind the reported figure (the source's runs)


def supported(step: Step) -> str:
    """What a step's reported figures can support. One run per side has no variance: no
    interval, so a change of ~0.1 ms cannot be told from start-to-start noise, and the
    source's 'positive' or 'negative' stands as its claim, not as a decision; pure."""
    if step.result == "unmeasured":
        return "unmeasured"
    if step.runs < 2:
        return SINGLE_RUN
    return step.result


@dataclass(frozen=True)
class Ledger:
    path: Path
    source: str
    status: str
    model: str
    workload: dict
    base: dict
    steps: tuple[Step, ...]
    final: dict  # the source's end-to-end figures, as reported


def _delta(node: Node | None, path: str, what: str) -> dict:
    if node is None:
        return {}
    f = _Fields(node, path, what, DELTA_FIELDS)
    out = _plain(node)
    for key, value in (out.get("env") or {}).items():
        if not isinstance(value, str):
            raise OverlayError(f"{what}: env {key} must be a string, got {value!r}", path=path,
                               line=f.map["env"].value[key].line, hint="quote the value")
    return out


def load_ledger(folder: Path, root: Path | None = None) -> Ledger:
    path = folder / "ledger.yaml" if folder.is_dir() else folder
    shown = _rel(path, root)
    doc = yamldoc.load(path, shown)
    top = _Fields(doc, shown, "the ledger", ("source", "status", "model", "hardware", "workload", "base",
                                             "steps", "final", "notes", "runs-per-step"))
    default_runs = _runs(top, "runs-per-step", 1)
    status = top.str("status", required=True) or ""
    if "not re-measured" not in status:
        raise top.error("status", "must say the figures are reported by the source, not re-measured here")
    steps: list[Step] = []
    ids: set[str] = set()
    items = top.map.get("steps")
    if items is None or not isinstance(items.value, list) or not items.value:
        raise top.error("steps", "expected a non-empty list of steps")
    for item in items.value:
        f = _Fields(item, shown, "step", STEP_FIELDS)
        if not f.has("step"):
            raise f.error("step", "missing; expected a step id such as 3 or N2")
        sid = str(f.map["step"].value)
        if sid in ids:
            raise f.error("step", f"step '{sid}' appears twice")
        ids.add(sid)
        result = f.str("result", required=True, expect="one of " + ", ".join(RESULTS))
        if result not in RESULTS:
            raise f.error("result", f"'{result}' is not one of " + ", ".join(RESULTS))
        tried = str(f.map["tried-at"].value) if f.has("tried-at") else None
        if tried is not None and tried not in ids and tried != "base":
            raise f.error("tried-at", f"'{tried}' is not an earlier step")
        tp = _plain(f.map["tpot-ms"]) if f.has("tpot-ms") else {}
        for k, v in tp.items():
            if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)):
                raise f.error("tpot-ms", f"{k}: expected [before, after] in ms")
        steps.append(Step(sid, f.str("layer") or "", f.str("change", required=True) or "",
                          _delta(f.map.get("variant"), shown, f"variant of step {sid}"), tp,
                          _plain(f.map["tpot-delta-ms"]) if f.has("tpot-delta-ms") else {},
                          result or "", tried, f.str("note") or "", item.line, _runs(f, "runs", default_runs)))
    return Ledger(path, top.str("source") or "", status, top.str("model") or "",
                  _plain(top.map["workload"]) if top.has("workload") else {},
                  _delta(top.map.get("base"), shown, "base"), tuple(steps),
                  _plain(top.map["final"]) if top.has("final") else {})


def _runs(f: _Fields, key: str, default: int) -> int:
    if not f.has(key):
        return default
    value = f.map[key].value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise f.error(key, f"expected a whole number of runs >= 1, got {value!r}")
    return value


def _merge(into: dict, delta: dict) -> dict:
    out = copy.deepcopy(into)
    for key, value in delta.items():
        if key in ("env", "additional-config", "compilation-config"):
            out[key] = _deep(out.get(key, {}), value)
        elif key in ("server-args", "series"):
            out[key] = list(out.get(key, [])) + list(value)
        elif key == "source-change":
            out.setdefault("source-changes", []).append(value)
        else:
            out[key] = value
    return out


def _deep(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _deep(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def cumulative(led: Ledger, step_id: str) -> tuple[dict, dict]:
    """(variant before, variant after) for a step, as accumulated deltas."""
    state = {"base": copy.deepcopy(led.base)}
    current = copy.deepcopy(led.base)
    for s in led.steps:
        before = state[s.tried_at] if s.tried_at else current
        after = _merge(before, s.delta)
        if s.id == step_id:
            return before, after
        state[s.id] = after
        if s.result == "positive" and s.tried_at is None:
            current = after
    raise OverlayError(f"no step '{step_id}' in the ledger", path=str(led.path),
                       hint="steps: " + ", ".join(s.id for s in led.steps))


def as_protocol_variant(v: dict) -> dict:
    """A ledger variant in protocol.yaml's variant schema."""
    out: dict[str, Any] = {}
    if v.get("pin"):
        out["pin"] = v["pin"]
    if v.get("series"):
        out["series"] = list(v["series"])
    if v.get("env"):
        out["env"] = dict(v["env"])
    args = list(v.get("server-args", []))
    if v.get("compilation-config"):
        args += ["--compilation-config", json.dumps(v["compilation-config"], sort_keys=True)]
    if v.get("additional-config"):
        args += ["--additional-config", json.dumps(v["additional-config"], sort_keys=True)]
    if args:
        out["server-args"] = args
    notes = []
    if v.get("image"):
        notes.append(f"image: {v['image']}")
    for c in v.get("source-changes", []):
        notes.append(f"source change (needs its patch in series.yaml): {c}")
    if notes:
        out["description"] = "; ".join(notes)
    return out


def protocol_yaml(led: Ledger, step_id: str) -> str:
    before, after = cumulative(led, step_id)
    step = next(s for s in led.steps if s.id == step_id)
    w = led.workload
    conc = w.get("concurrency", [1, 4, 8])
    prompts = w.get("num-prompts", [40] * len(conc))
    if len(prompts) != len(conc):
        raise OverlayError("workload: num-prompts needs one entry per concurrency", path=str(led.path))
    scen = {f"c{c}": {"input-len": w.get("input-len", 1024), "output-len": w.get("output-len", 512),
                      "num-prompts": n, "max-concurrency": c, "warmups": w.get("warmups", 0)}
            for c, n in zip(conc, prompts, strict=True)}
    doc = {
        "claim": f"{led.path.parent.name}-step-{step_id}",
        "preregistered": "YYYY-MM-DD  # fill in before the first run",
        "hypothesis": f"step {step_id} ({step.change}) lowers mean TPOT at every concurrency",
        "model": led.model, "baseline": "before",
        "variants": {"before": as_protocol_variant(before), "after": as_protocol_variant(after)},
        "scenarios": scen, "starts": 5,
        "claims": {"tpot": {"hypothesis": f"step {step_id} lowers mean TPOT by >= 1%",
                            "checks": [{"metric": "tpot", "statistic": "mean", "change": "lower",
                                        "min-effect-pct": 1.0}]}},
    }
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    return (f"# Generated by `overlay evidence ledger --protocol-for {step_id}` from {led.path.name}.\n"
            "# Fill in `preregistered`, CPU sets and the server command before running it.\n" +
            text.replace("'YYYY-MM-DD  # fill in before the first run'", "YYYY-MM-DD  # fill in before the first run"))


def _fmt_tpot(s: Step) -> str:
    cells = []
    for c in ("c1", "c4", "c8"):
        if c in s.tpot_ms:
            b, a = s.tpot_ms[c]
            cells.append(f"{c} {b:g}→{a:g}")
        elif c in s.tpot_delta_ms:
            cells.append(f"{c} {s.tpot_delta_ms[c]:+g}")
    return ", ".join(cells) or "not reported"


def render(led: Ledger) -> str:
    out = [f"# {led.path.parent.name}: {led.model}", "", f"Source: {led.source}", "", f"Status: {led.status}", "",
           "| step | layer | change | TPOT ms (before→after or delta) | runs | source's result | supported | "
           "variant (re-runnable) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in led.steps:
        v = as_protocol_variant(s.delta)
        out.append(f"| {s.id} | {s.layer} | {s.change} | {_fmt_tpot(s)} | {s.runs} | {s.result} | {supported(s)} | "
                   f"`{json.dumps(v, ensure_ascii=False)}` |")
    single = [s.id for s in led.steps if supported(s) == SINGLE_RUN]
    if single:
        out += ["", f"Steps {', '.join(single)}: {SINGLE_RUN}. Each figure is one run per side, with no "
                "variance: no interval can be formed, and a change of 0.1-0.6 ms (about 1-5% of TPOT) is "
                "within what one server start differs from the next. The source's result is its claim, "
                "not a decision; `--protocol-for STEP` writes the A/B protocol (5 starts) that would decide it."]
    if led.final:
        out += ["", "Reported end-to-end: " + "; ".join(f"{k}: {json.dumps(v)}" for k, v in led.final.items())]
    return "\n".join(out) + "\n"


def to_json(led: Ledger) -> dict:
    return {"source": led.source, "status": led.status, "model": led.model, "workload": led.workload,
            "final": led.final,
            "steps": [{"step": s.id, "layer": s.layer, "change": s.change, "tpot_ms": s.tpot_ms,
                       "tpot_delta_ms": s.tpot_delta_ms, "result": s.result, "runs": s.runs,
                       "supported": supported(s), "tried_at": s.tried_at,
                       "variant": as_protocol_variant(s.delta),
                       "cumulative_after": as_protocol_variant(cumulative(led, s.id)[1])}
                      for s in led.steps]}


# ----------------------------------------------------------------------------- ladders
# A ladder campaign (protocol `ladder:`) measures the steps itself: rung k is judged
# against rung k-1 on the same workload, on the same node, in the same blocks. Its
# analysis is a ledger again, computed rather than reported.

LADDER_RESULT = {"REPRODUCED": "positive", "NOT_REPRODUCED": "negative", "INCONCLUSIVE": "neutral"}


def ladder_protocol_yaml(led: Ledger) -> str:
    """A ladder protocol from a ledger: the base, then the cumulative variant after each
    positive step (the steps the source kept), judged rung by rung on TPOT."""
    rungs: dict[str, dict] = {"base": as_protocol_variant(led.base)}
    for s in led.steps:
        if s.result == "positive" and s.tried_at is None:
            rungs[f"step-{s.id}"] = as_protocol_variant(cumulative(led, s.id)[1])
    if len(rungs) < 2:
        raise OverlayError("the ledger has no positive step to climb", path=str(led.path))
    w = led.workload
    conc = w.get("concurrency", [1, 4, 8])
    prompts = w.get("num-prompts", [40] * len(conc))
    scen = {f"c{c}": {"input-len": w.get("input-len", 1024), "output-len": w.get("output-len", 512),
                      "num-prompts": n, "max-concurrency": c, "warmups": w.get("warmups", 0)}
            for c, n in zip(conc, prompts, strict=True)}
    doc = {"claim": f"{led.path.parent.name}-ladder",
           "preregistered": "YYYY-MM-DD  # fill in before the first run",
           "hypothesis": "each kept step lowers mean TPOT against the rung before it",
           "model": led.model, "baseline": "base", "ladder": list(rungs), "variants": rungs,
           "scenarios": scen, "starts": 5,
           "claims": {"tpot": {"hypothesis": "each rung lowers mean TPOT by >= 1% against the previous one",
                               "checks": [{"metric": "tpot", "statistic": "mean", "change": "lower",
                                           "min-effect-pct": 1.0}]}}}
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    return ("# Generated by `overlay evidence ledger --ladder-protocol` from " + led.path.name + ".\n"
            "# Run it with `overlay bench ab --protocol ... [--cluster ADDRESS]`; fill in `preregistered`,\n"
            "# CPU sets and the server command first.\n" +
            text.replace("'YYYY-MM-DD  # fill in before the first run'", "YYYY-MM-DD  # fill in before the first run"))


def computed_ladder(a) -> dict:
    """The ledger a ladder campaign's analysis (evidence.analyze.Analysis) amounts to: per
    rung, what it was judged against, and per check and scenario the means before and
    after, the change with its interval, the decision and the ledger result; pure."""
    p = a.protocol
    checks = [x for c in a.claims for x in c.checks]
    steps = []
    for rung in p.ladder[1:]:
        rows = []
        for x in checks:
            if x.treatment != rung:
                continue
            iv = x.delta.interval if x.delta else None
            rows.append({"claim": next(c.name for c in a.claims if x in c.checks), "scenario": x.scenario,
                         "metric": x.check.metric, "statistic": x.check.statistic,
                         "before": iv.baseline_mean if iv else None, "after": iv.treatment_mean if iv else None,
                         "change_pct": iv.delta_pct if iv else None,
                         "interval_pct": [iv.low_pct, iv.high_pct] if iv else None,
                         "pairs": iv.n_pairs if iv else 0, "decision": x.decision,
                         "result": LADDER_RESULT.get(x.decision, "unmeasured")})
        decisions = {r["decision"] for r in rows}
        overall = (decisions.pop() if len(decisions) == 1 else "INCONCLUSIVE") if rows else "INCONCLUSIVE"
        steps.append({"step": rung, "compared-with": p.compared_with(rung), "decision": overall,
                      "result": LADDER_RESULT.get(overall, "unmeasured"), "checks": rows})
    return {"source": f"measured here: `overlay bench ab` on {p.path.name} ({p.starts} starts per rung)",
            "status": "measured here (a ladder campaign), computed by `overlay evidence analyze`",
            "model": p.model, "base": p.ladder[0], "steps": steps}


def render_computed_ladder(led: dict) -> str:
    out = ["## Ladder (computed ledger)", "",
           "| step | against | scenario | check | before | after | change | interval | pairs | decision |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in led["steps"]:
        for r in s["checks"]:
            iv = r["interval_pct"]
            cells = ("n/a", "n/a", "n/a", "n/a") if r["before"] is None else (
                f"{r['before']:.3f}", f"{r['after']:.3f}", f"{r['change_pct']:+.1f}%",
                f"({iv[0]:+.1f}%, {iv[1]:+.1f}%)")
            out.append(f"| {s['step']} | {s['compared-with']} | {r['scenario']} | {r['statistic']} "
                       f"{r['metric']} | {' | '.join(cells)} | {r['pairs']} | {r['decision']} |")
    return "\n".join(out) + "\n"
