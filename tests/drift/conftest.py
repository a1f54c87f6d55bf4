"""A synthetic upstream history that walks every drift class, built once per session.

Upstream "plugin" (pin = c0), first-parent commits c1..c14 (c14 merges a side branch).
The project's series on it, and the class each patch should have along the walk:

  0001-a20   a.py line 20        clean -> offset@c2 -> fuzz@c4 -> conflict@c6
  0002-a34   a.py line 34        clean -> offset@c2 -> blocked@c6 (builds on 0001's file)
  0003-b10   b.py line 10        clean -> merged (reverse)@c7
  0004-c05   c.py line 5         clean -> missing@c9 (renamed to pkg/core/c_impl.py)
  0005-d     d.py adds 2 lines   clean -> merged (likely)@c10 (upstream reformatted it)
  0006-e05   e.py line 5         clean -> merged (reverse)@c11; rule patch-id from c12
  0007-new   creates pkg/new.py  clean -> merged (reverse)@c13

Upstream "core" (pin = k0, then one unrelated commit): 0101-core-x stays clean.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

PLUGIN_URL = "https://git.example.invalid/acme/plugin"
CORE_URL = "https://git.example.invalid/acme/core"


def git(args: list[str], cwd: Path, n: int = 0, author: str = "Upstream Dev") -> str:
    date = f"2026-07-{1 + n // 24:02d}T{n % 24:02d}:00:00+0000"
    env = dict(os.environ)
    env.update({"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": "dev@example.org",
                "GIT_COMMITTER_NAME": "Upstream Dev", "GIT_COMMITTER_EMAIL": "dev@example.org",
                "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
                "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    return subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgSign=false",
                           *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def numbered(prefix: str, count: int) -> str:
    return "".join(f"{prefix}_{i:02d} = {i}\n" for i in range(1, count + 1))


D_PY = """def run(alpha, beta):
    x = 1
    y = 2
    z = 3
    w = 4
    v = 5
    u = 6
    return x
"""


class Repo:
    def __init__(self, path: Path, author: str = "Upstream Dev", dress=lambda subject: subject) -> None:
        """`author` of every commit, `dress` each subject (hostile upstream text in tests)."""
        self.path = path
        self.n = 0
        self.author, self.dress = author, dress
        path.mkdir(parents=True)
        git(["init", "-q"], path)

    def edit(self, rel: str, old: str, new: str) -> None:
        p = self.path / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new, 1))

    def write(self, rel: str, text: str) -> None:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def commit(self, subject: str, tag: str | None = None) -> str:
        self.n += 1
        git(["add", "-A"], self.path, self.n)
        git(["commit", "-q", "--allow-empty", "-m", self.dress(subject)], self.path, self.n, self.author)
        sha = git(["rev-parse", "HEAD"], self.path)
        if tag:
            git(["tag", tag], self.path)
        return sha


@dataclass(frozen=True)
class History:
    project: Path
    mirror: Path
    plugin: Path  # git dir of the plugin upstream
    commits: dict[str, str]  # c0..c14 -> sha (first parent line)
    side: str  # the side-branch commit merged by c14


def _patch(work: Path, n: int, subject: str, edits) -> None:
    for rel, old, new in edits:
        p = work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        text = p.read_text() if p.exists() else ""
        p.write_text(text.replace(old, new, 1) if old else new)
    git(["add", "-A"], work, 100 + n)
    git(["commit", "-q", "-m", subject], work, 100 + n)


def build_history(root: Path) -> History:
    mirror = root / "mirror"
    up = Repo(mirror / "acme+plugin")
    up.write("README.md", "plugin\n")
    up.write("pkg/a.py", numbered("a", 40))
    up.write("pkg/b.py", numbered("b", 20))
    up.write("pkg/c.py", numbered("c", 12))
    up.write("pkg/d.py", D_PY)
    up.write("pkg/e.py", numbered("e", 12))
    c = {"c0": up.commit("Initial import (#100)", "c0")}

    # The project's patches, written against c0 in a scratch clone.
    work = root / "work"
    git(["clone", "-q", str(up.path), str(work)], root)
    series = [
        ("pkg/a.py", "a_20 = 20\n", "a_20 = 2000  # overlay\n", "a: raise a_20"),
        ("pkg/a.py", "a_34 = 34\n", "a_34 = 3400  # overlay\n", "a: raise a_34"),
        ("pkg/b.py", "b_10 = 10\n", "b_10 = 1000\n", "b: fix b_10 (backport of #107)"),
        ("pkg/c.py", "c_05 = 5\n", "c_05 = 500\n", "c: raise c_05"),
        ("pkg/d.py", "    z = 3\n", "    z = 3\n    result = compute(alpha, beta)\n"
                                   "    log(\"result\", result)\n", "d: compute the result"),
        ("pkg/e.py", "e_05 = 5\n", "e_05 = 50\n", "e: raise e_05"),
        ("pkg/new.py", "", "NEW = 'shipped by the overlay'\n", "new: add pkg/new.py"),
    ]
    for n, (rel, old, new, subject) in enumerate(series):
        _patch(work, n, subject, [(rel, old, new)])
    project = root / "project"
    (project / "patches").mkdir(parents=True)
    git(["format-patch", "-q", "-o", str(project / "patches"), "c0"], work)

    # Upstream history after the pin.
    up.write("README.md", "plugin\nmore docs\n")
    c["c1"] = up.commit("[Doc] readme (#101)", "c1")
    up.edit("pkg/a.py", "a_01", "h_1 = 1\nh_2 = 2\nh_3 = 3\nh_4 = 4\nh_5 = 5\na_01")
    c["c2"] = up.commit("[Misc] a: header block (#102)", "c2")
    up.write("pkg/other.py", "x = 1\n")
    c["c3"] = up.commit("[Misc] unrelated (#103)", "c3")
    up.edit("pkg/a.py", "a_23 = 23\n", "a_23 = 23  # upstream\n")
    c["c4"] = up.commit("[Misc] a: tweak a_23 (#104)", "c4")
    up.write("pkg/other.py", "x = 2\n")
    c["c5"] = up.commit("[Misc] unrelated again (#105)", "c5")
    up.edit("pkg/a.py", "a_20 = 20\n", "a_20 = 21\n")
    c["c6"] = up.commit("[Refactor] a: rework a_20 (#106)", "c6")
    up.edit("pkg/b.py", "b_10 = 10\n", "b_10 = 1000\n")
    c["c7"] = up.commit("[BugFix] b: fix b_10 (#107)", "c7")
    up.write("pkg/other.py", "x = 3\n")
    c["c8"] = up.commit("[Misc] unrelated three (#108)", "c8")
    (up.path / "pkg/core").mkdir()
    git(["mv", "pkg/c.py", "pkg/core/c_impl.py"], up.path)
    c["c9"] = up.commit("[Refactor] move c into core (#109)", "c9")
    up.edit("pkg/d.py", "    z = 3\n", "    z = 3  # checked upstream\n"
                                      "    result = compute(alpha,\n                     beta)\n"
                                      "    log( \"result\", result )\n")
    c["c10"] = up.commit("[Feature] d: compute the result (#110)", "c10")
    up.edit("pkg/e.py", "e_05 = 5\n", "e_05 = 50\n")
    c["c11"] = up.commit("[Feature] e: raise e_05 (#111)", "c11")
    up.edit("pkg/e.py", "e_04 = 4\n", "e_04 = 40\n")
    up.edit("pkg/e.py", "e_06 = 6\n", "e_06 = 60\n")
    c["c12"] = up.commit("[Feature] e: neighbours (#112)", "c12")
    up.write("pkg/new.py", "NEW = 'shipped by the overlay'\n")
    c["c13"] = up.commit("[Feature] add new.py (#113)", "c13")
    git(["checkout", "-q", "-b", "side", "c12"], up.path)
    up.edit("pkg/b.py", "b_01 = 1\n", "b_01 = 1  # side branch\n")
    side = up.commit("[Side] touch b.py far from the patch")
    git(["checkout", "-q", "main"], up.path)
    git(["merge", "-q", "--no-ff", "-m", "Merge pull request #114 from side", "side"], up.path, 99)
    c["c14"] = git(["rev-parse", "HEAD"], up.path)
    git(["tag", "c14"], up.path)

    core = Repo(mirror / "acme+core")
    core.write("core/__init__.py", "")
    core.write("core/x.py", numbered("x", 10))
    k0 = core.commit("core import", "k0")
    core.write("core/y.py", "y = 1\n")
    core.commit("core: unrelated", "k1")
    cwork = root / "cwork"
    git(["clone", "-q", str(core.path), str(cwork)], root)
    git(["reset", "-q", "--hard", "k0"], cwork)
    _patch(cwork, 50, "core: raise x_03", [("core/x.py", "x_03 = 3\n", "x_03 = 300\n")])
    git(["format-patch", "-q", "--start-number", "101", "-o", str(project / "patches"), "k0"], cwork)

    names = sorted(p.name for p in (project / "patches").iterdir())
    lines = ["series:"]
    upstream = {"0001": "acme/plugin#106",  # the PR that reworked a_20 upstream
                "0004": "other/fork#109"}  # another repository's PR: not this target's #109
    for name in names:
        lines += [f"  - patch: {name}", f"    target: {'core' if name.startswith('0101') else 'plugin'}",
                  "    origin: local"]
        if name[:4] in upstream:
            lines.append(f"    upstream: {upstream[name[:4]]}")
    (project / "series.yaml").write_text("\n".join(lines) + "\n")
    (project / "pins").mkdir()
    (project / "pins" / "test.yaml").write_text(
        "description: synthetic drift history\ndefault: true\ntargets:\n"
        f"  core:\n    repo: {CORE_URL}\n    commit: {k0}\n"
        f"  plugin:\n    repo: {PLUGIN_URL}\n    commit: {c['c0']}\n")
    return History(project, mirror, up.path / ".git", c, side)


@pytest.fixture(scope="session")
def history(tmp_path_factory) -> History:
    return build_history(tmp_path_factory.mktemp("drift"))


@pytest.fixture
def project(history: History, tmp_path: Path) -> Path:
    """A private copy of the project (tests may write reports next to it)."""
    dest = tmp_path / "project"
    shutil.copytree(history.project, dest)
    return dest


@pytest.fixture(scope="session")
def series_history(tmp_path_factory):
    """The small history of tests/drift/series_history.py (alone, overlap, rebase)."""
    from tests.drift.series_history import build

    return build(tmp_path_factory.mktemp("series"))
