"""Issue 30 item 5: a rebase's gate counts only what is new against upstream's pairing.

Every real bump used to exit 1 on upstream's own gate errors. Here the plugin's release
2.0 declares core 2.0 and already imports a name core lacks (upstream's own break, present
without the series): the rebase onto that pairing exits 0 and says the error is
upstream's. A series patch that adds a break of its own makes it exit 1 and names it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fixtures import CORE_FILES, PLUGIN_FILES, make_patch, make_sdist

UPSTREAM_BREAK = "from vllm.graph import GraphManager\nfrom vllm.sampler import _gone_upstream\n"


_sdist = make_sdist


def _setup(world) -> None:
    pypi = world.mirror / "pypi"
    core1 = _sdist(pypi, "core-1.0", CORE_FILES)
    _sdist(pypi, "core-2.0", CORE_FILES)
    release = dict(PLUGIN_FILES)
    release["vllm_ascend/worker.py"] = PLUGIN_FILES["vllm_ascend/worker.py"].replace(
        "from vllm.graph import GraphManager\n", UPSTREAM_BREAK)
    release[".github/vllm-release-tag.commit"] = "v2.0\n"
    _sdist(pypi, "plugin-2.0", release)
    # p1's core becomes the 1.0 archive, and the core patch goes (core carries none)
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    block = text[text.index("  core:"):text.index("  plugin:")]
    digest = hashlib.sha256(core1.read_bytes()).hexdigest()
    pin.write_text(text.replace(block, f"  core:\n    pypi: core==1.0\n    sha256: {digest}\n"))
    series = world.project / "series.yaml"
    s = series.read_text()
    series.write_text(s[:s.index("  - patch: 0002")] + s[s.index("  - patch: 0003"):])
    world.patch_file("0002-core-rename-helper.patch").unlink()


def _rebase(run, world):
    return run("rebase", "--pin", "p1", "--onto", "plugin=pypi:plugin==2.0", "--onto", "core=pypi:core==2.0",
               "--as", "r2", "--mirror", world.mirror, "--json", root=world.project)


def test_upstreams_own_errors_at_its_declared_pairing_are_not_new(world, run):
    _setup(world)
    code, out, err = _rebase(run, world)
    result = json.loads(out)
    assert result.get("status") == "done", (result, err)
    gate = result["gate"]
    assert gate["ran"] and gate["upstream_errors"] >= 1 and gate["new"] == [], (gate, err)
    assert "core==2.0 (its release)" in gate["baseline"]
    assert code == 0 and result["ok"], (result["check"], result["other_pins"], err)


def test_a_break_the_series_adds_is_new_and_fails_the_rebase(world, run):
    _setup(world)
    plugin_pin = world.plugin_commits[1]
    p3 = {"vllm_ascend/envs.py": "from vllm.sampler import _planted_by_the_series\nVARS = {'PLUGIN_FAST_PATH': '0'}\n"}
    make_patch(world.plugin, plugin_pin, p3, "[Perf] Add an opt-in fast path switch",
               "Off by default; evidence pending.", world.patch_file("0003-plugin-switch.patch"),
               previous=[{"vllm_ascend/worker.py": PLUGIN_FILES["vllm_ascend/worker.py"].replace(
                   "def factory(config, device):", "def factory(config, device, lora_capture_cases=None):")}])
    code, out, err = _rebase(run, world)
    gate = json.loads(out)["gate"]
    assert code == 1 and len(gate["new"]) == 1 and "_planted_by_the_series" in gate["new"][0], (gate, err)


def test_gate_baseline_declared_counts_only_what_the_series_adds(world, run):
    """Issue 27 item 4 / 29 item 5: `overlay gate --baseline declared` on the pin set the
    rebase made: upstream's own error is not counted (exit 0, a note says how many were
    left out); without the baseline it fails."""
    _setup(world)
    code, out, err = _rebase(run, world)
    assert code == 0, err
    code, out, err = run("gate", "--pin", "r2", "--mirror", world.mirror, root=world.project)
    assert code == 1 and "_gone_upstream" in out, (out, err)
    code, out, err = run("gate", "--pin", "r2", "--baseline", "declared", "--mirror", world.mirror,
                         root=world.project)
    assert code == 0, (out, err)
    assert "baseline: upstream's plugin PyPI plugin==2.0 without the series, against core==2.0" in out
    assert "finding(s) it already has are not counted" in out
    assert not [p for p in (world.project / ".overlay").iterdir() if p.name.startswith("baseline-")]


def test_the_pre_commit_gate_hook_passes_a_good_series_and_fails_a_planted_break(world, run):
    """Issue 29 item 5: the overlay-gate hook gates the series being committed (composed
    fresh, not build/) with the baseline: upstream's own error does not fail it, a break a
    patch plants does. Before, it gated build/ without a baseline and could never pass."""
    import shlex
    import shutil

    import yaml

    hook = {h["id"]: h for h in yaml.safe_load(
        (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text())}["overlay-gate"]
    argv = shlex.split(hook["entry"])[1:] + ["--pin", "r2", "--mirror", str(world.mirror)]
    _setup(world)
    code, _, err = _rebase(run, world)
    assert code == 0, err
    shutil.rmtree(world.project / "build")  # the hook must not need (or read) build/
    code, out, err = run(*argv, root=world.project)
    assert code == 0, (out, err)
    assert "finding(s) it already has are not counted" in out
    # a planted break in the committed series: the patch now imports a name core lacks
    patch = next(p for p in (world.project / "patches").iterdir() if p.name.startswith("0003"))
    text = patch.read_text()
    planted = text.replace("+VARS = {", "+from vllm.sampler import _planted_by_the_series\n+VARS = {", 1)
    assert planted != text
    planted = planted.replace("@@ -1 +1 @@", "@@ -1 +1,2 @@", 1)
    patch.write_text(planted)
    code, out, err = run(*argv, root=world.project)
    assert code == 1 and "_planted_by_the_series" in out, (code, out, err)
