"""Reports of untrusted upstream text, and PR numbers of both GitHub merge styles (pure)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from overlay.drift.classify import DriftPatch, Verdict
from overlay.drift.report import DriftReport, junit, markdown, terminal
from overlay.drift.scan import CommitInfo, PatchHistory, TargetRun, Transition, landed_in


def test_pr_number_of_a_squash_merge_and_of_a_merge_commit():
    assert CommitInfo("a" * 40, "2026-07-01", "[CI] upgrade vllm (#10935)").pr == 10935
    assert CommitInfo("a" * 40, "2026-07-01", "Merge pull request #77 from fork/branch").pr == 77
    assert CommitInfo("a" * 40, "2026-07-01",
                      "Merge pull request #77 from fork/fix-#12 (#99)").pr == 77  # the merge says
    assert CommitInfo("a" * 40, "2026-07-01", "Merge branch 'main' into dev").pr is None
    assert CommitInfo("a" * 40, "2026-07-01", "see issue #12 for why").pr is None


def test_a_change_landed_by_a_merge_commit_is_found():
    patch = DriftPatch("0001-x.patch", "plugin", (), upstream=("acme/plugin#77",))
    commits = [CommitInfo("1" * 40, "2026-07-01", "unrelated (#76)"),
               CommitInfo("2" * 40, "2026-07-02", "Merge pull request #77 from dev/fix")]
    assert landed_in([patch], commits, "acme/plugin") == {"0001-x.patch": 2}


EVIL = "fix \x1b[31mred\x1b[0m \x07bell\x1b]8;;http://x\x07link\u202e (#5)"


def _report() -> DriftReport:
    commit = CommitInfo("c" * 40, "2026-07-01T00:00:00+00:00", EVIL)
    before = Verdict("0001-x.patch", "clean", "applies at the recorded lines")
    after = Verdict("0001-x.patch", "conflict", "pkg/\x1bx.py: hunk #1 (line 3) does not apply")
    hist = PatchHistory("0001-x.patch", before, after, (Transition("clean", after, commit, 1),))
    run = TargetRun("plugin", "main", "b" * 40, "c" * 40, (after,), 1, (hist,))
    return DriftReport("pin", "scan", (run,))


def test_control_characters_from_upstream_are_shown_escaped_not_sent_raw():
    report = _report()
    for text in (terminal(report), markdown(report)):
        assert not any(ch in text for ch in "\x1b\x07\u202e")
        assert "fix \\x1b[31mred\\x1b[0m \\x07bell" in text  # visible, so nothing is hidden
        assert "pkg/\\x1bx.py" in text and "(#5)" in text


def test_junit_stays_well_formed_xml_with_control_characters():
    root = ET.fromstring(junit(_report()))
    failure = next(root.iter("failure"))
    assert "\x1b" not in failure.get("message") and "pkg/\\x1bx.py" in failure.text
