"""Mutation check: does each patch's own test notice when the patch's change is gone?

For every patch of a composed target, a mutant is the composed tree with that patch's
non-test change reverted (a 3-way reverse apply on top of the whole series, so later
patches stay) and its tests kept. The patch's tests (series.yaml `tests:`) run on the
unmutated tree first and must pass there; on the mutant they must fail ("killed"). A
mutant whose tests still pass "survived": the tests do not pin the change down.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

from overlay import gitcmd
from overlay.testing.testrun import KnownFailure, RunReport, real_error

KILLED, SURVIVED, INVALID, CONFLICT, NO_CODE, UNTESTED = (
    "killed", "survived", "invalid", "conflict", "no-code", "untested")
PASSING = (KILLED, NO_CODE)  # the statuses that do not fail the check


def is_test_path(path: str) -> bool:
    """A test file or test helper: under tests/, or named test_*.py / *_test.py / conftest.py."""
    p = PurePosixPath(path)
    return (p.parts[:1] == ("tests",) or p.name == "conftest.py"
            or (p.suffix == ".py" and (p.name.startswith("test_") or p.stem.endswith("_test"))))


def split_paths(paths: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(code paths, test paths) of a patch's changed files."""
    paths = sorted(set(paths))
    return tuple(p for p in paths if not is_test_path(p)), tuple(p for p in paths if is_test_path(p))


@dataclass(frozen=True)
class Mutant:
    reverted: tuple[str, ...]  # the patch's non-test files reverted in this mutant
    status: str  # killed | survived | conflict | invalid
    detail: str

    def line(self) -> str:
        return f"revert {', '.join(self.reverted)}: {self.status}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Result:
    patch: str
    status: str  # killed | survived | invalid | conflict | no-code | untested
    detail: str
    mutants: tuple[Mutant, ...] = ()

    def line(self) -> str:
        return f"{self.patch}: {self.status}" + (f" ({self.detail})" if self.detail else "")


# A patch is only as well tested as its weakest mutant.
_WORST_FIRST = (SURVIVED, INVALID, CONFLICT, KILLED)


def mutant_sets(code_paths: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The whole non-test change, then each of its files alone when there are several: a
    test that only notices the whole revert (say, because a helper it imports is gone)
    does not prove that each call site is covered."""
    return [code_paths] + ([(p,) for p in code_paths] if len(code_paths) > 1 else [])


def patch_result(patch: str, mutants: list[Mutant]) -> Result:
    status = next(s for s in _WORST_FIRST if any(m.status == s for m in mutants))
    killed = sum(m.status == KILLED for m in mutants)
    if status == KILLED:
        detail = f"{killed} of {len(mutants)} mutant(s) killed"
    else:
        bad = [m for m in mutants if m.status == status]
        detail = f"{killed} of {len(mutants)} killed; {status}: " + "; ".join(
            f"revert {', '.join(m.reverted)}" + (f" ({m.detail})" if m.detail else "") for m in bad)
    return Result(patch, status, detail, tuple(mutants))


def tests_ran(report: RunReport, tests: Iterable[str]) -> dict[str, list[str]]:
    """For each listed test (file or node id), the node ids of it that ran."""
    return {t: [n for n in report.outcomes if n == t or n.startswith(t + "::")] for t in tests}


def subset(report: RunReport, tests: Iterable[str]) -> RunReport:
    """The part of a run that belongs to the listed tests (files or node ids)."""
    tests = tuple(tests)

    def mine(nodeid: str) -> bool:
        return any(nodeid == t or nodeid.startswith(t + "::") or t.startswith(nodeid + "::") for t in tests)

    if report.collected is None:
        return report
    outcomes = {n: o for n, o in report.outcomes.items() if mine(n)}
    errors = {n: w for n, w in report.collect_errors.items() if mine(n)}
    return RunReport(report.exitstatus, len(outcomes), outcomes, errors, report.output_tail)


def drop(report: RunReport, nodeids: Iterable[str]) -> RunReport:
    """The run without the given tests (pure)."""
    gone = set(nodeids)
    if report.collected is None or not gone:
        return report
    outcomes = {n: o for n, o in report.outcomes.items() if n not in gone}
    return RunReport(report.exitstatus, report.collected - (len(report.outcomes) - len(outcomes)),
                     outcomes, report.collect_errors, report.output_tail)


def without_known(report: RunReport, known: Iterable[KnownFailure]) -> tuple[RunReport, tuple[str, ...]]:
    """(the unmutated run without the pin set's known failures that failed in it, those node
    ids): a test failing with and without the patch cannot judge a mutant (pure)."""
    known = tuple(known)
    aside = tuple(sorted(n for n, (o, _) in report.outcomes.items()
                         if o in ("failed", "error") and any(k.matches(n) for k in known)))
    return drop(report, aside), aside


def check_unmutated(report: RunReport, tests: tuple[str, ...]) -> str | None:
    """Why the patch's tests cannot judge a mutant (they must all run and pass), or None."""
    if report.collected is None:
        return f"pytest stopped before running the tests on the unmutated tree: {real_error(report.output_tail)}"
    missing = [t for t, ran in tests_ran(report, tests).items() if not ran]
    if missing:
        return f"no test ran for {', '.join(missing)} on the unmutated tree"
    failing = sorted(report.failures())
    if failing:
        return f"{len(failing)} test(s) fail without any mutation: {', '.join(failing[:3])}"
    if not any(o == "passed" for o, _ in report.outcomes.values()):
        return "every test is skipped on the unmutated tree"
    return None


def classify(report: RunReport) -> tuple[str, str]:
    """(status, detail) of the patch's tests run on its mutant."""
    if report.collected is None:
        return KILLED, f"pytest stopped before running any test: {real_error(report.output_tail)}"
    if report.collect_errors:
        return KILLED, f"the tests no longer import: {next(iter(sorted(report.collect_errors.values())))}"
    failures = report.failures()
    if failures:
        where = next(iter(sorted(failures.values())))
        return KILLED, f"{len(failures)} of {max(report.collected, len(failures))} failed, first: {where}"
    if report.collected == 0:
        return INVALID, "no test collected on the mutant"
    passed = report.count("passed")
    return SURVIVED, f"all {passed} passed" + (f", {report.count('skipped')} skipped" if report.count("skipped") else "")


# ----------------------------------------------------------------------------- git


def changed_paths(repo: Path, commit: str) -> list[str]:
    """Files a composed patch commit changes, against its parent."""
    out = gitcmd.git(["diff", "--name-only", "-z", "--no-renames", "--end-of-options", f"{commit}^",
                      commit], cwd=repo).stdout
    return [name for name in out.split("\0") if name]


def make_mutant(repo: Path, head: str, commit: str, code_paths: tuple[str, ...], dest: Path) -> str | None:
    """A work tree at `dest` holding `head` with `commit`'s change to `code_paths` reverted.
    Returns why that was impossible (a conflict with later patches), or None."""
    gitcmd.git(["clone", "-q", "--shared", "--no-checkout", str(repo), str(dest)])
    gitcmd.git(["checkout", "-q", "--detach", head], cwd=dest)
    diff = gitcmd.git(["diff", "--binary", "--no-renames", "--end-of-options", f"{commit}^", commit,
                       "--", *code_paths], cwd=dest).stdout
    proc = gitcmd.git(["apply", "-R", "--3way", "--index"], cwd=dest, input=diff, check=False)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        return lines[-1] if lines else f"git apply -R exited {proc.returncode}"
    return None


# ----------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class PatchUnderTest:
    patch: str
    commit: str  # the patch's commit in the composed repository
    tests: tuple[str, ...]  # series.yaml `tests:`


RunTests = Callable[[Path, tuple[str, ...]], RunReport]  # (tree, tests) -> what pytest recorded


def check(repo: Path, head: str, patches: Iterable[PatchUnderTest], run_tests: RunTests,
          progress: Callable[[str], None] | None = None, scratch: Path | None = None,
          known: Iterable[KnownFailure] = ()) -> list[Result]:
    """One Result per patch, in series order. `run_tests` runs pytest on a tree. `known`: the
    pin set's known failures; those that fail on the unmutated tree are set aside (and said)."""
    say = progress or (lambda msg: None)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="mutation-", dir=scratch) as tmp:
        base = Path(tmp) / "unmutated"
        gitcmd.git(["clone", "-q", "--shared", "--no-checkout", str(repo), str(base)])
        gitcmd.git(["checkout", "-q", "--detach", head], cwd=base)
        patches = list(patches)
        say("the series' tests on the unmutated tree")
        unmutated = run_tests(base, tuple(t for p in patches for t in p.tests))
        for n, p in enumerate(patches, 1):
            code, tests_changed = split_paths(changed_paths(repo, p.commit))
            if not p.tests:
                results.append(Result(p.patch, UNTESTED, "series.yaml lists no tests for it"))
            elif not code:
                results.append(Result(p.patch, NO_CODE, f"only test files: {', '.join(tests_changed)}"))
            else:
                mine, aside = without_known(subset(unmutated, p.tests), known)
                if aside:
                    say(f"[{n}] {p.patch}: {len(aside)} known failure(s) of this pin set set aside "
                        f"(they fail unmutated too): {', '.join(aside[:3])}")
                why = check_unmutated(mine, p.tests)
                if why:
                    results.append(Result(p.patch, INVALID, why))
                else:
                    mutants = []
                    for k, reverted in enumerate(mutant_sets(code), 1):
                        where = Path(tmp) / f"mutant-{n}-{k}"
                        say(f"[{n}] {p.patch}: revert {', '.join(reverted)}; run {', '.join(p.tests)}")
                        conflict = make_mutant(repo, head, p.commit, reverted, where)
                        if conflict:
                            mutants.append(Mutant(reverted, CONFLICT, f"cannot revert on top of the series: {conflict}"))
                        else:
                            mutants.append(Mutant(reverted, *classify(drop(run_tests(where, p.tests), aside))))
                        shutil.rmtree(where, ignore_errors=True)  # a full checkout each
                        say(f"[{n}]   {mutants[-1].line()}")
                    results.append(patch_result(p.patch, mutants))
            say(f"[{n}] {results[-1].line()}")
    return results


def exit_code(results: list[Result]) -> int:
    """0 when every patch's mutant was killed (or it changes tests only), else 1."""
    return 0 if results and all(r.status in PASSING for r in results) else 1
