"""JUnit XML for CI (pure): suites of test cases in, one document out, valid against the
common JUnit XSD (Jenkins' junit-10.xsd; checked in tests/reporting/).

What the schema asks, and this writer does: every `<testsuite>` carries `name`, `tests`,
`failures` and `errors`; `<testsuites>` the totals; `<properties>` only on a suite;
`<testcase>` only `name`, `classname` and `time` (a location goes into the failure text);
times only where measured, in seconds with at most three decimals. Characters that XML
1.0 cannot carry are written as visible escapes, so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Sequence

# XML 1.0 allows tab, newline, carriage return and everything from U+0020 except the
# surrogates and U+FFFE/U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


@dataclass(frozen=True)
class Failure:
    message: str
    type: str
    text: str = ""


@dataclass(frozen=True)
class Case:
    name: str
    classname: str
    failure: Failure | None = None
    skipped: str | None = None  # the reason; a skipped case is neither passed nor failed
    output: str | None = None  # <system-out>
    time: float | None = None  # seconds, where the case was timed on its own


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[Case, ...]
    time: float | None = None
    properties: tuple[tuple[str, str], ...] = ()

    @property
    def failures(self) -> int:
        return sum(1 for c in self.cases if c.failure is not None)

    @property
    def skipped(self) -> int:
        return sum(1 for c in self.cases if c.skipped is not None and c.failure is None)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _suite(suite: Suite) -> ET.Element:
    attrs = {"name": xml_text(suite.name), "tests": str(len(suite.cases)),
             "failures": str(suite.failures), "errors": "0", "skipped": str(suite.skipped)}
    if suite.time is not None:
        attrs["time"] = _seconds(suite.time)
    element = ET.Element("testsuite", attrs)
    if suite.properties:
        props = ET.SubElement(element, "properties")
        for name, value in suite.properties:
            ET.SubElement(props, "property", name=xml_text(name), value=xml_text(value))
    for c in suite.cases:
        attrs = {"classname": xml_text(c.classname), "name": xml_text(c.name)}
        if c.time is not None:
            attrs["time"] = _seconds(c.time)
        case = ET.SubElement(element, "testcase", attrs)
        if c.failure is not None:
            failure = ET.SubElement(case, "failure", message=xml_text(c.failure.message),
                                    type=xml_text(c.failure.type))
            failure.text = xml_text(c.failure.text) or None
        elif c.skipped is not None:
            ET.SubElement(case, "skipped", message=xml_text(c.skipped))
        if c.output:
            ET.SubElement(case, "system-out").text = xml_text(c.output)
    return element


def render(suites: Sequence[Suite], name: str | None = None) -> str:
    """The document: `<testsuites>` with the totals over `suites`, then each suite."""
    attrs = {"tests": str(sum(len(s.cases) for s in suites)),
             "failures": str(sum(s.failures for s in suites)), "errors": "0"}
    if name:
        attrs = {"name": xml_text(name), **attrs}
    timed = [s.time for s in suites if s.time is not None]
    if timed:
        attrs["time"] = _seconds(sum(timed))
    root = ET.Element("testsuites", attrs)
    root.extend(_suite(s) for s in suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
