"""drift's report files: written 0644 (they were 0600, unlike gate's), and one that cannot
be written is one error line naming it plus, with --json, the error document on stdout
(as gate does), never an internal temporary file."""

from __future__ import annotations

import json
import os
import stat

from overlay.cli import main


def test_drift_reports_are_readable_like_gate_reports(capsys, history, project, tmp_path):
    old = os.umask(0o022)
    try:
        rc = main(["--root", str(project), "drift", "--mirror", str(history.mirror), "--onto",
                   "plugin=c3", "--markdown", str(tmp_path / "r" / "drift.md"), "--junit",
                   str(tmp_path / "r" / "drift.xml")])
    finally:
        os.umask(old)
    capsys.readouterr()
    assert rc == 0
    for name in ("drift.md", "drift.xml"):
        assert stat.S_IMODE((tmp_path / "r" / name).stat().st_mode) == 0o644, name
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["drift.md", "drift.xml"]


def test_drift_json_with_an_unwritable_junit_is_one_line_and_a_json_error(capsys, history, project,
                                                                          tmp_path):
    bad = tmp_path / ("j" * 300)  # no file system takes a name this long
    rc = main(["--root", str(project), "drift", "--mirror", str(history.mirror), "--onto",
               "plugin=c3", "--json", "--junit", str(bad)])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("overlay: error: ") and "--junit" in err
    assert ".overlay-report-" not in err and f".{bad.name}." not in err and "tmp" not in err.replace(str(tmp_path), "")
    doc = json.loads(out)
    assert doc["ok"] is False and "--junit" in doc["error"] and doc["path"] == str(bad)
