"""`overlay gate --bisect`: first core commit that breaks the plugin, read from git objects only."""

from __future__ import annotations

import json
import os
import subprocess

import gatekit
import pytest

from overlay.errors import OverlayError
from overlay.gate.bisect import bisect_core, parse_range
from overlay.gate.source import CatFile, DirSource, GitTreeSource

ENV = {**os.environ, "GIT_AUTHOR_NAME": "Core Dev", "GIT_AUTHOR_EMAIL": "core@example.org",
       "GIT_COMMITTER_NAME": "Core Dev", "GIT_COMMITTER_EMAIL": "core@example.org",
       "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd, *args) -> str:
    return subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=ENV, check=True,
                          capture_output=True, text=True).stdout.strip()


def build_history(work, changes) -> list[str]:
    """Commit the core tree at `work` as it is, then one commit per (message, files) step."""
    git(work, "init", "-q")
    commits = []
    for message, files in [("Initial core", {})] + list(changes):
        gatekit.tree(work, files)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", message)
        commits.append(git(work, "rev-parse", "HEAD"))
    return commits


LORA_BREAK = {"vllm/v1/worker/gpu/cudagraph_utils.py": gatekit.CUDAGRAPH_NEW,
              "vllm/v1/worker/gpu/model_runner.py": gatekit.RUNNER_NEW}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A core history of 9 commits with the LoRA capture change planted at commit 6,
    and a bare copy of it (bisect needs no work tree)."""
    base = tmp_path_factory.mktemp("bisect")
    work = base / "core"
    gatekit.core(work, new=False)
    steps = []
    for i in range(1, 9):
        if i == 6:
            steps.append(("[MRV2] Add LoRA capture cases to the graph manager (#35536)", LORA_BREAK))
        else:
            # Unrelated churn, including files that do not even parse: never read.
            steps.append((f"Unrelated change {i}", {f"vllm/unrelated/mod{i}.py": "def (:\n" * i,
                                                    "vllm/unrelated/__init__.py": f"# {i}\n"}))
    commits = build_history(work, steps)
    bare = base / "core.git"
    git(base, "clone", "-q", "--bare", str(work), str(bare))
    plugin = gatekit.plugin(base / "plugin", fixed=False)
    fixed = gatekit.plugin(base / "plugin-fixed", fixed=True)
    return bare, commits, plugin, fixed


def test_finds_the_planted_break(history):
    bare, commits, plugin, _ = history
    result = bisect_core(bare, commits[0], commits[-1], DirSource(plugin))
    assert result.first_bad == commits[6]
    assert result.subject.startswith("[MRV2] Add LoRA capture cases")
    assert [f.symbol for f in result.findings] == [
        "replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager"]
    assert "lora_capture_cases" in result.findings[0].message
    assert result.candidates == 8
    # GOOD, BAD, then a binary search over 8 candidates: at most 3 more steps.
    assert len(result.steps) <= 2 + 3
    # Each step read only the files the plugin depends on, never the unrelated churn.
    assert all(s.core_files_read <= 8 for s in result.steps)


def test_only_dependency_files_are_read(history):
    bare, commits, plugin, _ = history
    from overlay.gate.engine import gate_sources
    with CatFile(bare) as cat:
        src = GitTreeSource(cat, commits[-1])
        raw = gate_sources(src, DirSource(plugin))
    assert not any("unrelated" in p for p in raw.core_files_read)
    assert "vllm/v1/worker/gpu/model_runner.py" in raw.core_files_read
    assert len(raw.core_files_read) < len(list(src.py_files()))


def test_nothing_to_bisect_when_bad_is_clean(history):
    bare, commits, _, fixed = history
    result = bisect_core(bare, commits[0], commits[-1], DirSource(fixed), version="0.25.0")
    assert result.first_bad is None


def test_bisect_cli_json(run, history):
    bare, commits, plugin, _ = history
    code, out, err = run("gate", "--plugin", plugin, "--core-repo", bare,
                         "--bisect", f"core={commits[0][:10]}..{commits[-1]}", "--json")
    assert code == 1, err  # a break was found: findings, as for a plain gate run
    doc = json.loads(out)
    assert doc["first_bad"] == commits[6]
    assert doc["findings"][0]["kind"] == "replacement"


def test_bisect_text(run, history):
    bare, commits, plugin, _ = history
    code, out, _ = run("gate", "--plugin", plugin, "--core-repo", bare,
                       "--bisect", f"core={commits[0]}..{commits[-1]}")
    assert code == 1
    assert f"first bad core commit: {commits[6]}" in out
    assert "appear later" not in out  # the one break at BAD is the one found


@pytest.mark.parametrize("make_range,message", [
    (lambda c: (c[5], c[2]), "is not an ancestor"),
    (lambda c: ("nope", c[2]), "unknown core revision 'nope'"),
    (lambda c: (c[3], c[3]), "no commits in"),
])
def test_bad_ranges(history, make_range, message):
    bare, commits, plugin, _ = history
    good, bad = make_range(commits)
    with pytest.raises(OverlayError, match=message):
        bisect_core(bare, good, bad, DirSource(plugin))


def test_parse_range():
    assert parse_range("core=v1..v2") == ("v1", "v2")
    assert parse_range("a..b") == ("a", "b")
    for bad in ("core=a", "core=..b", "core=a..", "x=a..b"):
        with pytest.raises(OverlayError):
            parse_range(bad)


def test_run_gate_on_commit(history):
    from overlay.gate import run_gate_on_commit
    bare, commits, plugin, _ = history
    before = run_gate_on_commit(bare, commits[5], plugin)
    after = run_gate_on_commit(bare, commits[6], plugin)
    factory = "replacement:vllm.v1.worker.gpu.model_runner.ModelCudaGraphManager"
    assert factory not in {f.symbol for f in before.findings}
    assert factory in {f.symbol for f in after.findings}
    assert after.core.endswith(commits[6][:12])
    with pytest.raises(OverlayError, match="unknown core revision"):
        run_gate_on_commit(bare, "nope", plugin)


@pytest.fixture(scope="module")
def two_breaks(tmp_path_factory):
    """A core history with two planted breaks: the factory signature at commit 2, and a
    helper the plugin imports removed at commit 5. Kept as a work tree (no bare copy)."""
    base = tmp_path_factory.mktemp("bisect2")
    work = base / "core"
    gatekit.core(work, new=False, extra={"vllm/v1/worker/gpu/__init__.py": "def helper_fn():\n    pass\n"})
    steps = []
    for i in range(1, 8):
        if i == 2:
            files = LORA_BREAK
        elif i == 5:
            files = {"vllm/v1/worker/gpu/__init__.py": "# helper_fn moved away\n"}
        else:
            files = {"vllm/unrelated.py": f"X = {i}\n"}
        steps.append((f"Change {i}", files))
    commits = build_history(work, steps)
    plugin = gatekit.plugin(base / "plugin", fixed=False,
                            extra={"vllm_ascend/extra.py": "from vllm.v1.worker.gpu import helper_fn\n"})
    return work, commits, plugin


def test_later_breaks_are_counted_and_the_next_bisect_named(run, two_breaks):
    work, commits, plugin = two_breaks
    result = bisect_core(work / ".git", commits[0], commits[-1], DirSource(plugin))
    assert result.first_bad == commits[2]
    assert [f.symbol for f in result.later] == ["import:vllm.v1.worker.gpu:helper_fn"]
    # the CLI takes the work tree itself, says what is left, and exits 1 (a break was found)
    code, out, err = run("gate", "--plugin", plugin, "--core-repo", work,
                         "--bisect", f"core={commits[0]}..{commits[-1]}")
    assert code == 1, err
    assert f"first bad core commit: {commits[2]}" in out
    assert (f"1 more finding(s) appear later (at BAD, not introduced by {commits[2][:12]}): "
            f"run --bisect again from {commits[2][:12]}") in out
    code, out, _ = run("gate", "--plugin", plugin, "--core-repo", work, "--json",
                       "--bisect", f"core={commits[2][:12]}..{commits[-1]}")
    doc = json.loads(out)
    assert code == 1 and doc["first_bad"] == commits[5] and doc["later_findings"] == []


def test_core_prefix_matching_nothing_is_bad_input(run, two_breaks):
    work, commits, plugin = two_breaks
    code, out, err = run("gate", "--plugin", plugin, "--core-repo", work, "--core-prefix", "src",
                         "--bisect", f"core={commits[0]}..{commits[-1]}")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "the core tree holds no `vllm` package the plugin imports" in err and "--core-prefix" in err


def test_clean_bisect_exits_zero(run, history):
    bare, commits, _, fixed = history
    code, out, _ = run("gate", "--plugin", fixed, "--core-repo", bare, "--core-version", "0.25.0",
                       "--bisect", f"core={commits[0]}..{commits[-1]}")
    assert code == 0 and "nothing to bisect" in out
