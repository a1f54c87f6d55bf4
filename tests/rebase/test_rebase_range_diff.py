"""`overlay rebase` ends with the range-diff of the old pin set against the new one, the
summary `overlay range-diff OLD NEW` prints (issue 29), on the fixture history of
tests/rebase/test_rebase.py: at u4, 0001 is merged upstream (dropped), 0002 is refreshed
by 3-way into an entry of the new pin set, 0003 conflicts (skipped here), 0004 is kept."""

from __future__ import annotations

import json

from overlay.cli import main
from tests.rebase.test_rebase import _history, project, rebase  # noqa: F401 (fixtures)


def _subjects(project) -> dict[str, str]:
    from overlay.series.patchfile import read_patch

    return {p.name[:4]: read_patch(p).subject for p in sorted((project / "patches").glob("000*.patch"))}


def test_rebase_json_has_the_range_diff_of_old_and_new_pin_sets(capsys, project):
    subjects = _subjects(project)
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    rc, out, err = rebase(capsys, project, "--skip", "--json")
    assert rc == 0, err
    diff = json.loads(out)["range_diff"]
    assert (diff["a"]["given"], diff["a"]["kind"], diff["b"]["given"]) == ("base", "pin", "next")
    assert [t["target"] for t in diff["targets"]] == ["plugin"]
    pairs = [(p["a"], p["status"], p["b"], p["subject"]) for p in diff["targets"][0]["pairs"]]
    # 0001 (merged upstream) and 0003 (skipped) are only in base; 0002 and 0004 are on both
    assert [(a, b, s) for a, _, b, s in pairs] == [
        (1, None, subjects["0001"]), (2, 1, subjects["0002"]), (3, None, subjects["0003"]),
        (4, 2, subjects["0004"])]
    assert [st for _, st, _, _ in pairs][0] == "<" and pairs[2][1] == "<"


def test_rebase_summary_ends_with_what_range_diff_prints(capsys, project):
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    rc, out, err = rebase(capsys, project, "--skip")
    assert rc == 0, err
    assert out.startswith("## Rebase of pin set `base` onto plugin `u4`")
    head, _, shown = out.partition("\nRange-diff (`overlay range-diff base next`):\n\n~~~~~~\n")
    assert shown.endswith("~~~~~~\n") and "- check: ok" in head, out
    shown = shown[: -len("~~~~~~\n")]
    rc = main(["--root", str(project), "range-diff", "base", "next", "--targets", "plugin"])
    same, err = capsys.readouterr()
    assert rc == 0, err
    assert shown == same  # the one summary, byte for byte
    assert shown.startswith("range-diff base -> next\n== plugin: ") and " 2 only in base, 0 only in next" in shown


def test_a_range_diff_that_cannot_be_made_leaves_the_rebase_done(capsys, project, monkeypatch):
    from overlay.views import rangediff

    def broken(*args, **kwargs):
        raise rangediff.OverlayError("no sources for pin set base", hint="give --mirror")

    monkeypatch.setattr(rangediff, "range_diff", broken)
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    rc, out, err = rebase(capsys, project, "--skip", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["status"] == "done" and doc["range_diff"] == {"error": "no sources for pin set base (give --mirror)"}
    assert (project / "pins" / "next.yaml").is_file() and "Traceback" not in err
