"""Running the plugin's CPU unit tests on a composed tree and judging the result.

A run is judged on what pytest itself reports, recorded by a small pytest plugin
(REPORT_PLUGIN) inside the test environment: how many tests were collected, each
test's outcome, each collection error. The verdict is a pure function of that
record, the known-failures list and a floor on the collected count, so a run where
nothing ran, a conftest that does not import, or a collection error can never pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from overlay.testing import probes, testenv
from overlay.series import yamldoc
from overlay.errors import OverlayError

REPORT_MODULE = "composed_test_report"
REPORT_ENV = "COMPOSED_TEST_REPORT"
TIMEOUT_ENV = "COMPOSED_TEST_TIMEOUT"  # seconds a test may run (setup to teardown)
TEST_TIMEOUT = 300
# No output at all for this long (seconds) stops the whole run: a hang outside any test
# (collection, teardown of the session, a finaliser) is beyond the per-test clock. pytest -q
# prints at least every few tests, and one test is stopped at TEST_TIMEOUT.
STALL_ENV = "COMPOSED_TEST_STALL"
STALL_TIMEOUT = 3 * TEST_TIMEOUT
# Written into the shim folder and loaded with `pytest -p composed_test_report`: it runs in
# the test environment (any pytest >= 7), so stdlib only.
REPORT_PLUGIN = '''"""composed-test: record what pytest collected and each test's outcome, as JSON."""
import builtins
import json
import os
import signal
import sys
import threading
import time

_OUT = os.environ["%(env)s"]
_STATE = {"collected": None, "outcomes": {}, "collect_errors": {}, "exitstatus": None, "probes": {}}
_CURRENT = ["<collection>"]


def _probe(pid):
    """Execution probes (overlay.testing.probes): which tests reached a probed statement."""
    tests = _STATE["probes"].setdefault(str(pid), [])
    if len(tests) < 50 and (not tests or tests[-1] != _CURRENT[0]) and _CURRENT[0] not in tests:
        tests.append(_CURRENT[0])


setattr(builtins, "%(probe)s", _probe)


def pytest_collectstart(collector):
    _CURRENT[0] = collector.nodeid or "<collection>"  # import-time probes: the module collecting


def pytest_runtest_logstart(nodeid, location):
    _CURRENT[0] = nodeid


_TIMEOUT = int(os.environ.get("%(timeout_env)s") or 0)


class TestTimedOut(Exception):
    pass


def _on_alarm(signum, frame):
    raise TestTimedOut("composed-test: the test ran past %%d s (a blocking wait?)" %% _TIMEOUT)


def pytest_runtest_setup(item):
    # One clock per test, setup to teardown: a test that blocks (a socket recv without a
    # timeout) fails with TestTimedOut instead of stopping the whole run.
    if _TIMEOUT > 0 and hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(_TIMEOUT)


def pytest_runtest_logfinish(nodeid, location):
    if _TIMEOUT > 0 and hasattr(signal, "SIGALRM"):
        signal.alarm(0)
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def _where(report):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None:
        path = _short(str(crash.path))
        return "%%s:%%s: %%s" %% (path, crash.lineno, crash.message.splitlines()[0] if crash.message else "")
    text = (getattr(report, "longreprtext", "") or "").strip().splitlines()
    errs = [t[4:] for t in text if t.startswith("E   ")]
    return (errs or text or [""])[-1].strip()


def _short(path):
    """A path relative to the tree or to the sys.path entry holding it (vllm/..., unittest/...)."""
    if path.startswith(os.getcwd() + os.sep):
        return os.path.relpath(path)
    roots = [p for p in sys.path if p and os.path.isabs(p)]
    best = max((r for r in roots if path.startswith(r.rstrip(os.sep) + os.sep)), key=len, default=None)
    return os.path.relpath(path, best) if best else path


def _dump():
    tmp = _OUT + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(_STATE, fh)
    os.replace(tmp, _OUT)


def pytest_collectreport(report):
    if report.failed:
        _STATE["collect_errors"][report.nodeid or "<session>"] = _where(report)


def pytest_collection_finish(session):
    _STATE["collected"] = len(session.items)
    _dump()


def pytest_runtest_logreport(report):
    if report.failed:
        outcome = "failed" if report.when == "call" else "error"
    elif report.skipped:
        outcome = "skipped"
    elif report.when == "call":
        outcome = "passed"
    else:
        return
    old = _STATE["outcomes"].get(report.nodeid)
    if old is None or _RANK[outcome] > _RANK[old[0]]:
        _STATE["outcomes"][report.nodeid] = [outcome, _where(report) if outcome in ("failed", "error") else ""]


def pytest_sessionfinish(session, exitstatus):
    _STATE["exitstatus"] = int(exitstatus)
    _dump()
''' % {"env": REPORT_ENV, "probe": probes.PROBE_BUILTIN, "timeout_env": TIMEOUT_ENV}

# The plugin's CI routes unit tests to runners by path (.github/workflows/scripts/
# select_tests.py, `runner_mapping:` in test_config.yaml): a path under tests/ut matching
# one of these patterns goes to an NPU runner, every other file to its CPU runner. These
# are the directory conventions its tests/ut/conftest.py documents, for plugin commits
# whose test_config.yaml has no runner_mapping.
TEST_CONFIG = ".github/workflows/scripts/test_config.yaml"
CONVENTION_NPU_PATTERNS = ("tests/ut/.+/a2/", "tests/ut/.+/a2_2/", "tests/ut/.+/a3_2/",
                           "tests/ut/.+/a3_4/", "tests/ut/.+/310p/")


# ----------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class RunReport:
    """What one pytest run did. `collected` is None when pytest never finished collecting."""

    exitstatus: int
    collected: int | None
    outcomes: dict[str, tuple[str, str]]  # node id -> (passed|failed|error|skipped, where)
    collect_errors: dict[str, str]  # node id (a file, or <session>) -> where
    output_tail: tuple[str, ...] = ()
    probes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # probe id -> tests that reached it

    def count(self, outcome: str) -> int:
        return sum(1 for o, _ in self.outcomes.values() if o == outcome)

    def failures(self) -> dict[str, str]:
        """Failed or errored tests and collection errors: node id -> where."""
        bad = {n: w for n, (o, w) in self.outcomes.items() if o in ("failed", "error")}
        bad.update(self.collect_errors)
        return bad

    def line(self) -> str:
        if self.collected is None:
            return "collection did not finish"
        text = (f"{self.collected} collected: {self.count('passed')} passed, "
                f"{self.count('failed') + self.count('error')} failed, {self.count('skipped')} skipped")
        return text + (f", {len(self.collect_errors)} collection error(s)" if self.collect_errors else "")

    def to_json(self) -> dict:
        return {"exitstatus": self.exitstatus, "collected": self.collected,
                "passed": self.count("passed"), "failed": self.count("failed") + self.count("error"),
                "skipped": self.count("skipped"), "collect_errors": self.collect_errors,
                "failures": self.failures()}


def parse_report(data: dict | None, exitstatus: int, output: Iterable[str]) -> RunReport:
    tail = tuple(output)
    if not data:
        return RunReport(exitstatus, None, {}, {}, tail)
    outcomes = {k: (v[0], v[1]) for k, v in (data.get("outcomes") or {}).items()}
    probes_hit = data.get("probes") if isinstance(data.get("probes"), dict) else {}
    return RunReport(exitstatus, data.get("collected"), outcomes,
                     dict(data.get("collect_errors") or {}), tail,
                     {str(k): tuple(str(t) for t in v) for k, v in probes_hit.items() if isinstance(v, list)})


def real_error(output: Iterable[str]) -> str:
    """The error pytest printed when it stopped before running anything (a conftest that does
    not import, a usage error): its headline and its `E   ` line, or its last line."""
    lines = [line.rstrip() for line in output if line.strip()]
    head = next((line for line in lines if line.startswith(("ImportError while loading conftest",
                                                            "ERROR:", "INTERNALERROR>"))), None)
    errs = [line[4:].strip() for line in lines if line.startswith("E   ")]
    where = [line for line in lines if re.match(r"^\S+\.py:\d+: in ", line)]
    parts = [p for p in (head, where[-1] if where else None, errs[-1] if errs else None) if p]
    return " | ".join(parts) if parts else (lines[-1] if lines else "pytest printed nothing")


# ----------------------------------------------------------------------------- known failures


@dataclass(frozen=True)
class KnownFailure:
    test: str  # a node id, a file, or a folder ending in "/"
    pins: tuple[str, ...]
    cause: str

    def matches(self, nodeid: str) -> bool:
        if self.test.endswith("/"):
            return nodeid.startswith(self.test)
        return nodeid == self.test or nodeid.startswith(self.test + "::")


@dataclass(frozen=True)
class KnownFailures:
    entries: tuple[KnownFailure, ...]
    floors: dict[str, int]  # pin set -> the fewest tests a full run must collect
    default_floor: int

    def for_pin(self, pin: str) -> tuple[KnownFailure, ...]:
        return tuple(e for e in self.entries if pin in e.pins)

    def floor(self, pin: str) -> int:
        return self.floors.get(pin, self.default_floor)


def load_known_failures(path: Path, display: str | None = None) -> KnownFailures:
    """The committed list; any problem is one error naming the file, line and entry."""
    shown = display or str(path)
    doc = yamldoc.load(path, shown)

    def bad(message: str, node: yamldoc.Node, hint: str | None = None) -> OverlayError:
        return OverlayError(message, path=shown, line=node.line, hint=hint)

    if not isinstance(doc.value, dict) or set(doc.value) - {"floor", "known-failures"} or "floor" not in doc.value:
        raise bad("expected a mapping with `floor:` and `known-failures:`", doc,
                  "see docs/series.md, Composed-tree tests")
    floor = doc.value["floor"]
    if not isinstance(floor.value, dict) or "default" not in floor.value:
        raise bad("`floor:` must map `default` (and pin set names) to test counts", floor)
    floors: dict[str, int] = {}
    for name, node in floor.value.items():
        if type(node.value) is not int or node.value <= 0:
            raise bad(f"floor `{name}` must be a positive number of tests", node)
        floors[name] = node.value
    items = doc.value.get("known-failures", yamldoc.Node([], doc.line))
    if not isinstance(items.value, list):
        raise bad("`known-failures:` must be a list of entries", items)
    entries = []
    for item in items.value:
        fields = item.value if isinstance(item.value, dict) else {}
        if set(fields) != {"test", "pins", "cause"}:
            raise bad("each known failure has exactly `test`, `pins` and `cause`", item)
        test, pins, cause = fields["test"], fields["pins"], fields["cause"]
        if not isinstance(test.value, str) or not test.value.startswith("tests/"):
            raise bad("`test` must be a pytest node id, file or folder under tests/", test)
        if not isinstance(pins.value, list) or not pins.value or not all(
                isinstance(p.value, str) for p in pins.value):
            raise bad(f"{test.value}: `pins` must be a list of pin set names", pins)
        if not isinstance(cause.value, str) or len(cause.value.split()) < 4:
            raise bad(f"{test.value}: give the cause in a sentence", cause)
        entries.append(KnownFailure(test.value, tuple(p.value for p in pins.value),
                                    " ".join(cause.value.split())))
    default = floors.pop("default")
    return KnownFailures(tuple(entries), floors, default)


# ----------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Verdict:
    problems: tuple[str, ...]  # each one makes the run fail
    unexpected: dict[str, str] = field(default_factory=dict)  # failures not on the list
    known: dict[str, KnownFailure] = field(default_factory=dict)  # failures on the list
    stale: tuple[KnownFailure, ...] = ()  # entries that matched nothing

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(report: RunReport, known: Iterable[KnownFailure], floor: int, *, full_run: bool = True) -> Verdict:
    """Pass only when pytest collected at least `floor` tests (full runs) or any (filtered
    runs), ran them, and every failure is on the known list. On a full run a list entry
    that matched nothing is a problem too: the list must not outlive its failures."""
    known = tuple(known)
    if report.collected is None:
        return Verdict((f"pytest stopped before running any test (exit {report.exitstatus}): "
                        f"{real_error(report.output_tail)}",))
    problems: list[str] = []
    if report.collected == 0:
        problems.append("no test was collected")
    elif full_run and report.collected < floor:
        problems.append(f"only {report.collected} tests collected, below the floor of {floor}")
    ran = sum(1 for o, _ in report.outcomes.values())
    if report.collected and ran == 0 and not report.collect_errors:
        problems.append(f"{report.collected} tests collected but none ran (exit {report.exitstatus})")
    if report.exitstatus not in (0, 1) and not report.collect_errors:
        problems.append(f"pytest exited {report.exitstatus}: {real_error(report.output_tail)}")
    unexpected: dict[str, str] = {}
    matched: dict[str, KnownFailure] = {}
    for nodeid, where in sorted(report.failures().items()):
        entry = next((e for e in known if e.matches(nodeid)), None)
        if entry is None:
            unexpected[nodeid] = where
        else:
            matched[nodeid] = entry
    for where, nodeids in by_cause(unexpected):
        kind = "collection error" if nodeids[0] in report.collect_errors else "failure"
        shown = ", ".join(nodeids[:3]) + (f" and {len(nodeids) - 3} more" if len(nodeids) > 3 else "")
        count = f"{len(nodeids)} {kind}s" if len(nodeids) > 1 else kind
        problems.append(f"{count} not on the known-failures list: {shown}: {where}")
    stale = tuple(e for e in known if e not in matched.values()) if full_run else ()
    for e in stale:
        problems.append(f"known failure no longer fails: {e.test} (remove it from the list)")
    return Verdict(tuple(problems), unexpected, matched, stale)


def by_cause(failures: dict[str, str]) -> list[tuple[str, list[str]]]:
    """Failures grouped by their error (file:line: message), largest group first."""
    groups: dict[str, list[str]] = {}
    for nodeid, where in sorted(failures.items()):
        groups.setdefault(where, []).append(nodeid)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


# ----------------------------------------------------------------------------- which tests


def npu_patterns(test_config_text: str | None) -> tuple[str, ...]:
    """The plugin CI's NPU routing patterns for unit tests (the keys under tests/ut of the
    top-level `runner_mapping:` block), or the documented directory conventions when it has
    none. Read line by line (the file holds several YAML documents; only this block's keys,
    one indentation step in, matter)."""
    keys: list[tuple[int, str]] = []
    inside = False
    for line in (test_config_text or "").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            if inside:
                break
            inside = line.split("#", 1)[0].strip() == "runner_mapping:"
            continue
        if inside:
            m = re.match(r"^( +)([^\s#][^#]*?):\s*(#.*)?$", line)
            indent = len(line) - len(line.lstrip())
            if m and (not keys or indent == keys[0][0]):
                keys.append((indent, m.group(2).strip().strip("'\"")))
    found = tuple(k for _, k in keys if k.startswith("tests/ut"))
    return found if keys else CONVENTION_NPU_PATTERNS


def npu_only_files(files: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """Files the plugin's CI runs on an NPU runner (re.search, as its router does)."""
    compiled = [re.compile(p) for p in patterns]
    return sorted(f for f in files if any(c.search(f) for c in compiled))


def npu_ignores(tree: Path) -> list[str]:
    """`--ignore=` arguments for the NPU-routed files of the plugin tree's tests/ut."""
    cfg = tree / TEST_CONFIG
    patterns = npu_patterns(cfg.read_text() if cfg.is_file() else None)
    files = [p.relative_to(tree).as_posix() for p in (tree / "tests" / "ut").rglob("*.py")]
    return [f"--ignore={f}" for f in npu_only_files(files, patterns)]


# ----------------------------------------------------------------------------- running


def run_pytest(python: Path, tree: Path, core_dir: Path, scratch: Path, args: list[str],
               echo: Callable[[str], None] | None, *, timeout: float | None = None) -> RunReport:
    """pytest in the test environment on the exported plugin `tree` (build info and shims
    written first); `echo` receives pytest's output lines (None: keep quiet)."""
    testenv.write_build_info(tree)
    shim = scratch / "shim"
    testenv.write_shims(shim, tree)
    (shim / f"{REPORT_MODULE}.py").write_text(REPORT_PLUGIN)
    report_file = scratch / "report.json"
    report_file.unlink(missing_ok=True)
    env = testenv.test_env(shim, core_dir)
    env[REPORT_ENV] = str(report_file)
    env.setdefault(TIMEOUT_ENV, str(TEST_TIMEOUT))
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-p", testenv.TORCHVISION_SHIM_MODULE,
           "-p", REPORT_MODULE, *args]
    tail: deque[str] = deque(maxlen=200)
    stall = _stall_limit(env)
    proc = subprocess.Popen(cmd, cwd=tree, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, bufsize=1, errors="replace")
    last = [time.monotonic()]
    stalled = threading.Event()
    done = threading.Event()

    def watch() -> None:  # stops only the pytest this call started
        while not done.wait(1.0):
            if time.monotonic() - last[0] > stall:
                stalled.set()
                proc.kill()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert proc.stdout is not None
        prefixes = (f"{tree}{os.sep}", f"{core_dir}{os.sep}", f"{python.parent.parent}{os.sep}")
        for line in proc.stdout:
            last[0] = time.monotonic()
            text = line.rstrip("\n")
            for prefix in prefixes:  # the scratch tree, the installed core, the environment
                text = text.replace(prefix, "")
            tail.append(text)
            if echo:
                echo(line.rstrip("\n"))
        code = proc.wait(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()
        watcher.join()
    if stalled.is_set():
        note = (f"ERROR: pytest stopped by overlay: no output for {stall:g} s ({STALL_ENV}); "
                "a hang outside any test (collection or session teardown)")
        tail.append(note)
        if echo:
            echo(note)
        return parse_report(None, code, tail)
    data = None
    if report_file.is_file():
        try:
            data = json.loads(report_file.read_text())
        except ValueError:
            data = None
    return parse_report(_relative(data, (f"{tree}{os.sep}", f"{core_dir}{os.sep}",
                                         f"{python.parent.parent}{os.sep}")), code, tail)


def _stall_limit(env: dict) -> float:
    """Seconds of silence that stop a run (COMPOSED_TEST_STALL; a bad value is one error)."""
    raw = env.get(STALL_ENV, "").strip()
    if not raw:
        return float(STALL_TIMEOUT)
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):  # NaN fails both comparisons
        raise OverlayError(f"{STALL_ENV}={raw!r} is not a positive number of seconds",
                           hint=f"unset it for the default ({STALL_TIMEOUT} s)")
    return value


def _relative(data: dict | None, prefixes: tuple[str, ...]) -> dict | None:
    """Error texts with the scratch tree and the installed core shown relative."""
    if not data:
        return data

    def rel(text: str) -> str:
        for prefix in prefixes:
            text = text.replace(prefix, "")
        return text

    data["outcomes"] = {n: [o, rel(w)] for n, (o, w) in (data.get("outcomes") or {}).items()}
    data["collect_errors"] = {n: rel(w) for n, w in (data.get("collect_errors") or {}).items()}
    return data


def echo_to_terminal(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
