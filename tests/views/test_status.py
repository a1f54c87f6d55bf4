"""`overlay status`: each pin set's patches in order, their upstream state and lock state."""

from __future__ import annotations

import json

from conftest import add_second_pin, set_lock


def test_each_pin_set_lists_what_it_carries_in_order(world, run):
    add_second_pin(world)
    code, out, err = run("status", "--json", root=world.project)
    assert code == 0, err
    pins = {p["pin"]: p for p in json.loads(out)["pins"]}
    assert sorted(pins) == ["p1", "p2"]
    p1 = [(r["patch"], r["state"], r["carried"]) for r in pins["p1"]["patches"]]
    assert p1 == [("0001-plugin-lora-args.patch", "carried", True),
                  ("0002-core-rename-helper.patch", "carried", True),
                  ("0003-plugin-switch.patch", "ported", True)]
    p2 = {r["patch"]: r for r in pins["p2"]["patches"]}
    assert "0003-plugin-switch.patch" not in p2  # only-pins: p1
    merged = p2["0001-plugin-lora-args.patch"]
    assert merged["state"] == "merged" and not merged["carried"]
    assert "upstream-commit" in merged["detail"] and "example/plugin#10935" in merged["detail"]
    assert p2["0002-core-rename-helper.patch"]["origin"] == "local"


def test_text_output_numbers_only_the_applied_patches(world, run):
    add_second_pin(world)
    code, out, _ = run("status", "--pin", "p2", root=world.project)
    assert code == 0
    assert out.startswith("pin set p2")
    assert "pin set p1" not in out
    lines = [line for line in out.splitlines() if ".patch" in line]
    assert lines[0].lstrip().startswith("-. 0001-plugin-lora-args.patch")
    assert "merged" in lines[0] and "rule: upstream-commit" in lines[0]
    assert lines[1].lstrip().startswith("1. 0002-core-rename-helper.patch")


def test_lock_state_is_read_from_pins_and_build(world, run):
    def lock_states():
        code, out, err = run("status", "--pin", "p1", "--json", root=world.project)
        assert code == 0, err
        doc = json.loads(out)["pins"][0]
        return {t["target"]: t["lock"] for t in doc["targets"]}, doc

    assert lock_states()[0] == {"core": "not composed", "plugin": "not composed"}
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert lock_states()[0] == {"core": "not locked", "plugin": "not locked"}
    assert run("lock", root=world.project)[0] == 0
    states, doc = lock_states()
    assert states == {"core": "locked tree matches", "plugin": "locked tree matches"}
    assert {r["lock"] for r in doc["patches"]} == {"locked tree matches"}
    set_lock(world.project / "pins" / "p1.yaml", "plugin", "a" * 40)
    assert lock_states()[0]["plugin"] == "mismatch"
    # the series moved on since the tree was composed: the tree says nothing about it
    patch = world.patch_file("0001-plugin-lora-args.patch")
    patch.write_text(patch.read_text().replace("Core now passes", "Core passes"))
    assert lock_states()[0]["plugin"] == "composed from another series"


def test_unknown_pin_is_one_line_exit_2(world, run):
    code, out, err = run("status", "--pin", "nope", root=world.project)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "unknown pin 'nope'" in err
