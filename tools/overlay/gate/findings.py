"""What the gate reports: findings and the report that carries them."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("import", "override", "replacement", "constructor", "attribute", "call", "patch-target", "version-guard",
         "undecidable", "type")

# Which engine found it: the hand gate's checks, the type checker run differentially
# (kind `type`, see checker.py), or both at the same plugin site (then it is an error).
ENGINES = ("hand", "checker", "both")
CONFIDENCES = ("high", "medium", "low")

# error: core's code reaches the break on a path the plugin runs (start-up import chain,
# a visible core call site): the exit status follows these. warning: a break with no
# evidence that anything runs it (no visible core caller, a module nothing imports at
# start-up, a condition the gate cannot decide). info: worth knowing, not a break.
SEVERITIES = ("error", "warning", "info")


def also_at(lines: list[int]) -> str:
    """` (also at line(s) 12, 40)` after a message grouped over sorted `lines`, the first
    being the finding's own; "" for one line."""
    return f" (also at line(s) {', '.join(map(str, lines[1:]))})" if len(lines) > 1 else ""

# A hand finding checked only against what core declares, no call site of core seen: the
# checker agreeing on the signature adds no caller, so agreement leaves it a warning.
NO_CORE_CALLER = "no core caller seen"
# unreached.py's words for a site inside a helper this core never runs (engines.combine reads them)
NOT_RUN_WITH_CORE = "not run with it"
SUMMARY_MAX = 160  # one text line per finding; the whole story is in the JSON `message`


@dataclass(frozen=True)
class Finding:
    """One contract break between the plugin and the core under test.

    `symbol` is stable across runs and line moves (the allowlist matches on it):
    `import:<module>:<name>` (`import:<module>` for a missing module),
    `override:<plugin class>.<method>`, `replacement:<core owner>.<attr>`,
    `constructor:<plugin module>:<core class>`, `attribute:<core owner>.<attr>`;
    undecidable findings carry the symbol of the check they could not decide.
    `summary` is the one-line text; `message` the full explanation; `reason` why the
    finding is reachable (or why it is only a warning).
    """

    kind: str  # see KINDS
    symbol: str
    plugin_path: str
    plugin_line: int
    core_path: str
    core_line: int
    message: str
    severity: str = "error"
    reason: str = ""
    summary: str = ""
    engine: str = "hand"  # see ENGINES
    confidence: str = ""  # see CONFIDENCES; "" when only one engine ran

    def location(self) -> str:
        core = self.core_path or "-"
        if self.core_path and self.core_line:
            core += f":{self.core_line}"
        return f"{self.plugin_path}:{self.plugin_line} -> core {core}"

    def short(self) -> str:
        text = self.summary or self.message
        return text if len(text) <= SUMMARY_MAX else text[:SUMMARY_MAX - 1] + "…"

    def sort_key(self) -> tuple:
        return (self.plugin_path, self.plugin_line, self.kind, self.symbol, self.core_path, self.core_line)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "symbol": self.symbol, "severity": self.severity,
                "plugin": {"path": self.plugin_path, "line": self.plugin_line},
                "core": {"path": self.core_path or None, "line": self.core_line or None},
                "summary": self.short(), "message": self.message, "reason": self.reason,
                "engine": self.engine, "confidence": self.confidence or None}


@dataclass(frozen=True)
class Suppressed:
    finding: Finding
    reason: str
    allowlist_line: int


@dataclass(frozen=True)
class GateReport:
    core: str  # label of the core tree
    plugin: str  # label of the plugin tree
    core_version: str | None
    findings: tuple[Finding, ...]
    suppressed: tuple[Suppressed, ...] = ()
    notes: tuple[str, ...] = ()  # expired or unused allowlist entries, etc.
    stats: dict = field(default_factory=dict)
    fail_on: str = "error"  # the lowest severity that fails the run
    # plugin modules loaded at start-up (None: the plugin declares no entry points, so
    # every module counts as loaded); the checker engine's reachability filter reads it
    loaded: frozenset[str] | None = field(default=None, compare=False, repr=False)

    @property
    def failing(self) -> tuple[Finding, ...]:
        limit = SEVERITIES.index(self.fail_on)
        return tuple(f for f in self.findings if SEVERITIES.index(f.severity) <= limit)

    @property
    def ok(self) -> bool:
        return not self.failing

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in KINDS}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out

    def severity_counts(self) -> dict[str, int]:
        out = {s: 0 for s in SEVERITIES}
        for f in self.findings:
            out[f.severity] += 1
        return out


def merge_sites(findings: list[Finding]) -> list[Finding]:
    """One finding per break: the same symbol at the same plugin line with the same
    severity, broken at several core call sites, becomes one finding naming them all; and
    where one check proves it an error, another's weaker finding of that symbol at that
    line (a plugin forward with no core caller in sight of the override check, which
    heldobjects.py sees core call) is dropped."""
    errors = {(f.kind, f.symbol, f.plugin_path, f.plugin_line) for f in findings if f.severity == "error"}
    findings = [f for f in findings
                if f.severity == "error" or (f.kind, f.symbol, f.plugin_path, f.plugin_line) not in errors]
    out: list[Finding] = []
    index: dict[tuple, int] = {}
    for f in findings:
        key = (f.kind, f.symbol, f.plugin_path, f.plugin_line, f.severity)
        if key not in index:
            index[key] = len(out)
            out.append(f)
            continue
        first = out[index[key]]
        also = f"{f.core_path}:{f.core_line}" if f.core_line else f.core_path
        if also and also not in first.message:
            from dataclasses import replace
            out[index[key]] = replace(first, message=f"{first.message}; also at core {also}")
    return out
