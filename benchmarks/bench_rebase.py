"""Rebase cost: `overlay rebase` to a new core release, split into the gate and the rest,
each as a ratio against the plain git operations that move the same trees.

The fixture is the tests' synthetic world (fixtures.make_world: a plugin upstream in git,
the series of patches) with core as a release archive (fixtures.make_sdist: the fixtures'
core plus FILES generated modules). Each round copies the project fresh and runs
`overlay rebase --pin p1 --onto core=pypi:core==2.0 --as r2 --json` in a fresh process, on
an object cache a warm-up round filled (steady state: the pinned plugin and the archives
are already imported). The rebase's own `timings` give the gate's share; the rest is its
wall time less the gate. Plain git on the same fixture: `git worktree add` of the plugin
at its pin and `git am -3` of the plugin patches, plus extracting the new core archive
(`tar -xzf`): what a maintainer would do by hand, without drift, records, lock or check.
The interpreter and the tool's imports (`overlay --help`) are timed too: a fixed cost of
every command, most of the rest on a fixture this small.
Median of ROUNDS interleaved rounds. The goal (issue 30 item 9): the rest at most 30 s
wall on the real mirror; here the ratios show where the time goes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fixtures import CORE_FILES, PATCH_AUTHOR, make_sdist, make_world, run_git  # noqa: E402

FILES = int(os.environ.get("BENCH_FILES", "300"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def core_files(version: str) -> dict[str, str]:
    files = dict(CORE_FILES)
    files["vllm/__init__.py"] = f"__version__ = '{version}'\n"
    files["vllm/gen/__init__.py"] = ""
    for i in range(FILES):
        files[f"vllm/gen/m{i}.py"] = (f"import os\n\n\nclass Base{i}:\n"
                                      + "".join(f"    def method_{m}(self, a, b=None):\n        return os.sep\n\n"
                                                for m in range(8))
                                      + "".join(f"\ndef free_{i}_{k}(x, y=1):\n    return [x] * y\n"
                                                for k in range(6)))
    return files


def build(tmp: Path):
    world = make_world(tmp / "w")
    pypi = world.mirror / "pypi"
    core1 = make_sdist(pypi, "core-1.0", core_files("1.0"))
    make_sdist(pypi, "core-2.0", core_files("2.0"))
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    block = text[text.index("  core:"):text.index("  plugin:")]
    digest = hashlib.sha256(core1.read_bytes()).hexdigest()
    pin.write_text(text.replace(block, f"  core:\n    pypi: core==1.0\n    sha256: {digest}\n"))
    series = world.project / "series.yaml"
    s = series.read_text()  # core is an archive now: it carries no patch
    series.write_text(s[:s.index("  - patch: 0002")] + s[s.index("  - patch: 0003"):])
    world.patch_file("0002-core-rename-helper.patch").unlink()
    (world.project / ".gitignore").write_text(".overlay/\nbuild/\n")
    return world


def rebase_once(world, project: Path, env: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "overlay", "--root", str(project), "rebase", "--pin", "p1",
                           "--onto", "core=pypi:core==2.0", "--as", "r2", "--mirror", str(world.mirror),
                           "--json"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = {}
    if doc.get("status") != "done":
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"bench_rebase: the rebase did not finish (exit {proc.returncode})")
    return wall, doc


def plain_once(world, tmp: Path) -> float:
    dest, core = tmp / "plain-plugin", tmp / "plain-core"
    if dest.exists():
        run_git(["worktree", "remove", "--force", str(dest)], world.plugin)
    shutil.rmtree(core, ignore_errors=True)
    core.mkdir()
    mails = [world.patch_file(n) for n in ("0001-plugin-lora-args.patch", "0003-plugin-switch.patch")]
    start = time.perf_counter()
    run_git(["worktree", "add", "-q", "--detach", str(dest), world.plugin_commits[1]], world.plugin)
    run_git(["am", "-3", "-q", *map(str, mails)], dest, author=PATCH_AUTHOR)
    subprocess.run(["tar", "-xzf", str(world.mirror / "pypi" / "core-2.0.tar.gz"), "-C", str(core)], check=True)
    return time.perf_counter() - start


def startup_once(env: dict) -> float:
    """The interpreter and the tool's imports alone (`overlay --help`): every command pays it."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "overlay", "--help"], capture_output=True, env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-rebase-") as t:
        tmp = Path(t)
        world = build(tmp)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"), OVERLAY_CACHE=str(tmp / "cache"))
        env.pop("OVERLAY_MIRROR", None)

        def fresh() -> Path:
            project = tmp / "project"
            shutil.rmtree(project, ignore_errors=True)
            shutil.copytree(world.project, project)
            return project

        rebase_once(world, fresh(), env)  # warm-up: fills the object cache
        walls, gates, plains, starts, phases = [], [], [], [], {}
        for _ in range(ROUNDS):
            wall, doc = rebase_once(world, fresh(), env)
            gate = doc["timings"].get("gate", 0.0)
            walls.append(wall)
            gates.append(gate)
            for k, v in doc["timings"].items():
                phases.setdefault(k, []).append(v)
            plains.append(plain_once(world, tmp))
            starts.append(startup_once(env))
        w, g, p = statistics.median(walls), statistics.median(gates), statistics.median(plains)
        st = statistics.median(starts)
        rest = w - g
        result = {"core_files": FILES + len(CORE_FILES) + 1, "rounds": ROUNDS, "rebase_wall_s": round(w, 3),
                  "gate_s": round(g, 3), "rest_s": round(rest, 3), "plain_git_s": round(p, 3),
                  "gate_over_plain": round(g / p, 2), "rest_over_plain": round(rest / p, 2),
                  "startup_s": round(st, 3), "rest_less_startup_over_plain": round((rest - st) / p, 2),
                  "phases_s": {k: round(statistics.median(v), 3) for k, v in phases.items()}}
        if "--json" in sys.argv:
            print(json.dumps(result))
        else:
            print(f"rebase: core alone onto a new release archive ({result['core_files']} core files), "
                  f"wall time, median of {ROUNDS} interleaved rounds")
            print(f"  overlay rebase, whole             {w:7.3f} s")
            print(f"    of which the gate               {g:7.3f} s   {g / p:6.2f}x plain git")
            print(f"    the rest                        {rest:7.3f} s   {rest / p:6.2f}x plain git")
            print(f"      of which the interpreter and imports (overlay --help)  {st:7.3f} s; "
                  f"the rest less that {(rest - st) / p:6.2f}x plain git")
            print(f"  plain git (worktree add, am -3, tar -x of the core)  {p:7.3f} s")
            print("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in result["phases_s"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
