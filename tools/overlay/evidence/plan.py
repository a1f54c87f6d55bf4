"""The run order: independent server starts per variant, balanced and interleaved.

Start k of every variant forms block k; block k lists the variants rotated by k
(a cyclic Latin square: with two variants A B, B A, A B, ...), so slow drift of
the machine (thermal, background load) hits every variant equally often first and
last. Start k of the treatment is paired with start k of the baseline: they ran
next to each other, which is what the paired-start bootstrap relies on.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlay.evidence.protocol import Protocol


@dataclass(frozen=True)
class PlannedRun:
    position: int  # 1-based place in the run order
    run_id: str  # "<variant>-r<start>", the seed's naming (optimized-r5)
    variant: str
    start: int  # 1-based independent server start of this variant
    scenarios: tuple[str, ...]  # run in this order against one server start


def run_id(variant: str, start: int) -> str:
    return f"{variant}-r{start}"


def balanced_order(variants: tuple[str, ...], starts: int) -> list[tuple[str, int]]:
    """(variant, start) pairs in balanced interleaved order; pure."""
    out: list[tuple[str, int]] = []
    n = len(variants)
    for k in range(starts):
        rotated = variants[k % n:] + variants[:k % n]
        out.extend((v, k + 1) for v in rotated)
    return out


def plan(protocol: Protocol) -> tuple[PlannedRun, ...]:
    scen = tuple(s.name for s in protocol.scenarios)
    # The baseline leads block 1, so the first pair reads baseline -> treatment.
    names = (protocol.baseline,) + protocol.treatments
    return tuple(PlannedRun(i, run_id(v, k), v, k, scen)
                 for i, (v, k) in enumerate(balanced_order(names, protocol.starts), 1))
