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
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overlay import reporting
from overlay.errors import OverlayError
from overlay.trees.ownership import proc_stat
from overlay.evidence.plan import PlannedRun, plan
from overlay.evidence.protocol import DIGEST_FILE, PLACEHOLDER, Protocol, Scenario, Variant, protocol_digest
from overlay.evidence import bounded
from overlay.evidence.engine import engine_record
from overlay.evidence import trees as tree_mod
from overlay.evidence.trees import VariantTrees
from overlay.series.model import load_series

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


def _processes() -> dict[int, tuple[int, int, str, int]]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None:
                out[int(d.name)] = st
    return out


def process_tree(pid: int) -> dict[int, int]:
    """pid -> start time of the server's process group and of every descendant (a worker
    that called setsid has left the group but not the tree); live ones only."""
    procs = _processes()
    tree = {p: st[3] for p, st in procs.items() if st[1] == pid and st[2] != "Z"}
    if pid in procs:
        tree[pid] = procs[pid][3]
    frontier = set(tree)
    while frontier:
        children = {p for p, st in procs.items() if st[0] in frontier and p not in tree and st[2] != "Z"}
        tree.update({p: procs[p][3] for p in children})
        frontier = children
    return tree


def tree_affinity(pid: int) -> list[int]:
    """The CPUs the server's processes may run on (the union over its tree), as the kernel
    has them once it answers: evidence that the pinning held, recorded in run.json."""
    cpus: set[int] = set()
    for p in process_tree(pid):
        try:
            cpus.update(os.sched_getaffinity(p))
        except OSError:
            pass
    return sorted(cpus)


def _signal_tree(tree: dict[int, int], sig: int) -> None:
    for p, started in tree.items():
        if _alive(p, started):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass


def stop_tree(pid: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Stop the server and everything it started: SIGTERM to its group (vLLM shuts its
    engine and workers down on it), then SIGKILL whatever of the tree is left after
    `timeout` seconds. Returns once none of them runs: a worker that outlives the API
    server keeps the port, the CPU and memory that the next start needs."""
    tree = process_tree(pid)
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _signal_tree({p: t for p, t in tree.items() if p != pid}, signal.SIGTERM)  # those that left the group

    def left() -> dict[int, int]:
        if proc is not None:
            proc.poll()  # reap the leader, so it does not linger as a zombie
        return {p: t for p, t in tree.items() if _alive(p, t)}

    deadline = time.monotonic() + timeout
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    if left():
        tree.update({p: t for p, t in process_tree(pid).items() if p not in tree})
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _signal_tree(left(), signal.SIGKILL)
        deadline = time.monotonic() + 5
        while left() and time.monotonic() < deadline:
            time.sleep(0.05)
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is not None and not process_tree(proc.pid):
        return
    stop_tree(proc.pid, timeout, proc)


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


def cpu_set(cpus: str) -> set[int]:
    """The CPUs a `taskset -c` list names ("0-3,6" -> {0, 1, 2, 3, 6}); pure."""
    out: set[int] = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _fmt_cpus(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def check_cpus(protocol: Protocol, available: set[int] | None = None) -> None:
    """Every CPU the protocol pins to must be one this process may run on, checked
    before anything starts (taskset would otherwise fail at the first server start)."""
    have = set(os.sched_getaffinity(0)) if available is None else available
    for role, cpus in (("server", protocol.server_cpus), ("client", protocol.client_cpus)):
        if not cpus:
            continue
        missing = cpu_set(cpus) - have
        if missing:
            raise OverlayError(f"cpus.{role} '{cpus}' names CPU(s) {_fmt_cpus(missing)}, which this machine "
                               f"does not offer (available: {_fmt_cpus(have)})", path=str(protocol.path),
                               hint="pin within the available CPUs (a preregistered protocol is written "
                                    "for its machine: start a new claim folder for another one)")


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
        data = bounded.load_json(meta)
    except OverlayError:
        return False  # not complete: set aside and rerun
    return (isinstance(data, dict) and data.get("status") == "complete"
            and all((run_dir / f"{s}.json").is_file() for s in run.scenarios))


# ----------------------------------------------------------------------------- the server pid file

PID_FILE = "server.pid"
SERVER_NONCE_VAR = "OVERLAY_SERVER_NONCE"  # a secret per server start, in its environment


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a] or None


_stat = proc_stat  # (ppid, process group, state, start time in clock ticks), or None


def _alive(pid: int, started: int | None = None) -> bool:
    st = _stat(pid)
    return st is not None and st[2] != "Z" and (started is None or st[3] == started)


def _environ(pid: int) -> list[bytes] | None:
    """The environment a process started with (None when unreadable: not ours to judge)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None


def new_nonce() -> str:
    return secrets.token_hex(16)


def server_process_env(env: dict[str, str], nonce: str) -> dict[str, str]:
    """The environment a server starts with: `env` and the nonce that later proves it ours;
    pure. SPT_NOENV keeps setproctitle (vLLM's processes rename themselves) from writing
    the title over the memory /proc/<pid>/environ shows, where the nonce is read back."""
    return {**env, SERVER_NONCE_VAR: nonce, "SPT_NOENV": "1"}


def pid_record(pid: int, stat: tuple[int, int, str, int] | None, nonce: str, argv: list[str],
               run_id: str) -> dict:
    """What server.pid holds: enough to recognise this very process later and nothing else; pure."""
    return {"pid": pid, "pgid": stat[1] if stat else None, "started": stat[3] if stat else None,
            "nonce": nonce, "argv": argv, "run": run_id}


def record_identity(rec: object) -> tuple[int, int, int, str] | str:
    """(pid, process group, start time, nonce) from a server.pid record, or why it has none; pure."""
    if not isinstance(rec, dict):
        return "not a server pid record (expected a JSON object)"
    try:
        pid, pgid, started = (int(rec[k]) for k in ("pid", "pgid", "started"))
        nonce = str(rec["nonce"])
    except (KeyError, TypeError, ValueError):
        return "no verifiable identity (pid, pgid, started and nonce are all needed)"
    if pid < 2 or pgid != pid or not re.fullmatch(r"[0-9a-f]{32}", nonce):
        return "no verifiable identity (the server leads its own process group; the nonce is 32 hex digits)"
    return pid, pgid, started, nonce


def carries_nonce(environ: list[bytes], nonce: str) -> bool:
    """Whether one entry of a process's environment is exactly `OVERLAY_SERVER_NONCE=<nonce>`;
    pure. Identity is that entry, never a substring: a 40-hex id on a foreign command line
    or a value that merely contains the nonce holds any 32 of its digits."""
    return f"{SERVER_NONCE_VAR}={nonce}".encode() in environ


def why_not_ours(pid: int, pgid: int, started: int, nonce: str) -> str | None:
    """None when the live process is the server a `bench ab` started with this nonce:
    same start time (pid reuse), leader of the recorded process group (start_new_session),
    and the exact nonce entry in the environment it was started with (a forged record can
    copy a pid and a start time, not a secret only the real server was given; the command
    line does not count: anyone's argv can hold a string of hex digits)."""
    st = _stat(pid)
    if st is None or st[2] == "Z":
        return f"no process {pid} runs (a stale record)"
    if st[3] != started:
        return f"process {pid} started at another time than the recorded server (its pid was reused)"
    if st[1] != pgid:
        return f"process {pid} is not the leader of the recorded process group {pgid}"
    env = _environ(pid)
    if env is None or not carries_nonce(env, nonce):
        return f"process {pid} does not carry the run's nonce ({SERVER_NONCE_VAR}), so this tool did not start it"
    return None


def _write_pid(results: Path, proc: subprocess.Popen, argv: list[str], run_id: str, nonce: str) -> None:
    rec = pid_record(proc.pid, _stat(proc.pid), nonce, argv, run_id)
    results.mkdir(parents=True, exist_ok=True)
    tmp = results / (PID_FILE + ".tmp")
    tmp.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    tmp.replace(results / PID_FILE)


def _clear_pid(results: Path) -> None:
    try:
        (results / PID_FILE).unlink()
    except FileNotFoundError:
        pass


def _warn(msg: str) -> None:
    print(f"overlay: warning: {msg}", file=sys.stderr, flush=True)


def stop_leftover_server(results: Path, progress: Progress, timeout: float = 10.0,
                         warn: Progress = _warn) -> int | None:
    """Stop the server a killed `bench ab` left running (recorded in server.pid); its pid, if any.

    Only a process matching the whole recorded identity (why_not_ours) is signalled, with
    its process group and descendants; a forged, stale or unverifiable record is reported
    in one line and left alone (it is replaced when the next server starts). A server
    we cannot stop is refused, naming its pid."""
    path = results / PID_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        ident = record_identity(bounded.load_json(path))
    except OverlayError as exc:
        ident = exc.message
    why = ident if isinstance(ident, str) else why_not_ours(*ident)
    if why is not None:
        warn(f"{path}: {why}; nothing signalled, record ignored")
        return None
    pid, _, started, _ = ident  # type: ignore[misc]
    progress(f"stopping the server a previous run left behind (pid {pid})")
    try:
        stop_tree(pid, timeout)  # it leads its own process group (start_new_session)
    except PermissionError:
        raise OverlayError(f"a server left by an earlier run is still running (pid {pid}) and cannot be "
                           "stopped", path=str(path), hint=f"stop it (kill {pid}) and run again") from None
    if _alive(pid, started):
        raise OverlayError(f"a server left by an earlier run is still running (pid {pid})", path=str(path),
                           hint=f"stop it (kill -9 {pid}) and run again")
    _clear_pid(results)
    return pid


def bench_ab(protocol: Protocol, root: Path, results: Path, progress: Progress,
             *, only: int | None = None, mirror: Path | None = None) -> BenchSummary:
    """Run (or resume) the protocol; `only` stops after that many new runs."""
    _check_tools(protocol)
    check_cpus(protocol)
    check_series(protocol, root)
    check_preregistered(protocol)
    runs_dir = results / "runs"
    digest_file = results / DIGEST_FILE
    digest = protocol_digest(protocol)
    if (digest_file.exists() or digest_file.is_symlink()) and bounded.read_text(digest_file).strip() != digest:
        raise OverlayError("the protocol changed after runs were recorded under these results",
                           path=str(protocol.path),
                           hint="a preregistered protocol is frozen: restore it, or start a new results folder")
    stop_leftover_server(results, progress, protocol.stop_timeout_s)
    # Checked before any run folder exists, so a retry against a busy port sets nothing aside.
    if _answering(protocol):
        raise OverlayError(f"port {protocol.port} is already serving: another server answers on "
                           f"{protocol.host}:{protocol.port}; refusing to benchmark it",
                           path=str(protocol.path), hint="stop that server first")
    excluded: list[str] = []
    done, ran = [], []
    try:
        recorded = (runs_dir.is_dir() and any(runs_dir.iterdir())) or (results / "excluded").is_dir()
        trees = tree_mod.prepare(protocol, root, results, mirror, progress, runs_recorded=recorded)
        runs_dir.mkdir(parents=True, exist_ok=True)
        # A run a previous invocation left half-done (killed hard) is set aside first.
        for leftover in sorted(runs_dir.glob("*.partial")):
            rid = leftover.name[: -len(".partial")]
            found = sorted(p.name for p in leftover.glob("*.json") if p.name != "run.json")
            excluded.append(_exclude(results, leftover, rid, "interrupted: the run did not complete "
                                     f"(scenario results present: {', '.join(found) or 'none'}); "
                                     "rerun from a fresh server start"))
        planned = plan(protocol)
        with _INTERRUPTS:
            _INTERRUPTS.requested = False
            _run_all(protocol, root, results, planned, progress, only, done, ran, excluded, trees)
    finally:
        # Nothing but what a run recorded stays behind: no empty runs/ from a failed first run.
        if runs_dir.is_dir() and not any(runs_dir.iterdir()):
            runs_dir.rmdir()
    return BenchSummary(len(planned), tuple(done), tuple(ran), tuple(excluded), results)


def _record_digest(protocol: Protocol, results: Path) -> None:
    """The protocol a complete run was made under; written with the first complete run, so
    a run that failed (a wrong CPU list, a typo in the server command) does not freeze the
    protocol before any result exists."""
    path = results / DIGEST_FILE
    if not path.is_file():
        path.write_text(protocol_digest(protocol) + "\n", encoding="utf-8")


def _run_all(protocol: Protocol, root: Path, results: Path, planned: tuple[PlannedRun, ...],
             progress: Progress, only: int | None, done: list[str], ran: list[str],
             excluded: list[str], trees: dict[str, VariantTrees]) -> None:
    runs_dir = results / "runs"
    todo = sum(not _complete(runs_dir / r.run_id, r) for r in planned)
    if only is not None:
        todo = min(todo, only)
    began = time.monotonic()
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
        _wait_port_free(protocol, progress)
        _one_run(protocol, root, results, run, progress, excluded, trees.get(run.variant))
        ran.append(run.run_id)
        progress(eta_line(len(ran), todo, time.monotonic() - began))


def portable_paths(obj: object, prefixes: dict[str, Path]) -> object:
    """The same record with this machine's folders written as <results>/... and <root>/...:
    run.json is committed with the evidence, and a path of one machine means nothing on
    another (and must not be published). The run's own folder is <results>/runs/<id>.partial
    while it runs. Pure."""
    order = sorted(prefixes.items(), key=lambda kv: -len(str(kv[1])))  # the deepest folder first

    def fix(s: str) -> str:
        for token, folder in order:
            s = s.replace(str(folder) + os.sep, token + "/")
            if s == str(folder):
                return token
        return s

    if isinstance(obj, str):
        return fix(obj)
    if isinstance(obj, list):
        return [portable_paths(x, prefixes) for x in obj]
    if isinstance(obj, dict):
        return {k: portable_paths(v, prefixes) for k, v in obj.items()}
    return obj


def eta_line(ran: int, todo: int, elapsed_s: float) -> str:
    """'3/9 new runs done in 7m30s, about 15m left'; pure."""
    def mins(x: float) -> str:
        return f"{int(x // 60)}m{int(x % 60):02d}s"

    left = (todo - ran) * elapsed_s / ran if ran else 0.0
    tail = f", about {mins(left)} left" if ran < todo else ""
    return f"{ran}/{todo} new runs done in {mins(elapsed_s)}{tail}"


def _wait_port_free(protocol: Protocol, progress: Progress) -> None:
    """The previous start's server must be gone before the next binds the port."""
    deadline = time.monotonic() + protocol.stop_timeout_s
    while _answering(protocol):
        if time.monotonic() > deadline:
            raise OverlayError(f"port {protocol.port} still answers {protocol.stop_timeout_s:g}s after the "
                               "previous server was stopped", path=str(protocol.path),
                               hint="something else serves there: stop it, then resume `overlay bench ab`")
        progress(f"waiting for port {protocol.port} to be released")
        time.sleep(1.0)


# Exec'd in front of a campaign's server: SIGTERM reaches the server when the process that
# started it dies (a Ray worker killed hard must not leave its server holding the card).
# An exec wrapper rather than preexec_fn, which is unsafe in a threaded process such as a
# Ray worker; PR_SET_PDEATHSIG (1) survives the exec, and the live command line is the argv.
# The death signal only covers a parent that dies after prctl: one that died while the
# wrapper's interpreter started (seconds on a loaded host) has already left it to init,
# so the wrapper compares its parent with the pid it was started for and then exits
# as SIGTERM would have ended it (143), instead of starting an orphaned server.
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys; "
                    "ctypes.CDLL(None).prctl(1, signal.SIGTERM); "
                    "os.getppid() == int(sys.argv[1]) or os._exit(143); "
                    "os.execvp(sys.argv[2], sys.argv[2:])")


def die_with_parent(argv: list[str], parent: int | None = None) -> list[str]:
    """argv behind the exec wrapper; `parent`: the pid that will start it (this process)."""
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid() if parent is None else parent)] + list(argv)


def _one_run(protocol: Protocol, root: Path, results: Path, run: PlannedRun, progress: Progress,
             excluded: list[str], tree: VariantTrees | None, *, placement: dict | None = None,
             pid_dir: Path | None = None) -> None:
    """One server start and its scenarios. A campaign (evidence.campaign) passes where the
    run was placed (node, cards, host CPUs: recorded in run.json) and a pid folder of the
    run's own, since several runs share one results folder at once."""
    pid_dir = results if pid_dir is None else pid_dir
    variant = protocol.variant(run.variant)
    partial = results / "runs" / f"{run.run_id}.partial"
    meta = {"run": run.run_id, "variant": run.variant, "start": run.start, "position": run.position,
            "status": "running", "started": _now(), "server_cpus": protocol.server_cpus,
            "client_cpus": protocol.client_cpus, "server_argv": server_argv(protocol, variant, tree),
            "env": dict(variant.env), "pin": tree.pin if tree else variant.pin,
            "series": variant.series if isinstance(variant.series, str) else list(variant.series),
            "composed_trees": dict(tree.tree_ids) if tree else {},
            "composed_dirs": {t: str(p) for t, p in tree.dirs} if tree else {}, "scenarios": {}}
    if placement is not None:
        meta["placement"] = dict(placement)

    def save() -> None:
        portable = portable_paths(meta, {"<results>": results.resolve(), "<root>": root.resolve()})
        (partial / "run.json").write_text(json.dumps(portable, indent=2) + "\n", encoding="utf-8")

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
        nonce = new_nonce()
        env = server_process_env(server_env(protocol, variant, root, run, tree=tree), nonce)
        # The engine the run used, read from the installed packages now (not from the protocol).
        meta["engine"] = {"server": engine_record(protocol.server_command[0], env),
                          "client": engine_record(protocol.client_command[0], dict(os.environ))}
        argv = meta["server_argv"] if placement is None else die_with_parent(meta["server_argv"])
        proc = subprocess.Popen(argv, env=env,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=root)
        _write_pid(pid_dir, proc, meta["server_argv"], run.run_id, nonce)
        meta["server_pid"] = proc.pid
        save()
        _INTERRUPTS.check()
        failure = _serve_scenarios(protocol, run, proc, partial, meta, save, progress, root)
    except KeyboardInterrupt:
        if proc is not None:
            _stop(proc, protocol.stop_timeout_s)
            _clear_pid(pid_dir)
        if log is not None:
            log.close()
        excluded.append(_exclude(results, partial, run.run_id,
                                 "interrupted by the operator; rerun from a fresh server start"))
        raise
    _stop(proc, protocol.stop_timeout_s)
    _clear_pid(pid_dir)
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
    _record_digest(protocol, results)
    partial.rename(results / "runs" / run.run_id)
    progress(f"[{run.position}] {run.run_id}: complete")


SERVER_DIED = -1000  # _run_client: the server exited while the client ran


def _run_client(argv: list[str], log, timeout_s: float, server: subprocess.Popen | None = None,
                cwd: Path | None = None, tick: Callable[[float], None] | None = None) -> int | None:
    """The client's exit status (None on timeout, SERVER_DIED when the server exited
    meanwhile: its requests would only fail from then on); stops it on an interrupt."""
    client = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              start_new_session=True, cwd=cwd)
    began = time.monotonic()
    deadline = began + timeout_s
    try:
        while True:
            try:
                return client.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
            _INTERRUPTS.check()
            if server is not None and server.poll() is not None:
                _stop(client, 5.0)
                return SERVER_DIED
            if time.monotonic() > deadline:
                _stop(client, 5.0)
                return None
            if tick is not None:
                tick(time.monotonic() - began)
    except KeyboardInterrupt:
        _stop(client, 5.0)
        raise


def _listening(protocol: Protocol, timeout: float = 5.0) -> bool:
    """Whether anything accepts connections on the server's port. The kernel completes a
    TCP handshake for a listening socket however busy its process is, so only a closed
    socket (connection refused) says no."""
    try:
        with socket.create_connection((protocol.host, protocol.port), timeout=timeout):
            return True
    except socket.timeout:
        return True
    except OSError:
        return False


def server_gone(proc: subprocess.Popen, protocol: Protocol) -> bool:
    """Whether the server died while the client ran. A dying process closes its sockets
    (the client's requests fail and it may exit 0 at once) before its exit status can be
    read, so polling once would race the client: a server that no longer listens is
    waited for (up to the stop timeout) instead."""
    if proc.poll() is not None:
        return True
    if _listening(protocol):
        return False
    try:
        proc.wait(timeout=protocol.stop_timeout_s)
    except subprocess.TimeoutExpired:
        pass
    return True


def _last_line(path: Path) -> str:
    """The last non-empty line of a log, for a failure reason (the log stays in the run)."""
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][-200:] if lines else ""


def _served_models(protocol: Protocol) -> list[str] | None:
    """Model ids the server lists on /v1/models (None when not that endpoint or unreadable)."""
    if protocol.ready_path.rstrip("/") != "/v1/models":
        return None
    url = f"http://{protocol.host}:{protocol.port}{protocol.ready_path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 (local URL)
            data = json.loads(resp.read().decode("utf-8"))
        return [str(m.get("id")) for m in data.get("data", [])]
    except (OSError, ValueError, AttributeError):
        return None


class _Ticker:
    """A progress line at most every `every` seconds while something long runs."""

    def __init__(self, progress: Progress, every: float = 15.0) -> None:
        self.progress, self.every, self.next = progress, every, every

    def __call__(self, elapsed: float, what: str) -> None:
        if elapsed >= self.next:
            self.progress(f"{what} ({elapsed:.0f}s)")
            self.next = elapsed + self.every


def _serve_scenarios(protocol: Protocol, run: PlannedRun, proc: subprocess.Popen, partial: Path,
                     meta: dict, save: Callable[[], None], progress: Progress,
                     root: Path | None = None) -> str | None:
    """Wait for the server, run every scenario; the failure reason, or None."""
    began = time.monotonic()
    deadline = began + protocol.ready_timeout_s
    ticker = _Ticker(progress)
    while not _answering(protocol):
        _INTERRUPTS.check()
        if proc.poll() is not None:
            last = _last_line(partial / "server.log")
            return (f"server exited with status {proc.returncode} before answering"
                    + (f": {last}" if last else "") + " (see server.log)")
        if time.monotonic() > deadline:
            return f"server did not answer {protocol.ready_path} within {protocol.ready_timeout_s:g}s"
        ticker(time.monotonic() - began, f"[{run.position}] {run.run_id}: waiting for the server to answer "
                                         f"{protocol.ready_path} (ready-timeout {protocol.ready_timeout_s:g}s)")
        time.sleep(0.2)
    meta["ready"] = _now()
    meta["ready_after_s"] = round(time.monotonic() - began, 1)
    meta["server_affinity"] = tree_affinity(proc.pid)
    progress(f"[{run.position}] {run.run_id}: server answered after {meta['ready_after_s']:.0f}s")
    served = _served_models(protocol)
    if served is not None and protocol.model not in served:
        return (f"the server answering on port {protocol.port} serves {', '.join(served) or 'no model'}, "
                f"not the protocol's model {protocol.model}")
    for name in run.scenarios:
        progress(f"[{run.position}] {run.run_id}: scenario {name}")
        argv = client_argv(protocol, protocol.scenario(name), run, partial)
        ticker = _Ticker(progress)
        with open(partial / f"{name}.client.log", "wb") as clog:
            rc = _run_client(argv, clog, protocol.client_timeout_s, server=proc, cwd=root,
                             tick=lambda t: ticker(t, f"[{run.position}] {run.run_id}: client running "
                                                      f"scenario {name}"))
        meta["scenarios"][name] = {"argv": argv, "returncode": rc, "finished": _now()}
        save()
        if rc == SERVER_DIED or server_gone(proc, protocol):  # its results would be cut short
            last = _last_line(partial / "server.log")
            how = ("stopped listening (still running after the stop timeout)" if proc.returncode is None
                   else f"exited with status {proc.returncode}")
            return (f"server {how} during scenario {name}"
                    + (f": {last}" if last else "") + " (see server.log)")
        if rc != 0 or not (partial / f"{name}.json").is_file():
            last = _last_line(partial / f"{name}.client.log")
            what = ("timed out" if rc is None else f"exited with status {rc}" if rc != 0
                    else "exited 0 but wrote no result file")
            return (f"client for scenario {name} {what}" + (f": {last}" if last else "")
                    + f" (see {name}.client.log)")
    return None


def throttled(progress: Progress, every_s: float = 1.0) -> Progress:
    """At most one line per `every_s` seconds (the first always): for per-file progress."""
    last = [-math.inf]

    def out(msg: str) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            progress(msg)

    return out


def terminal_progress(json_mode: bool, command: str = "evidence") -> Progress:
    """Progress lines on stderr only for a terminal, never with --json."""
    return reporting.progress(command, quiet=json_mode) or (lambda _msg: None)
