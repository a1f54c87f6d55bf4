"""`overlay bench ab`: run a protocol for real, one independent server start at a time.

Before the first run, every variant's (pin, series subset) is composed once
(evidence.trees). For each planned run, in the protocol's balanced order: start the
variant's server from its composed trees (pinned with taskset to the protocol's
server CPUs, with the variant's environment, in its own process group, recorded in
server.pid so a later invocation can stop it if this one is killed hard),
wait until it answers, run every scenario with the benchmark client (pinned to the
client CPUs, per-request detail saved), stop the server, next.

Resumable without double counting: a run is written under runs/<id>.partial and
renamed to runs/<id> only when every scenario finished, so a complete run is never
rerun and an interrupted one is never counted. An interrupted or failed run is
moved to excluded/<id>.<n>/ with reason.txt and rerun from scratch (a fresh server
start) on the next invocation; analysis refuses until the exclusion is recorded in
deviations.yaml, as the seed recorded its excluded partial run.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overlay.errors import OverlayError
from overlay.evidence.plan import PlannedRun, plan
from overlay.evidence.protocol import DIGEST_FILE, PLACEHOLDER, Protocol, Scenario, Variant, protocol_digest
from overlay.evidence import trees as tree_mod
from overlay.evidence.trees import VariantTrees
from overlay.model import load_series

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchSummary:
    planned: int
    already_complete: tuple[str, ...]
    ran: tuple[str, ...]
    excluded: tuple[str, ...]  # excluded/<name> entries created by this invocation
    results: Path


# ----------------------------------------------------------------------------- commands (pure)


def _fmt(arg: str, values: dict[str, str], variant: str) -> str:
    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            if key.startswith("composed:"):
                raise OverlayError(f"variant '{variant}' has no composed tree for {{{key}}}",
                                   hint="give the variant a pin (and a series) whose pin set has that target")
            raise OverlayError(f"unknown placeholder {{{key}}} in '{arg}'",
                               hint="known: " + ", ".join("{" + k + "}" for k in sorted(values)))
        return values[key]

    return PLACEHOLDER.sub(sub, arg)


def placeholders(protocol: Protocol, variant: Variant, tree: VariantTrees | None) -> dict[str, str]:
    values = {"model": protocol.model, "host": protocol.host, "port": str(protocol.port),
              "variant": variant.name, "pin": variant.pin or ""}
    if tree is not None:
        values["pin"] = tree.pin
        for target, path in tree.dirs:
            values[f"composed:{target}"] = str(path)
    return values


def taskset(cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus] if cpus else []


def server_argv(protocol: Protocol, variant: Variant, tree: VariantTrees | None = None) -> list[str]:
    """The server command of a variant; {composed:<target>} is the variant's own composed tree."""
    values = placeholders(protocol, variant, tree)
    cmd = [_fmt(a, values, variant.name) for a in protocol.server_command + variant.server_args]
    return taskset(protocol.server_cpus) + cmd


def client_argv(protocol: Protocol, scenario: Scenario, run: PlannedRun, out_dir: Path) -> list[str]:
    """`vllm bench serve` arguments for one scenario (per-request detail saved)."""
    args = list(protocol.client_command) + [
        "--backend", "openai", "--host", protocol.host, "--port", str(protocol.port),
        "--model", protocol.model, "--dataset-name", scenario.dataset,
        "--random-input-len", str(scenario.input_len), "--random-output-len", str(scenario.output_len),
        "--ignore-eos", "--num-prompts", str(scenario.num_prompts),
        "--request-rate", "inf" if math.isinf(scenario.request_rate) else f"{scenario.request_rate:g}",
        "--num-warmups", str(scenario.warmups), "--seed", str(protocol.seed),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
        "--save-result", "--save-detailed", "--result-dir", str(out_dir),
        "--result-filename", f"{scenario.name}.json",
        "--metadata", f"overlay_run={run.run_id}", f"overlay_variant={run.variant}",
        f"overlay_scenario={scenario.name}",
    ]
    if scenario.max_concurrency is not None:
        args[len(protocol.client_command):len(protocol.client_command)] = [
            "--max-concurrency", str(scenario.max_concurrency)]
    return taskset(protocol.client_cpus) + args + list(scenario.client_args)


def server_env(protocol: Protocol, variant: Variant, root: Path, run: PlannedRun,
               base: dict[str, str] | None = None, tree: VariantTrees | None = None) -> dict[str, str]:
    """The variant's environment; its composed trees come first on PYTHONPATH, so the
    server imports the variant's source (core and plugin), not whatever is installed."""
    env = dict(os.environ if base is None else base)
    env.update(dict(variant.env))
    env["OVERLAY_VARIANT"] = variant.name
    env["OVERLAY_RUN"] = run.run_id
    if tree is not None:
        dirs = [str(path) for _, path in tree.dirs]
        for target, path in tree.dirs:
            env[f"OVERLAY_COMPOSED_{target.upper().replace('-', '_')}"] = str(path)
        env["PYTHONPATH"] = os.pathsep.join(dirs + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if variant.venv:
        venv = (root / variant.venv).resolve()
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
    return env


# ----------------------------------------------------------------------------- side effects


class _Interrupts:
    """SIGINT/SIGTERM only set a flag; the loop acts on it at safe points, so an
    interrupt can never land between starting a server and remembering its pid."""

    def __init__(self) -> None:
        self.requested = False
        self._old: dict[int, object] = {}

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]

    def _handle(self, _sig: int, _frame: object) -> None:
        self.requested = True

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt


_INTERRUPTS = _Interrupts()


def _answering(protocol: Protocol, timeout: float = 1.0) -> bool:
    url = f"http://{protocol.host}:{protocol.port}{protocol.ready_path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (local URL)
            return 200 <= resp.status < 300
    except (urllib.error.URLError, ConnectionError, OSError, ValueError):
        return False


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it forked
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _exclude(results: Path, partial: Path, run_id: str, reason: str) -> str:
    base = results / "excluded"
    base.mkdir(parents=True, exist_ok=True)
    n = 1
    while (base / f"{run_id}.{n}").exists():
        n += 1
    dest = base / f"{run_id}.{n}"
    if partial.exists():
        partial.rename(dest)
    else:
        dest.mkdir()
    (dest / "reason.txt").write_text(reason + "\n", encoding="utf-8")
    return dest.name


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _check_tools(protocol: Protocol) -> None:
    if (protocol.server_cpus or protocol.client_cpus) and shutil.which("taskset") is None:
        raise OverlayError("taskset is not installed but the protocol pins CPUs",
                           hint="install util-linux (it provides taskset)")
    for cmd in (protocol.server_command[0], protocol.client_command[0]):
        if shutil.which(cmd) is None and not Path(cmd).is_file():
            raise OverlayError(f"'{cmd}' is not on PATH", path=str(protocol.path),
                               hint="install the client/server or give the full path in the protocol")


def check_series(protocol: Protocol, root: Path) -> None:
    """A variant may only name patches the series carries: a protocol cannot run
    a source change that has no patch yet."""
    named = [(v, p) for v in protocol.variants if not isinstance(v.series, str) for p in v.series]
    if not named:
        return
    known = {e.patch for e in load_series(root).entries}
    for v, patch in named:
        if patch not in known:
            raise OverlayError(f"variant '{v.name}' names patch {patch}, which series.yaml does not list",
                               path=str(protocol.path), line=v.line,
                               hint="add the patch to patches/ and series.yaml, or drop it from the variant")


def check_preregistered(protocol: Protocol, today: _dt.date | None = None) -> None:
    """A protocol dated after today cannot have been written before this run."""
    today = today or _dt.datetime.now(_dt.timezone.utc).date()
    if protocol.preregistered > today:
        raise OverlayError(f"the protocol is dated {protocol.preregistered.isoformat()}, after today "
                           f"({today.isoformat()})", path=str(protocol.path),
                           hint="preregistered is the date the protocol was written, before the first run")


def _complete(run_dir: Path, run: PlannedRun) -> bool:
    meta = run_dir / "run.json"
    if not meta.is_file():
        return False
    try:
        status = json.loads(meta.read_text(encoding="utf-8")).get("status")
    except json.JSONDecodeError:
        return False
    return status == "complete" and all((run_dir / f"{s}.json").is_file() for s in run.scenarios)


# ----------------------------------------------------------------------------- the server pid file

PID_FILE = "server.pid"


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a] or None


def _ours(recorded: list[str], running: list[str]) -> bool:
    """taskset execs the server, so the live command line is the argv without it."""
    if running == recorded:
        return True
    return recorded[:2] == ["taskset", "-c"] and running == recorded[3:]


def _write_pid(results: Path, proc: subprocess.Popen, argv: list[str], run_id: str) -> None:
    tmp = results / (PID_FILE + ".tmp")
    tmp.write_text(json.dumps({"pid": proc.pid, "argv": argv, "run": run_id}) + "\n", encoding="utf-8")
    tmp.replace(results / PID_FILE)


def _clear_pid(results: Path) -> None:
    try:
        (results / PID_FILE).unlink()
    except FileNotFoundError:
        pass


def stop_leftover_server(results: Path, progress: Progress, timeout: float = 10.0) -> int | None:
    """Stop the server a killed `bench ab` left running (recorded in server.pid); its pid, if any.

    Only a process whose command line is the recorded one is ours; a reused pid is
    left alone. A server we cannot stop is refused, naming its pid."""
    path = results / PID_FILE
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        pid, argv = int(rec["pid"]), [str(a) for a in rec["argv"]]
    except (ValueError, KeyError, TypeError):
        raise OverlayError("not a server pid record", path=str(path),
                           hint="check that no benchmark server is still running, then delete the file") from None
    running = _cmdline(pid)
    if running is None or not _ours(argv, running):
        _clear_pid(results)  # gone, or the pid now belongs to someone else
        return None
    progress(f"stopping the server a previous run left behind (pid {pid}, run {rec.get('run')})")
    try:
        os.killpg(pid, signal.SIGTERM)  # it leads its own process group (start_new_session)
        deadline = time.monotonic() + timeout
        while _cmdline(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if _cmdline(pid) is not None:
            os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while _cmdline(pid) is not None and time.monotonic() < deadline:
                time.sleep(0.05)
    except ProcessLookupError:
        pass
    except PermissionError:
        raise OverlayError(f"a server left by an earlier run is still running (pid {pid}) and cannot be "
                           "stopped", path=str(path), hint=f"stop it (kill {pid}) and run again") from None
    if _cmdline(pid) is not None and _ours(argv, _cmdline(pid) or []):
        raise OverlayError(f"a server left by an earlier run is still running (pid {pid})", path=str(path),
                           hint=f"stop it (kill -9 {pid}) and run again")
    _clear_pid(results)
    return pid


def bench_ab(protocol: Protocol, root: Path, results: Path, progress: Progress,
             *, only: int | None = None, mirror: Path | None = None) -> BenchSummary:
    """Run (or resume) the protocol; `only` stops after that many new runs."""
    _check_tools(protocol)
    check_series(protocol, root)
    check_preregistered(protocol)
    runs_dir = results / "runs"
    digest_file = results / DIGEST_FILE
    digest = protocol_digest(protocol)
    if digest_file.is_file() and digest_file.read_text().strip() != digest:
        raise OverlayError("the protocol changed after runs were recorded under these results",
                           path=str(protocol.path),
                           hint="a preregistered protocol is frozen: restore it, or start a new results folder")
    runs_dir.mkdir(parents=True, exist_ok=True)
    stop_leftover_server(results, progress, protocol.stop_timeout_s)
    # Checked before any run folder exists, so a retry against a busy port sets nothing aside.
    if _answering(protocol):
        raise OverlayError(f"port {protocol.port} is already serving: another server answers on "
                           f"{protocol.host}:{protocol.port}; refusing to benchmark it",
                           path=str(protocol.path), hint="stop that server first")
    excluded: list[str] = []
    recorded = any(runs_dir.iterdir()) or (results / "excluded").is_dir()
    trees = tree_mod.prepare(protocol, root, results, mirror, progress, runs_recorded=recorded)
    digest_file.write_text(digest + "\n", encoding="utf-8")
    # A run a previous invocation left half-done (killed hard) is set aside first.
    for leftover in sorted(runs_dir.glob("*.partial")):
        rid = leftover.name[: -len(".partial")]
        found = sorted(p.name for p in leftover.glob("*.json") if p.name != "run.json")
        excluded.append(_exclude(results, leftover, rid, "interrupted: the run did not complete "
                                 f"(scenario results present: {', '.join(found) or 'none'}); "
                                 "rerun from a fresh server start"))
    planned = plan(protocol)
    done, ran = [], []
    with _INTERRUPTS:
        _INTERRUPTS.requested = False
        _run_all(protocol, root, results, planned, progress, only, done, ran, excluded, trees)
    return BenchSummary(len(planned), tuple(done), tuple(ran), tuple(excluded), results)


def _run_all(protocol: Protocol, root: Path, results: Path, planned: tuple[PlannedRun, ...],
             progress: Progress, only: int | None, done: list[str], ran: list[str],
             excluded: list[str], trees: dict[str, VariantTrees]) -> None:
    runs_dir = results / "runs"
    for run in planned:
        _INTERRUPTS.check()
        final = runs_dir / run.run_id
        if _complete(final, run):
            done.append(run.run_id)
            continue
        if final.exists():  # not complete: not counted, set aside
            excluded.append(_exclude(results, final, run.run_id, "incomplete run folder found"))
        if only is not None and len(ran) >= only:
            break
        progress(f"[{run.position}/{len(planned)}] {run.run_id}: starting server")
        _one_run(protocol, root, results, run, progress, excluded, trees.get(run.variant))
        ran.append(run.run_id)


def _one_run(protocol: Protocol, root: Path, results: Path, run: PlannedRun, progress: Progress,
             excluded: list[str], tree: VariantTrees | None) -> None:
    variant = protocol.variant(run.variant)
    partial = results / "runs" / f"{run.run_id}.partial"
    meta = {"run": run.run_id, "variant": run.variant, "start": run.start, "position": run.position,
            "status": "running", "started": _now(), "server_cpus": protocol.server_cpus,
            "client_cpus": protocol.client_cpus, "server_argv": server_argv(protocol, variant, tree),
            "env": dict(variant.env), "pin": tree.pin if tree else variant.pin,
            "series": variant.series if isinstance(variant.series, str) else list(variant.series),
            "composed_trees": dict(tree.tree_ids) if tree else {},
            "composed_dirs": {t: str(p) for t, p in tree.dirs} if tree else {}, "scenarios": {}}

    def save() -> None:
        (partial / "run.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    proc: subprocess.Popen | None = None
    log = None
    partial.mkdir(parents=True)
    # From here on the partial folder exists: whatever happens, it is either renamed
    # to a complete run or set aside under excluded/ with the reason.
    try:
        save()
        log = open(partial / "server.log", "wb")
        # Its own session (process group): stopping it stops the workers it forked,
        # and server.pid lets the next invocation stop it if this one is killed hard.
        proc = subprocess.Popen(meta["server_argv"], env=server_env(protocol, variant, root, run, tree=tree),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=root)
        _write_pid(results, proc, meta["server_argv"], run.run_id)
        meta["server_pid"] = proc.pid
        save()
        _INTERRUPTS.check()
        failure = _serve_scenarios(protocol, run, proc, partial, meta, save, progress)
    except KeyboardInterrupt:
        if proc is not None:
            _stop(proc, protocol.stop_timeout_s)
            _clear_pid(results)
        if log is not None:
            log.close()
        excluded.append(_exclude(results, partial, run.run_id,
                                 "interrupted by the operator; rerun from a fresh server start"))
        raise
    _stop(proc, protocol.stop_timeout_s)
    _clear_pid(results)
    log.close()
    if failure is not None:
        name = _exclude(results, partial, run.run_id, failure)
        excluded.append(name)
        raise OverlayError(f"run {run.run_id} failed: {failure}", path=f"excluded/{name}",
                           hint="kept under excluded/ with the reason; fix the cause and run "
                                "`overlay bench ab` again to resume", exit_code=1)
    meta["status"] = "complete"
    meta["finished"] = _now()
    save()
    partial.rename(results / "runs" / run.run_id)
    progress(f"[{run.position}] {run.run_id}: complete")


def _run_client(argv: list[str], log, timeout_s: float) -> int | None:
    """The client's exit status (None on timeout); stops it on an interrupt."""
    client = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                return client.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
            _INTERRUPTS.check()
            if time.monotonic() > deadline:
                _stop(client, 5.0)
                return None
    except KeyboardInterrupt:
        _stop(client, 5.0)
        raise


def _serve_scenarios(protocol: Protocol, run: PlannedRun, proc: subprocess.Popen, partial: Path,
                     meta: dict, save: Callable[[], None], progress: Progress) -> str | None:
    """Wait for the server, run every scenario; the failure reason, or None."""
    deadline = time.monotonic() + protocol.ready_timeout_s
    while not _answering(protocol):
        _INTERRUPTS.check()
        if proc.poll() is not None:
            return f"server exited with status {proc.returncode} before answering (see server.log)"
        if time.monotonic() > deadline:
            return f"server did not answer {protocol.ready_path} within {protocol.ready_timeout_s:g}s"
        time.sleep(0.2)
    meta["ready"] = _now()
    for name in run.scenarios:
        progress(f"[{run.position}] {run.run_id}: scenario {name}")
        argv = client_argv(protocol, protocol.scenario(name), run, partial)
        with open(partial / f"{name}.client.log", "wb") as clog:
            rc = _run_client(argv, clog, protocol.client_timeout_s)
        meta["scenarios"][name] = {"argv": argv, "returncode": rc, "finished": _now()}
        save()
        if rc != 0 or not (partial / f"{name}.json").is_file():
            return (f"client for scenario {name} " + ("timed out" if rc is None else f"exited with status {rc}")
                    + f" (see {name}.client.log)")
        if proc.poll() is not None:
            return f"server exited with status {proc.returncode} during scenario {name}"
    return None


def terminal_progress(json_mode: bool) -> Progress:
    """Progress lines on stderr only for a terminal, never with --json."""
    if json_mode or not sys.stderr.isatty():
        return lambda _msg: None
    return lambda msg: print(msg, file=sys.stderr, flush=True)
