"""Issue 29: `bench ab --cluster local` printed two Ray tracebacks (`No module named 'acl'`):
Ray asks the Ascend runtime for the type of the protocol's `NPU` cards. The campaign's
connection keeps exactly that record out, and nothing else."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ray_cluster  # noqa: E402

from overlay.evidence import campaign  # noqa: E402

SCRIPT = """
import sys, types
sys.path.insert(0, {tools!r})
import ray
from overlay.evidence import campaign
protocol = types.SimpleNamespace(cards=types.SimpleNamespace(resource="NPU"))
campaign.connect(ray, "local", protocol, 2)
assert ray.cluster_resources().get("NPU") == 2.0
ray.shutdown()
print("connected")
"""


def _record(exc: BaseException | None) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc else None
    return logging.LogRecord("ray._private.accelerators.npu", logging.ERROR, "npu.py", 82,
                             "Failed to detect NPU type.", (), info)


def test_only_the_missing_ascend_runtime_is_dropped():
    missing = ModuleNotFoundError("No module named 'acl'", name="acl")
    assert campaign._NoAscendLibrary.filter(_record(missing)) is False
    assert campaign._NoAscendLibrary.filter(_record(ModuleNotFoundError("x", name="numpy"))) is True
    assert campaign._NoAscendLibrary.filter(_record(RuntimeError("driver broken"))) is True
    assert campaign._NoAscendLibrary.filter(_record(None)) is True


SKIP = ray_cluster.netns_available()


@pytest.mark.skipif(SKIP is not None, reason=f"no local Ray cluster: {SKIP}")
def test_a_local_cluster_of_npu_cards_starts_without_tracebacks(tmp_path):
    script = tmp_path / "connect.py"
    script.write_text(SCRIPT.format(tools=str(HERE.parents[1] / "tools")))
    proc = ray_cluster.in_netns([sys.executable, str(script)], timeout=300)
    assert proc.returncode == 0 and "connected" in proc.stdout, proc.stderr[-2000:]
    assert "No module named 'acl'" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
