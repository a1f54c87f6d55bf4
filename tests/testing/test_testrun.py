"""tools/overlay/testing/testrun.py: the record, the verdict, the known-failures list, NPU routing,
and real pytest runs on small synthetic plugin trees."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from fixtures import write
from overlay.testing import testrun
from overlay.errors import OverlayError
from overlay.testing.testrun import KnownFailure, RunReport

# The shape pytest 8 prints when a conftest does not import (from a real composed-test run
# on vLLM 0.25.0, paths shortened).
CONFTEST_ERROR_OUTPUT = [
    "INFO 11-30 14:44:12 [platform.py:60] Breakable cudagraph is force disabled on Ascend",
    "ImportError while loading conftest 'tests/ut/conftest.py'.",
    "tests/ut/conftest.py:114: in <module>",
    "    adapt_patch()",
    "vllm_ascend/patch/platform/patch_glm47_tool_call_parser.py:26: in <module>",
    "    Glm47MoeModelToolParser._extract_tool_call_regions",
    "E   AttributeError: type object 'Glm47MoeModelToolParser' has no attribute '_extract_tool_call_regions'",
]


def report(outcomes: dict[str, str], *, collected: int | None = None, exitstatus: int = 0,
           collect_errors: dict[str, str] | None = None) -> RunReport:
    return RunReport(exitstatus, len(outcomes) if collected is None else collected,
                     {n: (o, f"{n}: boom" if o in ("failed", "error") else "") for n, o in outcomes.items()},
                     collect_errors or {})


KNOWN = KnownFailure("tests/ut/ops/test_gdn.py", ("v0.25.0",), "core 0.25.0 changed the GDN builder, not dense")


def test_a_clean_run_passes():
    v = testrun.judge(report({"tests/ut/a.py::t1": "passed", "tests/ut/a.py::t2": "skipped"}), (), floor=2)
    assert v.ok and v.problems == ()


def test_a_run_that_stopped_before_collecting_fails_with_the_real_error():
    r = testrun.parse_report(None, 4, CONFTEST_ERROR_OUTPUT)
    v = testrun.judge(r, (), floor=1)
    assert not v.ok
    (problem,) = v.problems
    assert problem.startswith("pytest stopped before running any test (exit 4): ImportError while loading conftest")
    assert "patch_glm47_tool_call_parser.py:26" in problem
    assert problem.endswith("AttributeError: type object 'Glm47MoeModelToolParser' has no attribute "
                            "'_extract_tool_call_regions'")


@pytest.mark.parametrize("r, expected", [
    (report({}, collected=0, exitstatus=5), "no test was collected"),
    (report({"tests/ut/a.py::t": "passed"}), "only 1 tests collected, below the floor of 10"),
    (report({}, collected=12, exitstatus=2), "12 tests collected but none ran"),
])
def test_nothing_or_too_little_ran_fails(r, expected):
    v = testrun.judge(r, (), floor=10)
    assert not v.ok and any(p.startswith(expected) for p in v.problems)


def test_a_filtered_run_skips_the_floor_but_not_the_empty_check():
    assert testrun.judge(report({"tests/ut/a.py::t": "passed"}), (), floor=10, full_run=False).ok
    assert not testrun.judge(report({}, collected=0, exitstatus=5), (), floor=10, full_run=False).ok


def test_a_collection_error_fails_even_when_everything_else_passed():
    r = report({"tests/ut/a.py::t": "passed"}, exitstatus=2,
               collect_errors={"tests/ut/b.py": "tests/ut/b.py:3: ImportError: no module x"})
    v = testrun.judge(r, (), floor=1)
    assert v.problems == ("collection error not on the known-failures list: tests/ut/b.py: "
                          "tests/ut/b.py:3: ImportError: no module x",)


def test_failures_must_be_on_the_list_and_the_list_must_still_fail():
    r = report({"tests/ut/ops/test_gdn.py::test_builder[x]": "failed", "tests/ut/a.py::t": "error",
                "tests/ut/a.py::u": "passed"})
    v = testrun.judge(r, (KNOWN,), floor=1)
    assert list(v.known) == ["tests/ut/ops/test_gdn.py::test_builder[x]"]
    assert v.problems == ("failure not on the known-failures list: tests/ut/a.py::t: tests/ut/a.py::t: boom",)
    # Fixed upstream or by the series: the entry is stale and the run says so.
    v = testrun.judge(report({"tests/ut/ops/test_gdn.py::test_builder[x]": "passed"}), (KNOWN,), floor=1)
    assert v.problems == ("known failure no longer fails: tests/ut/ops/test_gdn.py (remove it from the list)",)
    assert testrun.judge(report({"tests/ut/a.py::u": "passed"}), (KNOWN,), floor=1, full_run=False).ok


@pytest.mark.parametrize("pattern, nodeid, hit", [
    ("tests/ut/a.py", "tests/ut/a.py::T::t", True),
    ("tests/ut/a.py", "tests/ut/a.py", True),
    ("tests/ut/a.py", "tests/ut/a.py.bak::t", False),
    ("tests/ut/a.py::T", "tests/ut/a.py::T::t[1]", True),
    ("tests/ut/a.py::T", "tests/ut/a.py::Tx::t", False),
    ("tests/ut/ops/", "tests/ut/ops/x/test_y.py::t", True),
])
def test_known_failure_matching(pattern, nodeid, hit):
    assert KnownFailure(pattern, ("p",), "a cause in words").matches(nodeid) is hit


def test_report_line_and_json():
    r = report({"a::1": "passed", "a::2": "failed", "a::3": "error", "a::4": "skipped"},
               collect_errors={"b.py": "x"})
    assert r.line() == "4 collected: 1 passed, 2 failed, 1 skipped, 1 collection error(s)"
    assert r.to_json()["failures"] == {"a::2": "a::2: boom", "a::3": "a::3: boom", "b.py": "x"}
    assert testrun.parse_report(None, 4, []).line() == "collection did not finish"


# ----------------------------------------------------------------------------- the list


def write_list(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "known.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_the_committed_list_loads_and_every_entry_has_a_cause():
    root = Path(__file__).resolve().parents[2]
    known = testrun.load_known_failures(root / "requirements" / "composed-test-known-failures.yaml")
    assert known.default_floor > 0
    for e in known.entries:
        assert e.test.startswith("tests/ut/") and e.pins and len(e.cause.split()) >= 4


def test_load_known_failures(tmp_path):
    known = testrun.load_known_failures(write_list(tmp_path, """\
        floor:
          default: 100
          v0.25.0: 120
        known-failures:
          - test: tests/ut/ops/test_gdn.py
            pins: [v0.25.0]
            cause: >
              core 0.25.0 changed the
              GDN builder
        """))
    assert known.floor("v0.25.0") == 120 and known.floor("v0.23.0") == 100
    assert known.for_pin("v0.25.0") == (KnownFailure("tests/ut/ops/test_gdn.py", ("v0.25.0",),
                                                     "core 0.25.0 changed the GDN builder"),)
    assert known.for_pin("v0.24.0") == ()


@pytest.mark.parametrize("text, message, line", [
    ("known-failures: []\n", "expected a mapping with `floor:`", 1),
    ("floor: {v1: 3}\n", "`floor:` must map `default`", 1),
    ("floor:\n  default: 0\n", "floor `default` must be a positive number", 2),
    ("floor: {default: 1}\nknown-failures:\n  - test: tests/ut/a.py\n    pins: [p]\n",
     "exactly `test`, `pins` and `cause`", 3),
    ("floor: {default: 1}\nknown-failures:\n  - test: a.py\n    pins: [p]\n    cause: one two three four\n",
     "`test` must be a pytest node id", 3),
    ("floor: {default: 1}\nknown-failures:\n  - test: tests/a.py\n    pins: p\n    cause: one two three four\n",
     "tests/a.py: `pins` must be a list", 4),
    ("floor: {default: 1}\nknown-failures:\n  - test: tests/a.py\n    pins: [p]\n    cause: flaky\n",
     "tests/a.py: give the cause in a sentence", 5),
    ("floor: [\n", "YAML syntax error", 2),
])
def test_a_bad_list_is_one_error_naming_file_and_line(tmp_path, text, message, line):
    with pytest.raises(OverlayError) as err:
        testrun.load_known_failures(write_list(tmp_path, text), "known.yaml")
    assert err.value.one_line().startswith(f"known.yaml:{line}: ") and message in err.value.one_line()


# ----------------------------------------------------------------------------- NPU routing

# The shape of the plugin's .github/workflows/scripts/test_config.yaml (801a6b41): module
# documents first, then `runner_mapping:` in the second YAML document.
TEST_CONFIG = textwrap.dedent("""\
    - name: default_cpu_ut
      tests: [tests/ut]
    ---
    runner_mapping:
      tests/e2e/pull_request/one_card:
        default: a2_x1
        310p: 310p_x1
      tests/ut/.+/a3_2:
        default: a3_x2
      tests/ut/.+/a2:
        default: a2_x1
    """)


def test_npu_routing_follows_the_plugins_runner_mapping():
    patterns = testrun.npu_patterns(TEST_CONFIG)
    assert patterns == ("tests/ut/.+/a3_2", "tests/ut/.+/a2")
    files = ["tests/ut/ops/a2/test_x.py", "tests/ut/ops/a2_2/test_x.py", "tests/ut/ops/a3_2/test_y.py",
             "tests/ut/ops/test_z.py", "tests/ut/_310p/attention/test_attention_mask_310.py",
             "tests/ut/_310p/ops/a2/test_w.py"]
    # tests/ut/_310p mirrors the vllm_ascend/_310p package; the CI routes it to its CPU runner.
    assert testrun.npu_only_files(files, patterns) == [
        "tests/ut/_310p/ops/a2/test_w.py", "tests/ut/ops/a2/test_x.py", "tests/ut/ops/a2_2/test_x.py",
        "tests/ut/ops/a3_2/test_y.py"]


def test_without_a_runner_mapping_the_documented_conventions_apply():
    assert testrun.npu_patterns(None) == testrun.CONVENTION_NPU_PATTERNS
    assert testrun.npu_patterns("- name: x\n") == testrun.CONVENTION_NPU_PATTERNS
    assert testrun.npu_patterns("a: [\n") == testrun.CONVENTION_NPU_PATTERNS
    files = ["tests/ut/x/310p/test_a.py", "tests/ut/x/a3_4/test_b.py", "tests/ut/x/test_c.py"]
    assert testrun.npu_only_files(files, testrun.CONVENTION_NPU_PATTERNS) == files[:2]


# ----------------------------------------------------------------------------- real pytest runs


def plugin_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    tree = tmp_path / "plugin"
    write(tree, {"setup.py": "setup(entry_points={'vllm.platform_plugins': ['ascend = vllm_ascend:register']})\n",
                 "vllm_ascend/__init__.py": "", TEST_CONFIG_PATH: TEST_CONFIG, **files})
    return tree


TEST_CONFIG_PATH = testrun.TEST_CONFIG


def run(tmp_path: Path, tree: Path, *extra: str) -> RunReport:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return testrun.run_pytest(Path(sys.executable), tree, tmp_path / "no-core", scratch,
                              ["-q", "tests/ut", *testrun.npu_ignores(tree), *extra], echo=None)


def test_run_records_outcomes_and_leaves_out_npu_routed_files(tmp_path):
    tree = plugin_tree(tmp_path, {
        "tests/ut/test_a.py": "import pytest\n\ndef test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n\n"
                              "@pytest.mark.skip(reason='x')\ndef test_skip():\n    pass\n\n"
                              "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n\n"
                              "def test_setup_error(broken):\n    pass\n",
        "tests/ut/ops/a2/test_npu.py": "def test_npu():\n    raise SystemExit('ran an NPU test')\n",
        "tests/ut/_310p/test_310.py": "def test_cpu_310():\n    pass\n",
    })
    r = run(tmp_path, tree)
    assert r.exitstatus == 1 and r.collected == 5
    assert {n: o for n, (o, _) in r.outcomes.items()} == {
        "tests/ut/test_a.py::test_ok": "passed", "tests/ut/test_a.py::test_bad": "failed",
        "tests/ut/test_a.py::test_skip": "skipped", "tests/ut/test_a.py::test_setup_error": "error",
        "tests/ut/_310p/test_310.py::test_cpu_310": "passed"}
    where = r.outcomes["tests/ut/test_a.py::test_bad"][1]
    assert where.startswith("tests/ut/test_a.py:7: ") and "assert 1 == 2" in where
    assert (tree / "vllm_ascend" / "_build_info.py").is_file()


def test_run_with_a_conftest_that_does_not_import_is_never_green(tmp_path):
    tree = plugin_tree(tmp_path, {
        "tests/ut/conftest.py": "import helper_that_is_gone\n",
        "tests/ut/test_a.py": "def test_ok():\n    pass\n",
    })
    r = run(tmp_path, tree)
    v = testrun.judge(r, (), floor=1)
    assert r.collected is None and not v.ok
    assert "ImportError while loading conftest 'tests/ut/conftest.py'" in v.problems[0]
    assert v.problems[0].endswith("ModuleNotFoundError: No module named 'helper_that_is_gone'")


def test_run_with_a_collection_error_fails(tmp_path):
    tree = plugin_tree(tmp_path, {
        "tests/ut/test_a.py": "def test_ok():\n    pass\n",
        "tests/ut/test_b.py": "from vllm.gone import thing\n",
    })
    r = run(tmp_path, tree)
    v = testrun.judge(r, (), floor=1)
    assert r.exitstatus == 2 and list(r.collect_errors) == ["tests/ut/test_b.py"]
    assert v.problems == (f"collection error not on the known-failures list: tests/ut/test_b.py: "
                          f"{r.collect_errors['tests/ut/test_b.py']}",)
    assert "No module named 'vllm'" in r.collect_errors["tests/ut/test_b.py"]


def test_run_that_selects_nothing_fails(tmp_path):
    tree = plugin_tree(tmp_path, {"tests/ut/test_a.py": "def test_ok():\n    pass\n"})
    r = run(tmp_path, tree, "-k", "nothing_matches")
    assert r.collected == 0 and not testrun.judge(r, (), floor=1, full_run=False).ok


def test_unexpected_failures_are_reported_once_per_cause():
    r = RunReport(1, 6, {f"tests/ut/a.py::t{i}": ("failed", "vllm/config/device.py:56: RuntimeError: no device")
                         for i in range(5)} | {"tests/ut/b.py::u": ("error", "b.py:1: x")}, {})
    v = testrun.judge(r, (), floor=1)
    assert v.problems == (
        "5 failures not on the known-failures list: tests/ut/a.py::t0, tests/ut/a.py::t1, tests/ut/a.py::t2 "
        "and 2 more: vllm/config/device.py:56: RuntimeError: no device",
        "failure not on the known-failures list: tests/ut/b.py::u: b.py:1: x")
    assert len(v.unexpected) == 6


def test_runner_mapping_keys_are_read_with_comments_and_quotes():
    text = ("---\nrunner_mapping:   # routing\n  # a comment\n  \"tests/ut/.+/a2\":\n    default: a2_x1\n"
            "  'tests/e2e/x':\n    default: a3_x2\npartition:\n  tests/ut/not/this: 2\n")
    assert testrun.npu_patterns(text) == ("tests/ut/.+/a2",)


def test_a_test_that_blocks_fails_alone_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv(testrun.TIMEOUT_ENV, "1")
    tree = plugin_tree(tmp_path, {
        "tests/ut/test_a.py": "import socket\n\ndef test_blocks():\n    a, b = socket.socketpair()\n    a.recv(1)\n\n"
                              "def test_after():\n    pass\n",
    })
    r = run(tmp_path, tree)
    assert r.outcomes["tests/ut/test_a.py::test_after"][0] == "passed"
    outcome, where = r.outcomes["tests/ut/test_a.py::test_blocks"]
    assert outcome == "failed" and "TestTimedOut" in where and "ran past 1 s" in where


def test_a_run_that_stalls_in_collection_is_stopped_and_never_green(tmp_path, monkeypatch):
    """A hang outside any test (a v0.31.0 run sat 30 minutes in collection, in a zmq context's
    __del__), where the per-test clock cannot reach: with no output for the stall limit
    (COMPOSED_TEST_STALL) the run is stopped, says so, and is judged a stopped run."""
    monkeypatch.setenv(testrun.STALL_ENV, "2")
    tree = plugin_tree(tmp_path, {
        "tests/ut/conftest.py": "import time\nprint('collecting', flush=True)\ntime.sleep(600)\n",
        "tests/ut/test_a.py": "def test_ok():\n    pass\n",
    })
    r = run(tmp_path, tree)
    v = testrun.judge(r, (), floor=1)
    assert r.collected is None and not v.ok
    assert "no output for 2 s" in v.problems[0]
