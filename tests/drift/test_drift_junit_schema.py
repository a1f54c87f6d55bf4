"""Drift's JUnit files (scan, onto, onto with the gate) against the common JUnit XSD, and
the scan and `--onto` reports under distinct suite names (issue 22 item 3)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from junit_xsd import problems

from overlay.cli import main


def _junit(capsys, project, mirror, tmp_path, name: str, *args: str) -> str:
    xml = tmp_path / name
    main(["--root", str(project), "drift", "--mirror", str(mirror), *args, "--junit", str(xml)])
    capsys.readouterr()
    return xml.read_text()


def test_scan_and_onto_junit_validate_against_the_xsd(capsys, history, project, tmp_path):
    plugin = project / "build" / "test" / "plugin" / "plug"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("from core.x import x_01, x_99\n")  # one gate finding
    docs = {"scan": _junit(capsys, project, history.mirror, tmp_path, "scan.xml", "--scan", "plugin=main"),
            "bisect": _junit(capsys, project, history.mirror, tmp_path, "bisect.xml", "--scan", "plugin=main",
                             "--bisect"),
            "onto+gate": _junit(capsys, project, history.mirror, tmp_path, "onto.xml",
                                "--onto", "core=k1,plugin=c1", "--gate")}
    for mode, text in docs.items():
        assert problems(text) == [], mode
        root = ET.fromstring(text)
        suites = list(root)
        assert root.get("tests") == str(sum(int(s.get("tests")) for s in suites)), mode
        assert root.get("failures") == str(sum(int(s.get("failures")) for s in suites)), mode
        assert all(s.get("errors") == "0" and s.get("time") for s in suites), mode
        assert not any(c.get("time") == "0" for c in root.iter("testcase")), mode


def test_scan_and_onto_reports_name_their_suites_and_cases_apart(capsys, history, project, tmp_path):
    """`make drift-ci` publishes drift-scan.xml (report only) and drift.xml (--onto, fails)
    as one CI check: no patch may appear there as both a passed and a failed test."""
    scan = ET.fromstring(_junit(capsys, project, history.mirror, tmp_path, "s.xml",
                                "--scan", "plugin=main", "--fail-on", "none"))
    onto = ET.fromstring(_junit(capsys, project, history.mirror, tmp_path, "o.xml", "--onto", "plugin=main"))
    assert {s.get("name") for s in scan}.isdisjoint(s.get("name") for s in onto)
    ids = lambda root: {(s.get("name"), c.get("classname"), c.get("name"))  # noqa: E731
                        for s in root for c in s.iter("testcase")}
    assert ids(scan).isdisjoint(ids(onto))
    assert {c.get("classname") for c in scan.iter("testcase")}.isdisjoint(
        c.get("classname") for c in onto.iter("testcase"))
    assert any(c.find("failure") is not None for c in onto.iter("testcase"))  # the same patch fails here
