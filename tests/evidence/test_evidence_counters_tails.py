"""Mechanism counters from profiler statistics CSVs, and per-phase tail diagnosis (seed 004)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from overlay.errors import OverlayError
from overlay.evidence import decide, profiler, tails
from overlay.evidence.analyze import decide_counter_claim
from overlay.evidence.protocol import load_protocol

REPO = Path(__file__).resolve().parents[2]
API_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"


def api_csv(path: Path, d2h: int, waits: int) -> Path:
    # Two devices' rows for the copies: counts add up across rows.
    path.write_text(API_HEADER +
                    f"0,AscendCL,acl_memcpy_device_to_host,120.5,{d2h - 4},4.1,1.0,9.0,0.3\n"
                    f"1,AscendCL,acl_memcpy_device_to_host,30.0,4,4.0,1.0,9.0,0.3\n"
                    f"0,Runtime,wait_event,80.0,{waits},5.0,1.0,9.0,0.3\n"
                    "0,AscendCL,aclrtMemcpyAsync,10.0,99,0.1,0.1,0.1,0\n")
    return path


def test_counts_are_summed_and_divided_by_steps(tmp_path):
    t = profiler.per_step({"baseline": api_csv(tmp_path / "b.csv", 24, 16),
                           "optimized": api_csv(tmp_path / "o.csv", 16, 8)},
                          ("acl_memcpy_device_to_host", "wait_event", "*emcpy*"), 8)
    assert t["baseline"]["acl_memcpy_device_to_host"] == (24, 3.0)
    assert t["optimized"]["wait_event"] == (8, 1.0)
    assert t["baseline"]["*emcpy*"][0] == 24 + 99  # a glob matches several names


def test_acl_statistic_layout_is_supported(tmp_path):
    p = tmp_path / "acl_statistic_0.csv"
    p.write_text("Name,Type,Time(%),Time(us),Count,Avg(us),Min(us),Max(us),Process ID,Thread ID\n"
                 "wait_event,ACL_RTS,1.0,10,16,1,1,1,1,1\n")
    assert profiler.load_statistics(p) == {"wait_event": 16}


def test_not_a_statistics_csv_is_one_clear_error(tmp_path, run, evroot):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    code, out, err = run("evidence", "counters", f"baseline={p}", "--steps", "8", "--name", "wait_event",
                         root=evroot)
    assert code == 2 and out == "" and "not a profiler statistics CSV" in err and err.count("\n") == 1


def test_counters_cli_table(tmp_path, run, evroot):
    code, out, err = run("evidence", "counters", f"baseline={api_csv(tmp_path / 'b.csv', 24, 16)}",
                         f"optimized={api_csv(tmp_path / 'o.csv', 16, 8)}", "--steps", "8",
                         "--name", "acl_memcpy_device_to_host", "--name", "wait_event", root=evroot)
    assert code == 0, err
    assert "| acl_memcpy_device_to_host | 24 (3/step) | 16 (2/step) |" in out
    assert "| wait_event | 16 (2/step) | 8 (1/step) |" in out


def test_counter_claim_decision_from_csvs(tmp_path):
    proto = load_protocol(REPO / "evidence" / "mrv2-metadata-barrier")
    claim = next(c for c in proto.claims if c.kind == "counters")
    d = tmp_path / "counters"
    d.mkdir()
    api_csv(d / "baseline.csv", 24, 16)
    api_csv(d / "optimized.csv", 16, 8)
    assert decide_counter_claim(claim, d).decision == decide.REPRODUCED
    api_csv(d / "optimized.csv", 24, 8)  # the copy was not removed
    res = decide_counter_claim(claim, d)
    assert res.decision == decide.INCONCLUSIVE  # one check reproduced, one not
    assert [c.decision for c in res.counters] == [decide.NOT_REPRODUCED, decide.REPRODUCED]
    assert decide_counter_claim(claim, None).note.startswith("no profiler statistics")


# ----------------------------------------------------------------------------- tails


def seed004_like(rounds: int = 400, seed: int = 0, runner_tail_round: int | None = 561,
                 validate_tail_round: int | None = None) -> list[tuple[int, str, str, float]]:
    """Four ranks; device wall stable; one rank's runner envelope stalls ~33 ms in
    one round; optionally every rank's gap stalls in another round."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(rounds):
        for rank in ("5", "7", "9", "15"):
            dev = 5.76 + rng.normal(0, 0.03)
            runner = dev + 0.15 + abs(rng.normal(0, 0.03))
            gap = 0.02 + abs(rng.normal(0, 0.005))
            val = 0.02 + abs(rng.normal(0, 0.005))
            if r == runner_tail_round and rank == "5":
                runner += 33.4
            if r == validate_tail_round:
                gap += 4.7
            rows += [(r, rank, "device_wall", dev), (r, rank, "runner_run", runner),
                     (r, rank, "gap", gap), (r, rank, "validate", val)]
    return rows


def write_csv(path: Path, rows) -> Path:
    path.write_text("round,rank,phase,ms\n" + "".join(f"{r},{k},{p},{v:.4f}\n" for r, k, p, v in rows))
    return path


def test_phase_stats_and_single_rank_outlier():
    ph = tails.derive(tails.to_phases(seed004_like(rounds=600)), "excess", "runner_run", "device_wall")
    stats = {s.phase: s for s in tails.phase_stats(ph)}
    assert stats["runner_run"].max > 39 and stats["device_wall"].max < 6.0
    assert stats["excess"].max == pytest.approx(33.4, abs=0.3)
    # percentiles are numpy's over every (round, rank) value of the phase
    assert stats["device_wall"].p99 == pytest.approx(np.percentile(ph["device_wall"].ms, 99))
    outs = tails.outliers(ph, 5.0)
    singles = [o for o in outs if o.kind == "single-rank"]
    assert {(o.phase, o.round, o.rank) for o in singles} == {("runner_run", 561, "5"), ("excess", 561, "5")}
    assert not [o for o in outs if o.kind == "common"]


def test_common_stall_of_every_rank_is_found():
    ph = tails.to_phases(seed004_like(runner_tail_round=None, validate_tail_round=131))
    outs = tails.outliers(ph, 3.0)
    assert [(o.phase, o.kind, o.round) for o in outs] == [("gap", "common", 131)]


def test_tail_moving_between_phases_is_reported():
    a = tails.to_phases(seed004_like(runner_tail_round=100, validate_tail_round=None))
    b = tails.to_phases(seed004_like(runner_tail_round=None, validate_tail_round=100, seed=1))
    shifts, moved = tails.compare(a, b, 3.0)
    by = {s.phase: s for s in shifts}
    assert (by["runner_run"].outliers_a, by["runner_run"].outliers_b) == (1, 0)
    assert (by["gap"].outliers_a, by["gap"].outliers_b) == (0, 1)
    assert moved == [("runner_run", "gap")]


def test_tails_cli(tmp_path, run, evroot):
    a = write_csv(tmp_path / "a.csv", seed004_like(runner_tail_round=100))
    b = write_csv(tmp_path / "b.csv", seed004_like(runner_tail_round=None, validate_tail_round=100))
    code, out, err = run("evidence", "tails", a, "--compare", b, "--threshold-ms", "3",
                         "--derive", "excess=runner_run-device_wall", root=evroot)
    assert code == 0, err
    assert re.search(r"(?m)^  runner_run +round 100  rank 5  +[0-9.]+ ms  \(reference ", out)
    assert "tail moved: excess -> gap, runner_run -> gap" in out
    code, out, _ = run("evidence", "tails", a, "--json", root=evroot)
    data = json.loads(out)
    assert {p["phase"] for p in data["phases"]} == {"device_wall", "runner_run", "gap", "validate"}


def test_tails_bad_input(tmp_path, run, evroot):
    p = tmp_path / "t.csv"
    p.write_text("round,rank,phase,ms\n1,0,x,fast\n")
    code, _, err = run("evidence", "tails", p, root=evroot)
    assert code == 2 and f"{p}:2: round must be an integer and ms a number" in err
    with pytest.raises(OverlayError, match="no phase 'device_wall'"):
        tails.derive(tails.to_phases([(1, "0", "x", 1.0)]), "e", "x", "device_wall")


def test_counter_name_matching_nothing_is_warned(tmp_path, run, evroot):
    b, o = api_csv(tmp_path / "b.csv", 24, 16), api_csv(tmp_path / "o.csv", 16, 8)
    code, out, err = run("evidence", "counters", f"baseline={b}", f"optimized={o}", "--steps", "8",
                         "--name", "wait_event", "--name", "nosuch", "--name", "no*glob", "--json", root=evroot)
    assert code == 0
    assert json.loads(out)["unmatched"] == ["nosuch", "no*glob"]
    assert "--name nosuch matches no API or op" in err and "--name no*glob" in err
    assert "wait_event" not in err


@pytest.mark.parametrize("rows, line, message", [
    ("0,0,step,1.0\n1,0,step,1.5\n0,0,step,2.0\n", 4,
     "duplicate record for round 0, rank 0, phase step (first on line 2)"),
    ("0,0,step,nan\n", 2, "ms is nan"),
    ("0,0,step,1\n0,1,step,inf\n", 3, "ms is inf"),
    ("0,0,step,-3\n", 2, "ms is negative (-3)"),
])
def test_bad_timing_records_are_refused_with_their_line(tmp_path, run, evroot, rows, line, message):
    f = tmp_path / "t.csv"
    f.write_text("round,rank,phase,ms\n" + rows)
    code, out, err = run("evidence", "tails", f, root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"t.csv:{line}: {message}" in err


def test_duplicate_jsonl_record_is_refused(tmp_path):
    f = tmp_path / "t.jsonl"
    rec = json.dumps({"round": 1, "rank": "0", "phase": "step", "ms": 1.0})
    f.write_text(rec + "\n" + rec + "\n")
    with pytest.raises(OverlayError, match="duplicate record") as exc:
        tails.load_records(f)
    assert exc.value.line == 2
