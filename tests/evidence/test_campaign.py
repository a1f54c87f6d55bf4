"""`overlay bench ab --cluster`: campaigns as Ray tasks (evidence.campaign).

The pure parts run everywhere. The cluster tests start a real 2-node Ray cluster on
this machine (a head and a second raylet, each with one `NPU` card) inside a network
namespace of their own, run the fake-server protocol on it, and check pairing,
placement records, fault handling and the one-line refusals; they are skipped, with
the reason, where the cluster extra (Ray) is not installed or no namespace can be made.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from overlay.evidence import campaign, strata
from overlay.evidence.plan import PlannedRun

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ray_cluster  # noqa: E402
from tests.hostile_text import TEXT, unsafe_in  # noqa: E402


def _runs(*ids: tuple[str, int]) -> tuple[PlannedRun, ...]:
    return tuple(PlannedRun(i, f"{v}-r{k}", v, k, ("s",)) for i, (v, k) in enumerate(ids, 1))


def test_blocks_group_start_k_of_every_variant_in_plan_order():
    planned = _runs(("base", 1), ("fast", 1), ("fast", 2), ("base", 2), ("base", 3), ("fast", 3))
    got = campaign.blocks(planned)
    assert [b.start for b in got] == [1, 2, 3]
    assert [[r.run_id for r in b.runs] for b in got] == [["base-r1", "fast-r1"], ["fast-r2", "base-r2"],
                                                         ["base-r3", "fast-r3"]]


def test_capacity_is_per_node_not_the_cluster_total():
    nodes = [{"Alive": True, "Resources": {"NPU": 1.0}}, {"Alive": True, "Resources": {"NPU": 1.0}},
             {"Alive": False, "Resources": {"NPU": 8.0}}]
    assert campaign.max_cards_per_node(nodes, "NPU") == 1.0
    assert campaign.max_cards_per_node(nodes, "GPU") == 0.0


def test_progress_line_names_each_node_and_the_queue():
    line = campaign.progress_line({"aaaaaaaaaaaa": {"done": 2, "running": 1}, "bbbbbbbbbbbb": {"running": 1}},
                                  3, 2, 7, 40.0, {"aaaaaaaaaaaa": "aaaaaaaa (h1)"})
    assert line.startswith("node aaaaaaaa (h1): 2 done, 1 running | node bbbbbbbb: 0 done, 1 running | "
                           "3 queued | 2/7 new runs done in 0m40s, about 1m40s left")


def test_stratified_resampling_stays_within_each_node():
    labels = ["a", "a", "b", "b", "b"]
    idx = strata.stratified_indices(labels, 500, seed=1)
    assert idx.shape == (500, 5)
    assert set(np.unique(idx[:, :2])) <= {0, 1} and set(np.unique(idx[:, 2:])) <= {2, 3, 4}
    # every draw keeps each node's count of pairs
    assert (np.isin(idx, [0, 1]).sum(axis=1) == 2).all()


def test_strata_need_two_pairs_on_every_node():
    assert strata.resamplable(["a", "a", "b", "b"])
    assert not strata.resamplable(["a", "b"])  # one pair a node: a single resample each
    assert not strata.resamplable(["a", "a", "a"])  # one node: nothing to stratify
    assert not strata.resamplable(["a", None, "b", "b"])  # a serial run among them


def test_a_claim_whose_sign_differs_between_nodes_is_flagged():
    per = strata.per_stratum_delta_pct(np.array([10.0, 10, 10, 10]), np.array([12.0, 12, 8, 8]),
                                       ["a", "a", "b", "b"])
    assert per == {"a": pytest.approx(20.0), "b": pytest.approx(-20.0)}
    assert strata.sign_differs(per)
    assert not strata.sign_differs({"a": 5.0, "b": 1.0})


def test_ladder_must_list_every_variant_baseline_first(tmp_path):
    from evhelpers import ladder_protocol

    from overlay.errors import OverlayError
    from overlay.evidence.protocol import load_protocol

    p = ladder_protocol(tmp_path / "l")
    proto = load_protocol(p)
    assert proto.treatments == ("rung1", "rung2")
    assert proto.compared_with("rung2") == "rung1" and proto.compared_with("rung1") == "rung0"
    text = p.read_text()
    p.write_text(text.replace("- rung0\n- rung1\n- rung2", "- rung1\n- rung0\n- rung2"))
    with pytest.raises(OverlayError, match="first rung must be the baseline"):
        load_protocol(p)
    p.write_text(text.replace("- rung0\n- rung1\n- rung2", "- rung0\n- rung1"))
    with pytest.raises(OverlayError, match="every variant exactly once"):
        load_protocol(p)


def test_ladder_protocol_from_a_ledger_climbs_the_kept_steps(run):
    repo = Path(__file__).resolve().parents[2]
    code, out, err = run("evidence", "ledger", repo / "evidence" / "910c-online-tuning", "--ladder-protocol",
                         root=repo)
    assert code == 0, err
    import yaml

    doc = yaml.safe_load(out.replace("YYYY-MM-DD  # fill in before the first run", "2026-12-01"))
    assert doc["ladder"][0] == "base" and doc["baseline"] == "base"
    assert set(doc["ladder"]) == set(doc["variants"])
    assert doc["variants"]["step-2"]["env"]["HCCL_OP_EXPANSION_MODE"] == "AIV"
    assert "step-2" in doc["ladder"] and doc["ladder"].index("step-2") > doc["ladder"].index("step-1")


# ----------------------------------------------------------------------------- node outcomes
# What a block's Ray task returns is a node's word (issue 26 case 15): checked in one place
# before anything of it is counted.


class _Ray:
    """Just what the driver's `finished` asks of Ray: the outcomes a node returned."""

    def __init__(self, outcomes) -> None:
        self.outcomes = outcomes

    def get(self, ref):
        return self.outcomes


def _driver(tmp_path, outcomes):
    block = campaign.Block(2, _runs(("base", 2), ("fast", 2)))
    drv = campaign._Driver(_Ray(outcomes), None, tmp_path, tmp_path / "results", lambda _m: None, {}, 3)
    drv.pending["ref"] = (block, 1)
    return drv


def _finish(tmp_path, outcomes):
    """(driver, the one error line or None) after the node answered `outcomes`."""
    from overlay.errors import OverlayError

    drv = _driver(tmp_path, outcomes)
    try:
        drv.finished("ref")
    except OverlayError as err:
        return drv, err.one_line()
    except KeyboardInterrupt:  # what an interrupted run unwinds with: not an answer here
        return drv, "KeyboardInterrupt"
    return drv, None


NODE = "ab" * 28


def test_outcomes_of_the_runs_asked_for_are_counted(tmp_path):
    drv, err = _finish(tmp_path, [{"run": "base-r2", "status": "complete", "node_id": NODE},
                                  {"run": "fast-r2", "status": "complete", "node_id": NODE}])
    assert err is None and drv.ran == ["base-r2", "fast-r2"] and drv.nodes == {NODE: ["base-r2", "fast-r2"]}


@pytest.mark.parametrize("outcomes, message", [
    # a run of another block, or one no block has
    ([{"run": "base-r2", "status": "complete", "node_id": NODE},
      {"run": "base-r7", "status": "complete", "node_id": NODE}],
     "block 2: a node's outcome 2 (node abababab) is for run 'base-r7', which the block did not ask for"),
    ([{"run": "base-r2", "status": "complete", "node_id": NODE}] * 2, "outcome 2 (node abababab) repeats run 'base-r2'"),
    ([{"run": "base-r2", "node_id": NODE}], "outcome 1 (node abababab) has no 'status'"),
    ([{"run": "base-r2", "status": "done", "node_id": NODE}], "outcome 1 (node abababab) has status 'done'"),
    ([{"run": "base-r2", "status": 3}], "outcome 1 has status 3"),
    ([{"status": "complete", "node_id": NODE}], "outcome 1 (node abababab) has no 'run'"),
    ([{"run": ["base-r2"], "status": "complete", "node_id": NODE}], "outcome 1 (node abababab): 'run' is a list"),
    ([{"run": "base-r2", "status": "complete"}], "outcome 1 has no 'node_id'"),
    ([{"run": "base-r2", "status": "failed", "node_id": NODE}], "outcome 1 (node abababab) has no 'reason'"),
    ([{"run": "base-r2", "status": "complete", "node_id": NODE, "excluded": "base-r2.1"}],
     "'excluded' is a string"),
    ([{"run": "base-r2", "status": "complete", "node_id": NODE, "excluded": ["../../etc"]}],
     "excludes '../../etc', which is no run of the block"),
    ([{"status": "refused"}], "outcome 1 has no 'message'"),
    ([{"status": "refused", "message": "x", "hint": 7}], "outcome 1: 'hint' is a number"),
    ("complete", "the node's answer is a string, not a list of outcomes"),
    ([], "the node's answer is an empty list"),
    ([None], "outcome 1 is nothing, not a mapping"),
])
def test_a_bad_or_foreign_outcome_is_one_line_and_nothing_of_the_block_is_counted(tmp_path, outcomes, message):
    drv, err = _finish(tmp_path, outcomes)
    assert err is not None and message in err, err
    assert drv.ran == [] and drv.nodes == {} and drv.excluded == []


@given(st.lists(st.dictionaries(st.sampled_from(["run", "status", "node_id", "reason", "excluded", "message",
                                                 "path", "hint"]),
                                st.one_of(st.sampled_from(["base-r2", "fast-r2", "base-r1", "complete", "failed",
                                                           "refused", NODE, "base-r2.1"]),
                                          st.none(), st.integers(), st.lists(st.text(max_size=5), max_size=2),
                                          TEXT)),
                max_size=4))
def test_no_node_outcome_gives_a_traceback_or_counts_a_run_not_asked_for(outcomes):
    """Whatever a node answers: one error line, or Ctrl-C's unwinding for an interrupted
    run, and only the block's own runs counted, each once."""
    import tempfile

    from overlay.errors import OverlayError

    with tempfile.TemporaryDirectory() as tmp:
        drv = _driver(Path(tmp), outcomes)
        try:
            drv.finished("ref")
        except OverlayError as err:
            assert unsafe_in(err.one_line()) == []
        except KeyboardInterrupt:  # only for a run the node says was interrupted
            assert any(isinstance(o, dict) and o.get("status") == "interrupted" for o in outcomes)
        assert set(drv.ran) <= {"base-r2", "fast-r2"} and len(set(drv.ran)) == len(drv.ran)
        assert all(unsafe_in(e) == [] for e in drv.excluded)


def test_a_nodes_escape_sequences_are_never_printed(tmp_path):
    """issue 26 case 13: a node's message, reason and names reach the terminal made printable."""
    hostile = "\x1b]0;owned\x07\x1b[2J\x9b31m"
    for outcomes in ([{"status": "refused", "message": "node h: " + hostile, "hint": hostile}],
                     [{"run": "base-r2", "status": "failed", "reason": hostile, "node_id": NODE}],
                     [{"run": "base-r2", "status": "complete", "node_id": NODE + hostile}],
                     [{"run": "base-r2", "status": "complete", "node_id": NODE, "excluded": ["base-r2.1" + hostile]}]):
        drv, err = _finish(tmp_path, outcomes)
        assert err is not None and unsafe_in(err) == [], err
        assert drv.ran == []


def _gone(pid: int, timeout: float = 10.0) -> bool:
    import time

    from overlay.evidence import orchestrate

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not orchestrate._alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_server_whose_worker_died_before_the_death_signal_was_armed_never_starts(tmp_path):
    """PR_SET_PDEATHSIG covers only a parent that dies after prctl. A worker killed while
    the wrapper's interpreter was still starting has already left the wrapper to init:
    it must then exit as SIGTERM would have ended it, not start an orphaned server. The
    race is forced by naming as the parent a pid that is not the wrapper's parent."""
    import subprocess

    from overlay.evidence.orchestrate import die_with_parent

    started = tmp_path / "server-started"
    not_the_parent = 1
    proc = subprocess.run(die_with_parent(["touch", str(started)], parent=not_the_parent))
    assert proc.returncode == 143 and not started.exists()
    proc = subprocess.run(die_with_parent(["touch", str(started)]))  # the real parent: it runs
    assert proc.returncode == 0 and started.exists()


def test_a_campaign_server_gets_sigterm_when_its_worker_dies(tmp_path):
    """The exec wrapper's PR_SET_PDEATHSIG: a Ray worker killed hard takes its server along."""
    import os
    import signal
    import subprocess

    from overlay.evidence import orchestrate

    pid_file = tmp_path / "child"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from overlay.evidence.orchestrate import die_with_parent\n"
        f"p = subprocess.Popen(die_with_parent(['sleep', '120']), start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(120)\n")])
    try:
        assert _wait_file(pid_file)
        child = int(pid_file.read_text())
        for _ in range(200):  # exec'd: the live command line becomes the server's own argv
            if orchestrate._cmdline(child) == ["sleep", "120"]:
                break
            import time

            time.sleep(0.05)
        assert orchestrate._cmdline(child) == ["sleep", "120"]
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone(child), "the server outlived the process that started it"
    finally:
        parent.kill()
        if pid_file.is_file():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def _wait_file(path: Path, timeout: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return True
        time.sleep(0.05)
    return False


def test_leftover_servers_are_stopped_only_when_their_worker_is_gone(tmp_path):
    import os
    import socket
    import subprocess

    from overlay.evidence import orchestrate

    host, boot = socket.gethostname(), campaign._boot_id()
    servers, records = [], {}
    live_worker = subprocess.Popen(["sleep", "120"])
    dead_worker = subprocess.Popen(["sleep", "120"])
    dead_started = orchestrate._stat(dead_worker.pid)[3]
    dead_worker.kill()
    dead_worker.wait()
    try:
        for name, worker, started in (("beside", live_worker.pid, orchestrate._stat(live_worker.pid)[3]),
                                      ("orphan", dead_worker.pid, dead_started)):
            nonce = orchestrate.new_nonce()  # as bench ab starts its servers
            # the server says it is up: Popen returns once the child's exec has begun,
            # before the kernel has set up the new program's environment, which the
            # ownership check reads (seen refused as "does not carry the run's nonce")
            argv = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"]
            srv = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True,
                                   env={**os.environ, orchestrate.SERVER_NONCE_VAR: nonce})
            servers.append(srv)
            assert srv.stdout.readline() == "up\n"
            d = tmp_path / campaign.PIDS / name
            d.mkdir(parents=True)
            orchestrate._write_pid(d, srv, argv, name, nonce)
            (d / "node.json").write_text(json.dumps({"hostname": host, "boot_id": boot, "worker_pid": worker,
                                                     "worker_started": started}))
            records[name] = srv
        campaign._stop_own_leftovers(tmp_path, host, boot)
        assert records["orphan"].wait(timeout=10) is not None  # its worker is gone: stopped
        assert records["beside"].poll() is None  # a block running beside this one keeps its server
    finally:
        live_worker.kill()
        for srv in servers:
            srv.kill()
            srv.wait()


def test_cluster_without_ray_installed_is_one_line(run, evroot, monkeypatch):
    from evhelpers import fake_protocol

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    proto = fake_protocol(evroot / "ab", starts=2, cpus=False)
    code, out, err = run("bench", "ab", "--protocol", proto, "--cluster", "local", root=evroot)
    assert code == 2
    assert err.strip().splitlines() == [err.strip()]
    assert "needs Ray" in err and "pip install -e '.[cluster]'" in err
    assert not (evroot / "ab" / "runs").exists()


# ----------------------------------------------------------------------------- a real 2-node cluster

SKIP = ray_cluster.netns_available()
cluster = pytest.mark.skipif(SKIP is not None, reason=f"no local Ray cluster: {SKIP}")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    out = tmp_path_factory.mktemp("campaign")
    proc = ray_cluster.in_netns([sys.executable, str(HERE / "cluster_session.py"), str(out)], timeout=900)
    report = out / "report.json"
    assert proc.returncode == 0 and report.is_file(), proc.stderr[-3000:]
    return json.loads(report.read_text())


def _placements(results: str) -> dict[str, dict]:
    return {d.name: json.loads((d / "run.json").read_text())["placement"]
            for d in sorted((Path(results) / "runs").iterdir())}


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("overlay: error:")]
    assert len(lines) == 1, err
    return lines[0]


@cluster
def test_campaign_runs_pairs_on_one_node_and_spreads_blocks(session):
    res = session["normal"]
    assert res["rc"] == 0, res["err"]
    data = json.loads(res["out"])  # stdout is the JSON document alone, whatever Ray printed
    assert sorted(data["ran"]) == ["base-r1", "base-r2", "fast-r1", "fast-r2"] and data["remaining"] == 0
    place = _placements(res["results"])
    for k in (1, 2):
        assert place[f"base-r{k}"]["node_id"] == place[f"fast-r{k}"]["node_id"]  # the pair shares a node
        assert place[f"base-r{k}"]["resource"] == "NPU" and place[f"base-r{k}"]["cards"] == ["0"]
        assert place[f"base-r{k}"]["host_cpus"]
    # one card per node: the two blocks ran on the two nodes
    assert place["base-r1"]["node_id"] != place["base-r2"]["node_id"]
    assert set(data["nodes"]) == {place["base-r1"]["node_id"], place["base-r2"]["node_id"]}
    assert res["left"] == []


@cluster
def test_campaign_decisions_equal_the_serial_analysis_of_the_same_data(session, run, tmp_path):
    res = session["normal"]
    src = Path(res["results"])
    serial = tmp_path / "serial" / "ab"
    shutil.copytree(src, serial, ignore=shutil.ignore_patterns("analysis", "cluster"))
    (tmp_path / "serial" / "series.yaml").write_text("series: []\n")
    for meta_path in (serial / "runs").glob("*/run.json"):
        meta = json.loads(meta_path.read_text())
        meta.pop("placement")
        meta_path.write_text(json.dumps(meta))
    code, _, err = run("evidence", "analyze", src, "--json", root=src.parent)
    assert code == 0, err
    code2, _, err2 = run("evidence", "analyze", serial, "--json", root=serial.parent)
    assert code2 == 0, err2
    a = json.loads((src / "analysis" / "analysis.json").read_text())
    b = json.loads((serial / "analysis" / "analysis.json").read_text())
    assert [c["decision"] for c in a["claims"]] == [c["decision"] for c in b["claims"]]
    interval = [[x["interval"] for x in c["checks"]] for c in a["claims"]]
    assert interval == [[x["interval"] for x in c["checks"]] for c in b["claims"]]
    assert any("ran on 2 nodes" in n for n in a["notes"]) and not any("nodes" in n for n in b["notes"])


@cluster
def test_a_ladder_campaign_judges_each_rung_against_the_previous_on_one_node(session, run):
    res = session["ladder"]
    assert res["rc"] == 0, res["err"]
    place = _placements(res["results"])
    for k in (1, 2, 3, 4):  # every rung of block k on one node, so each adjacent pair is
        assert len({place[f"rung{i}-r{k}"]["node_id"] for i in range(3)}) == 1
    folder = Path(res["results"])
    code, out, err = run("evidence", "analyze", folder, "--json", root=folder.parent)
    assert code == 0, err
    ledger = json.loads(out)["ladder"]
    steps = {s["step"]: s for s in ledger["steps"]}
    assert [s["step"] for s in ledger["steps"]] == ["rung1", "rung2"]
    assert steps["rung1"]["compared-with"] == "rung0" and steps["rung2"]["compared-with"] == "rung1"
    assert steps["rung1"]["result"] == "positive"  # 30 ms -> 15 ms per token
    assert steps["rung2"]["result"] != "positive"  # 15 ms -> 30 ms per token: a step down
    row = steps["rung1"]["checks"][0]
    assert row["change_pct"] < -10 and row["before"] > row["after"]
    assert (folder / "analysis" / "ledger.yaml").is_file()


@cluster
def test_a_killed_worker_sets_its_run_aside_and_the_block_runs_again(session):
    res = session["fault"]
    assert res["killed_run"], "the test never saw a running server to kill"
    assert res["rc"] == 0, res["err"]
    data = json.loads(res["out"])
    assert data["requeued"] == 1 and data["remaining"] == 0
    killed = res["killed_run"]
    assert data["excluded"] == [f"{killed}.1"]
    reason = (Path(res["results"]) / "excluded" / f"{killed}.1" / "reason.txt").read_text()
    assert "lost the Ray worker or node mid-run" in reason
    assert (Path(res["results"]) / "runs" / killed / "run.json").is_file()  # rerun, complete
    place = _placements(res["results"])
    for k in (1, 2):
        assert place[f"base-r{k}"]["node_id"] == place[f"fast-r{k}"]["node_id"]
    assert res["left"] == []  # the killed worker's server got SIGTERM with its parent


@cluster
def test_ctrl_c_stops_every_remote_server_and_sets_the_runs_aside(session):
    res = session["interrupt"]
    assert res["seen"], "the test never saw a running server"
    assert res["rc"] == 130
    assert res["left"] == []
    excluded = Path(res["results"]) / "excluded"
    reasons = [p.read_text() for p in excluded.glob("*/reason.txt")]
    assert reasons and all("interrupted" in r for r in reasons)
    assert not list((Path(res["results"]) / "runs").glob("*.partial"))


@cluster
def test_a_killed_driver_resumes_without_double_counting(session):
    res = session["driver-killed"]
    assert res["complete_before"], "the driver was killed before any run completed"
    assert res["left_after_kill"] == []  # Ray ended the job's workers; their servers followed
    assert res["workers_left_after_kill"] == []  # so no run of the killed driver completes later
    assert res["rc"] == 0, res["err"]
    data = json.loads(res["out"])
    assert sorted(data["already_complete"]) == res["complete_before"]
    assert sorted(data["already_complete"] + data["ran"]) == sorted(
        f"{v}-r{k}" for v in ("base", "fast") for k in (1, 2, 3))
    place = _placements(res["results"])
    for k in (1, 2, 3):  # a resumed pair joins its partner's node
        assert place[f"base-r{k}"]["node_id"] == place[f"fast-r{k}"]["node_id"]


@cluster
def test_more_cards_per_run_than_any_node_has_is_one_line(session):
    res = session["cards"]
    assert res["rc"] == 2
    line = _one_line(res["err"])
    assert "asks for 2 NPU per run" in line and "most on one node: 1" in line
    assert not (Path(res["results"]) / "runs").exists()


@cluster
def test_an_unreachable_cluster_is_one_line(session):
    res = session["unreachable"]
    assert res["rc"] == 2
    line = _one_line(res["err"])
    assert "cannot reach the Ray cluster at 127.0.0.1:" in line
