"""`overlay bench ab` against what the real engine taught (issue 11) and its first-run
traps (issue 13, items 8, 11, 12): CPU lists, a failed first run, leftovers in the
evidence folder, readiness, slow starts, the server's whole process tree, a server
dying mid-run, client failures and progress."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evhelpers import fake_protocol
from overlay.errors import OverlayError
from overlay.evidence import orchestrate
from overlay.evidence.protocol import load_protocol


def add_env(proto_path: Path, variant: str, key: str, value: str) -> None:
    text = proto_path.read_text()
    anchor = f"  {variant}:\n    env:\n"
    assert anchor in text
    proto_path.write_text(text.replace(anchor, f'{anchor}      {key}: "{value}"\n', 1))


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ---- item 12: first-run traps


def test_cpu_list_the_machine_lacks_is_refused_before_anything_starts(run, evroot):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    beyond = max(os.sched_getaffinity(0)) + 1
    proto_path.write_text(proto_path.read_text().replace('client: "0"', f'client: "{beyond}-{beyond + 1}"'))
    before = listing(evroot / "ab")
    code, out, err = run("bench", "ab", "--protocol", proto_path, root=evroot)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"cpus.client '{beyond}-{beyond + 1}' names CPU(s) {beyond},{beyond + 1}" in err
    assert "available:" in err and str(proto_path) in err
    assert listing(evroot / "ab") == before  # no runs/, no excluded/, no protocol.sha256


def test_cpu_set_and_check_against_given_cpus():
    assert orchestrate.cpu_set("0-2,5") == {0, 1, 2, 5}
    proto = load_protocol(Path(__file__).resolve().parents[2] / "evidence" / "cpu-engine-smoke")
    orchestrate.check_cpus(proto, {0, 1})
    with pytest.raises(OverlayError, match=r"cpus.client '1' names CPU\(s\) 1.*available: 0"):
        orchestrate.check_cpus(proto, {0})


def test_failed_first_run_records_no_protocol_digest_and_leaves_no_empty_runs(run, evroot):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    add_env(proto_path, "base", "FAKE_FAIL_START", "1")  # the first start fails
    code, _, err = run("bench", "ab", "--protocol", proto_path, root=evroot)
    assert code == 1 and "run base-r1 failed: server exited with status 3 before answering" in err
    assert "failing on purpose" in err  # the server's last words are in the message
    folder = evroot / "ab"
    assert not (folder / "protocol.sha256").exists()
    assert not (folder / "runs").exists()
    assert (folder / "excluded" / "base-r1.1" / "reason.txt").is_file()  # the failure is kept
    # the fix is an edit of the protocol: not refused as "protocol changed"
    proto_path.write_text(proto_path.read_text().replace('      FAKE_FAIL_START: "1"\n', "", 1))
    code, out, err = run("bench", "ab", "--protocol", proto_path, "--max-runs", "1", "--json", root=evroot)
    assert code == 0, err
    assert json.loads(out)["ran"] == ["base-r1"]
    assert (folder / "protocol.sha256").is_file()  # recorded with the first complete run
    proto_path.write_text(proto_path.read_text().replace("num-prompts: 6", "num-prompts: 7"))
    code, _, err = run("bench", "ab", "--protocol", proto_path, root=evroot)
    assert code == 2 and "the protocol changed after runs were recorded" in err


# ---- readiness, slow start, process tree, dying server, client failures


def test_slow_start_is_waited_for_and_reported(evroot, monkeypatch):
    proto_path = fake_protocol(evroot / "ab", starts=2, startup_s=1.2)
    monkeypatch.setattr(orchestrate._Ticker, "__init__",
                        lambda self, progress, every=0.3: setattr(self, "__dict__",
                                                                  {"progress": progress, "every": every,
                                                                   "next": every}))
    seen: list[str] = []
    proto = load_protocol(proto_path)
    orchestrate.bench_ab(proto, evroot, evroot / "ab", seen.append, only=2)
    waits = [m for m in seen if "waiting for the server to answer /v1/models" in m]
    assert waits and all(m.startswith("[1] base-r1") or m.startswith("[2] fast-r1") for m in waits)
    assert any("server answered after" in m for m in seen)
    assert "1/2 new runs done in" in "\n".join(seen) and "left" in "\n".join(seen)
    meta = json.loads((evroot / "ab" / "runs" / "base-r1" / "run.json").read_text())
    assert meta["ready_after_s"] >= 1.0


def test_server_serving_another_model_is_not_benchmarked(run, evroot):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    add_env(proto_path, "base", "FAKE_SERVED_MODEL", "some-other-model")
    code, _, err = run("bench", "ab", "--protocol", proto_path, root=evroot)
    assert code == 1
    assert "serves some-other-model, not the protocol's model fake-model" in err
    assert not (evroot / "ab" / "excluded" / "base-r1.1" / "burst.json").exists()  # no client ran


@pytest.mark.parametrize("setsid", [False, True])
def test_stopping_the_server_stops_its_whole_process_tree(run, evroot, setsid):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    worker_file = evroot / "worker.pid"
    add_env(proto_path, "base", "FAKE_WORKER", str(worker_file))
    if setsid:  # a worker that left the process group and ignores SIGTERM
        add_env(proto_path, "base", "FAKE_WORKER_SETSID", "1")
    proto_path.write_text(proto_path.read_text().replace("stop-timeout-s: 5", "stop-timeout-s: 1"))
    code, _, err = run("bench", "ab", "--protocol", proto_path, "--max-runs", "1", root=evroot)
    worker = int(worker_file.read_text())
    try:
        assert code == 0, err
        assert not pid_alive(worker)
    finally:
        if pid_alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_server_dying_mid_run_stops_the_client_and_sets_the_run_aside(run, evroot):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    add_env(proto_path, "base", "FAKE_DIE_AFTER", "2")  # the warmup and one request, then exit 7
    proto_path.write_text(proto_path.read_text().replace("timeout-s: 60", "timeout-s: 600"))
    t0 = time.monotonic()
    code, _, err = run("bench", "ab", "--protocol", proto_path, root=evroot)
    assert code == 1 and err.count("\n") == 1
    assert "run base-r1 failed: server exited with status 7 during scenario burst" in err
    assert "dying after 2 requests" in err
    assert time.monotonic() - t0 < 60  # not left waiting for the client's timeout
    reason = (evroot / "ab" / "excluded" / "base-r1.1" / "reason.txt").read_text()
    assert "server exited with status 7 during scenario burst" in reason


def test_client_failure_reason_quotes_the_client(run, evroot):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    text = proto_path.read_text()
    start = text.index("client:\n  command: [")
    end = text.index("]", start)
    failing = f'client:\n  command: ["{sys.executable}", "-c", "import sys; print(\'ValueError: bad --model\'); sys.exit(1)"'
    proto_path.write_text(text[:start] + failing + text[end:])
    code, _, err = run("bench", "ab", "--protocol", proto_path, root=evroot)
    assert code == 1
    assert "client for scenario burst exited with status 1: ValueError: bad --model" in err
    reason = (evroot / "ab" / "excluded" / "base-r1.1" / "reason.txt").read_text()
    assert "ValueError: bad --model" in reason and "burst.client.log" in reason


def _sleeper(env: dict | None = None, argv_tail: tuple[str, ...] = ()) -> subprocess.Popen:
    """An unrelated process leading its own session, as bench ab's servers do; returned once
    the kernel shows its environment (Popen returns at the exec, a moment before that)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv_tail],
                            start_new_session=True, env=env)
    for _ in range(500):
        if Path(f"/proc/{proc.pid}/environ").read_bytes() and b"time.sleep" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            break
        time.sleep(0.01)
    return proc


def _proc_stat(pid: int) -> tuple[int, int]:
    """(process group, start time) from /proc/<pid>/stat, as anyone can read them."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[2]), int(fields[19])


def _record(folder: Path, proc: subprocess.Popen, nonce: str, started: int | None = None) -> None:
    """A server.pid as bench ab writes it (orchestrate.pid_record), for any process."""
    pgid, start = _proc_stat(proc.pid)
    rec = {"pid": proc.pid, "pgid": pgid, "started": start if started is None else started, "nonce": nonce,
           "argv": ["vllm", "serve"], "run": "base-r1"}
    (folder / "server.pid").write_text(json.dumps(rec))


def test_forged_pid_record_naming_an_unrelated_process_is_reported_and_survives(evroot):
    """Issue 16, item 3: pid, process group and start time all match (copied from /proc),
    but the process was never given the run's nonce: it is not signalled."""
    folder = evroot / "ab"
    folder.mkdir()
    victim = _sleeper()
    warnings: list[str] = []
    try:
        _record(folder, victim, secrets.token_hex(16))
        assert orchestrate.stop_leftover_server(folder, lambda m: None, timeout=5, warn=warnings.append) is None
        assert victim.poll() is None  # alive: not ours
        assert len(warnings) == 1 and "does not carry the run's nonce" in warnings[0]
        assert str(folder / "server.pid") in warnings[0] and "nothing signalled" in warnings[0]
        # an old-style record (pid, argv, start time) carries no verifiable identity either
        (folder / "server.pid").write_text(json.dumps({"pid": victim.pid, "argv": ["vllm", "serve"],
                                                       "started": _proc_stat(victim.pid)[1]}))
        assert orchestrate.stop_leftover_server(folder, lambda m: None, timeout=5, warn=warnings.append) is None
        assert victim.poll() is None and "no verifiable identity" in warnings[1]
    finally:
        victim.kill()
        victim.wait()


def test_forged_pid_record_via_cli_is_one_warning_and_the_process_survives(run, evroot):
    proto_path = fake_protocol(evroot / "ab", starts=2)
    victim = _sleeper()
    try:
        _record(evroot / "ab", victim, secrets.token_hex(16))
        code, out, err = run("bench", "ab", "--protocol", proto_path, "--max-runs", "1", "--json", root=evroot)
        assert code == 0, err
        assert victim.poll() is None
        assert err.count("\n") == 1 and "does not carry the run's nonce" in err
        assert json.loads(out)["ran"] == ["base-r1"]
    finally:
        victim.kill()
        victim.wait()


def test_leftover_server_is_identified_by_start_time_group_and_nonce(evroot):
    """The real leftover is stopped even though its command line is no longer the argv
    (vLLM's processes rename themselves): the exact nonce entry in its environment is
    what proves it ours. The same pid with another start time is not."""
    folder = evroot / "ab"
    folder.mkdir()
    nonce = secrets.token_hex(16)
    ours = _sleeper({**os.environ, "OVERLAY_SERVER_NONCE": nonce})
    warnings: list[str] = []
    try:
        _record(folder, ours, nonce)
        assert orchestrate.stop_leftover_server(folder, lambda m: None, timeout=5, warn=warnings.append) == ours.pid
        assert ours.wait(timeout=5) is not None and not (folder / "server.pid").exists()
        assert warnings == []
        other = _sleeper({**os.environ, "OVERLAY_SERVER_NONCE": nonce})
        try:
            _record(folder, other, nonce, started=1)  # the pid reused by a later process
            assert orchestrate.stop_leftover_server(folder, lambda m: None, timeout=5, warn=warnings.append) is None
            assert other.poll() is None and "started at another time" in warnings[0]
        finally:
            other.kill()
            other.wait()
    finally:
        if ours.poll() is None:
            ours.kill()
            ours.wait()


def test_nonce_is_an_exact_environment_entry_never_a_substring(evroot):
    """Issue 26, case 6: a forged server.pid names a foreign process whose command line
    holds a 40-hex id (any 32 of its digits pass as "the nonce"), or whose environment
    holds a value that merely contains the nonce: none is signalled, each is one warning."""
    folder = evroot / "ab"
    folder.mkdir()
    commit = secrets.token_hex(20)  # a git id on a foreign command line
    nonce = commit[:32]
    foreign = [
        _sleeper(argv_tail=(commit,)),
        _sleeper(argv_tail=(f"--tag={nonce}",)),
        _sleeper({**os.environ, "OVERLAY_SERVER_NONCE": "x" + nonce}),
        _sleeper({**os.environ, "OVERLAY_SERVER_NONCE": nonce + "0"}),
        _sleeper({**os.environ, "SOME_OTHER_VAR": nonce}),
        _sleeper({**os.environ, "X_OVERLAY_SERVER_NONCE": nonce}),
    ]
    try:
        for i, victim in enumerate(foreign):
            warnings: list[str] = []
            _record(folder, victim, nonce)
            assert orchestrate.stop_leftover_server(folder, lambda m: None, timeout=5, warn=warnings.append) is None, i
            assert victim.poll() is None, i  # alive: not ours
            assert len(warnings) == 1 and "does not carry the run's nonce" in warnings[0], (i, warnings)
    finally:
        for p in foreign:
            p.kill()
            p.wait()


RENAMES_ITSELF = """
import os, time
# What setproctitle does to a process that renames itself (vLLM's do): the title is
# written over the memory /proc/<pid>/environ shows, unless SPT_NOENV is set.
if not os.environ.get("SPT_NOENV"):
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write(b"\\0" * (end - start))
open(os.environ["READY_FILE"], "w").close()
time.sleep(60)
"""


def test_a_server_that_renames_itself_keeps_the_nonce_it_is_known_by(evroot):
    """The environment bench ab starts a server with keeps its nonce readable in
    /proc/<pid>/environ even when the server sets its process title, so the real
    leftover is still found (and stopped) by it."""
    folder = evroot / "ab"
    folder.mkdir()
    nonce = orchestrate.new_nonce()
    ready = evroot / "ready"
    env = orchestrate.server_process_env({**os.environ, "READY_FILE": str(ready)}, nonce)
    proc = subprocess.Popen([sys.executable, "-c", RENAMES_ITSELF], start_new_session=True, env=env)
    try:
        for _ in range(200):
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), "the stand-in server did not start"
        _record(folder, proc, nonce)
        warnings: list[str] = []
        assert orchestrate.stop_leftover_server(folder, lambda m: None, timeout=5, warn=warnings.append) == proc.pid
        assert proc.wait(timeout=5) is not None and warnings == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@given(entries=st.lists(st.binary(max_size=80), max_size=8), nonce=st.text("0123456789abcdef", min_size=32, max_size=32))
def test_carries_nonce_only_on_the_exact_entry(entries, nonce):
    """The pure check: true exactly when one environment entry is `OVERLAY_SERVER_NONCE=<nonce>`."""
    exact = f"{orchestrate.SERVER_NONCE_VAR}={nonce}".encode()
    assert orchestrate.carries_nonce(entries, nonce) == (exact in entries)
    near = [exact + b"0", b"X" + exact, exact[:-1], nonce.encode(), b"OTHER=" + nonce.encode()]
    assert not orchestrate.carries_nonce([e for e in entries if e != exact] + near, nonce)
    assert orchestrate.carries_nonce(entries + [exact], nonce)


def test_record_identity_needs_every_part():
    good = {"pid": 1234, "pgid": 1234, "started": 99, "nonce": "ab" * 16}
    assert orchestrate.record_identity(good) == (1234, 1234, 99, "ab" * 16)
    for broken in ({**good, "pgid": 1}, {**good, "nonce": "x"}, {k: v for k, v in good.items() if k != "started"},
                   [], {**good, "pid": "me"}):
        assert isinstance(orchestrate.record_identity(broken), str)


# ---- item 11: progress, quiet with --json


def test_eta_line():
    assert orchestrate.eta_line(1, 4, 90) == "1/4 new runs done in 1m30s, about 4m30s left"
    assert orchestrate.eta_line(4, 4, 300) == "4/4 new runs done in 5m00s"


def test_progress_is_quiet_with_json_even_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    orchestrate.terminal_progress(True)("hidden")
    orchestrate.terminal_progress(False)("shown")
    err = capsys.readouterr().err
    assert "hidden" not in err and "shown" in err


def test_analyze_reports_progress_per_result_file(tmp_path):
    from evhelpers import write_protocol
    from overlay.evidence import analyze, synth
    from overlay.evidence.protocol import load_protocol as load

    claim = tmp_path / "claim"
    write_protocol(claim, starts=2)
    proto = load(claim)
    synth.write_dataset(proto, claim, effect_pct={"fast": -20.0}, between_sd=0.02)
    seen: list[str] = []
    analyze.analyze(proto, claim, (), progress=seen.append)
    reads = [m for m in seen if m.startswith("reading results ")]
    assert reads[0].startswith("reading results 1/4: ") and reads[-1].startswith("reading results 4/4: ")
    assert any(m.startswith("intervals for 1 treatment x scenario") for m in seen)


def test_throttled_progress_drops_lines_within_the_interval():
    seen: list[str] = []
    p = orchestrate.throttled(seen.append, every_s=3600)
    for i in range(5):
        p(f"line {i}")
    assert seen == ["line 0"]


def test_run_json_paths_are_written_relative_to_results_and_root(tmp_path):
    root = tmp_path / "proj"
    results = root / "evidence" / "claim"
    meta = {"argv": ["vllm", "bench", "--result-dir", f"{results}/runs/a-r1.partial", "--model", f"{root}/m"],
            "dirs": {"plugin": str(results / "trees" / "a")}, "exact": str(results), "n": 3,
            "other": f"{tmp_path}/elsewhere"}
    out = orchestrate.portable_paths(meta, {"<results>": results, "<root>": root})
    assert out == {"argv": ["vllm", "bench", "--result-dir", "<results>/runs/a-r1.partial", "--model", "<root>/m"],
                   "dirs": {"plugin": "<results>/trees/a"}, "exact": "<results>", "n": 3,
                   "other": f"{tmp_path}/elsewhere"}
