"""What the gate reports: findings and the report that carries them."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("import", "override", "replacement", "undecidable")


@dataclass(frozen=True)
class Finding:
    """One contract break between the plugin and the core under test.

    `symbol` is stable across runs and line moves (the allowlist matches on it):
    `import:<module>:<name>`, `override:<plugin class>.<method>`,
    `replacement:<core owner>.<attr>`; undecidable findings carry the symbol of
    the check they could not decide.
    """

    kind: str  # import | override | replacement | undecidable
    symbol: str
    plugin_path: str
    plugin_line: int
    core_path: str
    core_line: int
    message: str

    def location(self) -> str:
        core = self.core_path or "-"
        if self.core_path and self.core_line:
            core += f":{self.core_line}"
        return f"{self.plugin_path}:{self.plugin_line} -> core {core}"

    def sort_key(self) -> tuple:
        return (self.plugin_path, self.plugin_line, self.kind, self.symbol)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "symbol": self.symbol,
                "plugin": {"path": self.plugin_path, "line": self.plugin_line},
                "core": {"path": self.core_path or None, "line": self.core_line or None},
                "message": self.message}


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

    @property
    def ok(self) -> bool:
        return not self.findings

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in KINDS}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out
