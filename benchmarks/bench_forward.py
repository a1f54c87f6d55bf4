"""Forward view cost: `overlay gate --against` over 6 core releases vs one cold run, in CPU.

The gate indexes core files by content (their blob id), so releases that share most of
their files should cost little more than one: the goal is forward-over-6 CPU at most 2x
one cold run's CPU (issue 27 item 5, issue 30 item 9). CPU, not wall: user + system time
of the `overlay` process and everything it starts (resource.getrusage of the children),
so a loaded machine does not skew the ratio.

The releases are synthetic source archives (tests' fixtures.make_sdist) in a mirror's
pypi/ folder: the fixtures' core (CORE_FILES) plus FILES generated modules, each release
changing CHANGED of them; the plugin (PLUGIN_FILES plus a module per core module it
subclasses and calls). Each measurement is a fresh process on a fresh gate cache:
- `extracted`: the release trees are already checked out (the cache's gate/cores/), the
  gate's own index cache is empty; this is the ratio against the goal;
- `from empty`: nothing cached at all, the archives' import and checkout included (linear
  in the releases by nature: each release is a different tree on disk).
ROUNDS rounds each, the median of each side. BENCH_FORWARD_RELEASES sets how many.

On the real releases (opt-in: BENCH_FORWARD_MIRROR=1 with OVERLAY_MIRROR holding
pypi/vllm-*.tar.gz and a vllm_ascend-*.tar.gz): the newest plugin release archive,
extracted here, gated against BENCH_FORWARD_MIRROR_RELEASES (default the six newest core
releases) and against the first of them alone, one round each, the release trees checked
out beforehand (as `extracted` above). Several minutes; the figure issue 27 item 5 and
issue 30 item 9 set the goal for.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fixtures import CORE_FILES, PLUGIN_FILES, make_sdist  # noqa: E402

FILES = int(os.environ.get("BENCH_FILES", "300"))
CHANGED = int(os.environ.get("BENCH_CHANGED", "10"))
RELEASES = int(os.environ.get("BENCH_FORWARD_RELEASES", "6"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
GOAL = 2.0


def core_module(i: int, release: int) -> str:
    """Module i of the core at `release`: a class with methods, functions, imports."""
    tweak = f"    def added_in_{release}(self, x):\n        return x\n\n" if i % RELEASES == release % RELEASES \
        and (i // RELEASES) < CHANGED else ""
    lines = [f'"""core module {i}."""', "", "import os", ""]
    if i:
        lines.append(f"from vllm.gen.m{i - 1} import Base{i - 1}, helper_{i - 1}")
    lines += ["", "", f"class Base{i}:", f"    def __init__(self, config, device=None, *, scale={i}):",
              "        self.config = config", "        self.device = device", ""]
    for m in range(8):
        lines += [f"    def method_{m}(self, a, b=None, *args, key={m}, **kw):",
                  f"        return helper_{i}(a, b) if a else self.method_{(m + 1) % 8}(b)", ""]
    body = "\n".join(lines) + "\n" + tweak
    body += "".join(f"\ndef helper_{i}(a, b=None, *, c={k}):\n    return os.path.join(str(a), str(b))\n"
                    for k in range(1))
    body += "".join(f"\ndef free_{i}_{k}(x, y=1):\n    return [x] * y\n" for k in range(6))
    return body


def core_release(release: int) -> dict[str, str]:
    files = dict(CORE_FILES)
    files["vllm/gen/__init__.py"] = ""
    for i in range(FILES):
        files[f"vllm/gen/m{i}.py"] = core_module(i, release)
    return files


def plugin_files() -> dict[str, str]:
    files = dict(PLUGIN_FILES)
    files["vllm_ascend/gen/__init__.py"] = ""
    for i in range(0, FILES, 3):
        files[f"vllm_ascend/gen/p{i}.py"] = (
            f"from vllm.gen.m{i} import Base{i}, helper_{i}, free_{i}_0\n\n\n"
            f"class Ascend{i}(Base{i}):\n"
            f"    def __init__(self, config):\n        super().__init__(config, device='npu', scale=2)\n\n"
            f"    def method_0(self, a, b=None, *args, key=0, **kw):\n"
            f"        return helper_{i}(a, b, c=1) or free_{i}_0(a, y=2) or self.method_1(a)\n")
    return files


def cpu_of(cmd: list[str], env: dict) -> float:
    """CPU seconds (user + system) of a fresh process running `cmd` and its children."""
    script = ("import resource, subprocess, sys\n"
              "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
              "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
              "sys.stderr.write(p.stderr.decode(errors='replace')) if p.returncode else None\n"
              "print(p.returncode, r.ru_utime + r.ru_stime)\n")
    out = subprocess.run([sys.executable, "-c", script, *cmd], capture_output=True, text=True, env=env)
    code, cpu = out.stdout.split()
    if code != "0":
        print(out.stderr, file=sys.stderr)
        raise SystemExit(f"bench_forward: overlay gate exited {code}")
    return float(cpu)


def build(tmp: Path) -> tuple[Path, Path, list[str]]:
    mirror = tmp / "mirror"
    versions = [f"1.{r}" for r in range(RELEASES)]
    for r, version in enumerate(versions):
        make_sdist(mirror / "pypi", f"vllm-{version}", core_release(r))
    plugin = tmp / "plugin"
    for rel, text in plugin_files().items():
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        (plugin / rel).write_text(text)
    return mirror, plugin, versions


def gate_cmd(mirror: Path, plugin: Path, versions: list[str]) -> list[str]:
    return [sys.executable, "-m", "overlay", "--root", str(ROOT), "gate", "--plugin", str(plugin),
            "--against", ",".join(f"vllm=={v}" for v in versions), "--mirror", str(mirror), "--json"]


def fresh_gate_cache(seed: Path, dest: Path, link: bool = False) -> None:
    """`dest`: a cache holding `seed`'s checked-out release trees and nothing of the gate's
    own index (no result, no names); `link`: its files hard links to the seed's (the real
    releases' trees are a gigabyte; the gate only reads them)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(seed, dest, symlinks=True, **({"copy_function": os.link} if link else {}))
    for entry in (dest / "gate").iterdir():
        if entry.name != "cores":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _version_key(name: str) -> tuple:
    import re

    return tuple(int(x) if x.isdigit() else x for x in re.findall(r"\d+|[a-z]+", name))


def mirror_ratio(mirror: Path, tmp: Path, env: dict) -> dict | None:
    """The real releases' figure (see the docstring), or None when the mirror lacks them."""
    import tarfile

    pypi = mirror / "pypi"
    cores = sorted((p.name[len("vllm-"):-len(".tar.gz")] for p in pypi.glob("vllm-*.tar.gz")), key=_version_key)
    plugins = sorted(pypi.glob("vllm_ascend-*.tar.gz"), key=lambda p: _version_key(p.name))
    wanted = [v for v in os.environ.get("BENCH_FORWARD_MIRROR_RELEASES", "").split(",") if v] or cores[-RELEASES:]
    if not plugins or not wanted or not set(wanted) <= set(cores):
        return None
    with tarfile.open(plugins[-1]) as tar:
        tar.extractall(tmp / "plugin-release", filter="data")
    (plugin,) = [p for p in (tmp / "plugin-release").iterdir() if p.is_dir()]
    seed = tmp / "mirror-seed"
    cpu_of(gate_cmd(mirror, plugin, wanted), dict(env, OVERLAY_CACHE=str(seed)))  # checks out all
    out = {}
    for key, versions in (("one", wanted[:1]), ("forward", wanted)):
        fresh_gate_cache(seed, tmp / "mc", link=True)
        out[key] = cpu_of(gate_cmd(mirror, plugin, versions), dict(env, OVERLAY_CACHE=str(tmp / "mc")))
    return {"plugin": plugins[-1].name[:-len(".tar.gz")], "releases": wanted,
            "one_cold_cpu_s": round(out["one"], 1), "forward_cpu_s": round(out["forward"], 1),
            "ratio": round(out["forward"] / out["one"], 2)}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-forward-") as t:
        tmp = Path(t)
        mirror, plugin, versions = build(tmp)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"))
        seed = tmp / "seed"
        cpu_of(gate_cmd(mirror, plugin, versions), dict(env, OVERLAY_CACHE=str(seed)))  # checks out all
        one, many, one_empty, many_empty = [], [], [], []
        for i in range(ROUNDS):
            for versions_, out in ((versions[:1], one), (versions, many)):
                fresh_gate_cache(seed, tmp / "c")
                out.append(cpu_of(gate_cmd(mirror, plugin, versions_), dict(env, OVERLAY_CACHE=str(tmp / "c"))))
            for versions_, out in ((versions[:1], one_empty), (versions, many_empty)):
                cache = tmp / f"e{i}-{len(versions_)}"
                out.append(cpu_of(gate_cmd(mirror, plugin, versions_), dict(env, OVERLAY_CACHE=str(cache))))
        o, m = statistics.median(one), statistics.median(many)
        oe, me = statistics.median(one_empty), statistics.median(many_empty)
        result = {"core_files": FILES + len(CORE_FILES) + 1, "changed_per_release": CHANGED,
                  "releases": RELEASES, "rounds": ROUNDS, "one_cold_cpu_s": round(o, 3),
                  "forward_cpu_s": round(m, 3), "ratio": round(m / o, 2), "goal": GOAL,
                  "from_empty_one_cpu_s": round(oe, 3), "from_empty_forward_cpu_s": round(me, 3),
                  "from_empty_ratio": round(me / oe, 2)}
        mirror = os.environ.get("OVERLAY_MIRROR")
        if os.environ.get("BENCH_FORWARD_MIRROR") == "1" and mirror:
            result["mirror"] = mirror_ratio(Path(mirror), tmp, env)
        if "--json" in sys.argv:
            print(json.dumps(result))
        else:
            print(f"forward: {RELEASES} synthetic core releases of {result['core_files']} files, "
                  f"{CHANGED} changed per release; CPU (user+system, children included), median of {ROUNDS}")
            print(f"  release trees checked out, empty gate cache:")
            print(f"    one release, cold               {o:7.2f} s CPU")
            print(f"    forward over {RELEASES}, cold            {m:7.2f} s CPU")
            print(f"    ratio                           {m / o:7.2f}x  (goal <= {GOAL:.0f}x)")
            print(f"  nothing cached (archive import and checkout included):")
            print(f"    one release                     {oe:7.2f} s CPU")
            print(f"    forward over {RELEASES}                  {me:7.2f} s CPU")
            print(f"    ratio                           {me / oe:7.2f}x")
            real = result.get("mirror")
            if real:
                print(f"  the real releases: plugin {real['plugin']} against vllm {', '.join(real['releases'])}, "
                      "release trees checked out, empty gate cache, one round:")
                print(f"    one release, cold               {real['one_cold_cpu_s']:7.1f} s CPU")
                print(f"    forward over {len(real['releases'])}, cold            {real['forward_cpu_s']:7.1f} s CPU")
                print(f"    ratio                           {real['ratio']:7.2f}x  (goal <= {GOAL:.0f}x)")
            elif "mirror" in result:
                print("  the real releases: not in the mirror (pypi/vllm-*.tar.gz, vllm_ascend-*.tar.gz)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
