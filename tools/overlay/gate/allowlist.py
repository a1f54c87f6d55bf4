"""Accepted findings: each with a reason and an expiry, so acceptance never goes stale silently.

```yaml
accepted:
  - symbol: "import:vllm.v1.foo:bar"     # the finding's symbol (printed by the gate)
    kind: import                         # optional: must match when given
    path: vllm_ascend/x.py               # optional: plugin file it applies to
    reason: "why this is fine for now"   # required
    expires: 2026-12-31                  # a date, and/or
    pins: [a30addc7]                     # the pin sets it applies to
```
An entry needs a reason and at least one of `expires` / `pins`. Past its date an
entry no longer applies (the finding comes back, with a note saying so); with
`pins`, it applies only while gating one of those pin sets.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from overlay.series import yamldoc
from overlay.errors import OverlayError, quoted
from overlay.gate.findings import KINDS, Finding, Suppressed

KEYS = {"symbol", "kind", "path", "reason", "expires", "pins"}


@dataclass(frozen=True)
class Entry:
    symbol: str
    kind: str | None
    path: str | None
    reason: str
    expires: dt.date | None
    pins: tuple[str, ...]
    line: int

    def matches(self, f: Finding) -> bool:
        return (f.symbol == self.symbol and (self.kind is None or self.kind == f.kind)
                and (self.path is None or self.path == f.plugin_path))


@dataclass(frozen=True)
class Allowlist:
    path: str
    entries: tuple[Entry, ...]


def load(path: Path) -> Allowlist:
    shown = str(path)
    doc = yamldoc.load(path, shown)  # also turns an impossible date (2026-02-30) into one error line
    if not isinstance(doc.value, dict) or "accepted" not in doc.value:
        raise OverlayError("an allowlist is a mapping with an 'accepted' list", path=shown,
                           line=doc.line, hint="see docs/gate.md, 'Allowlist'")
    items = doc.value["accepted"]
    if items.value is None:
        return Allowlist(shown, ())
    if not isinstance(items.value, list):
        raise OverlayError("'accepted' must be a list", path=shown, line=items.line)
    return Allowlist(shown, tuple(_entry(node, shown) for node in items.value))


def _entry(node: yamldoc.Node, shown: str) -> Entry:
    if not isinstance(node.value, dict):
        raise OverlayError("each accepted finding is a mapping", path=shown, line=node.line)
    fields = node.value
    unknown = sorted(set(fields) - KEYS)
    if unknown:
        raise OverlayError(f"unknown key {quoted(unknown[0])}", path=shown, line=fields[unknown[0]].line,
                           hint="keys: " + ", ".join(sorted(KEYS)))

    def text(key: str, required: bool) -> str | None:
        item = fields.get(key)
        if item is None or item.value is None:
            if required:
                raise OverlayError(f"missing '{key}'", path=shown, line=node.line,
                                   hint="every accepted finding needs a symbol and a reason")
            return None
        if not isinstance(item.value, str) or not item.value.strip():
            raise OverlayError(f"'{key}' must be a non-empty string", path=shown, line=item.line)
        return item.value.strip()

    symbol = text("symbol", True)
    reason = text("reason", True)
    kind = text("kind", False)
    if kind is not None and kind not in KINDS:
        raise OverlayError(f"unknown kind {quoted(kind)}", path=shown, line=fields["kind"].line,
                           hint="one of " + ", ".join(KINDS))
    expires = None
    if "expires" in fields:
        raw = fields["expires"].value
        if isinstance(raw, dt.datetime):
            raw = raw.date()
        if isinstance(raw, str):
            try:
                raw = dt.date.fromisoformat(raw)
            except ValueError:
                raw = None
        if not isinstance(raw, dt.date):
            raise OverlayError("'expires' must be a date (YYYY-MM-DD)", path=shown,
                               line=fields["expires"].line)
        expires = raw
    pins: tuple[str, ...] = ()
    if "pins" in fields:
        raw = fields["pins"].value
        values = raw if isinstance(raw, list) else [fields["pins"]]
        names = [v.value for v in values] if isinstance(raw, list) else [raw]
        if not names or not all(isinstance(n, (str, int)) and str(n).strip() for n in names):
            raise OverlayError("'pins' must be a pin name or a list of pin names", path=shown,
                               line=fields["pins"].line)
        pins = tuple(str(n).strip() for n in names)
    if expires is None and not pins:
        raise OverlayError("an accepted finding needs an expiry: 'expires' (date) or 'pins'",
                           path=shown, line=node.line,
                           hint="acceptance must end when the core or the date moves on")
    assert symbol is not None and reason is not None
    return Entry(symbol, kind, text("path", False), reason, expires, pins, node.line)


def apply(findings: tuple[Finding, ...], allow: Allowlist | None, pin: str | None,
          today: dt.date | None = None, note_unused: bool = True,
          ) -> tuple[tuple[Finding, ...], tuple[Suppressed, ...], tuple[str, ...]]:
    """Split findings into (reported, suppressed) and say which entries expired or went
    unused. `note_unused=False` for the project's default allowlist applied to trees that
    are not a pin set's: its entries are about the pinned pairings, not these trees."""
    if allow is None:
        return findings, (), ()
    today = today or dt.date.today()
    live: list[Entry] = []
    notes: list[str] = []
    for e in allow.entries:
        if e.expires is not None and e.expires < today:
            notes.append(f"{allow.path}:{e.line}: entry for {e.symbol} expired on {e.expires.isoformat()}")
        elif e.pins and (pin is None or not any(pin.startswith(p) for p in e.pins)):
            continue  # for other pin sets
        else:
            live.append(e)
    reported: list[Finding] = []
    suppressed: list[Suppressed] = []
    used: set[int] = set()
    for f in findings:
        entry = next((e for e in live if e.matches(f)), None)
        if entry is None:
            reported.append(f)
        else:
            used.add(entry.line)
            suppressed.append(Suppressed(f, entry.reason, entry.line))
    for e in live if note_unused else ():
        if e.line not in used:
            notes.append(f"{allow.path}:{e.line}: entry for {e.symbol} matched nothing (remove it?)")
    return tuple(reported), tuple(suppressed), tuple(notes)
