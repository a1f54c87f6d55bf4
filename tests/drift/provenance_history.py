"""A synthetic plugin history and core archives for the provenance rules (upstream-commit,
superseded-by) and for moving core along in a rebase.

Upstream "acme/plugin" (pin p0), first-parent commits p1..p5:

  p1  [BugFix] a: theirs (#301)            upstream's own version of backport 0001: its
                                          text differs from the backport (conflict), but
                                          0001's upstream-commit is p1
  p2  [Feature] b: first half (#302)       the first of 0002's two upstream commits
  p3  [Misc] docs (#304)                   touches nothing of the series
  p4  [Feature] b: second half (#303)      the second: 0002 is carried from here on
  p5  [Perf] c: upstream's fast path (#305) supersedes the experiment 0003 (superseded-by),
                                          and declares release v1.1 of core in
                                          .github/vllm-release-tag.commit

Series (written against p0): 0001 a.py (backport of #301), 0002 b.py (backport of #302 and
#303, two upstream commits), 0003 c.py (experimental, superseded by #305), 0004 d.py (local,
clean throughout).

Core "core" is pinned to a PyPI-style source archive core==1.0; core-1.1 sits beside it in
the mirror's pypi/ folder: the release p5 declares.
"""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.drift.conftest import Repo, numbered
from tests.drift.series_history import write_patches

URL = "https://git.example.invalid/acme/plugin"

PATCHES = [  # (file, old, new, subject)
    ("a.py", "a_10 = 10\n", "a_10 = 'backport'  # capability check\n", "a: fix a_10 (backport of #301)"),
    ("b.py", "b_05 = 5\nb_06 = 6\n", "b_05 = 'first'\nb_06 = 'second'\n", "b: both halves (backport of #302, #303)"),
    ("c.py", "c_10 = 10\n", "c_10 = 'fast path, opt-in'\n", "c: experimental fast path"),
    ("d.py", "d_03 = 3\n", "d_03 = 300\n", "d: raise d_03"),
]


@dataclass(frozen=True)
class ProvenanceHistory:
    project: Path
    mirror: Path
    upstream: Path  # work tree of the plugin upstream
    commits: dict[str, str]  # p0..p5 -> sha
    archives: dict[str, tuple[Path, str]]  # version -> (archive, sha256)


def _archive(pypi: Path, version: str) -> tuple[Path, str]:
    src = pypi.parent / "src" / f"core-{version}"
    (src / "core").mkdir(parents=True)
    (src / "core" / "__init__.py").write_text(f"__version__ = '{version}'\n")
    (src / "core" / "x.py").write_text(numbered("x", 10))
    archive = pypi / f"core-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname=f"core-{version}")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


# With `residue`, backport 0001 also changes e.py, which upstream's #301 (p1) never touched:
# the part of the backport a drop by provenance would lose.
RESIDUE_EDIT = ("e.py", "e_05 = 5\n", "e_05 = 'throttle'  # only the backport does this\n")
# With `residue="tests"`, backport 0001 also adds its own test, which upstream never had: all
# of its code is upstream's, so the test goes with it, and the plan says so.
RESIDUE_TEST = ("tests/test_a.py", "", "def test_a_10():\n    assert True\n")


def build(root: Path, residue: bool | str = False) -> ProvenanceHistory:
    mirror = root / "mirror"
    up = Repo(mirror / "acme+plugin")
    for name in ("a", "b", "c", "d", "e"):
        up.write(f"{name}.py", numbered(name, 20))
    c = {"p0": up.commit("Initial import (#300)", "p0")}

    project = root / "project"
    patches = list(PATCHES)
    if residue:
        rel, old, new, subject = patches[0]
        patches[0] = ([(rel, old, new), RESIDUE_TEST if residue == "tests" else RESIDUE_EDIT], None, None, subject)
    names = write_patches(up.path, root, "p0", patches, project / "patches")

    up.edit("a.py", "a_10 = 10\n", "a_10 = 'upstream'  # version check\n")
    c["p1"] = up.commit("[BugFix] a: theirs (#301)", "p1")
    up.edit("b.py", "b_05 = 5\n", "b_05 = 'first'\n")
    c["p2"] = up.commit("[Feature] b: first half (#302)", "p2")
    up.write("README.md", "docs\n")
    c["p3"] = up.commit("[Misc] docs (#304)", "p3")
    up.edit("b.py", "b_06 = 6\n", "b_06 = 'second'  # and more\n")
    c["p4"] = up.commit("[Feature] b: second half (#303)", "p4")
    up.edit("c.py", "c_10 = 10\n", "c_10 = 'fast path, default on'\n")
    up.write(".github/vllm-release-tag.commit", "v1.1\n")
    c["p5"] = up.commit("[Perf] c: upstream's fast path (#305)", "p5")

    pypi = mirror / "pypi"
    pypi.mkdir()
    archives = {v: _archive(pypi, v) for v in ("1.0", "1.1")}

    entries = [
        ("backport", ["    upstream: acme/plugin#301", f"    upstream-commit: {c['p1']}",
                      "    original-author: Upstream Dev <dev@example.org>"]),
        ("backport", ["    upstream: [acme/plugin#302, acme/plugin#303]",
                      f"    upstream-commit: [{c['p2']}, {c['p4']}]",
                      "    original-author: Upstream Dev <dev@example.org>"]),
        ("experimental", ["    switch: C_FAST_PATH", "    evidence: evidence/c",
                          "    superseded-by:", f"      commit: {c['p5']}", "      pr: acme/plugin#305"]),
        ("local", ["    forwarded: not yet"]),
    ]
    lines = ["series:"]
    for name, (origin, fields) in zip(names, entries):
        lines += [f"  - patch: {name}", "    target: plugin", f"    origin: {origin}", *fields]
    (project / "series.yaml").write_text("\n".join(lines) + "\n")
    (project / "evidence" / "c").mkdir(parents=True)
    (project / "evidence" / "c" / "README.md").write_text("pending\n")
    (project / "pins").mkdir()
    (project / "pins" / "base.yaml").write_text(
        "description: synthetic provenance history\ndefault: true\ntargets:\n"
        f"  core:\n    pypi: core==1.0\n    sha256: {archives['1.0'][1]}\n"
        f"  plugin:\n    repo: {URL}\n    commit: {c['p0']}\n")
    return ProvenanceHistory(project, mirror, up.path, c, archives)
