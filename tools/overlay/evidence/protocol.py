"""The preregistered protocol (evidence/<claim>/protocol.yaml) and its deviations.

The protocol is written before any run and never edited afterwards; what happened
differently is recorded in deviations.yaml next to it. Both load into frozen
dataclasses; every error names file:line and the field, like pins and series.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from overlay.series import yamldoc
from overlay.errors import OverlayError, quoted, shortened
from overlay.series.model import _Fields, _kind, _rel
from overlay.series.yamldoc import Node

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")

# Per-request (or per-token) metrics and the one per-run metric. Values are what
# `vllm bench serve --save-detailed` stores: seconds per request, tokens/s per run.
REQUEST_METRICS = ("ttft", "tpot", "e2el", "itl")
RUN_METRICS = ("throughput", "request-throughput")
METRICS = RUN_METRICS + REQUEST_METRICS
STATISTICS = ("mean", "p50", "p95", "p99")
CHANGES = ("higher", "lower")
REFUTE_RULES = ("interval-excludes-min-effect", "interval-includes-zero")
# Declared kinds: what no result file shows, so only the record says it (always listed):
# `analysis` (the analysis method changed after the runs), `pin` (measured at another pin
# than the protocol's variants name).
DECLARED_KINDS = ("analysis", "pin")
DEVIATION_KINDS = ("excluded", "missing", "parameters", "order", "failed-requests", "extra",
                   "protocol") + DECLARED_KINDS

PROTOCOL_FIELDS = ("claim", "preregistered", "hypothesis", "model", "baseline", "variants",
                   "scenarios", "starts", "order", "seed", "cpus", "server", "client",
                   "metrics", "claims", "bootstrap", "stop-rules", "max-failed-requests", "notes",
                   "cards", "ladder")
VARIANT_FIELDS = ("description", "pin", "series", "env", "server-args", "venv")
SCENARIO_FIELDS = ("description", "dataset", "input-len", "output-len", "num-prompts",
                   "max-concurrency", "request-rate", "warmups", "client-args")
SERVER_FIELDS = ("command", "host", "port", "ready-path", "ready-timeout-s", "stop-timeout-s")
CLIENT_FIELDS = ("command", "timeout-s")
CLAIM_FIELDS = ("hypothesis", "kind", "scenarios", "treatments", "checks", "not-reproduced-when",
                "min-positive-pairs", "steps", "expect")
CHECK_FIELDS = ("metric", "statistic", "change", "min-effect-pct")
BOOT_FIELDS = ("resamples", "confidence", "seed")
CARD_FIELDS = ("resource", "per-run")
RESOURCE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")

# What a server command may contain; {composed:<target>} is the variant's composed tree.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_:-]*)\}")
PLACEHOLDERS = ("model", "host", "port", "variant", "pin")
COMPOSED = re.compile(r"^composed:[A-Za-z0-9][A-Za-z0-9_-]*$")

DEFAULT_SERVER_COMMAND = ("vllm", "serve", "{model}", "--host", "{host}", "--port", "{port}")
DEFAULT_CLIENT_COMMAND = ("vllm", "bench", "serve")


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    pin: str | None
    series: tuple[str, ...] | str  # "all", "none", or patch file names
    env: tuple[tuple[str, str], ...]
    server_args: tuple[str, ...]
    venv: str | None
    line: int


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    dataset: str
    input_len: int
    output_len: int
    num_prompts: int
    max_concurrency: int | None
    request_rate: float  # math.inf for "as fast as allowed"
    warmups: int
    client_args: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Check:
    """One (metric, statistic) the claim says moves in `change` by >= min_effect_pct."""

    metric: str
    statistic: str  # "value" for per-run metrics
    change: str  # higher | lower
    min_effect_pct: float
    line: int

    @property
    def label(self) -> str:
        return self.metric if self.statistic == "value" else f"{self.statistic} {self.metric}"


@dataclass(frozen=True)
class CounterExpectation:
    name: str  # profiler API name or glob
    per_step: tuple[tuple[str, float], ...]  # (variant, expected count per step)


@dataclass(frozen=True)
class Claim:
    name: str
    hypothesis: str
    kind: str  # "service" (bootstrap on runs) | "counters" (profiler, exact)
    scenarios: tuple[str, ...]
    checks: tuple[Check, ...]
    refute_rule: str
    min_positive_pairs: int
    steps: int  # counters: decode steps profiled
    expect: tuple[CounterExpectation, ...]
    line: int
    treatments: tuple[str, ...] = ()  # variants compared with the baseline; () = every treatment


@dataclass(frozen=True)
class Bootstrap:
    resamples: int
    confidence: float
    seed: int


@dataclass(frozen=True)
class Cards:
    """What one run holds exclusively on a campaign's cluster (a Ray resource: Ray
    labels Ascend cards NPU natively); a serial `bench ab` ignores it."""

    resource: str = "NPU"
    per_run: int = 1


@dataclass(frozen=True)
class Protocol:
    path: Path
    claim: str
    preregistered: _dt.date
    hypothesis: str
    model: str
    baseline: str
    variants: tuple[Variant, ...]
    scenarios: tuple[Scenario, ...]
    starts: int
    order: str
    seed: int
    server_cpus: str | None
    client_cpus: str | None
    server_command: tuple[str, ...]
    host: str
    port: int
    ready_path: str
    ready_timeout_s: float
    stop_timeout_s: float
    client_command: tuple[str, ...]
    client_timeout_s: float
    metrics: tuple[str, ...]
    claims: tuple[Claim, ...]
    bootstrap: Bootstrap
    stop_rules: tuple[str, ...]
    max_failed_requests: int
    cards: Cards = Cards()
    ladder: tuple[str, ...] = ()  # rung order (first = baseline): rung k is judged against rung k-1

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    def scenario(self, name: str) -> Scenario:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    @property
    def treatments(self) -> tuple[str, ...]:
        """Every variant compared with another: with the baseline, or on a ladder with the
        rung before it (in rung order)."""
        if self.ladder:
            return self.ladder[1:]
        return tuple(v.name for v in self.variants if v.name != self.baseline)

    def compared_with(self, treatment: str) -> str:
        """The variant a treatment is judged against: the baseline, or its previous rung."""
        if self.ladder:
            return self.ladder[self.ladder.index(treatment) - 1]
        return self.baseline

    @property
    def folder(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class Deviation:
    kind: str
    run: str | None
    scenario: str | None
    reason: str
    line: int


DIGEST_FILE = "protocol.sha256"  # in a results folder: the protocol the runs were made under


def protocol_digest(protocol: Protocol) -> str:
    return hashlib.sha256(protocol.path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- field helpers


# Upper bounds, each with the reason it is given in the refusal: a typo of a few zeros
# must be one line at load, not minutes of planning and a MemoryError.
MAX_STARTS = (100, "each start is a server start of its own (minutes each); the plan and the "
                   "analysis hold every start")
MAX_RESAMPLES = (100_000, "the bootstrap holds resamples x starts indices in memory; 10000 already "
                          "puts the percentile bounds within about 0.1% of the spread")
MAX_REQUESTS = (100_000, "every request's token gaps are kept in the client's result file, which "
                         "the analysis reads whole")


def _int(f: _Fields, key: str, *, default: int | None = None, minimum: int = 0,
         maximum: tuple[int, str] | None = None) -> int:
    if not f.has(key):
        if default is None:
            raise f.error(key, "missing; expected a whole number")
        return default
    value = f.map[key].value
    if isinstance(value, float) and value.is_integer() and maximum is not None and value > maximum[0]:
        value = int(value)  # 1e11 written as a float: refused for its size below, not its type
    if isinstance(value, bool) or not isinstance(value, int):
        raise f.error(key, f"expected a whole number, got {_kind(value)} {quoted(value)}")
    if value < minimum:
        raise f.error(key, f"{value} is below the minimum {minimum}")
    if maximum is not None and value > maximum[0]:
        raise f.error(key, f"{value} is above the maximum {maximum[0]}: {maximum[1]}")
    return value


def _number(f: _Fields, key: str, *, default: float | None = None, allow_inf: bool = False,
            minimum: float = 0.0) -> float:
    if not f.has(key):
        if default is None:
            raise f.error(key, "missing; expected a number")
        return default
    value = f.map[key].value
    if allow_inf and isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise f.error(key, f"expected a number{' or inf' if allow_inf else ''}, "
                           f"got {_kind(value)} {quoted(value)}")
    if value < minimum:
        raise f.error(key, f"{value} is below the minimum {minimum}")
    return float(value)


def _name(f: _Fields, key: str, value: str, what: str) -> str:
    if not NAME.match(value):
        raise OverlayError(f"{what} name {quoted(value)} must be letters, digits, '-' or '_'",
                           path=f.path, line=f.map[key].line if key in f.map else f.node.line)
    return value


def _cmd_list(f: _Fields, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if not f.has(key):
        return default
    value = f.map[key].value
    if not isinstance(value, list) or not value:
        raise f.error(key, "expected a non-empty list of strings (argv, no shell)")
    out = []
    for item in value:
        if isinstance(item.value, bool) or not isinstance(item.value, (str, int, float)):
            raise OverlayError(f"field '{key}' of {f.what}: expected strings, got {quoted(item.value)}",
                               path=f.path, line=item.line)
        out.append(str(item.value))
    return tuple(out)


def _cpus(f: _Fields, key: str) -> str | None:
    value = f.str(key, expect="a CPU list such as 96-119 or 0,2,4-7")
    if value is not None and not CPU_LIST.match(value.replace(" ", "")):
        raise f.error(key, f"'{value}' is not a CPU list", hint="write it as taskset -c takes it, e.g. 96-119")
    return value.replace(" ", "") if value else None


def _date(f: _Fields, key: str) -> _dt.date:
    if not f.has(key):
        raise f.error(key, "missing; expected the date the protocol was written (YYYY-MM-DD)",
                      hint="a protocol is preregistered: write it before the first run")
    value = f.map[key].value
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(str(value).strip())
    except ValueError:
        raise f.error(key, f"'{value}' is not a date (YYYY-MM-DD)") from None


# ----------------------------------------------------------------------------- sections


def _variant(name: str, node: Node, path: str) -> Variant:
    f = _Fields(node, path, f"variant '{name}'", VARIANT_FIELDS)
    series: tuple[str, ...] | str = "all"
    if f.has("series"):
        raw = f.map["series"].value
        if isinstance(raw, str) and raw.strip() in ("all", "none"):
            series = raw.strip()
        else:
            series = f.str_list("series", expect="'all', 'none' or a list of patch file names")
            for patch in series:
                if not patch.endswith(".patch"):
                    raise f.error("series", f"'{patch}' is not a patch file name",
                                  hint="name patches as in series.yaml, e.g. 0003-topic.patch")
    env: list[tuple[str, str]] = []
    envn = f.mapping("env")
    if envn is not None:
        for key, value in envn.value.items():
            if not ENV_NAME.match(key):
                raise OverlayError(f"variant '{name}': {quoted(key)} is not an environment variable name",
                                   path=path, line=value.line)
            if not isinstance(value.value, str):
                raise OverlayError(f"variant '{name}': env {key} must be a string, got "
                                   f"{_kind(value.value)} {quoted(value.value)}", path=path, line=value.line,
                                   hint="quote the value, e.g. \"1\"")
            env.append((key, value.value))
    return Variant(name=name, description=f.str("description") or "", pin=f.str("pin"),
                   series=series, env=tuple(env),
                   server_args=_cmd_list(f, "server-args", ()), venv=f.str("venv"), line=node.line)


def _scenario(name: str, node: Node, path: str) -> Scenario:
    f = _Fields(node, path, f"scenario '{name}'", SCENARIO_FIELDS)
    conc = _int(f, "max-concurrency", minimum=1) if f.has("max-concurrency") else None
    rate = _number(f, "request-rate", default=math.inf, allow_inf=True)
    if rate <= 0:
        raise f.error("request-rate", "must be positive (or inf)")
    if conc is None and math.isinf(rate):
        raise f.error("max-concurrency", "a scenario needs max-concurrency, a finite request-rate, or both",
                      hint="an unbounded burst measures the client, not the server")
    return Scenario(name=name, description=f.str("description") or "",
                    dataset=f.str("dataset") or "random",
                    input_len=_int(f, "input-len", minimum=1), output_len=_int(f, "output-len", minimum=2),
                    num_prompts=_int(f, "num-prompts", minimum=1, maximum=MAX_REQUESTS), max_concurrency=conc,
                    request_rate=rate, warmups=_int(f, "warmups", default=0, maximum=MAX_REQUESTS),
                    client_args=_cmd_list(f, "client-args", ()), line=node.line)


def _check(node: Node, path: str, where: str) -> Check:
    f = _Fields(node, path, where, CHECK_FIELDS)
    metric = f.str("metric", required=True, expect="one of " + ", ".join(METRICS))
    if metric not in METRICS:
        raise f.error("metric", f"'{metric}' is not one of " + ", ".join(METRICS))
    if metric in RUN_METRICS:
        stat = f.str("statistic") or "value"
        if stat != "value":
            raise f.error("statistic", f"{metric} is one number per run; leave statistic out")
    else:
        stat = f.str("statistic", required=True, expect="one of " + ", ".join(STATISTICS))
        if stat not in STATISTICS:
            raise f.error("statistic", f"'{stat}' is not one of " + ", ".join(STATISTICS))
    change = f.str("change", required=True, expect="higher or lower (the claimed direction)")
    if change not in CHANGES:
        raise f.error("change", f"'{change}' is not higher or lower")
    effect = _number(f, "min-effect-pct", default=0.0)
    assert metric and stat
    return Check(metric, stat, change, effect, node.line)


def _claim(name: str, node: Node, path: str, scenarios: tuple[str, ...],
           variants: tuple[str, ...]) -> Claim:
    f = _Fields(node, path, f"claim '{name}'", CLAIM_FIELDS)
    kind = f.str("kind") or "service"
    if kind not in ("service", "counters"):
        raise f.error("kind", f"'{kind}' is not service or counters")
    hyp = f.str("hypothesis", required=True, expect="the sentence this claim tests")
    rule = f.str("not-reproduced-when") or REFUTE_RULES[0]
    if rule not in REFUTE_RULES:
        raise f.error("not-reproduced-when", f"'{rule}' is not one of " + ", ".join(REFUTE_RULES))
    checks: list[Check] = []
    expect: list[CounterExpectation] = []
    steps = 0
    claim_scen: tuple[str, ...] = ()
    treatments: tuple[str, ...] = ()
    if kind == "service":
        claim_scen = f.str_list("scenarios") or scenarios
        for s in claim_scen:
            if s not in scenarios:
                raise f.error("scenarios", f"unknown scenario '{s}'",
                              hint="known: " + ", ".join(scenarios))
        if not f.has("checks") or not isinstance(f.map["checks"].value, list) or not f.map["checks"].value:
            raise f.error("checks", "expected a non-empty list of {metric, statistic, change, min-effect-pct}")
        for i, item in enumerate(f.map["checks"].value, 1):
            checks.append(_check(item, path, f"check {i} of claim '{name}'"))
        treatments = f.str_list("treatments") or ()
        for t in treatments:
            if t not in variants:
                raise f.error("treatments", f"unknown variant '{t}'", hint="known: " + ", ".join(variants))
    else:
        steps = _int(f, "steps", minimum=1)
        en = f.mapping("expect", required=True)
        assert en is not None
        for api, per in en.value.items():
            pf = _Fields(per, path, f"expected counts of '{api}'", variants)
            pairs = []
            for v in variants:
                if pf.has(v):
                    pairs.append((v, _number(pf, v)))
            if len(pairs) < 2:
                raise OverlayError(f"claim '{name}': {quoted(api)} needs an expected per-step count for "
                                   "at least two variants", path=path, line=per.line)
            expect.append(CounterExpectation(api, tuple(pairs)))
    assert hyp
    return Claim(name=name, hypothesis=hyp, kind=kind, scenarios=claim_scen, checks=tuple(checks),
                 refute_rule=rule, min_positive_pairs=_int(f, "min-positive-pairs", default=0),
                 steps=steps, expect=tuple(expect), line=node.line, treatments=tuple(treatments))


def load_protocol(path: Path, root: Path | None = None) -> Protocol:
    """Load a protocol.yaml (or the one in a claim folder)."""
    if path.is_dir():
        path = path / "protocol.yaml"
    shown = _rel(path, root)
    doc = yamldoc.load(path, shown)
    top = _Fields(doc, shown, "the protocol", PROTOCOL_FIELDS)
    claim_name = top.str("claim") or path.parent.name
    hyp = top.str("hypothesis", required=True, expect="the hypothesis, written before any run")
    model = top.str("model", required=True, expect="the served model name or path")
    vn = top.mapping("variants", required=True)
    assert vn is not None and hyp and model
    variants = tuple(_variant(_name(top, "variants", n, "variant"), node, shown) for n, node in vn.value.items())
    if len(variants) < 2:
        raise top.error("variants", "an A/B protocol needs at least two variants")
    baseline = top.str("baseline", required=True, expect="the name of the baseline variant")
    if baseline not in [v.name for v in variants]:
        raise top.error("baseline", f"'{baseline}' is not a variant",
                        hint="known: " + ", ".join(v.name for v in variants))
    sn = top.mapping("scenarios", required=True)
    assert sn is not None
    scenarios = tuple(_scenario(_name(top, "scenarios", n, "scenario"), node, shown) for n, node in sn.value.items())
    if not scenarios:
        raise top.error("scenarios", "expected at least one scenario")
    starts = _int(top, "starts", minimum=2, maximum=MAX_STARTS)
    order = top.str("order") or "balanced"
    if order != "balanced":
        raise top.error("order", f"'{order}' is not supported", hint="use balanced (interleaved, counterbalanced)")
    server_cpus = client_cpus = None
    cn = top.mapping("cpus")
    if cn is not None:
        cf = _Fields(cn, shown, "cpus", ("server", "client"))
        server_cpus, client_cpus = _cpus(cf, "server"), _cpus(cf, "client")
    srv = _Fields(top.mapping("server") or Node({}, doc.line), shown, "server", SERVER_FIELDS)
    cli = _Fields(top.mapping("client") or Node({}, doc.line), shown, "client", CLIENT_FIELDS)
    metrics = top.str_list("metrics") or METRICS
    for m in metrics:
        if m not in METRICS:
            raise top.error("metrics", f"'{m}' is not one of " + ", ".join(METRICS))
    names = tuple(s.name for s in scenarios)
    claims: list[Claim] = []
    cl = top.mapping("claims", required=True)
    assert cl is not None
    for cname, cnode in cl.value.items():
        claims.append(_claim(_name(top, "claims", cname, "claim"), cnode, shown, names,
                             tuple(v.name for v in variants)))
    if not claims:
        raise top.error("claims", "expected at least one claim with its decision thresholds")
    for c in claims:
        if baseline in c.treatments:
            raise OverlayError(f"claim '{c.name}': the baseline '{baseline}' cannot be one of its treatments",
                               path=shown, line=c.line, hint="list the variants compared with the baseline")
    bn = top.mapping("bootstrap")
    bf = _Fields(bn or Node({}, doc.line), shown, "bootstrap", BOOT_FIELDS)
    conf = _number(bf, "confidence", default=0.95)
    if not 0.5 <= conf < 1:
        raise bf.error("confidence", f"{conf} is not in [0.5, 1)")
    seed = _int(top, "seed", default=0)
    server_command = _cmd_list(srv, "command", DEFAULT_SERVER_COMMAND)
    srv_line = srv.map["command"].line if srv.has("command") else doc.line
    pinned = [v for v in variants if v.pin]
    # The shared command runs for every variant: {composed:*} there needs every variant pinned.
    _check_placeholders(server_command, next((v for v in variants if not v.pin), None) if len(pinned) <
                        len(variants) else None, shown, srv_line)
    for v in variants:
        _check_placeholders(v.server_args, v, shown, v.line)
    return Protocol(
        path=path, claim=claim_name, preregistered=_date(top, "preregistered"), hypothesis=hyp,
        model=model, baseline=baseline, variants=variants, scenarios=scenarios, starts=starts,
        order=order, seed=seed, server_cpus=server_cpus, client_cpus=client_cpus,
        server_command=server_command,
        host=srv.str("host") or "127.0.0.1", port=_int(srv, "port", default=8000, minimum=1),
        ready_path=srv.str("ready-path") or "/v1/models",
        ready_timeout_s=_number(srv, "ready-timeout-s", default=1800.0),
        stop_timeout_s=_number(srv, "stop-timeout-s", default=60.0),
        client_command=_cmd_list(cli, "command", DEFAULT_CLIENT_COMMAND),
        client_timeout_s=_number(cli, "timeout-s", default=7200.0),
        metrics=metrics, claims=tuple(claims),
        bootstrap=Bootstrap(_int(bf, "resamples", default=10000, minimum=100, maximum=MAX_RESAMPLES), conf,
                            _int(bf, "seed", default=seed)),
        stop_rules=top.str_list("stop-rules"),
        max_failed_requests=_int(top, "max-failed-requests", default=0),
        cards=_cards(top, shown, doc.line),
        ladder=_ladder(top, baseline, tuple(v.name for v in variants)),
    )


def _ladder(top: _Fields, baseline: str, names: tuple[str, ...]) -> tuple[str, ...]:
    if not top.has("ladder"):
        return ()
    rungs = top.str_list("ladder", expect="the variants in rung order, the baseline first")
    if sorted(rungs) != sorted(names) or len(set(rungs)) != len(rungs):
        raise top.error("ladder", "must list every variant exactly once, in rung order",
                        hint="variants: " + ", ".join(names))
    if rungs[0] != baseline:
        raise top.error("ladder", f"the first rung must be the baseline '{baseline}'")
    return tuple(rungs)


def _cards(top: _Fields, shown: str, line: int) -> Cards:
    cf = _Fields(top.mapping("cards") or Node({}, line), shown, "cards", CARD_FIELDS)
    resource = cf.str("resource") or Cards.resource
    if not RESOURCE_NAME.match(resource):
        raise cf.error("resource", f"'{resource}' is not a resource name", hint="for example NPU")
    return Cards(resource, _int(cf, "per-run", default=Cards.per_run, minimum=1))


def _check_placeholders(args: tuple[str, ...], variant: Variant | None, path: str, line: int) -> None:
    """Every {name} in a server command must be one `bench ab` fills in; a typo such as
    {modle} would otherwise reach the server verbatim."""
    for arg in args:
        for m in PLACEHOLDER.finditer(arg):
            key = m.group(1)
            if key in PLACEHOLDERS:
                continue
            if COMPOSED.match(key):
                if variant is not None and not variant.pin:
                    raise OverlayError(f"variant '{variant.name}' uses {{{key}}} but has no pin",
                                       path=path, line=line, hint="give the variant a pin (and series)")
                continue
            raise OverlayError(f"unknown placeholder {shortened('{' + key + '}')} in {quoted(arg)}", path=path, line=line,
                               hint="known: " + ", ".join("{" + k + "}" for k in PLACEHOLDERS)
                                    + ", {composed:<target>}")


def load_deviations(folder: Path, root: Path | None = None) -> tuple[Deviation, ...]:
    """deviations.yaml: what happened differently from the protocol, and why."""
    path = folder / "deviations.yaml"
    if not os.path.lexists(path):  # absent is "none"; anything else there must be a YAML file
        return ()
    shown = _rel(path, root)
    doc = yamldoc.load(path, shown)
    top = _Fields(doc, shown, "deviations.yaml", ("deviations",))
    items = top.map.get("deviations")
    if items is None or items.value is None:
        return ()
    if not isinstance(items.value, list):
        raise top.error("deviations", "expected a list of {kind, run, scenario, reason}")
    out = []
    for i, item in enumerate(items.value, 1):
        f = _Fields(item, shown, f"deviation {i}", ("kind", "run", "scenario", "reason", "action"))
        kind = f.str("kind", required=True, expect="one of " + ", ".join(DEVIATION_KINDS))
        if kind not in DEVIATION_KINDS:
            raise f.error("kind", f"'{kind}' is not one of " + ", ".join(DEVIATION_KINDS))
        reason = f.str("reason", required=True, expect="why it happened and what was done")
        assert kind and reason
        out.append(Deviation(kind, f.str("run"), f.str("scenario"), reason, item.line))
    return tuple(out)
