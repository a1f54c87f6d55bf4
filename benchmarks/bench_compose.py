"""Compose overhead: `overlay apply` vs plain `git worktree add` + `git am` of the same series.

Both start from the same local upstream repository (a synthetic tree of FILES files)
and apply the same PATCHES patches; each is run ROUNDS times, interleaved, and the
median wall time of each is compared. Prints the ratio (goal: under 1.5x).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures import PATCH_AUTHOR, commit_all, init_repo, make_patch, run_git, write  # noqa: E402

FILES = int(os.environ.get("BENCH_FILES", "1500"))
PATCHES = int(os.environ.get("BENCH_PATCHES", "12"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def build(tmp: Path) -> tuple[Path, Path, list[Path]]:
    upstream = tmp / "remote" / "example" / "plugin"
    init_repo(upstream)
    write(upstream, {f"pkg/mod{i // 100}/file{i}.py": f"# module {i}\n" + "x = 1\n" * 40
                     for i in range(FILES)})
    base = commit_all(upstream, "import")
    project = tmp / "project"
    (project / "pins").mkdir(parents=True)
    (project / "pins" / "bench.yaml").write_text(
        f"default: true\ntargets:\n  plugin:\n    repo: file://{upstream}\n    commit: {base}\n")
    entries, previous, mails = [], [], []
    for n in range(1, PATCHES + 1):
        files = {f"pkg/mod{n % 10}/file{n * 7}.py": f"# module {n * 7}\n" + "x = 2\n" * 40}
        name = f"{n:04d}-change-{n}.patch"
        mails.append(make_patch(upstream, base, files, f"[Bench] change {n}", "Why: benchmark.",
                                project / "patches" / name, previous=list(previous)))
        previous.append(files)
        entries.append(f"  - patch: {name}\n    target: plugin\n    origin: local\n    forwarded: none\n")
    (project / "series.yaml").write_text("series:\n" + "".join(entries))
    return upstream, project, mails


def time_overlay(project: Path) -> float:
    shutil.rmtree(project / "build", ignore_errors=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "overlay", "--root", str(project), "apply", "--json"],
                   check=True, capture_output=True)
    return time.perf_counter() - start


def time_plain(upstream: Path, mails: list[Path], base: str, dest: Path) -> float:
    if dest.exists():
        run_git(["worktree", "remove", "--force", str(dest)], upstream)
    start = time.perf_counter()
    run_git(["worktree", "add", "-q", "--detach", str(dest), base], upstream)
    run_git(["am", "-q", *map(str, mails)], dest, author=PATCH_AUTHOR)
    return time.perf_counter() - start


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-compose-") as tmp_name:
        tmp = Path(tmp_name)
        upstream, project, mails = build(tmp)
        base = run_git(["rev-parse", "HEAD"], upstream)
        time_overlay(project)  # warm the object cache: steady state is a cached pin
        ours, plain = [], []
        for _ in range(ROUNDS):
            ours.append(time_overlay(project))
            plain.append(time_plain(upstream, mails, base, tmp / "plain"))
        o, p = statistics.median(ours), statistics.median(plain)
        result = {"files": FILES, "patches": PATCHES, "rounds": ROUNDS,
                  "overlay_apply_s": round(o, 3), "worktree_plus_am_s": round(p, 3),
                  "ratio": round(o / p, 2), "goal": 1.5}
        if "--json" in sys.argv:
            print(json.dumps(result))
        else:
            print(f"compose: {FILES} files, {PATCHES} patches, median of {ROUNDS} interleaved rounds")
            print(f"  overlay apply (cached pin)     {o:7.3f} s")
            print(f"  git worktree add + git am      {p:7.3f} s")
            print(f"  ratio                          {o / p:7.2f}x  (goal < 1.5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
