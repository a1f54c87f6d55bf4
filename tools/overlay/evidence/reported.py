"""Figures reported by a source (reported.yaml), decided by the protocol's thresholds.

A packet may hold a claim whose raw data is not here (the seed's runs happened on
hardware we do not have). Its reported.yaml transcribes the source's tables,
marked as reported, not re-measured; `overlay evidence analyze` applies the same
decision rules to them as to measured data and shows the source's own decision
next to the tool's, so a disagreement is visible.

reported.yaml:
  source: <where the figures come from>
  status: reported by the source, not re-measured here
  tables:
    - id: <name>            date: YYYY-MM-DD     role: preregistered | exploratory
      treatment: <variant>  conditions: <text>
      rows:
        - {scenario, metric, statistic, delta-pct, ci-pct: [lo, hi] | null,
           interval-includes-zero: true|false (when the bounds are not reported),
           positive-pairs: "k/n", value-note}
  counters:
    - {id, date, steps, counts: {<api>: {<variant>: <count>}}}
  source-decisions: {<claim>: REPRODUCED | NOT_REPRODUCED | INCONCLUSIVE}

Every table and counters set may say whose code it measured (`implementation:`,
default the file's top-level one): `series` is this repository's series, anything
else names another implementation. A decision taken from another implementation's
(or an unnamed one's) figures is labelled so in the output. counters/ beside the
file (with its measured.yaml) holds counts measured here; a counters claim is then
decided from them, and the reported counts are shown as the source's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from overlay.series import yamldoc
from overlay.errors import OverlayError
from overlay.evidence import decide
from overlay.evidence.protocol import METRICS, STATISTICS, Deviation, Protocol, _number
from overlay.evidence.report import Row, check_label
from overlay.series.model import _Fields, _rel

DECISIONS = (decide.REPRODUCED, decide.NOT_REPRODUCED, decide.INCONCLUSIVE)
THIS_SERIES = "series"  # implementation: this repository's patch series


def implementation_label(implementation: str, short: bool = False) -> str:
    """How a result set's implementation reads next to a decision (short: next to a row)."""
    if implementation == THIS_SERIES:
        return "this series"
    if not implementation:
        return "implementation not recorded" if short else "implementation not recorded (not shown to be this series)"
    return "another implementation" if short else f"ANOTHER IMPLEMENTATION: {implementation}"


@dataclass(frozen=True)
class ReportedRow:
    scenario: str
    metric: str
    statistic: str
    delta_pct: float
    ci: tuple[float, float] | None
    includes_zero: bool | None
    pairs: tuple[int, int] | None
    note: str


@dataclass(frozen=True)
class ReportedTable:
    id: str
    date: str
    role: str
    treatment: str
    conditions: str
    rows: tuple[ReportedRow, ...]
    implementation: str = ""


@dataclass(frozen=True)
class ReportedCounters:
    id: str
    date: str
    steps: int
    counts: dict[str, dict[str, int]]
    implementation: str = ""


@dataclass(frozen=True)
class Reported:
    path: Path
    source: str
    status: str
    tables: tuple[ReportedTable, ...]
    counters: tuple[ReportedCounters, ...]
    source_decisions: dict[str, str]


@dataclass(frozen=True)
class MeasuredCounters:
    """counters/measured.yaml: whose code the counts in counters/ are of, and how."""

    implementation: str
    device: str
    command: str
    pin: str = ""  # the pin set the counts were taken at


def pin_deviation_note(protocol: Protocol, measured: MeasuredCounters | None,
                       deviations: tuple[Deviation, ...]) -> str | None:
    """A line when the counts were taken at another pin than the protocol's variants name,
    saying whether deviations.yaml records it (kind `pin`); None when they agree; pure."""
    if measured is None or not measured.pin:
        return None
    pins = sorted({v.pin for v in protocol.variants if v.pin})
    if not pins or measured.pin in pins:
        return None
    recorded = any(d.kind == "pin" for d in deviations)
    return (f"the counts in counters/ were taken at pin {measured.pin}; the protocol's variants name "
            f"{', '.join(pins)}: " + ("recorded in deviations.yaml (kind pin)" if recorded else
                                      "NOT recorded in deviations.yaml: add a `kind: pin` deviation"))


def load_measured(folder: Path, root: Path | None = None) -> MeasuredCounters | None:
    path = folder / "counters" / "measured.yaml"
    if not path.is_file():
        return None
    shown = _rel(path, root)
    f = _Fields(yamldoc.load(path, shown), shown, "measured.yaml",
                ("implementation", "device", "pin", "date", "steps", "batch", "command", "trees", "cases"))
    return MeasuredCounters(f.str("implementation", required=True, expect="series, or the implementation counted")
                            or "", f.str("device") or "", f.str("command") or "", str(f.map["pin"].value)
                            if f.has("pin") else "")


def _pairs(f: _Fields, key: str) -> tuple[int, int] | None:
    v = f.str(key, expect="'k/n' (agreeing pairs of n)")
    if v is None:
        return None
    try:
        k, n = (int(x) for x in v.split("/"))
    except ValueError:
        raise f.error(key, f"'{v}' is not k/n") from None
    return k, n


def load_reported(folder: Path, root: Path | None = None) -> Reported:
    path = folder / "reported.yaml"
    shown = _rel(path, root)
    doc = yamldoc.load(path, shown)
    top = _Fields(doc, shown, "reported.yaml", ("source", "status", "tables", "counters", "source-decisions",
                                                "notes", "implementation"))
    implementation = top.str("implementation") or ""
    status = top.str("status", required=True, expect="'reported by the source, not re-measured here'")
    assert status
    if "not re-measured" not in status:
        raise top.error("status", "must say the figures are reported by the source, not re-measured here")
    tables = []
    for item in (top.map["tables"].value if top.has("tables") else []) or []:
        tf = _Fields(item, shown, "table", ("id", "date", "role", "treatment", "conditions", "rows", "columns",
                                            "implementation"))
        role = tf.str("role", required=True, expect="preregistered or exploratory")
        if role not in ("preregistered", "exploratory"):
            raise tf.error("role", f"'{role}' is not preregistered or exploratory")
        rows = []
        for r in (tf.map["rows"].value if tf.has("rows") else []) or []:
            rf = _Fields(r, shown, "row", ("scenario", "metric", "statistic", "delta-pct", "ci-pct",
                                           "interval-includes-zero", "positive-pairs", "note"))
            metric = rf.str("metric", required=True)
            if metric not in METRICS:
                raise rf.error("metric", f"'{metric}' is not one of " + ", ".join(METRICS))
            stat = rf.str("statistic") or "value"
            if stat not in STATISTICS + ("value",):
                raise rf.error("statistic", f"'{stat}' is not one of mean, p50, p95, p99, value")
            ci = None
            if rf.has("ci-pct"):
                raw = rf.map["ci-pct"].value
                if not isinstance(raw, list) or len(raw) != 2 or not all(
                        isinstance(x.value, (int, float)) and not isinstance(x.value, bool) for x in raw):
                    raise rf.error("ci-pct", "expected [low, high] in percent")
                ci = (float(raw[0].value), float(raw[1].value))
            inc = rf.bool("interval-includes-zero") if rf.has("interval-includes-zero") else None
            rows.append(ReportedRow(rf.str("scenario", required=True) or "", metric or "", stat,
                                    _number(rf, "delta-pct", minimum=-1e9), ci, inc,
                                    _pairs(rf, "positive-pairs"), rf.str("note") or ""))
        tables.append(ReportedTable(tf.str("id", required=True) or "", str(tf.map["date"].value)
                                    if tf.has("date") else "", role or "", tf.str("treatment") or "",
                                    tf.str("conditions") or "", tuple(rows),
                                    tf.str("implementation") or implementation))
    counters = []
    for item in (top.map["counters"].value if top.has("counters") else []) or []:
        cf = _Fields(item, shown, "counters", ("id", "date", "steps", "batch", "counts", "conditions",
                                               "implementation"))
        counts: dict[str, dict[str, int]] = {}
        cn = cf.mapping("counts", required=True)
        assert cn is not None
        for api, per in cn.value.items():
            if not isinstance(per.value, dict):
                raise OverlayError(f"counts of '{api}' must map variant -> count", path=shown, line=per.line)
            counts[api] = {v: int(n.value) for v, n in per.value.items()}
        steps = cf.map["steps"].value if cf.has("steps") else None
        if not isinstance(steps, int) or steps < 1:
            raise cf.error("steps", "expected the number of profiled decode steps")
        counters.append(ReportedCounters(cf.str("id", required=True) or "",
                                         str(cf.map["date"].value) if cf.has("date") else "", steps, counts,
                                         cf.str("implementation") or implementation))
    src: dict[str, str] = {}
    sd = top.mapping("source-decisions")
    if sd is not None:
        for k, v in sd.value.items():
            if v.value not in DECISIONS:
                raise OverlayError(f"source decision '{v.value}' is not one of " + ", ".join(DECISIONS),
                                   path=shown, line=v.line)
            src[k] = v.value
    return Reported(path, top.str("source") or "", status, tuple(tables), tuple(counters), src)


@dataclass(frozen=True)
class ReportedDecision:
    claim: str
    hypothesis: str
    decision: str
    source_decision: str | None
    decided_from: str = ""  # implementation_label() of the result sets the decision used
    other_implementation: bool = True  # not (only) this series' own results


def decide_reported(protocol: Protocol, rep: Reported, measured: dict | None = None,
                    measured_by: MeasuredCounters | None = None) -> tuple[list[ReportedDecision], list[Row]]:
    """Apply the protocol's claims to the preregistered reported tables; pure.
    `measured`: claim -> analyze.ClaimDecision of counts measured here (counters/),
    which decide their claim; the reported counts are then shown, not used."""
    rows: list[Row] = []
    decisions: list[ReportedDecision] = []
    pre = [t for t in rep.tables if t.role == "preregistered"]
    for claim in protocol.claims:
        got: list[str] = []
        used: set[str] = set()
        own = (measured or {}).get(claim.name)
        own_impl = measured_by.implementation if measured_by else ""
        own_device = measured_by.device if measured_by else ""
        if own is not None:
            impl = own_impl
            used.add(impl)
            got.append(own.decision)
            where = f"measured here ({measured_by.device})" if measured_by and measured_by.device else "measured here"
            for k in own.counters:
                exp = ", ".join(f"{v} {n:g}" for v, n in k.expected.items())
                seen = ", ".join(f"{v} {k.raw[v]} ({k.measured[v]:g}/step)" for v in k.raw)
                rows.append(Row(claim.name, "", "", f"{k.api} per step over {k.steps} steps [counters/]",
                                None, None, None, "", k.decision,
                                f"{implementation_label(impl, True)}, {where}; expected {exp}; counted {seen}"))
            if own.note:
                rows.append(Row(claim.name, "", "", "counters/", None, None, None, "", own.decision,
                                f"{implementation_label(impl, True)}: {own.note}"))
        if claim.kind == "counters":
            for e in claim.expect:
                for c in rep.counters:
                    if e.name not in c.counts:
                        continue
                    measured = {v: n / c.steps for v, n in c.counts[e.name].items()}
                    per_step = {v: n / c.steps for v, n in c.counts[e.name].items()}
                    d = decide.decide_counters(dict(e.per_step), per_step)
                    if own is None:
                        got.append(d)
                        used.add(c.implementation)
                    exp = ", ".join(f"{v} {n:g}" for v, n in e.per_step)
                    seen = ", ".join(f"{v} {n} ({n / c.steps:g}/step)" for v, n in c.counts[e.name].items())
                    shown = "" if own is None else "shown, not used: the counts measured here decide; "
                    rows.append(Row(claim.name, "", "", f"{e.name} per step over {c.steps} steps [{c.id}]",
                                    None, None, None, "", d, f"{shown}{implementation_label(c.implementation, True)}; "
                                                             f"expected {exp}; reported {seen}"))
        else:
            for t in pre:
                for s in claim.scenarios:
                    for chk in claim.checks:
                        match = [r for r in t.rows if r.scenario == s and r.metric == chk.metric
                                 and r.statistic == chk.statistic]
                        if not match:
                            continue
                        r = match[0]
                        agree = None
                        if r.pairs is not None:
                            agree = r.pairs[0] if chk.change == "higher" else r.pairs[1] - r.pairs[0]
                        d = decide.decide_check(
                            change=chk.change, estimate_pct=r.delta_pct,
                            low_pct=r.ci[0] if r.ci else None, high_pct=r.ci[1] if r.ci else None,
                            min_effect_pct=chk.min_effect_pct, rule=claim.refute_rule,
                            agreeing_pairs=agree, min_pairs=claim.min_positive_pairs,
                            includes_zero=r.includes_zero)
                        got.append(d)
                        used.add(t.implementation)
                        note = r.note
                        if r.ci is None:
                            note = ("interval bounds not reported; source: interval "
                                    + ("includes" if r.includes_zero else "excludes") + " zero")
                        note = implementation_label(t.implementation, True) + (f"; {note}" if note else "")
                        rows.append(Row(claim.name, t.treatment, s,
                                        check_label(chk.metric, chk.statistic, chk.change, chk.min_effect_pct),
                                        r.delta_pct, r.ci[0] if r.ci else None, r.ci[1] if r.ci else None,
                                        f"{agree}/{r.pairs[1]}" if r.pairs and agree is not None else "",
                                        d, note))
        decisions.append(ReportedDecision(claim.name, claim.hypothesis,
                                          decide.aggregate(got) if got else decide.INCONCLUSIVE,
                                          rep.source_decisions.get(claim.name),
                                          "; ".join(implementation_label(i) + (f", measured here ({own_device})"
                                                                               if own is not None and own_device
                                                                               and i == own_impl else "")
                                                    for i in sorted(used)),
                                          used != {THIS_SERIES}))
    return decisions, rows


def render(protocol: Protocol, rep: Reported, decisions: list[ReportedDecision], rows: list[Row],
           deviations: tuple[Deviation, ...] = ()) -> str:
    from overlay.evidence.report import _ci, _pct

    out = [f"# {protocol.claim}: figures REPORTED BY THE SOURCE, not re-measured here", "",
           f"Source: {rep.source}", "",
           f"Protocol preregistered {protocol.preregistered.isoformat()}; decisions below apply its "
           "thresholds to the source's preregistered tables.", "",
           "| claim | decision (this tool) | decided from | decision (source) | hypothesis |",
           "| --- | --- | --- | --- | --- |"]
    for d in decisions:
        agree = "" if d.source_decision in (None, d.decision) else " (DISAGREES)"
        out.append(f"| {d.claim} | **{d.decision}** | {d.decided_from or 'no results'} | "
                   f"{d.source_decision or 'n/a'}{agree} | {d.hypothesis} |")
    if any(d.other_implementation for d in decisions):
        out += ["", "A decision decided from ANOTHER IMPLEMENTATION (or an unrecorded one) is about that "
                    "code, not about this series."]
    out += ["", "| claim | treatment | scenario | check | delta | 95% CI | agreeing pairs | decision | note |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r.claim} | {r.treatment} | {r.scenario} | {r.check} | {_pct(r.estimate_pct)} | "
                   f"{_ci(r.low_pct, r.high_pct, 'not reported')} | {r.pairs} | {r.decision} | {r.note} |")
    expl = [t for t in rep.tables if t.role == "exploratory"]
    if expl:
        out += ["", "Exploratory tables (reported, not part of the preregistered decision):", ""]
        for t in expl:
            cells = "; ".join(f"{r.scenario} {r.statistic if r.statistic != 'value' else ''} {r.metric} "
                              f"{_pct(r.delta_pct)}".replace("  ", " ") for r in t.rows)
            out.append(f"- {t.id} ({t.date}): {t.conditions} — {cells}")
    if deviations:
        out += ["", "Deviations from the protocol, as recorded (deviations.yaml):", ""]
        for d in deviations:
            where = " ".join(x for x in (d.run, d.scenario) if x)
            out.append(f"- {d.kind}{f' ({where})' if where else ''}: {d.reason}")
    return "\n".join(out) + "\n"
