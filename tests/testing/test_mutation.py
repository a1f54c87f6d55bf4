"""tools/overlay/testing/mutation.py: pure classification, and the whole check on a synthetic
plugin repository whose patches are well tested, tested only through a helper, tested
by nothing but tests, or impossible to revert."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fixtures import commit_all, init_repo, run_git, write
from overlay.testing import mutation, testrun
from overlay.testing.mutation import CONFLICT, INVALID, KILLED, NO_CODE, SURVIVED, UNTESTED, Mutant, PatchUnderTest
from overlay.testing.testrun import RunReport


@pytest.mark.parametrize("path, is_test", [
    ("tests/ut/worker/test_x.py", True), ("tests/ut/conftest.py", True), ("tests/helpers/fake.py", True),
    ("vllm_ascend/conftest.py", True), ("pkg/test_thing.py", True), ("pkg/thing_test.py", True),
    ("vllm_ascend/worker/model_runner.py", False), ("vllm_ascend/testing.py", False),
    ("docs/tests.md", False), ("vllm_ascend/envs.py", False),
])
def test_is_test_path(path, is_test):
    assert mutation.is_test_path(path) is is_test


def test_split_paths_and_mutant_sets():
    code, tests = mutation.split_paths(["b.py", "tests/ut/test_b.py", "a.py", "a.py"])
    assert code == ("a.py", "b.py") and tests == ("tests/ut/test_b.py",)
    assert mutation.mutant_sets(code) == [("a.py", "b.py"), ("a.py",), ("b.py",)]
    assert mutation.mutant_sets(("a.py",)) == [("a.py",)]


def rep(outcomes: dict[str, str], collected: int | None = None, errors: dict | None = None) -> RunReport:
    return RunReport(0, len(outcomes) if collected is None else collected,
                     {n: (o, "x.py:1: boom" if o in ("failed", "error") else "") for n, o in outcomes.items()},
                     errors or {})


def test_classify_a_mutant_run():
    assert mutation.classify(rep({"t.py::a": "passed", "t.py::b": "failed"})) == (
        KILLED, "1 of 2 failed, first: x.py:1: boom")
    assert mutation.classify(rep({}, errors={"t.py": "t.py:1: ImportError: gone"})) == (
        KILLED, "the tests no longer import: t.py:1: ImportError: gone")
    assert mutation.classify(testrun.parse_report(None, 4, ["E   ImportError: x"]))[0] == KILLED
    assert mutation.classify(rep({"t.py::a": "passed", "t.py::s": "skipped"})) == (SURVIVED, "all 1 passed, 1 skipped")
    assert mutation.classify(rep({}, collected=0))[0] == INVALID


def test_the_unmutated_run_must_run_and_pass_every_listed_test():
    tests = ("t.py", "u.py::TestU")
    ok = rep({"t.py::a": "passed", "u.py::TestU::b": "passed"})
    assert mutation.check_unmutated(ok, tests) is None
    assert "no test ran for u.py::TestU" in mutation.check_unmutated(rep({"t.py::a": "passed"}), tests)
    assert "fail without any mutation: t.py::a" in mutation.check_unmutated(
        rep({"t.py::a": "failed", "u.py::TestU::b": "passed"}), tests)
    assert "every test is skipped" in mutation.check_unmutated(
        rep({"t.py::a": "skipped", "u.py::TestU::b": "skipped"}), tests)
    assert "pytest stopped" in mutation.check_unmutated(testrun.parse_report(None, 4, ["E   x"]), tests)


def test_subset_keeps_the_listed_tests_only():
    r = rep({"t.py::a": "passed", "u.py::b": "failed"}, errors={"v.py": "boom"})
    s = mutation.subset(r, ["t.py"])
    assert s.collected == 1 and list(s.outcomes) == ["t.py::a"] and s.collect_errors == {}


def test_a_patch_is_as_good_as_its_weakest_mutant():
    k = Mutant(("a.py",), KILLED, "")
    s = Mutant(("b.py",), SURVIVED, "all 5 passed")
    c = Mutant(("c.py",), CONFLICT, "x")
    assert mutation.patch_result("p", [k, k]).status == KILLED
    r = mutation.patch_result("p", [k, c, s])
    assert r.status == SURVIVED and r.detail == "1 of 3 killed; survived: revert b.py (all 5 passed)"
    assert mutation.patch_result("p", [k, c]).status == CONFLICT
    assert mutation.exit_code([mutation.Result("p", KILLED, ""), mutation.Result("q", NO_CODE, "")]) == 0
    assert mutation.exit_code([mutation.Result("p", KILLED, ""), mutation.Result("q", UNTESTED, "")]) == 1
    assert mutation.exit_code([]) == 1


# ----------------------------------------------------------------------------- a whole check

BASE = {
    "setup.py": "setup(entry_points={'vllm.platform_plugins': ['ascend = vllm_ascend:register']})\n",
    "vllm_ascend/__init__.py": "",
    "vllm_ascend/calc.py": "def scale(x):\n    return x\n",
    "vllm_ascend/runner.py": "def build(**kwargs):\n    return dict(kwargs)\n\n\ndef start():\n    return build()\n",
    "vllm_ascend/level.py": "LEVEL = 1\n",
    "tests/ut/test_base.py": "def test_base():\n    pass\n",
}
# Each patch: (message, files); tests are listed per patch below.
PATCHES = [
    ("well tested", {"vllm_ascend/calc.py": "def scale(x):\n    return 2 * x\n",
                     "tests/ut/test_scale.py": "from vllm_ascend.calc import scale\n\n\n"
                                               "def test_scale():\n    assert scale(3) == 6\n"}),
    ("wiring untested", {
        "vllm_ascend/helper.py": "def compat_kwargs():\n    return {'flag': True}\n",
        "vllm_ascend/runner.py": "from vllm_ascend.helper import compat_kwargs\n\n\ndef build(**kwargs):\n"
                                 "    return dict(kwargs)\n\n\ndef start():\n    return build(**compat_kwargs())\n",
        "tests/ut/test_helper.py": "from vllm_ascend.helper import compat_kwargs\n\n\n"
                                   "def test_helper():\n    assert compat_kwargs() == {'flag': True}\n"}),
    ("tests only", {"tests/ut/test_more.py": "def test_more():\n    pass\n"}),
    ("level two", {"vllm_ascend/level.py": "LEVEL = 2\n",
                   "tests/ut/test_level.py": "from vllm_ascend.level import LEVEL\n\n\n"
                                             "def test_level():\n    assert LEVEL >= 2\n"}),
    ("level three", {"vllm_ascend/level.py": "LEVEL = 3\n",
                     "tests/ut/test_level3.py": "from vllm_ascend.level import LEVEL\n\n\n"
                                                "def test_level3():\n    assert LEVEL == 3\n"}),
    ("broken test", {"vllm_ascend/half.py": "def half(x):\n    return x / 2\n",
                     "tests/ut/test_half.py": "from vllm_ascend.half import half\n\n\n"
                                              "def test_half():\n    assert half(4) == 3\n"}),
]
TESTS = {
    "well tested": ("tests/ut/test_scale.py",),
    "wiring untested": ("tests/ut/test_helper.py",),
    "tests only": ("tests/ut/test_more.py",),
    "level two": ("tests/ut/test_level.py",),
    "level three": ("tests/ut/test_level3.py",),
    "broken test": ("tests/ut/test_half.py",),
}


@pytest.fixture(scope="module")
def composed(tmp_path_factory) -> tuple[Path, str, list[PatchUnderTest]]:
    repo = init_repo(tmp_path_factory.mktemp("mut") / "plugin")
    write(repo, BASE)
    commit_all(repo, "base")
    patches = []
    for message, files in PATCHES:
        write(repo, files)
        patches.append(PatchUnderTest(f"{message}.patch", commit_all(repo, message), TESTS[message]))
    return repo, run_git(["rev-parse", "HEAD"], repo), patches


def run_tests(scratch_root: Path):
    def run(tree: Path, tests: tuple[str, ...]) -> RunReport:
        scratch = scratch_root / f"run-{len(list(scratch_root.iterdir()))}"
        scratch.mkdir()
        return testrun.run_pytest(Path(sys.executable), tree, scratch_root / "no-core", scratch,
                                  ["-q", *tests], echo=None)
    return run


def test_the_check_on_a_synthetic_series(composed, tmp_path):
    repo, head, patches = composed
    before = run_git(["status", "--porcelain"], repo)
    seen: list[str] = []
    results = {r.patch: r for r in mutation.check(repo, head, patches, run_tests(tmp_path), seen.append)}
    assert results["well tested.patch"].status == KILLED
    assert "test_scale.py:5: assert 3 == 6" in results["well tested.patch"].mutants[0].detail
    wiring = results["wiring untested.patch"]
    assert wiring.status == SURVIVED
    assert [(m.reverted, m.status) for m in wiring.mutants] == [
        (("vllm_ascend/helper.py", "vllm_ascend/runner.py"), KILLED),
        (("vllm_ascend/helper.py",), KILLED),
        (("vllm_ascend/runner.py",), SURVIVED)]
    assert results["tests only.patch"].status == NO_CODE
    # A later patch rewrote the same line: the revert cannot be made on top of the series.
    assert results["level two.patch"].status == CONFLICT
    assert results["level three.patch"].status == KILLED
    assert results["broken test.patch"].status == INVALID
    assert "fail without any mutation" in results["broken test.patch"].detail
    assert mutation.exit_code(list(results.values())) == 1
    assert any("revert vllm_ascend/runner.py: survived" in s for s in seen)
    # The composed repository is left as it was: mutants live in clones.
    assert run_git(["status", "--porcelain"], repo) == before
    assert run_git(["rev-parse", "HEAD"], repo) == head


def test_a_patch_without_tests_is_untested(composed, tmp_path):
    repo, head, patches = composed
    bare = [PatchUnderTest(patches[0].patch, patches[0].commit, ())]
    (result,) = mutation.check(repo, head, bare, run_tests(tmp_path))
    assert result.status == UNTESTED and mutation.exit_code([result]) == 1


def test_known_failures_that_fail_unmutated_are_set_aside_and_cannot_kill():
    """A pin set's known failure (requirements/composed-test-known-failures.yaml) in a
    patch's test file fails with and without the patch: it is set aside, named, and only
    the tests that passed unmutated can kill a mutant (v0.31.0's 0021 was INVALID for 8
    known kvpp-history failures in tests/ut/worker/test_model_runner_v2.py)."""
    known = (testrun.KnownFailure("t.py::k", ("p",), "read-only property"),)
    unmutated = rep({"t.py::a": "passed", "t.py::k": "failed", "t.py::z": "failed"})
    kept, aside = mutation.without_known(unmutated, known)
    assert aside == ("t.py::k",) and set(kept.outcomes) == {"t.py::a", "t.py::z"} and kept.collected == 2
    assert "fail without any mutation: t.py::z" in mutation.check_unmutated(kept, ("t.py",))
    clean, aside = mutation.without_known(rep({"t.py::a": "passed", "t.py::k": "failed"}), known)
    assert mutation.check_unmutated(clean, ("t.py",)) is None
    # on the mutant, the set-aside test failing again is no kill
    assert mutation.classify(mutation.drop(rep({"t.py::a": "passed", "t.py::k": "failed"}), aside))[0] == SURVIVED
    # a known failure that passes unmutated is not set aside: it can kill
    assert mutation.without_known(rep({"t.py::k": "passed"}), known)[1] == ()
