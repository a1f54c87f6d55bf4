"""A small synthetic upstream and series that walks every rebase outcome.

Upstream "acme/plugin" (pin u0), first-parent commits u1..u5:

  u1  [Doc] readme (#201)                        touches nothing of the series
  u2  [BugFix] o: theirs (#202)                  o_10 changed: 0003 conflicts; 0004,
                                                 built on 0003, is blocked (alone: clean)
  u3  [Feature] m: take the overlay change (#203) 0001's exact change: merged (reverse),
                                                 and an overlap that did the same
  u4  [Misc] n: reword n_08 (#204)               context of 0002 changed: fuzz, 3-way
                                                 refreshes it; an overlap that is no merge
  u5  [Refactor] o: rework o_18 (#205)           0004's line changed: alone, conflict

Series (written against u0, each on top of the one before):

  0001 m.py  adds m_05b, raises m_06       0002 n.py  raises n_10
  0003 o.py  o_10 -> two lines (ours)       0004 o.py  raises o_18 (line 19 after 0003)
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from overlay.trees.refresh import export_patch
from tests.drift.conftest import Repo, git, numbered

URL = "https://git.example.invalid/acme/plugin"

PATCHES = [
    ("m.py", "m_05 = 5\nm_06 = 6\n", "m_05 = 5\nm_05b = 'overlay extra'\nm_06 = 600\n",
     "m: add m_05b and raise m_06"),
    ("n.py", "n_10 = 10\n", "n_10 = 1000  # overlay\n", "n: raise n_10"),
    ("o.py", "o_10 = 10\n", "o_10 = 'ours'\no_10b = 'ours too'\n", "o: ours at o_10"),
    ("o.py", "o_18 = 18\n", "o_18 = 1800  # overlay\n", "o: raise o_18"),
]


@dataclass(frozen=True)
class SeriesHistory:
    project: Path
    mirror: Path
    upstream: Path  # work tree of the upstream repository
    commits: dict[str, str]  # u0..u5 -> sha


def write_patches(upstream: Path, root: Path, base: str, patches, folder: Path) -> list[str]:
    """Each (file, old, new, subject) as one mail in `folder`, each on top of the one
    before, against `base` of `upstream`; the mail names, in order. Contents as `overlay
    refresh` writes them (its pinned format-patch options), so a rebase that changes
    nothing rewrites no byte."""
    work = root / "work"
    git(["clone", "-q", str(upstream), str(work)], root)
    git(["checkout", "-q", base], work)
    for n, (rel, old, new, subject) in enumerate(patches):
        for path, before, after in (rel if isinstance(rel, list) else [(rel, old, new)]):  # one edit or several
            p = work / path
            if not before and not p.exists():  # a new file (a test the patch adds)
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(after)
                continue
            p.write_text(p.read_text().replace(before, after, 1))
        git(["add", "-A"], work, 100 + n)
        git(["commit", "-q", "-m", subject, "-m", "Why: the synthetic series needs it.\n\n"
             "Signed-off-by: Overlay Dev <overlay@example.org>"], work, 100 + n)
    folder.mkdir(parents=True)
    git(["format-patch", "-q", "-o", str(folder), base], work)
    names = sorted(p.name for p in folder.iterdir())
    for name, commit in zip(names, git(["rev-list", "--reverse", f"{base}..HEAD"], work).split()):
        (folder / name).write_text(export_patch(work, commit))
    return names


def build(root: Path, **upstream) -> SeriesHistory:
    """`upstream`: Repo's author and dress (upstream text of a hostile mirror)."""
    mirror = root / "mirror"
    up = Repo(mirror / "acme+plugin", **upstream)
    up.write("README.md", "plugin\n")
    for name, count in (("m", 40), ("n", 20), ("o", 30)):
        up.write(f"{name}.py", numbered(name, count))
    c = {"u0": up.commit("Initial import (#200)", "u0")}

    project = root / "project"
    names = write_patches(up.path, root, "u0", PATCHES, project / "patches")
    lines = ["series:"]
    for name in names:
        lines += [f"  - patch: {name}", "    target: plugin", "    origin: local",
                  "    forwarded: not yet"]
    (project / "series.yaml").write_text("\n".join(lines) + "\n")
    (project / "pins").mkdir()
    (project / "pins" / "base.yaml").write_text(
        "description: synthetic rebase history\ndefault: true\ntargets:\n"
        f"  plugin:\n    repo: {URL}\n    commit: {c['u0']}\n")

    up.write("README.md", "plugin\nmore docs\n")
    c["u1"] = up.commit("[Doc] readme (#201)", "u1")
    up.edit("o.py", "o_10 = 10\n", "o_10 = 'theirs'\n")
    c["u2"] = up.commit("[BugFix] o: theirs (#202)", "u2")
    up.edit("m.py", "m_05 = 5\nm_06 = 6\n", "m_05 = 5\nm_05b = 'overlay extra'\nm_06 = 600\n")
    c["u3"] = up.commit("[Feature] m: take the overlay change (#203)", "u3")
    up.edit("n.py", "n_08 = 8\n", "n_08 = 8  # reworded\n")
    c["u4"] = up.commit("[Misc] n: reword n_08 (#204)", "u4")
    up.edit("o.py", "o_18 = 18\n", "o_18 = 'reworked'\n")
    c["u5"] = up.commit("[Refactor] o: rework o_18 (#205)", "u5")
    return SeriesHistory(project, mirror, up.path, c)


def copy_project(history: SeriesHistory, dest: Path) -> Path:
    shutil.copytree(history.project, dest)
    return dest
