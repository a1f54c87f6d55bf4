"""Recorded reports a view shows beside a patch: a drift report (`overlay drift --json`
saved as reports/drift.json) and a mutation-check result (`overlay mutation-check --json`
saved as reports/mutation-check.json). Read as data by their documented fields
(docs/json.md); a report that is absent is "not measured", one that does not parse is an
error naming the file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from overlay import paths
from overlay.errors import OverlayError

REPORTS_DIR = "reports"
DRIFT_FILE = "drift.json"
MUTATION_FILE = "mutation-check.json"
MAX_REPORT_BYTES = 32 << 20


def reports_dir(root: Path, explicit: Path | None) -> Path:
    return explicit if explicit is not None else root / REPORTS_DIR


def read_report(path: Path) -> dict | None:
    """The JSON object in `path`, or None when there is no such file."""
    if not path.exists():
        return None
    try:
        raw = paths.read_capped(path, MAX_REPORT_BYTES)
        if len(raw) > MAX_REPORT_BYTES:
            raise OverlayError(f"larger than {MAX_REPORT_BYTES >> 20} MiB: not a report", path=str(path),
                               hint="write it with the command's --json, or remove it")
        data = json.loads(raw.decode("utf-8"))
    except (paths.NotARegularFile, paths.OutsideTree):
        raise OverlayError("not a regular file", path=str(path),
                           hint="write the report with the command's --json, or remove it") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise OverlayError(f"not a JSON report ({type(exc).__name__})", path=str(path),
                           hint="write it with the command's --json, or remove it") from None
    if not isinstance(data, dict):
        raise OverlayError("not a JSON object", path=str(path),
                           hint="write it with the command's --json, or remove it")
    return data


def _str(value) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class DriftAt:
    pin: str
    ref: str
    head: str
    cls: str
    rule: str
    detail: str

    def to_json(self) -> dict:
        return {"pin": self.pin, "ref": self.ref, "head": self.head, "class": self.cls,
                "rule": self.rule or None, "detail": self.detail}

    def line(self) -> str:
        rule = f" ({self.rule})" if self.rule else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.cls}{rule} at {self.ref} ({self.head[:12]}), from pin set {self.pin}{detail}"


def drift_of(report: dict | None, patch: str) -> list[DriftAt]:
    """Each run of a drift report that classified `patch`."""
    if report is None:
        return []
    out = []
    runs = report.get("runs")
    for run in runs if isinstance(runs, list) else []:
        if not isinstance(run, dict) or not isinstance(run.get("verdicts"), list):
            continue
        for v in run["verdicts"]:
            if isinstance(v, dict) and v.get("patch") == patch:
                out.append(DriftAt(_str(report.get("pin")), _str(run.get("ref")), _str(run.get("head")),
                                   _str(v.get("class")), _str(v.get("rule")), _str(v.get("detail"))))
    return out


@dataclass(frozen=True)
class MutationAt:
    pin: str
    status: str
    detail: str

    def to_json(self) -> dict:
        return {"pin": self.pin, "status": self.status, "detail": self.detail}

    def line(self) -> str:
        return f"{self.status} at pin set {self.pin}" + (f" ({self.detail})" if self.detail else "")


def mutation_of(report: dict | None, patch: str) -> MutationAt | None:
    if report is None or not isinstance(report.get("results"), list):
        return None
    for r in report["results"]:
        if isinstance(r, dict) and r.get("patch") == patch:
            return MutationAt(_str(report.get("pin")), _str(r.get("status")), _str(r.get("detail")))
    return None
