"""`overlay show PATCH`: header, provenance links, pin sets, drift, tests, mutation, diff."""

from __future__ import annotations

import json

from conftest import add_second_pin
from fixtures import make_patch


def _add_tested_patch(world) -> None:
    """0004: a plugin patch adding a test file and changing another."""
    make_patch(world.plugin, world.plugin_commits[1],
               {"tests/test_envs.py": "def test_vars():\n    assert True\n", "README.md": "plugin!\n"},
               "[Test] Cover the envs", "A test.", world.patch_file("0004-plugin-tests.patch"))
    series = world.project / "series.yaml"
    series.write_text(series.read_text() + "  - patch: 0004-plugin-tests.patch\n    target: plugin\n"
                      "    origin: local\n    tests:\n      - tests/test_envs.py\n")


def test_show_is_the_review_view(world, run):
    add_second_pin(world)
    code, out, err = run("show", "0001", root=world.project)
    assert code == 0, err
    assert out.startswith("patch 0001-plugin-lora-args.patch (plugin)\n")
    assert "Description: [BugFix][MRV2] Accept lora_capture_cases in factory" in out
    assert "Author: Patch Author <patch.author@example.org>" in out
    assert "Origin: backport, example/plugin#10935" in out
    assert "upstream PR: example/plugin#10935 <https://github.com/example/plugin/pull/10935>" in out
    assert "core change: example/core#35536 <https://github.com/example/core/pull/35536>" in out
    assert "  p1: carried; lock: not composed" in out
    assert "  p2: merged - upstream carries it" in out
    assert "not measured" in out and "mutation check: not recorded" in out
    # the diff comes last
    assert out.index("diff --git a/vllm_ascend/worker.py") > out.index("mutation check:")
    code, out, _ = run("show", "0001", "--pin", "p1", root=world.project)
    assert "  p1: carried" in out and "  p2:" not in out


def test_show_lists_the_test_files_the_patch_adds(world, run):
    _add_tested_patch(world)
    code, out, err = run("show", "0004-plugin-tests", "--json", root=world.project)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["tests"] == [{"path": "tests/test_envs.py", "added": True}]
    assert doc["declared_tests"] == ["tests/test_envs.py"]
    assert doc["drift"] is None and doc["mutation"] is None
    assert doc["diff"].startswith("diff --git")


def test_show_reads_the_recorded_drift_and_mutation_reports(world, run):
    newest = f"plugin={world.plugin_commits[-1]}"
    code, out, _ = run("drift", "--mirror", world.mirror, "--onto", newest, "--json", root=world.project)
    reports = world.project / "reports"
    reports.mkdir()
    (reports / "drift.json").write_text(out)
    (reports / "mutation-check.json").write_text(json.dumps(
        {"pin": "p1", "results": [{"patch": "0001-plugin-lora-args.patch", "status": "killed",
                                   "detail": "\x1b[31mred", "mutants": []}], "ok": True}))
    code, out, err = run("show", "0001-plugin-lora-args.patch", root=world.project)
    assert code == 0, err
    drift_line = out.split("drift at the newest upstream measured:\n", 1)[1].splitlines()[0]
    assert drift_line.startswith("  clean at ") and "from pin set p1" in drift_line
    assert "mutation check: killed at pin set p1 (\\x1b[31mred)" in out
    assert "\x1b" not in out


def test_hostile_names_and_reports_are_one_line_exit_2(world, run):
    for argv, says in ((("show", "0009"), "unknown patch '0009'"),
                       (("show", "000"), "is ambiguous"),
                       (("show", "--pin", "nope", "0001"), "unknown pin 'nope'"),
                       (("show", "../series.yaml"), "unknown patch")):
        code, out, err = run(*argv, root=world.project)
        assert code == 2 and out == "", argv
        assert len(err.strip().splitlines()) == 1 and says in err, err
    (world.project / "reports").mkdir()
    (world.project / "reports" / "drift.json").write_text("{not json")
    code, out, err = run("show", "0001", root=world.project)
    assert code == 2 and "reports/drift.json" in err and len(err.strip().splitlines()) == 1
