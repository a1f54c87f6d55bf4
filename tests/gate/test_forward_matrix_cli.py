"""`overlay forward` end to end on fixtures (issue 30 item 8): compose in scratch state,
gate each release, grade by the plugin release that declares it."""

from __future__ import annotations

import json

from fixtures import CORE_FILES, PLUGIN_FILES, make_sdist as _sdist


def test_the_matrix_grades_each_error_by_the_release_that_declares_the_core(world, run, tmp_path):
    pypi = world.mirror / "pypi"
    _sdist(pypi, "vllm-1.0", CORE_FILES)
    broken = dict(CORE_FILES)
    broken["vllm/graph.py"] = CORE_FILES["vllm/graph.py"].replace("class GraphManager", "class GraphManager2")
    _sdist(pypi, "vllm-2.0", broken)
    fixed = dict(PLUGIN_FILES)  # upstream's release for 2.0 rewrote the site the gate names
    fixed["vllm_ascend/worker.py"] = PLUGIN_FILES["vllm_ascend/worker.py"].replace(
        "from vllm.graph import GraphManager\n", "from vllm.graph import GraphManager2 as GraphManager\n")
    fixed[".github/vllm-release-tag.commit"] = "v2.0\n"
    _sdist(pypi, "vllm_ascend-2.0rc1", fixed)
    before = sorted(p.name for p in world.project.iterdir())
    code, out, err = run("forward", "--pin", "p1", "--releases", "1.0..2.0", "--mirror", world.mirror,
                         "--out", tmp_path / "out", "--json", root=world.project)
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["release"]: r for r in doc["releases"]}
    assert rows["1.0"]["errors"] == 0 and rows["1.0"]["plugin_release"] is None
    two = rows["2.0"]
    assert two["plugin_release"] == "2.0rc1" and two["errors"] >= 1
    assert all(i["grade"] == "confirmed" for i in two["findings"]), two
    assert (tmp_path / "out" / "FORWARD.md").read_text().startswith("# Forward matrix: pin set `p1`")
    # scratch state only: no composed tree of the pin set was made or left behind
    assert not (world.project / "build").exists()
    assert not [p for p in (world.project / ".overlay").iterdir() if p.name.startswith("forward-")]
    assert sorted(p.name for p in world.project.iterdir() if p.name != ".overlay") == \
        [n for n in before if n != ".overlay"]


def test_execute_never_runs_a_release_on_the_wrong_torch_and_says_so(world, run, tmp_path):
    pypi = world.mirror / "pypi"
    broken = dict(CORE_FILES)
    broken["vllm/graph.py"] = CORE_FILES["vllm/graph.py"].replace("class GraphManager", "class GraphManager2")
    broken["requirements/cpu.txt"] = "torch==9.9.0+cpu; platform_machine == 'x86_64'\n"
    _sdist(pypi, "vllm-2.0", broken)
    code, out, err = run("forward", "--pin", "p1", "--releases", "2.0", "--mirror", world.mirror, "--execute",
                         "--venv", tmp_path / "no-venv", "--out", tmp_path / "out", "--json", root=world.project)
    assert code == 0, err
    row = json.loads(out)["releases"][0]
    assert row["errors"] >= 1 and "needs torch 9.9" in row["execution_skipped"]
    assert all(i["execution"] == "not run (torch)" for i in row["findings"])
    assert not (tmp_path / "no-venv").exists()  # nothing was built for a release it cannot run
    assert "Execution not run: vllm 2.0 needs torch 9.9" in (tmp_path / "out" / "FORWARD.md").read_text()


def test_execute_refuses_an_environment_inside_the_repository(world, run):
    _sdist(world.mirror / "pypi", "vllm-1.0", CORE_FILES)
    code, _, err = run("forward", "--pin", "p1", "--releases", "1.0", "--mirror", world.mirror, "--execute",
                       "--venv", world.project / "venv", root=world.project)
    assert code == 2 and "inside the repository" in err
