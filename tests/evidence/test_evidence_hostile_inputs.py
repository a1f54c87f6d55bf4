"""Evidence inputs that used to be accepted silently (issue 13, item 7): each is now one
clear error naming the file, or a deviation analysis refuses until it is recorded.
(NaN, infinities and negative values in client results: test_evidence_client_schemas.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evhelpers import write_protocol
from overlay.evidence import profiler, synth
from overlay.evidence.protocol import load_protocol

API_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"


@pytest.fixture
def claim(evroot: Path) -> Path:
    folder = evroot / "claim"
    proto = load_protocol(write_protocol(folder, starts=2, prompts=8, resamples=300))
    synth.write_dataset(proto, folder, effect_pct={"fast": -20.0}, between_sd=0.01, seed=3)
    return folder


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("count,message", [
    ("-3", "Count -3 of 'wait_event' is negative"),
    ("nan", "Count 'nan' is not a finite number"),
    ("inf", "Count 'inf' is not a finite number"),
])
def test_broken_profiler_count_is_refused_with_its_line(tmp_path, run, evroot, count, message):
    p = tmp_path / "api_statistic_0.csv"
    p.write_text(API_HEADER + "0,AscendCL,acl_memcpy_device_to_host,1,8,1,1,1,0\n"
                 f"0,Runtime,wait_event,1,{count},1,1,1,0\n")
    code, out, err = run("evidence", "counters", f"baseline={p}", "--steps", "8", "--name", "wait_event",
                         root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{p}:3: {message}" in err


def test_extra_scenario_file_in_a_run_is_a_deviation(claim, run, evroot):
    extra = claim / "runs" / "fast-r1" / "c8.json"
    extra.write_text((claim / "runs" / "fast-r1" / "c4.json").read_text())
    before = _listing(claim)
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "runs/fast-r1/c8.json is not a scenario of the protocol" in err
    assert "kind: extra, run: fast-r1" in err
    assert _listing(claim) == before
    (claim / "deviations.yaml").write_text(
        "deviations:\n  - {kind: extra, run: fast-r1, scenario: c8, reason: a pilot scenario copied by hand}\n")
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 0, err
    md = (claim / "analysis" / "analysis.md").read_text()
    assert "runs/fast-r1/c8.json is not a scenario of the protocol" in md and "a pilot scenario" in md


@pytest.mark.parametrize("field,value,message", [
    ("variant", "base", "run.json names variant 'base', but the folder is fast-r1 (variant 'fast')"),
    ("start", 2, "run.json names start 2, but the folder is fast-r1 (start 1)"),
])
def test_run_json_naming_another_run_is_refused(claim, run, evroot, field, value, message):
    meta_path = claim / "runs" / "fast-r1" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta[field] = value
    meta_path.write_text(json.dumps(meta))
    before = _listing(claim)
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{meta_path}: {message}" in err
    assert _listing(claim) == before


def test_profiler_zero_count_is_still_accepted(tmp_path):
    p = tmp_path / "api_statistic_0.csv"
    p.write_text(API_HEADER + "0,Runtime,wait_event,1,0,1,1,1,0\n")
    assert profiler.load_statistics(p) == {"wait_event": 0}
