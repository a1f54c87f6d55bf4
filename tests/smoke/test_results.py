"""Reading and judging a smoke walk; a walk where nothing ran is a failure."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from overlay.smoke import run as smoke_run
from overlay.smoke.results import Walk, parse_steps, read_walk, unexpected_passes


def _lines(*records):
    return "\n".join(json.dumps(r) for r in records) + "\n"


OK = {"step": "platform", "status": "ok", "detail": "NPUPlatform", "where": ""}
BAD = {"step": "scheduler", "status": "FAILED", "detail": "TypeError: schedule() takes 1 positional argument",
       "where": "vllm/v1/engine/core.py:490"}


def test_all_ok_is_ok():
    walk = Walk("w", parse_steps(_lines(OK)), 0)
    assert walk.ok
    assert walk.summary() == "w: 1 ok, 0 failed, 0 skipped"


def test_a_failed_step_fails_the_walk():
    walk = Walk("w", parse_steps(_lines(OK, BAD)), 1)
    assert not walk.ok
    assert [s.step for s in walk.failed] == ["scheduler"]


@pytest.mark.parametrize("returncode", [0, 1, -9])
def test_no_step_is_a_failure_with_the_real_error(returncode):
    walk = Walk("w", (), returncode, "ModuleNotFoundError: No module named 'vllm'")
    assert not walk.ok
    assert "no step ran (ModuleNotFoundError: No module named 'vllm')" in walk.summary()


def test_a_crashed_walker_fails_even_if_its_steps_passed():
    walk = Walk("w", parse_steps(_lines(OK)), -11, "Segmentation fault")
    assert not walk.ok
    assert "exited -11: Segmentation fault" in walk.summary()


def test_malformed_record_names_file_and_line():
    with pytest.raises(ValueError, match=r"steps.jsonl:2: not a step record"):
        parse_steps(_lines(OK) + "not json\n", "steps.jsonl")
    with pytest.raises(ValueError, match="unknown status 'maybe'"):
        parse_steps(_lines({"step": "x", "status": "maybe"}))


def test_read_walk_without_a_results_file(tmp_path):
    walk = read_walk("w", tmp_path / "missing.jsonl", 1, "noise\nImportError: boom\n")
    assert walk.steps == () and walk.error == "ImportError: boom" and not walk.ok


def test_predicted_failures():
    walk = Walk("w", parse_steps(_lines(OK, BAD)), 1)
    assert unexpected_passes(walk, {"scheduler": "takes 1 positional argument"}) == []
    missing = unexpected_passes(walk, {"platform": "Error", "input-batch": "is_padding"})
    assert missing[0].startswith("platform: expected FAILED") and "got ok" in missing[0]
    assert missing[1].endswith("got no such step")


def _walker_script(tmp_path, body):
    script = tmp_path / "fake_walker.py"
    script.write_text(body)
    return script


def _plugin_tree(tmp_path):
    tree = tmp_path / "plugin"
    (tree / "vllm_ascend").mkdir(parents=True)
    (tree / "setup.py").write_text("setup(entry_points={'vllm.platform_plugins': ['ascend = vllm_ascend:register']})\n")
    return tree


def test_walk_tree_reports_a_walker_that_dies_before_any_step(tmp_path, monkeypatch):
    monkeypatch.setattr(smoke_run, "WALKER", _walker_script(
        tmp_path, "import sys\nprint('ImportError: cannot import name X', file=sys.stderr)\nsys.exit(3)\n"))
    walk = smoke_run.walk_tree("w", Path(sys.executable), tmp_path / "core", _plugin_tree(tmp_path),
                               tmp_path / "scratch", echo=None)
    assert (walk.steps, walk.returncode, walk.error) == ((), 3, "ImportError: cannot import name X")
    assert not walk.ok


def test_walk_tree_passes_results_and_environment(tmp_path, monkeypatch):
    body = ("import json, os, sys\n"
            "rec = {'step': 'env', 'status': 'ok', 'detail': os.environ['VLLM_USE_V2_MODEL_RUNNER'] + ' ' + "
            "os.environ['PYTHONPATH'].split(os.pathsep)[-1] + ' ' + os.getcwd()}\n"
            "print('  ok      env')\n"
            "open(sys.argv[1], 'a').write(json.dumps(rec) + '\\n')\n")
    monkeypatch.setattr(smoke_run, "WALKER", _walker_script(tmp_path, body))
    tree = _plugin_tree(tmp_path)
    echoed = []
    walk = smoke_run.walk_tree("w", Path(sys.executable), tmp_path / "core", tree, tmp_path / "scratch",
                               echo=echoed.append)
    assert walk.ok
    assert walk.steps[0].detail == f"1 {tree} {tree}"
    assert echoed == ["  ok      env"]
    assert (tree / "vllm_ascend" / "_build_info.py").is_file()  # the plugin's build-time file


def test_a_pin_whose_core_is_unreachable_is_one_line_without_the_targets_hint(world, run, tmp_path, monkeypatch):
    from overlay.testing import testenv

    def no_build(*args, **kwargs):
        raise AssertionError("the environment must not be built for a walk that cannot happen")

    monkeypatch.setattr(testenv, "ensure_venv", no_build)
    shutil.rmtree(world.mirror / "example+core")
    shutil.rmtree(world.core)  # the pinned URL is gone too
    code, out, err = run("smoke", "--pin", "p1", "--mirror", world.mirror, "--venv", tmp_path / "venv",
                         root=world.project)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "pins/p1.yaml: pin set p1: the smoke needs its core tree" in lines[0]
    assert "--targets" not in lines[0] and "Traceback" not in err
    assert not (tmp_path / "venv").exists()  # nothing built for a walk that cannot happen


def test_walk_tree_stops_a_hung_walker_and_says_so(tmp_path, monkeypatch):
    body = ("import json, sys, time\n"
            "open(sys.argv[1], 'a').write(json.dumps({'step': 'first', 'status': 'ok'}) + '\\n')\n"
            "print('  ok      first', flush=True)\n"
            "time.sleep(600)\n")
    monkeypatch.setattr(smoke_run, "WALKER", _walker_script(tmp_path, body))
    monkeypatch.setattr(smoke_run, "WALK_TIMEOUT_S", 2)
    walk = smoke_run.walk_tree("w", Path(sys.executable), tmp_path / "core", _plugin_tree(tmp_path),
                               tmp_path / "scratch", echo=None)
    assert not walk.ok
    assert [s.step for s in walk.steps] == ["first"]
    assert walk.error == "the walker was stopped after 2 s"


def test_the_summary_says_where_the_failures_lie():
    smoke = dict(BAD, step="scheduler-sync", lies="smoke", where="smoke check")
    walk = Walk("w", parse_steps(_lines(OK, dict(BAD, lies="core"), smoke)), 1)
    assert walk.summary() == "w: 1 ok, 2 failed, 0 skipped (1 in core, 1 in the smoke)"
    assert [s.lies for s in walk.failed] == ["core", "smoke"]
