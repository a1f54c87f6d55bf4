"""Synthetic upstreams and projects, built in a temporary directory by the tests.

`make_world` creates a small "core" and "plugin" repository with several commits
by an upstream author, and a project (series.yaml, pins/, patches/) whose patches
are written by a patch author other than the composer.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

UPSTREAM = ("Upstream Dev", "upstream@example.org")
PATCH_AUTHOR = ("Patch Author", "patch.author@example.org")
COMPOSER = ("Compo Ser", "composer@example.org")


def run_git(args: list[str], cwd: Path, author: tuple[str, str] = UPSTREAM,
            date: str = "2026-07-01T10:00:00+0800", strip: bool = True) -> str:
    env = dict(os.environ)
    env.update({
        "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": author[0], "GIT_COMMITTER_EMAIL": author[1],
        "GIT_COMMITTER_DATE": date, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
    })
    out = subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env,
                          check=True, capture_output=True, text=True).stdout
    return out.strip() if strip else out


def write(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)


def commit_all(repo: Path, message: str, author: tuple[str, str] = UPSTREAM,
               date: str = "2026-07-01T10:00:00+0800") -> str:
    run_git(["add", "-A"], repo, author, date)
    run_git(["commit", "-q", "-m", message], repo, author, date)
    return run_git(["rev-parse", "HEAD"], repo)


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    run_git(["init", "-q"], path)
    return path


CORE_FILES = {
    "vllm/__init__.py": "__version__ = '0.0.1'\n",
    "vllm/graph.py": textwrap.dedent("""\
        class GraphManager:
            def __init__(self, config, device):
                self.config = config
                self.device = device

            def capture(self, fn, sizes):
                return [fn(s) for s in sizes]
        """),
    "vllm/sampler.py": "def _compute_global_lse(x):\n    return x\n",
}
PLUGIN_FILES = {
    "vllm_ascend/__init__.py": "",
    "vllm_ascend/worker.py": textwrap.dedent("""\
        from vllm.graph import GraphManager


        def factory(config, device):
            return AclGraphManager(config, device)


        class AclGraphManager(GraphManager):
            def capture(self, fn, sizes):
                return super().capture(fn, sizes)
        """),
    "vllm_ascend/envs.py": "VARS = {}\n",
    "README.md": "plugin\n",
}


@dataclass
class World:
    tmp: Path
    core: Path  # upstream working clone
    plugin: Path
    core_commits: list[str]
    plugin_commits: list[str]
    project: Path
    mirror: Path

    def patch_file(self, name: str) -> Path:
        return self.project / "patches" / name


def make_upstream(path: Path, files: dict[str, str], extra_commits: int = 2) -> list[str]:
    init_repo(path)
    write(path, files)
    commits = [commit_all(path, "initial import")]
    for i in range(extra_commits):
        write(path, {f"docs/note{i}.md": f"note {i}\n"})
        commits.append(commit_all(path, f"[Doc] add note {i} (#{100 + i})",
                                  date=f"2026-07-0{i + 2}T10:00:00+0800"))
    return commits


def make_patch(upstream: Path, base: str, files: dict[str, str], subject: str,
               body: str, out: Path, author: tuple[str, str] = PATCH_AUTHOR,
               date: str = "2026-07-10T12:00:00+0800", previous: list[tuple] = ()) -> Path:
    """Write one format-patch mail that changes `files` on top of base (+ previous patches)."""
    work = out.parent.parent.parent / f"work-{out.stem}"
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    run_git(["clone", "-q", str(upstream), str(work)], out.parent.parent.parent)
    run_git(["checkout", "-q", base], work)
    for prev_files in previous:
        write(work, prev_files)
        commit_all(work, "previous", author, date)
    write(work, files)
    commit_all(work, f"{subject}\n\n{body}", author, date)
    mail = run_git(["format-patch", "-1", "--stdout", "--no-signature", "--zero-commit",
                    "--full-index", "--no-stat", "HEAD"], work, strip=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(mail)
    subprocess.run(["rm", "-rf", str(work)], check=True)
    return out


PINS_TEMPLATE = """\
# fixture pin set
description: fixture pairing
default: {default}
targets:
  core:
    repo: {core_url}
    commit: {core}
  plugin:
    repo: {plugin_url}
    commit: {plugin}
toolchain:
  python: "3.11"
"""

SERIES = """\
# fixture series
series:
  - patch: 0001-plugin-lora-args.patch
    target: plugin
    origin: backport
    upstream: example/plugin#10935
    original-author: Patch Author <patch.author@example.org>
    core-change: example/core#35536
  - patch: 0002-core-rename-helper.patch
    target: core
    origin: local
    forwarded: example/core#1
  - patch: 0003-plugin-switch.patch
    target: plugin
    origin: experimental
    switch: PLUGIN_FAST_PATH
    evidence: evidence/fast-path
"""


def make_world(tmp: Path) -> World:
    # Upstreams live at <tmp>/remote/example/{core,plugin} so their file:// URLs end in
    # owner/name, and a mirror of both (bare clones named owner+name) at <tmp>/mirror.
    core = tmp / "remote" / "example" / "core"
    plugin = tmp / "remote" / "example" / "plugin"
    core_commits = make_upstream(core, CORE_FILES)
    plugin_commits = make_upstream(plugin, PLUGIN_FILES)
    mirror = tmp / "mirror"
    mirror.mkdir()
    run_git(["clone", "-q", "--bare", str(core), str(mirror / "example+core")], tmp)
    run_git(["clone", "-q", str(plugin), str(mirror / "example+plugin")], tmp)
    project = tmp / "project"
    (project / "pins").mkdir(parents=True)
    (project / "evidence" / "fast-path").mkdir(parents=True)
    (project / "evidence" / "fast-path" / "README.md").write_text("pending\n")
    pin_core, pin_plugin = core_commits[1], plugin_commits[1]
    (project / "pins" / "p1.yaml").write_text(PINS_TEMPLATE.format(
        default="true", core_url=f"file://{core}", plugin_url=f"file://{plugin}",
        core=pin_core, plugin=pin_plugin))
    (project / "series.yaml").write_text(SERIES)
    patches = project / "patches"
    p1 = {"vllm_ascend/worker.py": PLUGIN_FILES["vllm_ascend/worker.py"].replace(
        "def factory(config, device):", "def factory(config, device, lora_capture_cases=None):")}
    make_patch(plugin, pin_plugin, p1, "[BugFix][MRV2] Accept lora_capture_cases in factory",
               "Core now passes lora_capture_cases.\n\nUpstream-PR: example/plugin#10935",
               patches / "0001-plugin-lora-args.patch")
    make_patch(core, pin_core, {"vllm/sampler.py": "def _compute_global_logsumexp(x):\n    return x\n"},
               "[Core] Rename the global lse helper", "Plugin expects the new name.",
               patches / "0002-core-rename-helper.patch", author=("Another Author", "another@example.org"))
    p3 = {"vllm_ascend/envs.py": "VARS = {'PLUGIN_FAST_PATH': '0'}\n"}
    make_patch(plugin, pin_plugin, p3, "[Perf] Add an opt-in fast path switch",
               "Off by default; evidence pending.", patches / "0003-plugin-switch.patch",
               previous=[p1])
    return World(tmp, core, plugin, core_commits, plugin_commits, project, mirror)


def break_patch_two(world) -> None:
    """Make 0003 fail: rewrite the plugin file it changes so its context is gone."""
    p = world.patch_file("0003-plugin-switch.patch")
    p.write_text(p.read_text().replace("-VARS = {}", "-VARS = {'OTHER': 1}"))


def make_sdist(folder: Path, top: str, files: dict) -> Path:
    """A synthetic source release `folder/TOP.tar.gz`: `files` (path -> text or bytes) under
    TOP/, regular members only, byte-stable (gzip mtime 0), as PyPI sdists are laid out."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{top}.tar.gz"
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path
