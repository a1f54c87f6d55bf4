"""Scoring the gate on real pairings against a committed, hand-made classification.

`make gate-eval` (overlay gate-eval) gates plugin commits against vLLM releases
and scores every finding against `benchmarks/gate_eval.yaml`: for each pairing, each
finding key (`symbol @ plugin path`) with a verdict (`true`: a real break on a path
that runs; `false`: not one) and a one-line reason. Pure functions: load, score, render.

- precision: the share of error findings whose verdict is true (an unclassified error
  counts as not shown to be real);
- recall: the share of true breaks (every `true` entry of the pairing) the gate
  reports as errors;
- unclassified: findings the file does not cover yet, listed so they get a verdict;
- truth recall (release-bump pairings): the pairing's `truth` lists what the maintainers
  changed for the API in the bump (or main2main) commit that followed, read from its
  diff, each with the finding keys that would name it. An item is caught when one of
  them is reported as an error; items no signature shows (`reach: false`, say an output
  contract) are listed as out of reach and not counted.
- confirmed forecasts (`gate-eval --engine both`): a checker-only finding the hand gate's
  filters confirmed is an error like any other (classified by hand, counted in precision),
  and it catches a truth item by the forecast rule below (`truth_confirmed` counts the
  items caught only that way);
- forecasts (`gate-eval --engine both`): a truth item not caught as an error is forecast
  when a checker-only warning (one the hand gate's filters left a warning, not info) sits
  in the plugin file of one of the item's keys and its message quotes that key's last
  name (the attribute, function or method), alone or as the end of a qualified name. The
  rule is fixed here, not per item, so the figure cannot be fitted to the file; "as errors
  or forecasts" adds them to the errors.
- held out: the file's `held_out:` section (`chosen`: the date it was chosen, `rule`: how,
  `pairings`) holds pairings chosen before tuning and never tuned on; their precision and
  truth recall are totalled on a line of their own, apart from the tuned set's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from overlay.series import yamldoc
from overlay.errors import OverlayError
from overlay.gate.callers import module_name
from overlay.gate.engines import QUOTED, last_name
from overlay.gate.findings import Finding

_COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")
# A plugin release archive, as a pin set names one (`pypi: "vllm-ascend==0.29.0rc1"`): the
# evaluation reads `vllm_ascend-<version>.tar.gz` from the mirror's pypi/ folder. Another
# out-of-tree plugin's release (`vllm-spyre==2.0.0rc3`) is gated the same way: a vLLM plugin
# distribution by its naming rule (`vllm-<name>`), so a held-out set can test the gate on
# code it was never tuned on.
_PLUGIN_RELEASE = re.compile(r"([a-z][a-z0-9]{0,30}(?:[-_][a-z0-9]{1,30}){0,4})==([0-9][0-9A-Za-z.+!_-]{0,40})")
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,40}")
PAIRING_KEYS = {"name", "plugin", "core", "findings", "truth", "control", "source", "declared"}
HELD_OUT_KEYS = {"chosen", "rule", "pairings"}
VERDICT_KEYS = {"key", "verdict", "reason"}
TRUTH_KEYS = {"item", "keys", "reach", "reason"}


@dataclass(frozen=True)
class TruthItem:
    item: str  # what changed (one line)
    keys: tuple[str, ...]  # finding keys that name it
    reach: bool  # a signature shows it (False: behaviour only, out of reach)
    reason: str
    line: int


@dataclass(frozen=True)
class Verdict:
    key: str
    real: bool
    reason: str
    line: int


@dataclass(frozen=True)
class Pairing:
    name: str
    plugin: str  # plugin commit, or a plugin release: "vllm-ascend==0.29.0rc1" ("vllm-spyre==2.0.0rc3")
    core: str  # core release version (its source archive in the mirror)
    verdicts: tuple[Verdict, ...]
    truth: tuple[TruthItem, ...] = ()
    control: bool = False  # a negative control: the bar is at most one error
    source: str = ""  # the commit(s) the truth items were read from
    held_out: str = ""  # the date the held-out set was chosen ("" for the tuned set)
    # the core the plugin release declares where its tree says so only in prose (vllm-metax's
    # README) or core declares it (tpu-inference): the checker's differential starts there
    declared: str = ""

    def verdict(self, key: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.key == key), None)

    @property
    def plugin_release(self) -> str | None:
        """The plugin release's version when the pairing gates a release archive, else None."""
        m = _PLUGIN_RELEASE.fullmatch(self.plugin)
        return m.group(2) if m else None

    @property
    def plugin_dist(self) -> str:
        """The plugin release's distribution name (vllm-ascend for a plugin commit)."""
        m = _PLUGIN_RELEASE.fullmatch(self.plugin)
        return m.group(1).replace("_", "-") if m else "vllm-ascend"


def is_release_version(text: str) -> bool:
    """A release version as the classification and a sdist's name carry it (0.25.0), nothing
    that could reach a path or an option."""
    return _VERSION.fullmatch(text) is not None


def finding_key(f: Finding) -> str:
    """Stable across line moves: what broke and in which plugin file."""
    return f"{f.symbol} @ {f.plugin_path}"


# The symbol forms the gate emits, one per kind (checks.py, calls.py, engines.py, ...).
KEY_FORMS = {
    "import": re.compile(r"import:[\w.]+(?::\w+)?"),
    "call": re.compile(r"call:[\w.]+"),
    "constructor": re.compile(r"constructor:[\w.]+:[\w.]+"),
    "attribute": re.compile(r"attribute:[\w.]+"),
    "override": re.compile(r"override:[\w.]+"),
    "replacement": re.compile(r"replacement:[\w.]+(?:@[\w.]+)?"),
    "patch-target": re.compile(r"patch-target:[\w.]+"),
    "version-guard": re.compile(r"version-guard:\S+"),
    "type": re.compile(r"type:[a-z-]+:.+"),
}


def canonical_key(key: str) -> str:
    """A truth key as the gate would spell it. A constructor key names the calling module
    before the class (`constructor:<module>:<class>`); written without it, the module is the
    one of the key's plugin path, which says the same."""
    symbol, sep, path = key.partition(" @ ")
    if sep and symbol.startswith("constructor:") and symbol.count(":") == 1 and path.endswith(".py"):
        return f"constructor:{module_name(path)}:{symbol.split(':', 1)[1]} @ {path}"
    return key


def key_problem(key: str) -> str | None:
    """Why the gate can never emit this (canonical) truth key, or None."""
    symbol, sep, path = key.partition(" @ ")
    if not sep or not path.endswith(".py"):
        return "not '<symbol> @ <plugin path>.py'"
    form = KEY_FORMS.get(symbol.split(":", 1)[0])
    if form is None:
        return f"no finding kind '{symbol.split(':', 1)[0]}' (kinds: {', '.join(KEY_FORMS)})"
    if not form.fullmatch(symbol):
        return f"not the gate's form for {symbol.split(':', 1)[0]} ({form.pattern})"
    return None


# The classification grows by about 100 KiB per held-out set (every finding's reason, each
# truth item's file:line evidence): past the 1 MiB cap for the project's own YAML in 2026-12.
EVALUATION_MAX_BYTES = 8 << 20


def load(path: Path) -> tuple[Pairing, ...]:
    shown = str(path)
    doc = yamldoc.load(path, shown, limit=EVALUATION_MAX_BYTES)
    if not isinstance(doc.value, dict) or not isinstance(doc.value.get("pairings", yamldoc.Node(None, 0)).value,
                                                          list):
        raise OverlayError("a gate evaluation file is a mapping with a 'pairings' list", path=shown,
                           line=doc.line)
    out = [_pairing(node, shown) for node in doc.value["pairings"].value]
    held = doc.value.get("held_out")
    if held is not None:
        if not isinstance(held.value, dict):
            raise OverlayError("'held_out' is a mapping with 'chosen', 'rule' and 'pairings'", path=shown,
                               line=held.line)
        _known_keys(held.value, HELD_OUT_KEYS, shown)
        chosen = _text(held.value, "chosen", shown, held.line)
        _text(held.value, "rule", shown, held.line)
        nodes = held.value.get("pairings")
        if nodes is None or not isinstance(nodes.value, list):
            raise OverlayError("'held_out' needs a 'pairings' list", path=shown, line=held.line)
        out += [replace(_pairing(node, shown), held_out=chosen) for node in nodes.value]
    names = [p.name for p in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise OverlayError(f"pairing '{dup}' appears twice", path=shown)
    return tuple(out)


def load_all(paths: list[Path]) -> tuple[Pairing, ...]:
    """The pairings of several classification files (the committed classification and,
    kept apart while a set is held out, its truth), in order; a pairing named in two is an
    error naming both."""
    out: list[Pairing] = []
    where: dict[str, Path] = {}
    for path in paths:
        for p in load(path):
            if p.name in where:
                raise OverlayError(f"pairing '{p.name}' is in both {where[p.name]} and {path}", path=str(path),
                                   hint="a pairing belongs to one classification file")
            where[p.name] = path
            out.append(p)
    return tuple(out)


def _text(fields: dict, key: str, shown: str, line: int) -> str:
    item = fields.get(key)
    if item is None or not isinstance(item.value, str) or not item.value.strip():
        raise OverlayError(f"missing '{key}'", path=shown, line=line)
    return item.value.strip()


def _known_keys(fields: dict, keys: set[str], shown: str) -> None:
    unknown = sorted(set(fields) - keys)
    if unknown:
        raise OverlayError(f"unknown key '{unknown[0]}'", path=shown, line=fields[unknown[0]].line,
                           hint="keys: " + ", ".join(sorted(keys)))


def _pairing(node: yamldoc.Node, shown: str) -> Pairing:
    if not isinstance(node.value, dict):
        raise OverlayError("each pairing is a mapping", path=shown, line=node.line)
    fields = node.value
    _known_keys(fields, PAIRING_KEYS, shown)
    name = _text(fields, "name", shown, node.line)
    plugin = str(fields["plugin"].value) if "plugin" in fields else ""
    core = str(fields["core"].value) if "core" in fields else ""
    if not plugin or not core:
        raise OverlayError(f"pairing '{name}' needs 'plugin' (a commit or a release) and 'core' (a release)",
                           path=shown, line=node.line)
    # Both reach git and a file name: a commit id or a plugin release, and a release version,
    # nothing else.
    if not (_COMMIT.fullmatch(plugin) or _PLUGIN_RELEASE.fullmatch(plugin)):
        raise OverlayError(f"pairing '{name}': plugin '{plugin[:60]}' is not a commit id nor a plugin release "
                           "(DISTRIBUTION==VERSION, e.g. vllm-ascend==0.9.0rc1)", path=shown, line=fields["plugin"].line,
                           hint="write the plugin commit's hex id, or the release as vllm-ascend==0.29.0rc1")
    if not is_release_version(core):
        raise OverlayError(f"pairing '{name}': core '{core[:60]}' is not a release version", path=shown,
                           line=fields["core"].line, hint="write the vLLM release, as 0.25.0")
    declared = str(fields["declared"].value) if "declared" in fields else ""
    if declared and not (is_release_version(declared) and _older(declared, core)):
        raise OverlayError(f"pairing '{name}': declared core '{declared[:60]}' is not a release older than {core}",
                           path=shown, line=fields["declared"].line,
                           hint="write the vLLM release the plugin release declares, as 0.17.0")
    verdicts = []
    items = fields.get("findings")
    for item in (items.value if items is not None and isinstance(items.value, list) else []):
        if not isinstance(item.value, dict):
            raise OverlayError("each classified finding is a mapping", path=shown, line=item.line)
        f = item.value
        _known_keys(f, VERDICT_KEYS, shown)
        key = _text(f, "key", shown, item.line)
        verdict = f.get("verdict")
        if verdict is None or not isinstance(verdict.value, bool):
            raise OverlayError(f"'{key}': verdict must be true or false", path=shown, line=item.line)
        reason = _text(f, "reason", shown, item.line)
        if "\n" in reason:
            raise OverlayError(f"'{key}': the reason is one line", path=shown, line=item.line)
        verdicts.append(Verdict(key, verdict.value, reason, item.line))
    keys = [v.key for v in verdicts]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise OverlayError(f"'{dup}' is classified twice in pairing '{name}'", path=shown)
    truth = []
    items = fields.get("truth")
    for item in (items.value if items is not None and isinstance(items.value, list) else []):
        if not isinstance(item.value, dict):
            raise OverlayError("each truth item is a mapping", path=shown, line=item.line)
        t = item.value
        _known_keys(t, TRUTH_KEYS, shown)
        what = _text(t, "item", shown, item.line)
        reach = t.get("reach")
        if reach is None or not isinstance(reach.value, bool):
            raise OverlayError(f"truth item '{what}': reach must be true or false", path=shown, line=item.line)
        raw = t.get("keys")
        found = [k.value for k in raw.value] if raw is not None and isinstance(raw.value, list) else []
        if reach.value and not found:
            raise OverlayError(f"truth item '{what}' is in reach but names no finding key", path=shown,
                               line=item.line)
        keys = tuple(canonical_key(str(k)) for k in found)
        for written, key in zip(found, keys):
            problem = key_problem(key)
            if problem is not None:  # a key the gate never emits could never be caught
                raise OverlayError(f"truth item '{what}': key '{written}' is {problem}", path=shown,
                                   line=item.line, hint="write it as the gate spells findings (see the file's other keys)")
        truth.append(TruthItem(what, keys, reach.value,
                               _text(t, "reason", shown, item.line), item.line))
    control = fields.get("control")
    source = fields.get("source")
    return Pairing(name, plugin, core, tuple(verdicts), tuple(truth),
                   bool(control.value) if control is not None else False,
                   str(source.value) if source is not None else "", declared=declared)


def _older(version: str, than: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) < Version(than)
    except InvalidVersion:
        return False


@dataclass(frozen=True)
class Score:
    pairing: str
    errors: int
    warnings: int
    infos: int
    true_errors: int  # errors classified true
    false_errors: int  # errors classified false
    true_breaks: int  # every `true` entry of the pairing
    caught: int  # true breaks reported as errors
    unclassified: tuple[Finding, ...]
    missed: tuple[str, ...]  # true breaks not reported as errors
    false_alarms: tuple[str, ...]  # errors classified false
    truth_items: int = 0  # truth items in reach
    truth_caught: int = 0  # of those, named by an error
    out_of_reach: tuple[str, ...] = ()
    truth_missed: tuple[str, ...] = ()
    seconds: float = 0.0
    control: bool = False
    held_out: str = ""  # the date the held-out set was chosen ("" for the tuned set)
    checker_ran: bool = False  # the second engine's findings are in
    truth_confirmed: int = 0  # of truth_caught, items only a confirmed forecast (a checker error) names
    truth_forecast: int = 0  # truth items not caught as errors but forecast by the checker
    truth_forecast_items: tuple[str, ...] = ()
    agreed: int = 0  # findings both engines report (errors)
    hand_only_errors: int = 0
    checker_forecasts: int = 0  # checker-only warnings
    checker_confirmed: int = 0  # checker-only errors: forecasts the hand gate's filters confirmed
    checker_skipped: str = ""  # why the checker did not run on this pairing (asked for, not run)

    @property
    def truth_recall(self) -> float | None:
        return self.truth_caught / self.truth_items if self.truth_items else None

    @property
    def precision(self) -> float | None:
        return self.true_errors / self.errors if self.errors else None

    @property
    def recall(self) -> float | None:
        return self.caught / self.true_breaks if self.true_breaks else None


def _checker_only(f: Finding) -> bool:
    return f.engine == "checker"


def _forecasts(item: TruthItem, forecasts: list[Finding]) -> bool:
    for key in item.keys:
        symbol, _, path = key.partition(" @ ")
        if symbol.startswith("type:"):  # a checker key names its diagnostic whole
            if any(finding_key(f) == key for f in forecasts):
                return True
            continue
        name = last_name(symbol)
        # a quoted qualified name (`"vllm.x.layer.FusedMoE"`) quotes its last name too
        if any(f.plugin_path == path and name in {q.rsplit(".", 1)[-1] for q in QUOTED.findall(f.message)}
               for f in forecasts):
            return True
    return False


def score(pairing: Pairing, findings: tuple[Finding, ...], seconds: float = 0.0) -> Score:
    by_key: dict[str, list[Finding]] = {}
    for f in findings:
        by_key.setdefault(finding_key(f), []).append(f)
    errors = [f for f in findings if f.severity == "error"]
    true_errors = [f for f in errors if (v := pairing.verdict(finding_key(f))) is not None and v.real]
    false_errors = [f for f in errors if (v := pairing.verdict(finding_key(f))) is not None and not v.real]
    true_keys = [v.key for v in pairing.verdicts if v.real]
    caught = [k for k in true_keys if any(f.severity == "error" for f in by_key.get(k, []))]
    error_keys = {finding_key(f) for f in errors}
    in_reach = [t for t in pairing.truth if t.reach]
    by_hand_key = [t for t in in_reach if error_keys & set(t.keys)]
    confirmed = [f for f in errors if _checker_only(f)]
    truth_caught = [t for t in in_reach if t in by_hand_key or _forecasts(t, confirmed)]
    forecasts = [f for f in findings if _checker_only(f) and f.severity == "warning"]
    forecast = [t for t in in_reach if t not in truth_caught and _forecasts(t, forecasts)]
    checker_ran = any(f.engine in ("checker", "both") for f in findings)
    return Score(
        pairing=pairing.name, errors=len(errors),
        warnings=sum(1 for f in findings if f.severity == "warning"),
        infos=sum(1 for f in findings if f.severity == "info"),
        true_errors=len(true_errors), false_errors=len(false_errors),
        true_breaks=len(true_keys), caught=len(caught),
        # the checker's own warnings are scored as forecasts, not by the hand classification;
        # its confirmed forecasts are errors, classified like the hand gate's
        unclassified=tuple(f for f in findings if (not _checker_only(f) or f.severity == "error")
                           and pairing.verdict(finding_key(f)) is None),
        missed=tuple(k for k in true_keys if k not in caught),
        false_alarms=tuple(finding_key(f) for f in false_errors),
        truth_items=len(in_reach), truth_caught=len(truth_caught),
        out_of_reach=tuple(t.item for t in pairing.truth if not t.reach),
        truth_missed=tuple(t.item for t in in_reach if t not in truth_caught),
        seconds=seconds, control=pairing.control, held_out=pairing.held_out,
        checker_ran=checker_ran, truth_forecast=len(forecast),
        truth_confirmed=sum(1 for t in truth_caught if t not in by_hand_key),
        truth_forecast_items=tuple(t.item for t in forecast),
        agreed=sum(1 for f in errors if f.engine == "both"),
        hand_only_errors=sum(1 for f in errors if f.engine == "hand"), checker_forecasts=len(forecasts),
        checker_confirmed=len(confirmed))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def totals(scores: list[Score], held_out: bool = False) -> dict:
    """Over the release-bump pairings (those with truth items; controls apart) of the tuned
    set, or of the held-out set: errors, real errors, precision, truth items in reach,
    caught, recall."""
    bumps = [s for s in scores if s.truth_items and not s.control and bool(s.held_out) == held_out]
    errors = sum(s.errors for s in bumps)
    real = sum(s.true_errors for s in bumps)
    items = sum(s.truth_items for s in bumps)
    caught = sum(s.truth_caught for s in bumps)
    forecast = sum(s.truth_forecast for s in bumps)
    confirmed = sum(s.truth_confirmed for s in bumps)
    return {"pairings": len(bumps), "errors": errors, "true_errors": real,
            "truth_confirmed": confirmed, "confirmed_errors": sum(s.checker_confirmed for s in bumps),
            "precision": real / errors if errors else None, "truth_items": items, "truth_caught": caught,
            "truth_recall": caught / items if items else None, "truth_forecast": forecast,
            "checker_ran": any(s.checker_ran for s in bumps),
            "truth_recall_with_forecasts": (caught + forecast) / items if items else None}


def _with_forecasts(t: dict) -> str:
    if not t["checker_ran"]:
        return ""
    both = t["truth_caught"] + t["truth_forecast"]
    return (f" ({t['truth_confirmed']} by confirmed forecasts, {t['confirmed_errors']} confirmed-forecast errors)"
            f"; recall on truth items as errors or forecasts {_pct(t['truth_recall_with_forecasts'])} "
            f"({both}/{t['truth_items']})")


def render(scores: list[Score]) -> str:
    head = ("| pairing | errors | TRUE | FALSE | precision | true breaks | caught as error | recall "
            "| truth items | caught | truth recall | out of reach | warnings | info | unclassified | seconds |")
    lines = [head, "|" + "---|" * 16]
    for s in scores:
        name = s.pairing + (" (control)" if s.control else "") + (" (held out)" if s.held_out else "")
        lines.append(f"| {name} | {s.errors} | {s.true_errors} | {s.false_errors} | {_pct(s.precision)} "
                     f"| {s.true_breaks} | {s.caught} | {_pct(s.recall)} | {s.truth_items} | {s.truth_caught} "
                     f"| {_pct(s.truth_recall)} | {len(s.out_of_reach)} | {s.warnings} | {s.infos} "
                     f"| {len(s.unclassified)} | {s.seconds:.1f} |")
    t = totals(scores)
    if t["pairings"]:
        lines.append(f"release bumps ({t['pairings']}): precision of errors {_pct(t['precision'])} "
                     f"({t['true_errors']}/{t['errors']}), recall on truth items as errors "
                     f"{_pct(t['truth_recall'])} ({t['truth_caught']}/{t['truth_items']})" + _with_forecasts(t))
    t = totals(scores, held_out=True)
    if t["pairings"]:
        chosen = next(s.held_out for s in scores if s.held_out)
        lines.append(f"held out ({t['pairings']}, chosen {chosen}): precision of errors {_pct(t['precision'])} "
                     f"({t['true_errors']}/{t['errors']}), recall on truth items as errors "
                     f"{_pct(t['truth_recall'])} ({t['truth_caught']}/{t['truth_items']})" + _with_forecasts(t))
    for s in scores:
        if s.checker_skipped:
            lines.append(f"engines ({s.pairing}): the checker did not run: {s.checker_skipped}")
        elif s.checker_ran:
            both = s.truth_caught + s.truth_forecast
            lines.append(f"engines ({s.pairing}): {s.agreed} agreed (both), {s.hand_only_errors} hand-only error(s), "
                         f"{s.checker_confirmed} confirmed forecast(s) (errors), "
                         f"{s.checker_forecasts} checker forecast(s); recall on truth items as errors or forecasts "
                         f"{_pct(both / s.truth_items if s.truth_items else None)} ({both}/{s.truth_items})")
    for s in scores:
        for item in s.truth_missed:
            said = " (forecast by the checker)" if item in s.truth_forecast_items else ""
            lines.append(f"truth item missed ({s.pairing}){said}: {item}")
        for item in s.out_of_reach:
            lines.append(f"out of reach ({s.pairing}): {item}")
    for s in scores:
        for k in s.false_alarms:
            lines.append(f"false alarm ({s.pairing}): {k}")
        for k in s.missed:
            lines.append(f"missed ({s.pairing}): {k}")
        for f in s.unclassified:
            lines.append(f"unclassified ({s.pairing}): {f.severity}: {finding_key(f)}  # {f.short()}")
    return "\n".join(lines) + "\n"
