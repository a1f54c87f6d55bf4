"""Result files are data someone else may have written (issue 16, items 9-11): a FIFO or a
symlink to /dev/zero must neither hang nor fill memory, JSON nested 100k deep is one line
and not a RecursionError, and a file over the cap is refused naming it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from evhelpers import write_protocol
from overlay.evidence import synth
from overlay.evidence.protocol import load_protocol, protocol_digest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def claim(evroot: Path) -> Path:
    folder = evroot / "claim"
    proto = load_protocol(write_protocol(folder, starts=2, prompts=6, resamples=200))
    synth.write_dataset(proto, folder, effect_pct={"fast": -12.0}, between_sd=0.01, seed=2)
    return folder


def _limit_memory() -> None:  # the old code read /dev/zero until memory ran out
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def analyze_cli(evroot: Path, claim: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO / "tools"), **env}
    return subprocess.run([sys.executable, "-m", "overlay", "--root", str(evroot), "evidence", "analyze",
                           str(claim), "--no-plots"], capture_output=True, text=True, timeout=60,
                          env=full, preexec_fn=_limit_memory)


def plant(path: Path, kind: str) -> None:
    if path.exists():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)


MESSAGES = {"fifo": "is a FIFO, not a regular file", "dev-zero": "is a device, not a regular file",
            "deep": "JSON nested more than 64 levels deep"}
CASES = [(t, k) for t in ("runs/fast-r1/c4.json", "runs/fast-r1/run.json", "protocol.sha256")
         for k in MESSAGES if (t, k) != ("protocol.sha256", "deep")]  # a digest is text, not JSON


@pytest.mark.parametrize("target, kind", CASES)
def test_hostile_result_file_is_one_line_and_no_hang(evroot, claim, target, kind):
    message = MESSAGES[kind]
    plant(claim / target, kind)
    try:
        proc = analyze_cli(evroot, claim)
    except subprocess.TimeoutExpired:
        pytest.fail(f"analyze hung on a {kind} {target}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert str(claim / target) in proc.stderr
    assert not (claim / "analysis").exists()


@pytest.mark.parametrize("target", ["runs/fast-r1/c4.json", "runs/fast-r1/run.json", "protocol.sha256",
                                    "excluded/base-r9/reason.txt"])
def test_a_result_file_linking_out_of_the_results_folder_is_refused(evroot, claim, tmp_path, target):
    """Issue 26, case 8 (results): a link to a file outside the results folder is not
    read, even when that file is a well-formed result: one line naming the file."""
    path = claim / target
    path.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / ("outside-" + path.name)
    if path.exists():
        outside.write_bytes(path.read_bytes())
    elif path.name == "protocol.sha256":  # the right digest: only where it lies is wrong
        outside.write_text(protocol_digest(load_protocol(claim / "protocol.yaml")) + "\n")
    else:
        outside.write_text("a reason\n")
    if path.exists():
        path.unlink()
    path.symlink_to(outside)
    proc = analyze_cli(evroot, claim)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "leads out of the results folder" in proc.stderr and str(path) in proc.stderr
    assert "Traceback" not in proc.stderr and not (claim / "analysis").exists()


def test_result_over_the_cap_is_refused_naming_the_file(evroot, claim):
    proc = analyze_cli(evroot, claim, OVERLAY_RESULT_MAX_BYTES="2000")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "is larger than 2000 bytes" in proc.stderr and "OVERLAY_RESULT_MAX_BYTES" in proc.stderr


def test_json_depth_ignores_brackets_in_strings():
    from overlay.evidence import bounded

    assert bounded.json_depth('{"a": [[1], "[[[[\\"]]"], "b": {}}') == 3
    assert bounded.json_depth("[" * 5000 + "]" * 5000) == 5000
    assert bounded.json_depth("") == 0
    assert bounded.json_depth(r'["\\", ["\\\"["]]') == 2  # an escaped backslash before a closing quote
    assert bounded.json_depth("[" * 100_000, stop=64) > 64
