"""`overlay bench ab --cluster ADDRESS|local`: a protocol's runs as Ray tasks over cards and nodes.

The unit of scheduling is a *block*: start k of every variant, in the protocol's
balanced order (evidence.plan). Start k of a treatment is paired with start k of the
baseline, so one Ray task runs a whole block, one server start after another, on one
node, holding the protocol's cards (`cards: {resource: NPU, per-run: 1}`) for the
whole block: both members of a pair share the node and the card type, and ran next to
each other, as the paired-start analysis assumes. Blocks run in parallel on as many
cards as the cluster has.

Each run is exactly the serial one (orchestrate._one_run): the same server and client
code, taskset, readiness checks and process-tree cleanup, on the node Ray picked, with
a port free on that node, the run's placement (node, cards, host CPUs, worker pid)
recorded in its run.json, and a pid record of its own under `cluster/pids/<run>/`.
The server is exec'd so that it gets SIGTERM when its Ray worker dies.

Faults: a block whose worker or node dies is requeued (at most `max_attempts` times);
its half-done run goes to excluded/ with the reason, as a serial interruption does. A
run that completed on a node that has since left the cluster is set aside too (its
partner must run on that same node), so nothing half-written or unpaired enters the
analysis. The driver keeps no state but the results folder: killed, it resumes where
the folder says. Ctrl-C cancels every remote block (each stops its server and sets its
run aside), then stops.

The results folder, the repository and the composed trees must be on a filesystem every
node mounts at the same path (checked at the start of every block with a nonce the
driver wrote); see evidence/README.md, "Campaigns on a Ray cluster".
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import secrets
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overlay.errors import OverlayError, quoted, shortened
from overlay.evidence import orchestrate
from overlay.evidence import trees as tree_mod
from overlay.evidence.plan import PlannedRun, plan
from overlay.evidence.protocol import DIGEST_FILE, Protocol, protocol_digest
from overlay.series.model import _kind

Progress = Callable[[str], None]
MARKER = ".campaign"  # results/.campaign: the driver's nonce, read back by every block
PIDS = Path("cluster") / "pids"
LOCAL = "local"


@dataclass(frozen=True)
class Block:
    start: int
    runs: tuple[PlannedRun, ...]  # in the protocol's balanced order


def blocks(planned: tuple[PlannedRun, ...]) -> tuple[Block, ...]:
    """Group the plan by start number (block k = start k of every variant); pure."""
    by_start: dict[int, list[PlannedRun]] = collections.OrderedDict()
    for r in planned:
        by_start.setdefault(r.start, []).append(r)
    return tuple(Block(k, tuple(rs)) for k, rs in by_start.items())


@dataclass(frozen=True)
class CampaignSummary:
    planned: int
    already_complete: tuple[str, ...]
    ran: tuple[str, ...]
    excluded: tuple[str, ...]
    requeued: int  # blocks sent again after a lost worker or node
    nodes: dict[str, list[str]]  # node id -> runs completed there by this invocation
    results: Path


# ----------------------------------------------------------------------------- pure helpers


def max_cards_per_node(nodes: list[dict], resource: str) -> float:
    """The most `resource` any one alive node offers (ray.nodes() records); pure."""
    return max((float(n.get("Resources", {}).get(resource, 0)) for n in nodes if n.get("Alive")),
               default=0.0)


def progress_line(status: dict[str, dict[str, int]], queued: int, finished: int, todo: int,
                  elapsed_s: float, labels: dict[str, str]) -> str:
    """'node a1b2c3d4 (host): 2 done, 1 running | 3 queued | 2/8 new runs done in 0m40s, about
    2m00s left'; pure."""
    parts = [f"node {labels.get(n, n[:8])}: {s.get('done', 0)} done, {s.get('running', 0)} running"
             for n, s in sorted(status.items())]
    parts.append(f"{queued} queued")
    parts.append(orchestrate.eta_line(finished, todo, elapsed_s))
    return " | ".join(parts)


# What a block's Ray task returns (run_block): one outcome per run it ran, or one refusal.
# It is a node's word: checked here, before any of it is counted.
OUTCOME_FIELDS = {  # status -> the strings it must carry
    "complete": ("run", "node_id"),
    "failed": ("run", "reason"),
    "interrupted": ("run",),
    "refused": ("message",),
}
_MAYBE_STRINGS = ("path", "hint")  # a refusal's location and next step, when it has them
NODE_ID = re.compile(r"^[0-9a-f]{8,128}$")  # Ray's node ids are hex
_EXCLUDED_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.[0-9]+$")  # orchestrate._exclude: <run>.<n>


def check_outcomes(outcomes, block: Block, asked: tuple[str, ...]) -> list[dict]:
    """The outcomes a node returned for `block` (whose runs `asked` it ran), each of the
    form run_block writes: a known status with the strings it carries, a run the block
    asked for, each run once, excluded folders named after those runs. Anything else is
    one OverlayError line naming the block, the outcome and its node; pure."""
    def refuse(what: str):
        raise OverlayError(f"block {block.start}: {what}; nothing of the block is counted",
                           hint="a node of another tool version, or something else, answered: check the "
                                "cluster's nodes, then run again to resume")

    if not isinstance(outcomes, list) or not outcomes:
        refuse(f"the node's answer is {'an empty list' if outcomes == [] else _kind(outcomes)}"
               + ("" if outcomes == [] else ", not a list of outcomes"))
    seen: set[str] = set()
    for i, o in enumerate(outcomes, 1):
        if not isinstance(o, dict):
            refuse(f"a node's outcome {i} is {_kind(o)}, not a mapping")
        node = o.get("node_id")
        which = f"outcome {i}" + (f" (node {shortened(node[:8])})" if isinstance(node, str) and node else "")
        status = o.get("status")
        if "status" not in o:
            refuse(f"a node's {which} has no 'status'")
        if not isinstance(status, str) or status not in OUTCOME_FIELDS:
            refuse(f"a node's {which} has status {quoted(status)}, not one of " + ", ".join(OUTCOME_FIELDS))
        for key in OUTCOME_FIELDS[status]:
            if key not in o or o[key] is None:
                refuse(f"a node's {which} has no {quoted(key)}")
            if not isinstance(o[key], str) or not o[key]:
                refuse(f"a node's {which}: {quoted(key)} is {_kind(o[key])}, not a non-empty string")
        for key in _MAYBE_STRINGS:
            if o.get(key) is not None and not isinstance(o[key], str):
                refuse(f"a node's {which}: {quoted(key)} is {_kind(o[key])}, not a string")
        if status == "complete" and not NODE_ID.match(o["node_id"]):
            refuse(f"a node's {which} names node {quoted(o['node_id'])}, which is no Ray node id")
        if status != "refused":
            run = o["run"]
            if run not in asked:
                refuse(f"a node's {which} is for run {quoted(run)}, which the block did not ask for "
                       f"(asked: {', '.join(asked)})")
            if run in seen:
                refuse(f"a node's {which} repeats run {quoted(run)}")
            seen.add(run)
        excluded = o.get("excluded", [])
        if not isinstance(excluded, list):
            refuse(f"a node's {which}: 'excluded' is {_kind(excluded)}, not a list")
        for name in excluded:
            if not isinstance(name, str) or not any(_EXCLUDED_NAME.match(name) and name.rsplit(".", 1)[0] == r
                                                    for r in asked):
                refuse(f"a node's {which} excludes {quoted(name)}, which is no run of the block "
                       "(excluded/<run>.<n>)")
    return outcomes


def _placement_of(run_dir: Path) -> dict | None:
    try:
        meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    place = meta.get("placement") if isinstance(meta, dict) else None
    return place if isinstance(place, dict) else None


# ----------------------------------------------------------------------------- Ray at the edges


def _import_ray():
    try:
        import ray  # noqa: PLC0415 (optional extra)
    except ImportError:
        raise OverlayError("--cluster needs Ray, which is not installed",
                           hint="pip install -e '.[cluster]' in the overlay checkout (the single-machine `bench ab` needs no Ray)") from None
    return ray


def _reachable(address: str) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise OverlayError(f"'{address}' is not a Ray cluster address",
                           hint="give HOST:PORT of the head node (`ray start --head` prints it), or `local`")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as err:
        raise OverlayError(f"cannot reach the Ray cluster at {address}: {err.strerror or err}",
                           hint="start it (`ray start --head --port PORT` on the head node) or fix the "
                                "address; `--cluster local` starts one on this machine") from None


class _NoAscendLibrary:
    """A logging filter for Ray's NPU detection: with a protocol's cards named `NPU`, Ray
    asks the Ascend runtime (`acl`) for the card type and logs a traceback when the module
    is absent (any machine without the NPU driver, a local cluster of fake cards). That
    one record says nothing about the campaign: it is dropped; every other passes."""

    @staticmethod
    def filter(record) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, ModuleNotFoundError) and exc.name == "acl")


def quiet_npu_detection() -> None:
    import logging

    npu_logger = logging.getLogger("ray._private.accelerators.npu")
    if not any(isinstance(f, _NoAscendLibrary) for f in npu_logger.filters):
        npu_logger.addFilter(_NoAscendLibrary())


def connect(ray, address: str, protocol: Protocol, local_cards: int | None) -> None:
    import logging

    quiet_npu_detection()
    kwargs = dict(log_to_driver=False, logging_level=logging.WARNING, include_dashboard=False)
    if address == LOCAL:
        resources = {} if local_cards is None else {protocol.cards.resource: float(local_cards)}
        try:
            ray.init(resources=resources, _node_ip_address="127.0.0.1", **kwargs)
        except Exception as err:  # noqa: BLE001 (Ray raises many kinds on a failed start)
            raise OverlayError(f"a local Ray cluster could not start: {str(err).splitlines()[0][:200]}",
                               hint="see `ray start --head` on this machine for the cause") from None
        return
    _reachable(address)
    if address.rpartition(":")[0] in ("127.0.0.1", "localhost"):
        kwargs["_node_ip_address"] = "127.0.0.1"  # no probe of a public address to find our own
    try:
        ray.init(address=address, **kwargs)
    except Exception as err:  # noqa: BLE001
        raise OverlayError(f"cannot join the Ray cluster at {address}: {str(err).splitlines()[0][:200]}",
                           hint="check that the head runs the same Ray and Python version as this machine") from None


def check_capacity(ray, protocol: Protocol, address: str) -> None:
    need, res = protocol.cards.per_run, protocol.cards.resource
    nodes = ray.nodes()
    most = max_cards_per_node(nodes, res)
    if most < need:
        total = sum(float(n.get("Resources", {}).get(res, 0)) for n in nodes if n.get("Alive"))
        raise OverlayError(f"the protocol asks for {need} {res} per run, but no node of the cluster at "
                           f"{address} has that many (most on one node: {most:g}, in all: {total:g})",
                           path=str(protocol.path),
                           hint=f"add nodes with {res} cards, or lower cards.per-run in a new protocol")


def _alive_nodes(ray) -> dict[str, dict]:
    return {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _stop_own_leftovers(results: Path, host: str, boot: str) -> None:
    """Servers an earlier block on this very machine left behind: its worker was killed
    before the server saw SIGTERM. Each pid record names its host, boot and worker
    (pid + start time); only a server whose worker is gone is stopped, so a block
    running beside this one on the same machine keeps its server, and no other
    machine's process is ever touched."""
    base = results / PIDS
    if not base.is_dir():
        return
    for d in sorted(base.iterdir()):
        try:
            node = json.loads((d / "node.json").read_text(encoding="utf-8"))
            worker, worker_started = int(node["worker_pid"]), int(node["worker_started"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if node.get("hostname") != host or node.get("boot_id") != boot:
            continue
        if orchestrate._alive(worker, worker_started) or not (d / orchestrate.PID_FILE).is_file():
            continue
        orchestrate.stop_leftover_server(d, lambda _m: None)


def run_block(protocol: Protocol, root: str, results: str, runs: tuple[PlannedRun, ...],
              trees: dict, nonce: str) -> list[dict]:
    """The body of one Ray task, on the node Ray picked: the block's runs, in order."""
    import ray  # noqa: PLC0415 (runs inside a Ray worker)

    res_dir, root_dir = Path(results), Path(root)
    try:
        seen = (res_dir / MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        seen = ""
    host = socket.gethostname()
    try:
        if seen != nonce:
            raise OverlayError(f"node {host} does not see the campaign's results folder {results}",
                               hint="every node must mount the results folder, the repository and the "
                                    "composed trees at the same path (a shared filesystem)")
        orchestrate._check_tools(protocol)
        orchestrate.check_cpus(protocol)
    except OverlayError as err:  # returned, not raised: the driver stops with this one line
        return [{"status": "refused", "message": f"node {host}: {err.message}", "path": err.path,
                 "hint": err.hint}]
    ctx = ray.get_runtime_context()
    cards = ctx.get_accelerator_ids().get(protocol.cards.resource)
    placement = {"node_id": ctx.get_node_id(), "hostname": host, "boot_id": _boot_id(),
                 "resource": protocol.cards.resource, "cards_per_run": protocol.cards.per_run,
                 "cards": cards if cards is not None else None,
                 "visible_devices": os.environ.get("ASCEND_RT_VISIBLE_DEVICES"),
                 "host_cpus": orchestrate._fmt_cpus(set(os.sched_getaffinity(0))), "worker_pid": os.getpid(),
                 "worker_started": (orchestrate._stat(os.getpid()) or (0, 0, "", 0))[3]}
    _stop_own_leftovers(res_dir, host, placement["boot_id"])
    proto = dataclasses.replace(protocol, port=_free_port(protocol.host))
    placement["port"] = proto.port
    out: list[dict] = []
    with orchestrate._INTERRUPTS:
        orchestrate._INTERRUPTS.requested = False
        for run in runs:
            pid_dir = res_dir / PIDS / run.run_id
            pid_dir.mkdir(parents=True, exist_ok=True)
            (pid_dir / "node.json").write_text(json.dumps(placement) + "\n", encoding="utf-8")
            excluded: list[str] = []
            try:
                orchestrate._one_run(proto, root_dir, res_dir, run, lambda _m: None, excluded,
                                     trees.get(run.variant), placement=placement, pid_dir=pid_dir)
            except OverlayError as err:
                out.append({"run": run.run_id, "status": "failed", "reason": err.message,
                            "excluded": excluded})
                break
            except KeyboardInterrupt:
                out.append({"run": run.run_id, "status": "interrupted", "excluded": excluded})
                break
            out.append({"run": run.run_id, "status": "complete", "node_id": placement["node_id"]})
    return out


# ----------------------------------------------------------------------------- the driver


def _preflight(protocol: Protocol, root: Path, results: Path) -> None:
    orchestrate.check_series(protocol, root)
    orchestrate.check_preregistered(protocol)
    digest_file = results / DIGEST_FILE
    if digest_file.is_file() and digest_file.read_text().strip() != protocol_digest(protocol):
        raise OverlayError("the protocol changed after runs were recorded under these results",
                           path=str(protocol.path),
                           hint="a preregistered protocol is frozen: restore it, or start a new results folder")


class _Driver:
    def __init__(self, ray, protocol: Protocol, root: Path, results: Path, progress: Progress,
                 trees: dict, max_attempts: int) -> None:
        self.ray, self.protocol, self.root, self.results = ray, protocol, root, results
        self.progress, self.trees, self.max_attempts = progress, trees, max_attempts
        self.runs_dir = results / "runs"
        self.excluded: list[str] = []
        self.ran: list[str] = []
        self.done: list[str] = []
        self.nodes: dict[str, list[str]] = {}
        self.requeued = 0
        self.nonce = secrets.token_hex(16)
        self.pending: dict = {}  # ref -> (block, attempt)
        self.asked: dict = {}  # ref -> the run ids sent (the block's unfinished runs)
        self.labels: dict[str, str] = {}

    def complete(self, run: PlannedRun) -> bool:
        return orchestrate._complete(self.runs_dir / run.run_id, run)

    def exclude(self, path: Path, run_id: str, reason: str) -> None:
        self.excluded.append(orchestrate._exclude(self.results, path, run_id, reason))

    def set_aside_partials(self, block: Block, reason: str) -> None:
        for r in block.runs:
            partial = self.runs_dir / f"{r.run_id}.partial"
            if partial.exists():
                self.exclude(partial, r.run_id, reason)
            final = self.runs_dir / r.run_id
            if final.exists() and not self.complete(r):
                self.exclude(final, r.run_id, "incomplete run folder found")

    def submit(self, block: Block, attempt: int) -> None:
        """Send the block's unfinished runs; where some already completed, to their node."""
        alive = _alive_nodes(self.ray)
        kept = [r for r in block.runs if self.complete(r)]
        node = None
        if kept:
            place = _placement_of(self.runs_dir / kept[0].run_id)
            node = place.get("node_id") if place else None
            if node not in alive:
                where = f"node {node[:8]}" if node else "a node this run did not record"
                for r in kept:
                    self.exclude(self.runs_dir / r.run_id, r.run_id,
                                 f"its pair partner must run on the same node, and {where} has left the "
                                 "cluster: the whole block runs again")
                    if r.run_id in self.done:
                        self.done.remove(r.run_id)
                kept, node = [], None
        todo = tuple(r for r in block.runs if r not in kept)
        if not todo:
            return
        opts: dict = {"num_cpus": 1, "max_retries": 0,
                      "resources": {self.protocol.cards.resource: self.protocol.cards.per_run}}
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        task = self.ray.remote(run_block).options(**opts)
        ref = task.remote(self.protocol, str(self.root), str(self.results), todo, self.trees, self.nonce)
        self.pending[ref] = (block, attempt)
        self.asked[ref] = tuple(r.run_id for r in todo)

    def running_by_node(self) -> dict[str, dict[str, int]]:
        status: dict[str, dict[str, int]] = {}
        for n, rs in self.nodes.items():
            status.setdefault(n, {})["done"] = len(rs)
        if self.runs_dir.is_dir():
            for partial in self.runs_dir.glob("*.partial"):
                place = _placement_of(partial)
                if place and place.get("node_id"):
                    n = place["node_id"]
                    self.labels.setdefault(n, f"{n[:8]} ({place.get('hostname')})")
                    status.setdefault(n, {}).setdefault("running", 0)
                    status[n]["running"] += 1
        return status

    def finished(self, ref) -> None:
        block, attempt = self.pending.pop(ref)
        asked = self.asked.pop(ref, tuple(r.run_id for r in block.runs))
        try:
            outcomes = self.ray.get(ref)
        except Exception as err:  # noqa: BLE001 (a lost worker or node, or the task's own error)
            cause = getattr(err, "cause", None)
            if isinstance(cause, OverlayError):
                self.set_aside_partials(block, f"the block failed: {cause.message}")
                raise cause from None
            what = type(err).__name__
            detail = str(err).strip().splitlines()[0][:200] if str(err).strip() else what
            self.set_aside_partials(block, f"lost the Ray worker or node mid-run ({what}: {detail}); "
                                           "rerun from a fresh server start")
            if attempt >= self.max_attempts:
                raise OverlayError(f"block {block.start} was lost {attempt} times ({what})",
                                   path=str(self.results),
                                   hint="check the cluster's nodes (`ray status`), then run again to resume")
            self.requeued += 1
            self.progress(f"block {block.start}: {what}; requeued (attempt {attempt + 1} of "
                          f"{self.max_attempts})")
            self.submit(block, attempt + 1)
            return
        try:
            check_outcomes(outcomes, block, asked)
        except OverlayError as err:
            self.set_aside_partials(block, f"the node's answer was refused: {err.message}")
            raise
        for o in outcomes:
            self.excluded.extend(o.get("excluded", []))
            if o["status"] == "refused":
                raise OverlayError(o["message"], path=o.get("path"), hint=o.get("hint"))
            if o["status"] == "complete":
                self.ran.append(o["run"])
                self.nodes.setdefault(o["node_id"], []).append(o["run"])
            elif o["status"] == "failed":
                raise OverlayError(f"run {o['run']} failed: {o['reason']}", path=str(self.results / "excluded"),
                                   hint="kept under excluded/ with the reason; fix the cause and run "
                                        "`overlay bench ab --cluster ...` again to resume", exit_code=1)
            else:
                raise KeyboardInterrupt

    def cancel_all(self) -> None:
        """Ctrl-C: every remote block stops its server and sets its run aside; force after a grace."""
        refs = list(self.pending)
        for ref in refs:
            self.ray.cancel(ref, force=False)
        grace = time.monotonic() + self.protocol.stop_timeout_s + 15
        while self.pending and time.monotonic() < grace:
            ready, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=1.0)
            for ref in ready:
                block, _ = self.pending.pop(ref)
                asked = self.asked.pop(ref, tuple(r.run_id for r in block.runs))
                try:
                    outcomes = check_outcomes(self.ray.get(ref), block, asked)
                except Exception:  # noqa: BLE001 (cancelled, or an answer that is refused)
                    outcomes = []
                for o in outcomes:
                    self.excluded.extend(o.get("excluded", []))
                self.set_aside_partials(block, "interrupted by the operator; rerun from a fresh server start")
        for ref, (block, _) in list(self.pending.items()):
            self.ray.cancel(ref, force=True)
            self.set_aside_partials(block, "interrupted by the operator; rerun from a fresh server start")
        self.pending.clear()


@contextlib.contextmanager
def _stdout_to_stderr():
    """Ray's driver prints cluster events (a worker died, ...) on stdout, which is the
    JSON document's with --json: while Ray runs, file descriptor 1 and sys.stdout are
    stderr's."""
    sys.stdout.flush()
    saved, saved_stream = os.dup(1), sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr  # Ray's own threads print through sys.stdout too
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = saved_stream
        os.dup2(saved, 1)
        os.close(saved)


def campaign(protocol: Protocol, root: Path, results: Path, progress: Progress, *, address: str,
             mirror: Path | None = None, local_cards: int | None = None,
             max_attempts: int = 3) -> CampaignSummary:
    """Run (or resume) the protocol on a Ray cluster; see the module docstring."""
    with _stdout_to_stderr():
        return _campaign(protocol, root, results, progress, address=address, mirror=mirror,
                         local_cards=local_cards, max_attempts=max_attempts)


def _campaign(protocol: Protocol, root: Path, results: Path, progress: Progress, *, address: str,
              mirror: Path | None, local_cards: int | None, max_attempts: int) -> CampaignSummary:
    ray = _import_ray()
    _preflight(protocol, root, results)
    connect(ray, address, protocol, local_cards)
    try:
        check_capacity(ray, protocol, address)
        recorded = ((results / "runs").is_dir() and any((results / "runs").iterdir())) \
            or (results / "excluded").is_dir()
        trees = tree_mod.prepare(protocol, root, results, mirror, progress, runs_recorded=recorded)
        drv = _Driver(ray, protocol, root, results, progress, trees, max_attempts)
        drv.runs_dir.mkdir(parents=True, exist_ok=True)
        (results / MARKER).write_text(drv.nonce + "\n", encoding="utf-8")
        planned = plan(protocol)
        todo_blocks = []
        for b in blocks(planned):
            drv.set_aside_partials(b, "interrupted: the run did not complete; rerun from a fresh server start")
            if all(drv.complete(r) for r in b.runs):
                drv.done.extend(r.run_id for r in b.runs)
            else:
                drv.done.extend(r.run_id for r in b.runs if drv.complete(r))
                todo_blocks.append(b)
        todo = sum(not drv.complete(r) for r in planned)
        began, last = time.monotonic(), 0.0
        with orchestrate._INTERRUPTS:
            orchestrate._INTERRUPTS.requested = False
            try:
                for b in todo_blocks:
                    drv.submit(b, 1)
                while drv.pending:
                    orchestrate._INTERRUPTS.check()
                    ready, _ = ray.wait(list(drv.pending), num_returns=1, timeout=1.0)
                    for ref in ready:
                        drv.finished(ref)
                    now = time.monotonic()
                    if ready or now - last >= 10:
                        last = now
                        status = drv.running_by_node()
                        running = sum(s.get("running", 0) for s in status.values())
                        queued = max(0, todo - len(drv.ran) - running)
                        progress(progress_line(status, queued, len(drv.ran), todo, now - began, drv.labels))
            except KeyboardInterrupt:
                progress("interrupted: stopping every remote server")
                drv.cancel_all()
                raise
            except OverlayError:
                drv.cancel_all()
                raise
        return CampaignSummary(len(planned), tuple(r for r in drv.done if r not in drv.ran), tuple(drv.ran),
                               tuple(drv.excluded), drv.requeued, drv.nodes, results)
    finally:
        try:
            (results / MARKER).unlink()
        except OSError:
            pass
        ray.shutdown()
