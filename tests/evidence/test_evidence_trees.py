"""`overlay bench ab` composes each variant's (pin, series subset) and runs its server from it."""

from __future__ import annotations

import json

from evhelpers import fake_protocol
from overlay import compose

PROBE = '    server-args: ["--probe", "{composed:plugin}/vllm_ascend/envs.py"]\n'


def _protocol(world, starts: int = 2):
    # 0003 adds the switch to vllm_ascend/envs.py: the server prints the file it sees.
    return fake_protocol(world.project / "evidence" / "ab", starts=starts,
                         base_extra="    pin: p1\n    series: none\n" + PROBE,
                         fast_extra="    pin: p1\n    series: [0001-plugin-lora-args.patch, "
                                    "0003-plugin-switch.patch]\n" + PROBE)


def test_variants_with_different_series_run_from_their_own_composed_trees(run, world):
    proto = _protocol(world)
    code, out, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "2",
                         root=world.project)
    assert code == 0, err
    results = proto.parent
    meta = {v: json.loads((results / "runs" / f"{v}-r1" / "run.json").read_text()) for v in ("base", "fast")}
    base, fast = meta["base"]["composed_trees"], meta["fast"]["composed_trees"]
    assert set(base) == set(fast) == {"core", "plugin"}
    assert base["plugin"] != fast["plugin"]  # different series subsets, different trees
    assert base["core"] == fast["core"]  # neither carries the core patch 0002
    base_dir = results / "trees" / "base" / "p1" / "plugin"
    fast_dir = results / "trees" / "fast" / "p1" / "plugin"
    assert meta["base"]["composed_dirs"]["plugin"] == str(base_dir)
    assert f"{base_dir}/vllm_ascend/envs.py" in meta["base"]["server_argv"]
    assert "def factory(config, device):" in (base_dir / "vllm_ascend" / "worker.py").read_text()
    assert "lora_capture_cases" in (fast_dir / "vllm_ascend" / "worker.py").read_text()
    base_log = (results / "runs" / "base-r1" / "server.log").read_text()
    fast_log = (results / "runs" / "fast-r1" / "server.log").read_text()
    assert "envs.py: VARS = {}" in base_log and "envs.py: VARS = {'PLUGIN_FAST_PATH': '0'}" in fast_log
    assert f"pythonpath: {results / 'trees' / 'base' / 'p1' / 'core'}" in base_log
    recorded = json.loads((results / "trees" / "trees.json").read_text())
    assert recorded["fast"]["trees"] == fast and recorded["fast"]["patches"] == [
        "0001-plugin-lora-args.patch", "0003-plugin-switch.patch"]
    assert recorded["base"]["patches"] == []


def test_variants_sharing_pin_and_series_compose_once(run, world, monkeypatch):
    proto = _protocol(world)
    proto.write_text(proto.read_text().replace("series: none", "series: [0001-plugin-lora-args.patch, "
                                                               "0003-plugin-switch.patch]", 1))
    calls = []
    real = compose.compose
    monkeypatch.setattr(compose, "compose", lambda *a, **k: calls.append(k["only"]) or real(*a, **k))
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "2",
                       root=world.project)
    assert code == 0, err
    assert len(calls) == 1 and not (proto.parent / "trees" / "fast").exists()
    runs = proto.parent / "runs"
    assert json.loads((runs / "fast-r1" / "run.json").read_text())["composed_dirs"]["plugin"] == \
        str(proto.parent / "trees" / "base" / "p1" / "plugin")


def test_resume_reuses_matching_trees_and_refuses_changed_ones(run, world, monkeypatch):
    proto = _protocol(world)
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
                       root=world.project)
    assert code == 0, err
    first = (proto.parent / "trees" / "trees.json").read_text()

    def no_compose(*_a, **_k):
        raise AssertionError("trees whose state matches must be reused, not recomposed")

    monkeypatch.setattr(compose, "compose", no_compose)
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
                       root=world.project)
    assert code == 0, err
    assert (proto.parent / "trees" / "trees.json").read_text() == first
    monkeypatch.undo()

    # Someone edits a composed tree: it no longer matches, and it holds work: one line, nothing run.
    worker = proto.parent / "trees" / "fast" / "p1" / "plugin" / "vllm_ascend" / "worker.py"
    worker.write_text(worker.read_text() + "# local edit\n")
    before = sorted(p.name for p in (proto.parent / "runs").iterdir())
    code, out, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "variant 'fast': composing pin p1 failed" in err and "uncommitted edits" in err
    assert sorted(p.name for p in (proto.parent / "runs").iterdir()) == before


def test_recomposed_tree_that_differs_from_the_recorded_runs_is_refused(run, world):
    proto = _protocol(world)
    assert run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
               root=world.project)[0] == 0
    record = proto.parent / "trees" / "trees.json"
    data = json.loads(record.read_text())
    data["base"]["trees"]["plugin"] = "0" * 40  # as if earlier runs used another tree
    record.write_text(json.dumps(data))
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 2 and "variant 'base': the composed plugin tree changed since runs were recorded" in err


def test_unknown_pin_is_refused_naming_the_variant(run, world):
    proto = _protocol(world)
    proto.write_text(proto.read_text().replace("pin: p1\n    series: none", "pin: nosuch\n    series: none"))
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 2 and err.startswith("overlay: error:") and "variant 'base'" in err
    assert not (proto.parent / "runs" / "base-r1").exists()


def test_plan_shows_each_variants_composed_tree(run, world):
    proto = _protocol(world)
    code, out, err = run("evidence", "plan", proto, "--json", root=world.project)
    assert code == 0, err
    argv = {r["variant"]: r["server_argv"] for r in json.loads(out)["runs"]}
    assert f"{proto.parent / 'trees' / 'base' / 'p1' / 'plugin'}/vllm_ascend/envs.py" in argv["base"]
    assert f"{proto.parent / 'trees' / 'fast' / 'p1' / 'plugin'}/vllm_ascend/envs.py" in argv["fast"]


def test_series_without_a_pin_is_refused(run, world):
    proto = _protocol(world)
    proto.write_text(proto.read_text().replace("    pin: p1\n    series: none\n" + PROBE, "    series: none\n"))
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 2 and "variant 'base' selects series patches but has no pin" in err
    assert not (proto.parent / "runs").exists() or not list((proto.parent / "runs").iterdir())


def test_tree_differing_from_a_recorded_runs_tree_is_refused(run, world):
    proto = _protocol(world)
    assert run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
               root=world.project)[0] == 0
    (proto.parent / "trees" / "trees.json").unlink()
    meta = proto.parent / "runs" / "base-r1" / "run.json"
    data = json.loads(meta.read_text())
    data["composed_trees"]["core"] = "1" * 40
    meta.write_text(json.dumps(data))
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 2 and "variant 'base': the composed core tree differs from the one run base-r1 used" in err
    assert sorted(p.name for p in (proto.parent / "runs").iterdir()) == ["base-r1"]
