#!/usr/bin/env python3
"""Drift speed: ours against the two usual ways, on the same history and series.

  (a) checkout: a shared clone checks out each commit, then `git apply --check`
      runs once per patch;
  (b) index:    a temporary index reads each commit's tree (`git read-tree`), then
      `git apply --cached --check` runs once per patch;
  ours, cold:   every commit from scratch (no result or blob reuse): one batched
      id look-up for the touched paths, each touched blob read, hunks applied in
      memory, with series semantics and merged detection on top;
  ours, scan:   what `overlay drift --scan` does (reuses checks while no touched
      blob changed; blocked patches classified alone; the upstream overlap of
      every patch from the same path-limited log the patch-ids read).

The baselines only answer "applies or not" per patch, independently; ours answers
the full class with series semantics, so the comparison favours the baselines.

Real history:  OVERLAY_MIRROR=DIR python benchmarks/bench_drift.py --root PROJECT \
                   --pin 1f486d96 --target plugin --ref main [--sample 200]
Anywhere:      python benchmarks/bench_drift.py            (a synthetic history)
Prints per-commit milliseconds and the ratios; --json for a machine-readable line.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from overlay import paths  # noqa: E402
from overlay.drift.blobs import BlobReader  # noqa: E402
from overlay.drift.classify import Memo  # noqa: E402
from overlay.drift.targets import load_patches, resolve_ref, target_repo  # noqa: E402
from overlay.drift.scan import Drift, commit_log  # noqa: E402
from overlay.gitcmd import isolated_env  # noqa: E402
from overlay.series.model import Project  # noqa: E402


def git(args, **kw) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True,
                          env=isolated_env(kw.pop("env", None)), **kw).stdout


# ----------------------------------------------------------------------------- synthetic


def synthetic(root: Path, files: int = 1500, commits: int = 400, seed: int = 7) -> Path:
    """A project + mirror: a tree of `files` files, `commits` first-parent commits
    each editing 3 files; 3 patches on files that upstream edits now and then, the first
    naming an upstream commit half way along (`upstream-commit`: the provenance rule)."""
    rng = random.Random(seed)
    content = {f"src/m{i:04d}.py": [f"value_{i}_{k} = {k}\n" for k in range(200)]
               for i in range(files)}
    hot = ["src/m0001.py", "src/m0002.py", "src/m0003.py"]
    stream = []
    for n in range(commits + 1):
        changed = list(content) if n == 0 else rng.sample(list(content), 3) + (
            [rng.choice(hot)] if n % 25 == 0 else [])
        body = ""
        for path in changed:
            if n:
                lines = content[path]
                k = rng.randrange(len(lines))
                lines.insert(k, f"inserted_{n} = {k}\n")
            data = "".join(content[path]).encode()
            body += f"M 644 inline {path}\ndata {len(data)}\n{data.decode()}\n"
        msg = f"commit {n} (#{n})"
        stream.append(f"commit refs/heads/main\ncommitter Dev <d@example.org> {1_780_000_000 + n} +0000\n"
                      f"data {len(msg)}\n{msg}\n{body}\n")
    repo = root / "mirror" / "acme+plugin"
    repo.mkdir(parents=True)
    git(["init", "-q", "--bare", str(repo)])
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input="".join(stream).encode(),
                   check=True, env=isolated_env())
    walk = git(["rev-list", "--reverse", "--first-parent", "main"], cwd=repo).split()
    first = walk[0]
    project = root / "project"
    (project / "patches").mkdir(parents=True)
    (project / "pins").mkdir()
    (project / "pins" / "bench.yaml").write_text(
        f"default: true\ntargets:\n  plugin:\n    repo: https://git.example.invalid/acme/plugin\n"
        f"    commit: {first}\n")
    series = ["series:"]
    for j, path in enumerate(hot, 1):
        i = int(path[5:9])
        k = 100
        ctx = [f"value_{i}_{m} = {m}\n" for m in range(k - 3, k + 4)]
        hunk = "".join(" " + x for x in ctx[:3]) + "-" + ctx[3] + f"+value_{i}_{k} = {k}0\n" + \
            "".join(" " + x for x in ctx[4:])
        name = f"000{j}-bench.patch"
        (project / "patches" / name).write_text(
            "From: Bench <b@example.org>\nDate: Wed, 1 Jul 2026 10:00:00 +0000\n"
            f"Subject: [PATCH] bench {j}\n\nA benchmark patch.\n---\n"
            f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -{k - 2},7 +{k - 2},7 @@\n{hunk}")
        series += [f"  - patch: {name}", "    target: plugin", "    origin: local"]
        if j == 1:  # the provenance rule too: upstream carries it from the walk's middle on
            series.append(f"    upstream-commit: {walk[len(walk) // 2]}")
    (project / "series.yaml").write_text("\n".join(series) + "\n")
    return project


# ----------------------------------------------------------------------------- the three ways


def baseline_checkout(git_dir: Path, shas: list[str], patch_files: list[Path], tmp: Path) -> list[float]:
    work = tmp / "checkout"
    git(["clone", "-q", "--shared", "--no-checkout", str(git_dir), str(work)])
    times = []
    for sha in shas:
        t = time.perf_counter()
        git(["checkout", "-q", "-f", "--detach", sha], cwd=work)
        for p in patch_files:
            subprocess.run(["git", "apply", "--check", str(p)], cwd=work, capture_output=True,
                           env=isolated_env())
        times.append(time.perf_counter() - t)
    shutil.rmtree(work)
    return times


def baseline_index(git_dir: Path, shas: list[str], patch_files: list[Path], tmp: Path) -> list[float]:
    env = {"GIT_INDEX_FILE": str(tmp / "bench.index")}
    times = []
    for sha in shas:
        t = time.perf_counter()
        git(["--git-dir", str(git_dir), "read-tree", sha], env=env)
        for p in patch_files:
            subprocess.run(["git", "--git-dir", str(git_dir), "apply", "--cached", "--check", str(p)],
                           capture_output=True, env=isolated_env(env))
        times.append(time.perf_counter() - t)
    return times


class Timed(BlobReader):
    """The real reader, with its two pipe operations timed (what bounds ours)."""

    def __init__(self, git_dir: Path) -> None:
        super().__init__(git_dir)
        self.oid_s = 0.0
        self.text_s = 0.0

    def oids(self, commit, paths):
        t = time.perf_counter()
        try:
            return super().oids(commit, paths)
        finally:
            self.oid_s += time.perf_counter() - t

    def prefetch(self, oids):  # every content read goes through here
        t = time.perf_counter()
        try:
            return super().prefetch(oids)
        finally:
            self.text_s += time.perf_counter() - t


def ours_cold(git_dir, base, patches, diffs, shas, head) -> tuple[list[float], Timed]:
    reader = Timed(git_dir)
    engine = Drift(git_dir, base, patches, diffs, reader)
    merged = {n: c[0] for n, c in engine.merged_ids(head).items()}
    times = []
    for sha in shas:
        engine.memo = Memo()  # nothing reused between commits
        reader.forget()
        t = time.perf_counter()
        engine.classify(sha, None, merged, None)
        times.append(time.perf_counter() - t)
    engine.close()
    return times, reader


def ours_scan(git_dir, base, patches, diffs, commits, head) -> tuple[float, int, Timed]:
    reader = Timed(git_dir)
    engine = Drift(git_dir, base, patches, diffs, reader)
    t = time.perf_counter()
    engine.scan(commits, head)
    engine.overlap(head, commits)  # --scan reports the upstream overlap too
    seconds = time.perf_counter() - t
    engine.close()
    return seconds, len(commits) + 1, reader


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="project root (default: a synthetic history)")
    ap.add_argument("--pin")
    ap.add_argument("--target", default="plugin")
    ap.add_argument("--ref", default="main")
    ap.add_argument("--mirror", type=Path)
    ap.add_argument("--sample", type=int, default=120,
                    help="commits (evenly spaced along the walk) the baselines and 'cold' run on")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-drift-") as tmp_name:
        tmp = Path(tmp_name)
        if args.root is None:
            root, mirror, what = synthetic(tmp), tmp / "project" / ".." / "mirror", "synthetic"
        else:
            root, mirror, what = args.root.resolve(), paths.mirror_root(args.mirror), "project"
        project = Project.load(root)
        pin = project.pin(args.pin)
        git_dir, base = target_repo(root, pin, args.target, mirror.resolve() if mirror else None)
        head = resolve_ref(git_dir, args.target, args.ref)
        patches, diffs = load_patches(project, args.target, pin.name)  # what the pin set carries
        if not patches:
            print(f"no patches for target {args.target} in {root}/series.yaml", file=sys.stderr)
            return 2
        patch_files = [project.patches_dir / e.patch for e in project.series.for_target(args.target)]
        commits = commit_log(git_dir, base, head)
        shas = [base] + [c.sha for c in commits]
        step = max(1, len(shas) // max(1, args.sample))
        sample = shas[::step][:args.sample]

        scan_s, walked, scan_reader = ours_scan(git_dir, base, patches, diffs, commits, head)
        cold, cold_reader = ours_cold(git_dir, base, patches, diffs, sample, head)
        idx = baseline_index(git_dir, sample, patch_files, tmp)
        chk = baseline_checkout(git_dir, sample, patch_files, tmp)

    ms = lambda xs: 1000 * statistics.mean(xs)  # noqa: E731
    result = {
        "history": what, "commits_walked": walked, "sample": len(sample), "patches": len(patches),
        "touched_paths": len({p for x in patches for p in x.paths}),
        "ms_per_commit": {
            "a_checkout_apply_check": round(ms(chk), 3),
            "b_temp_index_apply_cached_check": round(ms(idx), 3),
            "ours_cold": round(ms(cold), 3),
            "ours_scan": round(1000 * scan_s / walked, 3),
        },
        "ours_cold_breakdown_ms_per_commit": {
            "path_id_lookups": round(1000 * cold_reader.oid_s / len(sample), 3),
            "blob_reads": round(1000 * cold_reader.text_s / len(sample), 3),
            "apply_and_classify": round(ms(cold) - 1000 * (cold_reader.oid_s + cold_reader.text_s)
                                        / len(sample), 3),
        },
        "ours_scan_breakdown_ms_per_commit": {
            "path_id_lookups": round(1000 * scan_reader.oid_s / walked, 3),
            "blob_reads": round(1000 * scan_reader.text_s / walked, 3),
            "rest": round(1000 * (scan_s - scan_reader.oid_s - scan_reader.text_s) / walked, 3),
        },
    }
    m = result["ms_per_commit"]
    result["ratios"] = {
        "a_over_ours_cold": round(m["a_checkout_apply_check"] / m["ours_cold"], 1),
        "b_over_ours_cold": round(m["b_temp_index_apply_cached_check"] / m["ours_cold"], 1),
        "a_over_ours_scan": round(m["a_checkout_apply_check"] / m["ours_scan"], 1),
        "b_over_ours_scan": round(m["b_temp_index_apply_cached_check"] / m["ours_scan"], 1),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"drift benchmark: {what} history, {len(patches)} patches touching "
          f"{result['touched_paths']} paths; scan walked {walked} commits, "
          f"baselines and 'cold' on {len(sample)} of them")
    print(f"  {'method':<44}{'ms/commit':>10}")
    labels = {"a_checkout_apply_check": "(a) checkout + git apply --check",
              "b_temp_index_apply_cached_check": "(b) temp index + git apply --cached --check",
              "ours_cold": "ours, cold (no reuse between commits)",
              "ours_scan": "ours, scan (overlay drift --scan)"}
    for key, label in labels.items():
        print(f"  {label:<44}{m[key]:>10.3f}")
    c = result["ours_cold_breakdown_ms_per_commit"]
    s = result["ours_scan_breakdown_ms_per_commit"]
    print(f"  ours, cold: {c['path_id_lookups']:.3f} ms path-id look-ups, {c['blob_reads']:.3f} ms "
          f"blob reads, {c['apply_and_classify']:.3f} ms apply+classify")
    print(f"  ours, scan: {s['path_id_lookups']:.3f} ms path-id look-ups, {s['blob_reads']:.3f} ms "
          f"blob reads, {s['rest']:.3f} ms the rest")
    r = result["ratios"]
    print(f"  ratios: (a)/cold {r['a_over_ours_cold']}x, (b)/cold {r['b_over_ours_cold']}x, "
          f"(a)/scan {r['a_over_ours_scan']}x, (b)/scan {r['b_over_ours_scan']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
