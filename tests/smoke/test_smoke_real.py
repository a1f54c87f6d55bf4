"""The start-up smoke on the real release pin sets (needs OVERLAY_MIRROR and the
composed test environment, which `make smoke` or `make composed-test` builds once).

With the series every step passes. Without it, v0.24.0 and v0.25.0 fail exactly
where reading their code predicts (issue 9): the GLM-4.7 parser attribute read in
every process, the DeepSeek-V4 parser module (0.25.0), BalanceScheduler.schedule()
without core's throttle argument, the graph-manager factory without
lora_capture_cases, the reshape without kv_cache_config, and on 0.25.0 the
InputBatch fields and the renamed rejection-sampler helpers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from overlay.testing import testenv
from overlay.smoke.results import Walk, parse_steps, unexpected_passes

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.mirror

COMMON = {
    "global-patches: vllm_ascend/patch/platform/__init__.py:33": "_extract_tool_call_regions",
    "scheduler": "BalanceScheduler.schedule() takes 1 positional argument but 2 were given",
    "scheduler-sync": "BalanceScheduler.schedule() takes 1 positional argument but 2 were given",
    "graph-manager-factory": "unexpected keyword argument 'lora_capture_cases'",
    "init-kv-cache": "unexpected keyword argument 'kv_cache_config'",
}
# The experiment is the series' own: without it the switch removes nothing.
SWITCH_DOES_NOTHING = {"metadata-switch-on": "switch on: 24 D2H copies"}
PREDICTED = {
    "v0.24.0": {**COMMON, **SWITCH_DOES_NOTHING},
    "v0.25.0": {
        **COMMON,
        # the runner's prepare_inputs builds its AscendInputBatch in every decode step
        # (metadata-switch-on is skipped: it needs metadata-switch-off)
        "metadata-switch-off": "missing 2 required positional arguments: 'is_padding' and 'prompt_lens'",
        "metadata-speculative": "missing 2 required positional arguments: 'is_padding' and 'prompt_lens'",
        "global-patches: vllm_ascend/patch/platform/__init__.py:35": "vllm.tool_parsers.deepseekv4_tool_parser",
        "input-batch": "missing 2 required positional arguments: 'is_padding' and 'prompt_lens'",
        "rejection-sampler": "cannot import name '_compute_block_stats_kernel'",
    },
}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the project's series and pins: composing writes build/ there, not here."""
    root = tmp_path_factory.mktemp("project")
    for name in ("series.yaml", "patches", "pins"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / name)
    return root


def _smoke(project: Path, mirror: Path, pin: str, *extra: str) -> list[Walk]:
    venv = testenv.default_venv()
    if not (venv / testenv.REQUIREMENTS_STAMP).is_file():
        pytest.skip(f"the composed test environment is not built at {venv} (run `make smoke` once)")
    proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(project), "smoke", "--pin", pin,
                           "--mirror", str(mirror), "--json", *extra], capture_output=True, text=True, timeout=1800)
    assert proc.stdout.strip(), proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    walks = [Walk(w["label"], parse_steps("\n".join(json.dumps(s) for s in w["steps"])), w["returncode"], w["error"])
             for w in doc["walks"]]
    assert proc.returncode == (0 if walks[0].ok else 1)
    return walks


@pytest.mark.parametrize("pin", ["v0.23.0", "v0.24.0", "v0.25.0", "v0.27.1"])
def test_every_step_passes_with_the_series(project, mirror_dir, pin):
    composed = _smoke(project, mirror_dir, pin)[0]
    assert composed.ok, "\n".join(s.line() for s in composed.steps if not s.ok) or composed.summary()
    assert len(composed.steps) >= 15
    # 8 decode steps of 8 requests: the seed's profile (24 -> 16 copies, 16 -> 8 waits),
    # and nothing fewer when the steps carry draft tokens
    counts = {s.step: s.data["counts"] for s in composed.steps if "counts" in s.data}
    pick = ("acl_memcpy_device_to_host", "wait_event", "event_synchronize")
    assert [counts["metadata-switch-off"][n] for n in pick] == [24, 16, 16]
    on = [counts["metadata-switch-on"][n] for n in pick]
    # on 0.23.0 the plugin keeps MRV2 off; its fail-closed check may keep the device path there
    assert on == [16, 8, 8] or (pin == "v0.23.0" and on == [24, 16, 16])
    assert [counts["metadata-speculative"][n] for n in pick] == [24, 16, 16]


@pytest.mark.parametrize("pin", ["v0.24.0", "v0.25.0"])
def test_without_the_series_it_fails_where_predicted(project, mirror_dir, pin):
    composed, baseline = _smoke(project, mirror_dir, pin, "--baseline")
    assert composed.ok
    assert unexpected_passes(baseline, PREDICTED[pin]) == []
    # and nothing else: every failure is one the facts predict
    assert {s.step for s in baseline.failed} - {"general-plugins", "global-patches", "worker-patches"} == set(PREDICTED[pin])
