"""Compose a pin set, prepare the composed test environment and walk the start-up
path on the composed plugin (and, with baseline=True, on the pinned plugin without
the series). Side effects live here; reading and judging are in `results`."""

from __future__ import annotations

import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Callable

from overlay import gitcmd
from overlay.testing import testenv
from overlay.errors import OverlayError
from overlay.smoke.results import Walk, read_walk

WALKER = Path(__file__).with_name("walker.py")
WALK_TIMEOUT_S = 900  # the whole walk; a first import of vLLM takes tens of seconds


def prepare(root: Path, pin: str, mirror: str, venv: Path,
            progress: testenv.Progress) -> tuple[Path, Path, dict[str, dict], str | None]:
    """(test python, installed core dir, composition record per target, the environment's
    deviation or None) for `pin`."""
    try:
        targets = testenv.compose(root, pin, mirror)
    except OverlayError as exc:
        if "is unreachable" not in exc.message:
            raise
        # apply's own hint offers leaving the target out, which the smoke cannot do
        raise OverlayError(f"pin set {pin}: the smoke needs its core tree, and a target cannot be "
                           "obtained offline", path=f"pins/{pin}.yaml",
                           hint="give a mirror that holds the pinned core, or walk a release pin set "
                                "(v0.23.0, v0.24.0, v0.25.0)") from None
    if "core" not in targets or "plugin" not in targets:
        raise OverlayError(f"pin set {pin} has no composed core and plugin to walk",
                           path=f"pins/{pin}.yaml",
                           hint="the smoke needs a core tree: give a mirror that holds the pinned core")
    pin_file = root / "pins" / f"{pin}.yaml"
    version = testenv.core_version(pin_file.read_text()) if pin_file.is_file() else None
    env = testenv.select_environment(venv, Path(targets["core"]["path"]))
    if env.deviation and progress:
        progress(f"deviation: {env.deviation}")
    python = testenv.ensure_venv(env.venv, progress, env.requirements)
    core_dir = testenv.ensure_core(python, env.venv, targets["core"], version, progress)
    return python, core_dir, targets, env.deviation


def series_paths(repo: str | Path, base: str, rev: str) -> list[str]:
    """The plugin files the series changes: `base`..`rev` in the composed plugin repository."""
    if rev == base:
        return []
    out = gitcmd.git(["diff", "--name-only", "-z", "--no-renames", "--end-of-options", base, rev],
                     cwd=Path(repo)).stdout
    return sorted(name for name in out.split("\0") if name)


def walk_tree(label: str, python: Path, core_dir: Path, tree: Path, scratch: Path,
              echo: Callable[[str], None] | None, series_files: list[str] = ()) -> Walk:
    """Run the walker on one exported plugin tree; `echo` gets each step line as it comes.
    `series_files` (the plugin paths the series changes) let it place a failure in the series."""
    testenv.write_build_info(tree)
    shim = scratch / "shim"
    testenv.write_shims(shim, tree)
    env = testenv.test_env(shim, core_dir, [tree])
    env["VLLM_CACHE_ROOT"] = str(scratch / "vllm-cache")  # nothing of the user's cache is read or written
    env["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    listing = scratch / "series-files.txt"
    listing.write_text("".join(f"{name}\n" for name in series_files))
    env["OVERLAY_SMOKE_SERIES_FILES"] = str(listing)
    results = scratch / "steps.jsonl"
    log = scratch / "walker.log"
    with log.open("w") as err:
        proc = subprocess.Popen([str(python), str(WALKER), str(results)], cwd=tree, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=err)
        # The step lines are read as they come, so the deadline needs its own timer:
        # a hung walker is killed, which also ends the read.
        watchdog = threading.Timer(WALK_TIMEOUT_S, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if echo and line.startswith("  "):
                    echo(line.rstrip("\n"))
            returncode = proc.wait()
            timed_out = not watchdog.is_alive()  # the timer fired: it killed the walker
        finally:
            watchdog.cancel()
    tail = deque(log.read_text(errors="replace").splitlines(), maxlen=40)
    if timed_out:
        tail.append(f"the walker was stopped after {WALK_TIMEOUT_S} s")
    return read_walk(label, results, returncode, "\n".join(tail))


def run_smoke(root: Path, pin: str, mirror: str, venv: Path, *, baseline: bool,
              progress: testenv.Progress, echo: Callable[[str], None] | None
              ) -> tuple[list[Walk], dict[str, dict], str | None]:
    """The walks (with the series first), the composition record per target, and the
    environment's deviation (None when the core runs on the torch it pins)."""
    python, core_dir, targets, deviation = prepare(root, pin, mirror, venv, progress)
    plugin = targets["plugin"]
    walks = []
    plans = [(f"{pin} with the series", "HEAD")]
    if baseline:
        plans.append((f"{pin} without the series (plugin {plugin['base'][:12]})", plugin["base"]))
    with tempfile.TemporaryDirectory(prefix="overlay-smoke-") as tmp:
        for index, (label, rev) in enumerate(plans):
            if echo:
                echo(f"{label}:")
            scratch = Path(tmp) / str(index)
            tree = testenv.export_tree(plugin["path"], rev, scratch / "plugin")
            changed = series_paths(plugin["path"], plugin["base"], rev)
            walks.append(walk_tree(label, python, core_dir, tree, scratch, echo, changed))
    return walks, targets, deviation
