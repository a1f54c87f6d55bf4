"""The gate's JUnit file against the common JUnit XSD (issue 22 item 3)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import gatekit
from junit_xsd import problems


def test_gate_junit_validates_with_findings_accepted_and_clean(run, tmp_path):
    core = gatekit.core(tmp_path / "core", new=True, version="0.25.0")
    broken = gatekit.plugin(tmp_path / "broken", fixed=False)
    fixed = gatekit.plugin(tmp_path / "fixed", fixed=True)
    allow = tmp_path / "allow.yaml"
    allow.write_text("accepted:\n  - symbol: replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager\n"
                     "    reason: tracked upstream\n    expires: 2999-01-01\n")
    for label, argv in {"failing": ["--plugin", broken], "accepted": ["--plugin", broken, "--allowlist", allow],
                        "clean": ["--plugin", fixed]}.items():
        xml = tmp_path / f"{label}.xml"
        code, _, err = run("gate", "--core", core, *argv, "--junit", xml)
        assert code in (0, 1), err
        text = xml.read_text()
        assert problems(text) == [], label
        root = ET.fromstring(text)
        suite, = root
        assert suite.get("errors") == "0" and suite.get("time"), label
        for key in ("tests", "failures", "errors"):
            assert root.get(key) == suite.get(key), (label, key)
    assert next(ET.parse(tmp_path / "accepted.xml").getroot().iter("skipped")) is not None
