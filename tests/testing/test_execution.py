"""The forward matrix's execution column end to end below the CLI: the plugin's tests run
(real pytest) with probes at the gate errors' sites; each site is graded failed there,
reached, not reached or not probed, and each crash in plugin code forecast or missed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from fixtures import commit_all, init_repo, write
from overlay.gate import execution as grading
from overlay.testing import execution

WORKER = textwrap.dedent("""\
    from vllm.graph import capture


    def breaks():
        return capture(sizes=[1], stream=None)


    def survives():
        return capture(sizes=[2])


    def never_called():
        return capture(size=3)


    def crashes_elsewhere():
        return {}["missing"]
    """)
TESTS = textwrap.dedent("""\
    from vllm_ascend import worker


    def test_breaks():
        worker.breaks()


    def test_survives():
        assert worker.survives() == [2]


    def test_crashes_elsewhere():
        worker.crashes_elsewhere()
    """)


def plugin_repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "plugin")
    write(repo, {"setup.py": "setup(entry_points={})\n", "vllm_ascend/__init__.py": "",
                 "vllm_ascend/worker.py": WORKER, "tests/ut/test_worker.py": TESTS})
    commit_all(repo, "plugin")
    return repo


def core_dir(tmp_path: Path) -> Path:
    core = tmp_path / "core"
    write(core, {"vllm/__init__.py": "", "vllm/graph.py": "def capture(sizes):\n    return sizes\n"})
    return core


SITES = ["vllm_ascend/worker.py:5", "vllm_ascend/worker.py:9", "vllm_ascend/worker.py:13"]


def test_each_site_is_graded_by_what_the_tests_did_there(tmp_path):
    repo = plugin_repo(tmp_path)
    (tmp_path / "scratch").mkdir()
    run = execution.run_with_probes(Path(sys.executable), repo, core_dir(tmp_path), tmp_path / "scratch",
                                    SITES)
    assert run.placed == {s: True for s in SITES}
    failures = run.report.failures()
    assert set(failures) == {"tests/ut/test_worker.py::test_breaks", "tests/ut/test_worker.py::test_crashes_elsewhere"}
    worker = WORKER
    graded = {}
    for site in SITES:
        line = int(site.rpartition(":")[2])
        span = grading.enclosing_span(worker, line)
        graded[site] = grading.grade_site(site, span, run.placed[site], run.report.probes.get(site, ()), failures)
    assert graded[SITES[0]] == (grading.FAILED_THERE, ["tests/ut/test_worker.py::test_breaks"])
    assert graded[SITES[1]] == (grading.REACHED, ["tests/ut/test_worker.py::test_survives"])
    assert graded[SITES[2]] == (grading.NOT_REACHED, [])
    # the composed branch is untouched: probes go into the export only
    assert "__overlay_probe__" not in (repo / "vllm_ascend" / "worker.py").read_text()
    crashes = grading.grade_failures(failures, "vllm_ascend", {"vllm_ascend/worker.py": [
        grading.enclosing_span(worker, int(s.rpartition(":")[2])) for s in SITES]})
    assert [(c["where"], c["grade"]) for c in crashes] == [
        ("vllm_ascend/worker.py:5", "forecast"), ("vllm_ascend/worker.py:17", "missed")]


def test_without_a_run_or_a_probe_nothing_is_claimed():
    assert grading.grade_site("a.py:1", (1, 1), None, (), {}) == (grading.NOT_RUN, [])
    assert grading.grade_site("a.py:1", (1, 1), False, ("t",), {"t": "a.py:1: boom"}) == (grading.NOT_PROBED, [])


def test_a_failure_outside_the_sites_function_does_not_count_as_failed_there():
    failures = {"t": "vllm_ascend/w.py:40: TypeError: x"}
    assert grading.grade_site("vllm_ascend/w.py:5", (4, 6), True, ("t",), failures) == (grading.REACHED, ["t"])
    assert grading.grade_site("vllm_ascend/w.py:5", (4, 6), True, ("t",),
                              {"t": "vllm_ascend/w.py:6: TypeError: x"}) == (grading.FAILED_THERE, ["t"])


def test_a_run_whose_tests_never_start_is_not_run_and_its_import_crash_is_graded(tmp_path):
    """A plugin that does not import on the release: pytest stops at the conftest. That is
    never "not reached"; the crash in plugin code is the gate error's site: failed there."""
    from overlay.commands.forward import _execution_fields

    repo = init_repo(tmp_path / "plugin")
    write(repo, {"setup.py": "setup(entry_points={})\n", "vllm_ascend/__init__.py": "",
                 "vllm_ascend/boot.py": "import os\n\nfrom vllm.graph import GraphManager\n",
                 "vllm_ascend/worker.py": WORKER,
                 "tests/ut/conftest.py": "import vllm_ascend.boot\n", "tests/ut/test_worker.py": TESTS})
    commit_all(repo, "plugin")
    (tmp_path / "scratch").mkdir()
    sites = ["vllm_ascend/boot.py:3", "vllm_ascend/worker.py:9"]
    run = execution.run_with_probes(Path(sys.executable), repo, core_dir(tmp_path), tmp_path / "scratch", sites)
    assert run.report.collected is None
    items = [{"where": s} for s in sites]
    fields = _execution_fields(run, repo, items)["execution"]
    assert items[0]["execution"].startswith(grading.FAILED_THERE)
    assert items[1]["execution"] == grading.DID_NOT_START  # not "not reached": nothing ran
    assert fields["collected"] is None and "GraphManager" in fields["stopped"]
    assert [(c["where"], c["grade"]) for c in fields["plugin_crash_sites"]] == [("vllm_ascend/boot.py:3", "forecast")]
