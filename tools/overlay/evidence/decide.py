"""Three-way decisions from an interval and the protocol's preregistered thresholds.

A check claims the treatment moves a metric in one direction by at least
`min-effect-pct`. Orienting the interval so that positive means "as claimed":
  REPRODUCED      the interval excludes zero on the claimed side, the estimate
                  reaches the minimum effect, and enough paired starts agree;
  NOT_REPRODUCED  with `interval-excludes-min-effect` (default): the interval's
                  upper end is below the minimum effect, i.e. the claimed effect
                  is ruled out; with `interval-includes-zero` (a gate: the claim
                  must be demonstrated): whenever it is not REPRODUCED;
  INCONCLUSIVE    otherwise: the data cannot tell.
A claim aggregates its checks: all REPRODUCED -> REPRODUCED, all NOT_REPRODUCED
-> NOT_REPRODUCED, anything mixed -> INCONCLUSIVE.
"""

from __future__ import annotations

REPRODUCED = "REPRODUCED"
NOT_REPRODUCED = "NOT_REPRODUCED"
INCONCLUSIVE = "INCONCLUSIVE"


def orient(change: str, estimate: float, low: float | None, high: float | None
           ) -> tuple[float, float | None, float | None]:
    """Flip a 'lower is the claim' interval so positive always means 'as claimed'."""
    if change == "higher":
        return estimate, low, high
    return -estimate, (None if high is None else -high), (None if low is None else -low)


def decide_check(*, change: str, estimate_pct: float, low_pct: float | None,
                 high_pct: float | None, min_effect_pct: float, rule: str,
                 agreeing_pairs: int | None = None, min_pairs: int = 0,
                 includes_zero: bool | None = None) -> str:
    """Decision for one check. A reported figure may lack its interval bounds and
    only state whether the interval includes zero (`includes_zero`)."""
    e, lo, hi = orient(change, estimate_pct, low_pct, high_pct)
    excludes_zero_as_claimed = (lo is not None and lo > 0)
    if lo is None and includes_zero is False:
        excludes_zero_as_claimed = e > 0
    pairs_ok = agreeing_pairs is None or agreeing_pairs >= min_pairs
    if excludes_zero_as_claimed and e >= min_effect_pct and pairs_ok:
        return REPRODUCED
    if rule == "interval-includes-zero":
        return NOT_REPRODUCED
    if hi is not None and hi < min_effect_pct:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def aggregate(decisions: list[str]) -> str:
    if decisions and all(d == REPRODUCED for d in decisions):
        return REPRODUCED
    if decisions and all(d == NOT_REPRODUCED for d in decisions):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def decide_counters(expected: dict[str, float], measured: dict[str, float]) -> str:
    """Counters are exact: every variant's per-step count must match."""
    for variant, want in expected.items():
        got = measured.get(variant)
        if got is None or abs(got - want) > 1e-9:
            return NOT_REPRODUCED
    return REPRODUCED
