"""`overlay bench ab` composes each variant's (pin, series subset) and runs its server from it."""

from __future__ import annotations

import json

from evhelpers import fake_protocol
from overlay.trees import compose

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
    # run.json is committed: this machine's folders are written as <results>/...
    assert meta["base"]["composed_dirs"]["plugin"] == "<results>/trees/base/p1/plugin"
    assert "<results>/trees/base/p1/plugin/vllm_ascend/envs.py" in meta["base"]["server_argv"]
    assert str(results) not in (results / "runs" / "base-r1" / "run.json").read_text()
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
        "<results>/trees/base/p1/plugin"


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


# ---- issue 13, item 8: bench ab honours the lock, as apply does


def _lock_plugin(world, tree: str) -> None:
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    anchor = "  plugin:\n    repo: "
    head, tail = text.split(anchor, 1)
    url, rest = tail.split("\n", 1)
    pin.write_text(head + anchor + url + "\n" + rest.replace("commit: ", f"tree: {tree}\n    commit: ", 1))


def _whole_series(world):
    proto = _protocol(world)
    text = proto.read_text().replace("series: none", "series: all", 1)
    text = text.replace("series: [0001-plugin-lora-args.patch, 0003-plugin-switch.patch]", "series: all")
    proto.write_text(text)
    return proto


def test_pin_whose_lock_differs_from_what_composes_is_refused(run, world):
    _lock_plugin(world, "f" * 40)
    proto = _whole_series(world)
    code, out, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 3 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "TREE MISMATCH for variant 'base', target plugin" in err and "ffffffffffff" in err
    assert "pins/p1.yaml" in err and "overlay lock --pin p1" in err
    assert not (proto.parent / "runs").exists() and not (proto.parent / "protocol.sha256").exists()


def test_reused_tree_that_differs_from_the_lock_is_refused(run, world):
    proto = _whole_series(world)
    assert run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
               root=world.project)[0] == 0
    _lock_plugin(world, "e" * 40)  # the lock changes; the composed tree still "matches" its own state
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, root=world.project)
    assert code == 3 and "TREE MISMATCH for variant 'base', target plugin" in err
    assert sorted(p.name for p in (proto.parent / "runs").iterdir()) == ["base-r1"]


def test_matching_lock_runs(run, world):
    proto = _whole_series(world)
    assert run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
               root=world.project)[0] == 0
    tree = json.loads((proto.parent / "runs" / "base-r1" / "run.json").read_text())["composed_trees"]["plugin"]
    _lock_plugin(world, tree)
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
                       root=world.project)
    assert code == 0, err


def test_subset_variants_are_not_compared_with_the_whole_series_lock(run, world):
    _lock_plugin(world, "f" * 40)
    proto = _protocol(world)  # series none / a true subset: the lock is for the whole series
    proto.write_text(proto.read_text().replace("series: [0001-plugin-lora-args.patch, 0003-plugin-switch.patch]",
                                               "series: [0001-plugin-lora-args.patch]"))
    code, _, err = run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
                       root=world.project)
    assert code == 0, err


# ---- issue 13, item 12: what a run leaves in the evidence folder, and the hint


def test_no_compose_lock_file_is_left_in_the_evidence_folder(run, world):
    proto = _protocol(world)
    assert run("bench", "ab", "--protocol", proto, "--mirror", world.mirror, "--max-runs", "1",
               root=world.project)[0] == 0
    assert not list((proto.parent / "trees").rglob(".overlay.lock"))


def test_unreachable_target_fails_without_leftovers_or_a_targets_hint(run, world):
    proto = _protocol(world)
    pin = world.project / "pins" / "p1.yaml"
    pin.write_text(pin.read_text().replace(f"file://{world.core}", "file:///nonexistent/core"))
    code, out, err = run("bench", "ab", "--protocol", proto, root=world.project)  # no mirror
    assert code == 2 and err.count("\n") == 1
    assert "unreachable" in err and "--targets" not in err and "TARGETS" not in err
    assert "--mirror" in err
    folder = proto.parent
    assert not (folder / "runs").exists() and not (folder / "protocol.sha256").exists()
    assert not list(folder.rglob(".overlay.lock"))
    assert not (folder / "trees").exists() or not any((folder / "trees").iterdir())
