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
