"""Issue 30 item 4: `applied-upstream` records are kept per pin set.

A later rebase (`--as t4`) used to rewrite v0.27.1's record (rule `upstream-commit` ->
`3-way-empty`) because an entry had one record shared by every pin set. Now each claim is
its own record with the pin sets it holds for: recording pin set B never changes what A's
record says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.errors import OverlayError
from overlay.rebase.plan import applied_records, record_applied_upstream
from overlay.series.model import AppliedRecord, load_series

ENTRY = ("series:\n  - patch: 0001-a.patch\n    target: plugin\n    origin: local\n"
         "    applied-upstream:  # recorded by overlay rebase\n"
         "      ref: \"x/y#1\"\n      commit: " + "a" * 40 + "\n      rule: \"upstream-commit\"\n"
         "      pins: [\"v1\"]\n")


def _load(tmp_path: Path, text: str):
    (tmp_path / "series.yaml").write_text(text)
    return load_series(tmp_path).entries[0]


def test_a_different_claim_for_another_pin_set_leaves_the_first_record_alone(tmp_path):
    entry = _load(tmp_path, ENTRY)
    text = record_applied_upstream(ENTRY, entry.line, {"ref": "upstream at t4", "rule": "3-way-empty"},
                                   "t4", entry.provenance.applied_upstream_records)
    again = _load(tmp_path, text)
    v1, t4 = again.provenance.record_at("v1"), again.provenance.record_at("t4")
    assert v1 == AppliedRecord("x/y#1", "a" * 40, "upstream-commit", ("v1",))
    assert t4 == AppliedRecord("upstream at t4", None, "3-way-empty", ("t4",))
    assert not again.carried_at("v1") and not again.carried_at("t4") and again.carried_at("v0")


def test_the_same_claim_joins_the_record(tmp_path):
    entry = _load(tmp_path, ENTRY)
    text = record_applied_upstream(ENTRY, entry.line, entry.provenance.record_at("v1").as_dict(), "v2",
                                   entry.provenance.applied_upstream_records)
    again = _load(tmp_path, text)
    assert again.provenance.applied_upstream_records == (
        AppliedRecord("x/y#1", "a" * 40, "upstream-commit", ("v1", "v2")),)


def test_re_recording_a_pin_set_moves_only_that_pin_set():
    existing = (AppliedRecord("r", "a" * 40, "upstream-commit", ("v1", "v2")),)
    out = applied_records(existing, {"ref": "s", "rule": "reverse"}, "v2")
    assert out == [{"ref": "r", "commit": "a" * 40, "rule": "upstream-commit", "pins": ["v1"]},
                   {"ref": "s", "commit": None, "rule": "reverse", "pins": ["v2"]}]


def test_a_pin_set_in_two_records_is_one_line(tmp_path):
    text = ("series:\n  - patch: 0001-a.patch\n    target: plugin\n    origin: local\n"
            "    applied-upstream:\n      - ref: a\n        pins: [\"v1\"]\n"
            "      - ref: b\n        pins: [\"v1\"]\n")
    (tmp_path / "series.yaml").write_text(text)
    with pytest.raises(OverlayError) as err:
        load_series(tmp_path)
    assert "pin set 'v1' is in record 1 already" in str(err.value)


NOT_UPSTREAM = ENTRY.replace('      pins: ["v1"]\n', '      not-upstream: "the padding rows"\n      pins: ["v1"]\n')


def test_a_record_says_what_upstream_does_not_carry_and_a_rewrite_keeps_it(tmp_path):
    """Issue 28: 0003's record said upstream carries the patch, but its padding-row fix
    is not upstream. A record names the part upstream lacks (`not-upstream`), and
    recording another pin set leaves that line where it was."""
    entry = _load(tmp_path, NOT_UPSTREAM)
    assert entry.provenance.record_at("v1").not_upstream == "the padding rows"
    text = record_applied_upstream(NOT_UPSTREAM, entry.line, {"ref": "upstream at t4", "rule": "3-way-empty"},
                                   "t4", entry.provenance.applied_upstream_records)
    again = _load(tmp_path, text)
    assert again.provenance.record_at("v1").not_upstream == "the padding rows"
    assert again.provenance.record_at("t4").not_upstream is None
