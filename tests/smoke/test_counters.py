"""The smoke's decode counts written as an evidence packet's counters and read back
by `overlay evidence counters` and `overlay evidence analyze` (synthetic walks; the
real counts need a composed core: tests/smoke/test_smoke_real.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overlay.evidence import profiler, reported
from overlay.commands import smoke as smoke_cli
from overlay.smoke.counters import NotCounted, case_counts, counter_files
from overlay.smoke.results import Walk, parse_steps

REPO = Path(__file__).resolve().parents[2]
MRV2 = REPO / "evidence" / "mrv2-metadata-barrier"
TARGETS = {"core": {"base": "c" * 40, "tree": "d" * 40}, "plugin": {"base": "a" * 40, "tree": "b" * 40}}


def _counts(d2h, wait, sync):
    return {"acl_memcpy_device_to_host": d2h, "wait_event": wait, "event_synchronize": sync,
            "acl_memcpy_host_to_device": 16}


def _walk(off=(24, 16, 16), on=(16, 8, 8), spec=(24, 16, 16), spec_off=(24, 16, 16), drop=None):
    def step(name, counts, extra=None):
        data = {"steps": 8, "batch": 8, "counts": _counts(*counts),
                "sites": [{"name": "wait_event", "site": "vllm/v1/worker/gpu/async_utils.py:31", "count": 8}]}
        return {"step": name, "status": "ok", "detail": "", "where": "", "data": {**data, **(extra or {})}}

    records = [step("metadata-switch-off", off), step("metadata-switch-on", on),
               step("metadata-speculative", spec, {"switch-off": _counts(*spec_off)})]
    records = [r for r in records if r["step"] != drop]
    return Walk("w", parse_steps("\n".join(json.dumps(r) for r in records)), 0)


def _write(folder: Path, walk: Walk) -> None:
    folder.mkdir(parents=True)
    for name, text in counter_files(walk, "v0.25.0", TARGETS, "2026-12-01",
                                    "overlay smoke --pin v0.25.0 --write-counters DIR").items():
        (folder / name).write_text(text)


def test_written_counts_read_back_as_profiler_statistics(tmp_path, run):
    _write(tmp_path / "c", _walk())
    assert profiler.load_statistics(tmp_path / "c" / "baseline.csv")["acl_memcpy_device_to_host"] == 24
    assert profiler.load_statistics(tmp_path / "c" / "optimized.csv")["wait_event"] == 8
    assert profiler.load_statistics(tmp_path / "c" / "speculative-off.csv")["event_synchronize"] == 16
    code, out, err = run("evidence", "counters", f"baseline={tmp_path / 'c' / 'baseline.csv'}",
                         f"optimized={tmp_path / 'c' / 'optimized.csv'}", "--steps", "8",
                         "--name", "acl_memcpy_device_to_host", "--name", "wait_event", "--json")
    assert code == 0, err
    counts = json.loads(out)["counts"]
    assert counts["baseline"]["acl_memcpy_device_to_host"] == {"count": 24, "per_step": 3.0}
    assert counts["optimized"]["wait_event"] == {"count": 8, "per_step": 1.0}
    measured = reported.load_measured(tmp_path)  # counters/measured.yaml beside a packet
    assert measured is None
    shutil.move(tmp_path / "c", tmp_path / "counters")
    measured = reported.load_measured(tmp_path)
    assert measured.implementation == reported.THIS_SERIES
    assert measured.command == "overlay smoke --pin v0.25.0 --write-counters DIR"


def _packet(tmp_path, walk):
    folder = tmp_path / "mrv2-metadata-barrier"
    shutil.copytree(MRV2, folder, ignore=shutil.ignore_patterns("counters", "analysis"))
    _write(folder / "counters", walk)
    (tmp_path / "series.yaml").write_text("series: []\n")
    return folder


def _decisions(run, folder, tmp_path):
    code, out, err = run("evidence", "analyze", folder, "--json", "--out", tmp_path / "a", root=tmp_path)
    assert code == 0, err
    return {d["claim"]: d for d in json.loads(out)["decisions"]}


def test_analyze_decides_the_mechanism_from_the_counts_of_this_series(tmp_path, run):
    got = _decisions(run, _packet(tmp_path, _walk()), tmp_path)
    assert got["mechanism"]["decision"] == "REPRODUCED"
    assert got["mechanism"]["decided_from"].startswith("this series, measured here (CPU")
    assert got["mechanism"]["other_implementation"] is False
    # the service claims stay decided from the source's runs, and say so
    assert got["service-gain"]["other_implementation"] is True
    assert got["service-gain"]["decided_from"].startswith("ANOTHER IMPLEMENTATION: CubeLander/vllm-ascend-hust#188")


def test_counts_that_do_not_drop_do_not_reproduce_the_mechanism(tmp_path, run):
    # the source's NPU counts still show the drop; they are not what decides
    got = _decisions(run, _packet(tmp_path, _walk(on=(24, 16, 16))), tmp_path)
    assert got["mechanism"]["decision"] == "NOT_REPRODUCED"


def test_a_result_set_without_an_implementation_is_not_this_series(tmp_path, run):
    folder = tmp_path / "mrv2-metadata-barrier"
    shutil.copytree(MRV2, folder, ignore=shutil.ignore_patterns("counters", "analysis"))
    text = (folder / "reported.yaml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("    implementation:")]
    (folder / "reported.yaml").write_text("\n".join(lines) + "\n")
    (tmp_path / "series.yaml").write_text("series: []\n")
    got = _decisions(run, folder, tmp_path)
    assert got["mechanism"]["other_implementation"] is True
    assert got["mechanism"]["decided_from"].startswith("implementation not recorded")


@pytest.mark.parametrize("walk, message", [
    (_walk(drop="metadata-switch-on"), "step metadata-switch-on did not run"),
    (Walk("w", parse_steps(json.dumps({"step": "metadata-switch-off", "status": "FAILED"})), 1),
     "step metadata-switch-off is FAILED"),
])
def test_a_walk_without_every_case_writes_nothing(tmp_path, walk, message):
    with pytest.raises(NotCounted, match=message):
        case_counts(walk)
    with pytest.raises(Exception, match="counted no decode steps"):
        smoke_cli.write_counters(tmp_path / "c", walk, "v0.25.0", TARGETS, tmp_path)
    assert not (tmp_path / "c").exists()


def test_the_recorded_command_names_no_path_of_this_machine(tmp_path):
    root = tmp_path / "repo"
    smoke_cli.write_counters(root / "evidence" / "p" / "counters", _walk(), "v0.25.0", TARGETS, root)
    text = (root / "evidence" / "p" / "counters" / "measured.yaml").read_text()
    assert 'command: "overlay smoke --pin v0.25.0 --write-counters evidence/p/counters"' in text
    smoke_cli.write_counters(tmp_path / "elsewhere", _walk(), "v0.25.0", TARGETS, root)
    assert "--write-counters DIR" in (tmp_path / "elsewhere" / "measured.yaml").read_text()
    assert str(tmp_path) not in text
