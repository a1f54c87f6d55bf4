"""Per-phase tail diagnosis from per-rank, per-round timing records (seed 004).

Supported input: CSV with the header `round,rank,phase,ms` or JSON Lines with the
same keys, one record per (round, rank, phase); e.g. phase `runner_run` (host
envelope), `device_wall`, `validate`, `gap`, `step`. A derived phase such as
`excess = runner_run - device_wall` is computed per (round, rank).

Two kinds of outliers, because seed 004 saw both:
  single-rank  a rank's value exceeds the median of all ranks in that round (same
               phase) by more than the threshold (one process stalled);
  common       the round's median itself exceeds the phase's overall median by more
               than the threshold (every rank stalled together: a shared cause).
A tail "moved" between two variants when one phase's outliers fell while another
phase's rose: the fix only pushed the stall elsewhere.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from overlay.errors import OverlayError
from overlay.evidence import bounded


@dataclass(frozen=True)
class Phase:
    """One phase as a rounds x ranks matrix (NaN where a record is absent)."""

    name: str
    rounds: np.ndarray  # (R,) round ids
    ranks: tuple[str, ...]
    ms: np.ndarray  # (R, K)


@dataclass(frozen=True)
class PhaseStats:
    phase: str
    n: int
    p50: float
    p95: float
    p99: float
    max: float


@dataclass(frozen=True)
class Outlier:
    phase: str
    kind: str  # single-rank | common
    round: int
    rank: str | None
    ms: float
    reference_ms: float  # the round median (single-rank) or the phase median (common)


def check_rows(rows: list[tuple[int, str, str, float]], lines: list[int], path: str) -> None:
    """Durations are finite and non-negative, and each (round, rank, phase) appears once:
    a duplicate would silently overwrite one measurement with another."""
    seen: dict[tuple[int, str, str], int] = {}
    for (rnd, rank, phase, ms), line in zip(rows, lines):
        if not np.isfinite(ms):
            raise OverlayError(f"ms is {ms} (round {rnd}, rank {rank}, phase {phase})", path=path, line=line,
                               hint="drop or fix the record: a duration must be a finite number")
        if ms < 0:
            raise OverlayError(f"ms is negative ({ms:g}) (round {rnd}, rank {rank}, phase {phase})",
                               path=path, line=line, hint="a duration cannot be negative: check the clock")
        key = (rnd, rank, phase)
        if key in seen:
            raise OverlayError(f"duplicate record for round {rnd}, rank {rank}, phase {phase} "
                               f"(first on line {seen[key]})", path=path, line=line,
                               hint="one record per (round, rank, phase)")
        seen[key] = line


def load_records(path: Path) -> dict[str, Phase]:
    rows: list[tuple[int, str, str, float]] = []
    lines: list[int] = []
    if not path.exists() and not path.is_symlink():
        raise OverlayError("timing file not found", path=str(path))
    text = bounded.read_text(path, limit=bounded.RESULT_MAX_BYTES)
    if path.suffix in (".jsonl", ".ndjson"):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                rows.append((int(obj["round"]), str(obj["rank"]), str(obj["phase"]), float(obj["ms"])))
                lines.append(i)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise OverlayError("expected a JSON object with round, rank, phase, ms", path=str(path),
                                   line=i) from None
    else:
        reader = csv.DictReader(text.splitlines())
        need = {"round", "rank", "phase", "ms"}
        if not need.issubset(set(reader.fieldnames or [])):
            raise OverlayError("expected a CSV header with round,rank,phase,ms", path=str(path), line=1,
                               hint="see evidence/README.md, 'Tail diagnosis input'")
        for i, r in enumerate(reader, 2):
            try:
                rows.append((int(r["round"]), r["rank"].strip(), r["phase"].strip(), float(r["ms"])))
                lines.append(i)
            except (TypeError, ValueError):
                raise OverlayError("round must be an integer and ms a number", path=str(path),
                                   line=i) from None
    if not rows:
        raise OverlayError("no timing records", path=str(path))
    check_rows(rows, lines, str(path))
    return to_phases(rows)


def to_phases(rows: list[tuple[int, str, str, float]]) -> dict[str, Phase]:
    phases: dict[str, Phase] = {}
    for name in sorted({r[2] for r in rows}):
        sel = [r for r in rows if r[2] == name]
        rounds = np.array(sorted({r[0] for r in sel}))
        ranks = tuple(sorted({r[1] for r in sel}))
        ri = {v: i for i, v in enumerate(rounds.tolist())}
        ki = {v: i for i, v in enumerate(ranks)}
        mat = np.full((len(rounds), len(ranks)), np.nan)
        for rnd, rank, _, ms in sel:
            mat[ri[rnd], ki[rank]] = ms
        phases[name] = Phase(name, rounds, ranks, mat)
    return phases


def derive(phases: dict[str, Phase], name: str, minuend: str, subtrahend: str) -> dict[str, Phase]:
    """Add phase `name` = minuend - subtrahend, aligned on (round, rank)."""
    for p in (minuend, subtrahend):
        if p not in phases:
            raise OverlayError(f"cannot derive '{name}': no phase '{p}'",
                               hint="phases present: " + ", ".join(sorted(phases)))
    a, b = phases[minuend], phases[subtrahend]
    rounds = np.intersect1d(a.rounds, b.rounds)
    ranks = tuple(r for r in a.ranks if r in b.ranks)
    ia = np.searchsorted(a.rounds, rounds)
    ib = np.searchsorted(b.rounds, rounds)
    ka = [a.ranks.index(r) for r in ranks]
    kb = [b.ranks.index(r) for r in ranks]
    mat = a.ms[np.ix_(ia, ka)] - b.ms[np.ix_(ib, kb)]
    return {**phases, name: Phase(name, rounds, ranks, mat)}


def phase_stats(phases: dict[str, Phase]) -> list[PhaseStats]:
    out = []
    for name, p in phases.items():
        v = p.ms[np.isfinite(p.ms)]
        if v.size == 0:
            continue
        q = np.percentile(v, [50, 95, 99])
        out.append(PhaseStats(name, int(v.size), float(q[0]), float(q[1]), float(q[2]), float(v.max())))
    return out


def outliers(phases: dict[str, Phase], threshold_ms: float) -> list[Outlier]:
    out: list[Outlier] = []
    for name, p in phases.items():
        with np.errstate(all="ignore"):
            round_med = np.nanmedian(p.ms, axis=1)  # (R,)
        excess = p.ms - round_med[:, None]
        ri, ki = np.nonzero(np.nan_to_num(excess, nan=-np.inf) > threshold_ms)
        for r, k in zip(ri.tolist(), ki.tolist(), strict=True):
            out.append(Outlier(name, "single-rank", int(p.rounds[r]), p.ranks[k], float(p.ms[r, k]),
                               float(round_med[r])))
        overall = float(np.nanmedian(p.ms))
        for r in np.nonzero(np.nan_to_num(round_med, nan=-np.inf) > overall + threshold_ms)[0].tolist():
            out.append(Outlier(name, "common", int(p.rounds[r]), None, float(round_med[r]), overall))
    out.sort(key=lambda o: (-(o.ms - o.reference_ms), o.phase, o.round))
    return out


@dataclass(frozen=True)
class PhaseShift:
    phase: str
    outliers_a: int
    outliers_b: int
    p99_a: float
    p99_b: float


def compare(a: dict[str, Phase], b: dict[str, Phase], threshold_ms: float
            ) -> tuple[list[PhaseShift], list[tuple[str, str]]]:
    """Per-phase outlier counts and p99 in A and B; and (from, to) pairs where the
    tail moved: outliers fell in `from` and rose in `to`."""
    sa = {s.phase: s for s in phase_stats(a)}
    sb = {s.phase: s for s in phase_stats(b)}
    oa, ob = outliers(a, threshold_ms), outliers(b, threshold_ms)
    shifts = []
    for ph in sorted(set(sa) & set(sb)):
        shifts.append(PhaseShift(ph, sum(o.phase == ph for o in oa), sum(o.phase == ph for o in ob),
                                 sa[ph].p99, sb[ph].p99))
    fell = [s.phase for s in shifts if s.outliers_b < s.outliers_a]
    rose = [s.phase for s in shifts if s.outliers_b > s.outliers_a]
    return shifts, [(f, r) for f in fell for r in rose]
