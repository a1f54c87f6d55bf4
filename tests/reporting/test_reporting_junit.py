"""overlay.reporting.junit: totals, schema-valid structure, text XML can carry (pure)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from junit_xsd import problems

from overlay.reporting import junit


def _doc() -> str:
    a = junit.Suite("drift.onto.plugin@main", (
        junit.Case("0001.patch", "drift.onto.plugin.main", junit.Failure("conflict: x", "conflict", "x")),
        junit.Case("0002.patch", "drift.onto.plugin.main", skipped="blocked", output="blocked: y"),
        junit.Case("0003.patch", "drift.onto.plugin.main", output="clean")), 1.23456,
        (("pin", "p"), ("upstream-did-this-too", "0003.patch abc #5")))
    b = junit.Suite("overlay-gate", (junit.Case("contract", "gate"),), None)
    return junit.render([a, b], name="overlay drift p")


def test_totals_on_the_document_and_on_each_suite():
    root = ET.fromstring(_doc())
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("time")) == ("4", "1", "0", "1.235")
    drift, gate = root
    assert (drift.get("tests"), drift.get("failures"), drift.get("errors"), drift.get("skipped")) == ("3", "1", "0", "1")
    assert gate.get("time") is None  # not measured: no invented time="0"
    assert all(c.get("time") is None for c in root.iter("testcase"))
    assert [p.get("name") for p in drift.find("properties")] == ["pin", "upstream-did-this-too"]


def test_the_document_validates_against_the_common_xsd():
    assert problems(_doc()) == []
    bad = _doc().replace('<testcase classname="gate" name="contract"',
                         '<testcase classname="gate" name="contract" file="x.py"')
    assert problems(bad)  # the check itself can fail


def test_characters_xml_cannot_carry_are_escaped_so_the_file_parses():
    doc = junit.render([junit.Suite("s\x00", (junit.Case("c\x1b", "k", junit.Failure("m\x07", "t", "x\x0b")),))])
    assert problems(doc) == []
    case = ET.fromstring(doc).find("testsuite/testcase")
    assert case.get("name") == "c\\x1b" and case.find("failure").get("message") == "m\\x07"
