"""What a smoke walk wrote, read and judged (pure: no processes, no files but the one read)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# The walker runs in the composed environment with the stdlib only; its step record
# is the one this side reads back.
from overlay.smoke.walker import StepResult as StepOutcome

STATUSES = ("ok", "FAILED", "skipped")
PLACES = ("core", "plugin", "series", "smoke")  # where a failure lies (the walker's origin())


@dataclass(frozen=True)
class Walk:
    """One walk of the start-up path: its steps, and how the walker process ended."""

    label: str
    steps: tuple[StepOutcome, ...]
    returncode: int
    error: str = ""  # the walker's last stderr line when it wrote no step or crashed

    @property
    def ok(self) -> bool:
        # A walk where nothing ran, or that died, is a failure whatever it wrote.
        return bool(self.steps) and self.returncode == 0 and all(s.ok for s in self.steps)

    @property
    def failed(self) -> tuple[StepOutcome, ...]:
        return tuple(s for s in self.steps if s.status == "FAILED")

    def summary(self) -> str:
        if not self.steps:
            return f"{self.label}: no step ran ({self.error or f'walker exited {self.returncode}'})"
        counts = {status: sum(1 for s in self.steps if s.status == status) for status in STATUSES}
        text = f"{self.label}: {counts['ok']} ok, {counts['FAILED']} failed, {counts['skipped']} skipped"
        places = [s.lies for s in self.failed if s.lies]
        if places:
            text += " (" + ", ".join(f"{places.count(p)} in the {p}" if p == "smoke" else f"{places.count(p)} in {p}"
                                     for p in PLACES if p in places) + ")"
        if self.returncode not in (0, 1):
            text += f"; the walker exited {self.returncode}: {self.error or 'no message'}"
        return text

    def to_json(self) -> dict:
        return {"label": self.label, "ok": self.ok, "returncode": self.returncode, "error": self.error,
                "steps": [s.__dict__ for s in self.steps]}


def parse_steps(text: str, source: str = "smoke results") -> tuple[StepOutcome, ...]:
    """The JSON lines the walker appends, one per step."""
    steps = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            data = record.get("data") or {}
            if not isinstance(data, dict):
                raise TypeError(f"data is {type(data).__name__}, not an object")
            step = StepOutcome(str(record["step"]), str(record["status"]), str(record.get("detail", "")),
                               str(record.get("where", "")), data, str(record.get("lies", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{source}:{number}: not a step record ({exc})") from None
        if step.status not in STATUSES:
            raise ValueError(f"{source}:{number}: unknown status {step.status!r}")
        steps.append(step)
    return tuple(steps)


def read_walk(label: str, results: Path, returncode: int, stderr: str) -> Walk:
    text = results.read_text() if results.is_file() else ""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return Walk(label, parse_steps(text, str(results)), returncode, lines[-1] if lines else "")


def unexpected_passes(walk: Walk, predicted: dict[str, str]) -> list[str]:
    """Predicted failures (step -> a fragment of its message) that did not happen."""
    by_step = {s.step: s for s in walk.steps}
    missing = []
    for step, fragment in predicted.items():
        got = by_step.get(step)
        if got is None or got.status != "FAILED" or fragment not in f"{got.detail} {got.where}":
            missing.append(f"{step}: expected FAILED with {fragment!r}, got "
                           f"{got.status + ' ' + got.detail if got else 'no such step'}")
    return missing
