"""The status model's class claim, on generated entries: at every pin set, the patches status
numbers are exactly what compose applies (`Series.for_target`), in the same order; a pin set
with an `applied-upstream` record lists the patch as merged (with its rule), and one that
`only-pins` leaves out does not list it at all."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from overlay.series.model import AppliedRecord, Provenance, Series, SeriesEntry
from overlay.views.status import MERGED, PORTED, upstream_state

PINS = ("p1", "p2", "p3")
pin_subsets = st.lists(st.sampled_from(PINS), unique=True, max_size=3).map(tuple)


@st.composite
def entries(draw, i: int) -> SeriesEntry:
    merged_at = draw(pin_subsets)
    records = (AppliedRecord(f"o/n#{i}", "a" * 40, "upstream-commit", merged_at),) if merged_at else ()
    prov = Provenance(origin=draw(st.sampled_from(("backport", "local", "experimental"))),
                      applied_upstream_pins=merged_at, applied_upstream_records=records)
    return SeriesEntry(patch=f"{i:04d}-x.patch", target=draw(st.sampled_from(("plugin", "core"))),
                       provenance=prov, subject=None, tests=(), line=i, only_pins=draw(pin_subsets))


@st.composite
def series(draw) -> Series:
    n = draw(st.integers(0, 8))
    return Series(Path("series.yaml"), tuple(draw(entries(i)) for i in range(1, n + 1)))


@given(series(), st.sampled_from(PINS))
def test_status_lists_what_compose_applies_and_why_the_rest_is_out(s, pin):
    for target in ("plugin", "core"):
        listed = [(e, upstream_state(e, pin)) for e in s.entries if e.target == target]
        applied = [e.patch for e, found in listed if found is not None and found[0] != MERGED]
        assert applied == [e.patch for e in s.for_target(target, pin)]
        for e, found in listed:
            if e.provenance.record_at(pin) is not None:
                assert found is not None and found[0] == MERGED and "upstream-commit" in found[1]
            elif e.only_pins and pin not in e.only_pins:
                assert found is None
            elif e.only_pins:
                assert found[0] == PORTED
