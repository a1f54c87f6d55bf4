"""Upstream commits and the pull requests they land: what a series entry's provenance names.

`CommitInfo.pr` reads a commit subject as GitHub writes it; `refs_in` reads the PR numbers
and commit ids in an entry's `upstream:` references. Used by provenance (`overlay check`),
drift and rebase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from overlay import gitcmd

_PR = re.compile(r"\(#(\d+)\)")
_MERGE_PR = re.compile(r"^Merge pull request #(\d+) from ")


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    date: str  # committer date, ISO 8601
    subject: str
    author: str = ""

    @property
    def pr(self) -> int | None:
        """The pull request a commit lands: GitHub's merge commit says so first
        ("Merge pull request #77 from owner/branch"), its squash merge last ("... (#77)")."""
        merge = _MERGE_PR.match(self.subject)
        if merge:
            return int(merge.group(1))
        found = _PR.findall(self.subject)
        return int(found[-1]) if found else None

    def to_json(self) -> dict:
        return {"commit": self.sha, "date": self.date, "subject": self.subject, "pr": self.pr,
                "author": self.author}


def commit_info(git_dir: Path, sha: str) -> CommitInfo:
    line = gitcmd.out(["log", "-1", "--format=%H%x00%cI%x00%an%x00%s", "--end-of-options", sha],
                      git_dir=gitcmd.data_view(git_dir), data=True)
    a, b, author, c = line.split("\0", 3)
    return CommitInfo(a, b, c, author)


def commit_infos(git_dir: Path, shas: Sequence[str]) -> dict[str, CommitInfo]:
    """The CommitInfo of each of `shas` (full ids) that is a commit of `git_dir`; the others
    are left out. Two git processes whatever their number: `cat-file --batch-check` says
    which are commits, one `log --no-walk --stdin` reads them all."""
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return {}
    view = gitcmd.data_view(git_dir)
    listing = gitcmd.git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], git_dir=view,
                         input="".join(f"{sha}\n" for sha in wanted), data=True).stdout
    commits = [line.split(" ", 1)[0] for line in listing.splitlines()
               if line.endswith(" commit") and line.split(" ", 1)[0] in wanted]
    if not commits:
        return {}
    text = gitcmd.git(["log", "--no-walk=unsorted", "--stdin", "--format=%H%x00%cI%x00%an%x00%s"],
                      git_dir=view, input="".join(f"{sha}\n" for sha in commits), data=True).stdout
    out = {}
    for line in text.splitlines():
        a, b, author, c = line.split("\0", 3)
        out[a] = CommitInfo(a, b, c, author)
    return out


_SHA_REF = re.compile(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])")


def refs_in(refs: Sequence[str], slug: str) -> tuple[frozenset[int], tuple[str, ...]]:
    """PR numbers (of repository `slug`) and commit ids in upstream references."""
    prs: set[int] = set()
    shas: list[str] = []
    for ref in refs:
        for m in re.finditer(r"(?:([\w.-]+/[\w.-]+)#|([\w.-]+/[\w.-]+)/pull/|(?<![\w/])#)(\d+)", ref):
            repo = m.group(1) or m.group(2)
            if repo is None or repo.lower().endswith(slug.lower()) and slug:
                prs.add(int(m.group(3)))
        shas += _SHA_REF.findall(ref.lower())
    return frozenset(prs), tuple(shas)
