"""Verify an entry's upstream commits against the target's history in a mirror.

`upstream-commit` and `superseded-by` name upstream commits by full id; with a mirror,
`overlay check` proves each one exists there and that its subject carries the pull
request the entry names (`upstream:`, or superseded-by's `pr`), as GitHub writes it
("... (#123)" or "Merge pull request #123 from ..."). Without a mirror the model has
already checked the form (full 40-hex ids, owner/name#N).
"""

from __future__ import annotations

from pathlib import Path

from overlay import paths
from overlay.series.upstream import CommitInfo, commit_infos, refs_in
from overlay.series.model import GitSource, PinSet, SeriesEntry


def target_history(mirror: Path, pins: list[PinSet], target: str) -> tuple[Path, str] | None:
    """(git dir in the mirror, owner/name) of a target pinned to git in some pin set."""
    for pin in pins:
        if target in pin.target_names and isinstance(pin.target(target).source, GitSource):
            src = pin.target(target).source
            repo = paths.find_mirror_repo(mirror, src.mirror_name)
            if repo is not None:
                return repo, src.mirror_name.replace("+", "/")
    return None


def named_commits(entry: SeriesEntry) -> tuple[str, ...]:
    """The upstream commits an entry names (`upstream-commit`, `superseded-by`)."""
    prov = entry.provenance
    return prov.upstream_commits + ((prov.superseded_by_commit,) if prov.superseded_by_commit else ())


def commit_problems(entry: SeriesEntry, git_dir: Path, slug: str,
                    infos: dict[str, CommitInfo] | None = None) -> list[str]:
    """What is wrong with the upstream commits the entry names, read from `git_dir`
    (`infos`: commit_infos of them, read once for many entries)."""
    prov = entry.provenance
    if infos is None:
        infos = commit_infos(git_dir, named_commits(entry))
    wanted, _ = refs_in(prov.upstream, slug)
    named = [("upstream-commit", c, wanted, ", ".join(prov.upstream) or "nothing")
             for c in prov.upstream_commits]
    if prov.superseded_by_commit and prov.superseded_by_pr:
        prs, _ = refs_in((prov.superseded_by_pr,), slug)
        named.append(("superseded-by", prov.superseded_by_commit, prs, prov.superseded_by_pr))
    out = []
    for field, sha, prs, says in named:
        info = infos.get(sha)
        if info is None:
            out.append(f"{field} {sha[:12]} is not a commit of {slug} (mirror)")
            continue
        if info.pr is None or info.pr not in prs:
            carried = f"PR #{info.pr}" if info.pr else "no PR number"
            out.append(f"{field} {sha[:12]} ({info.subject!r}) carries {carried}, "
                       f"not the one the entry names ({says})")
    return out
