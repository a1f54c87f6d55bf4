"""`overlay check`: the series, its patches, their provenance and the pins agree (offline)."""

from __future__ import annotations

import email.utils
import re
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from overlay.errors import OverlayError, clean_line
from overlay.series.model import Project, SeriesEntry, load_all_pins
from overlay.series import seriesdoc
from overlay.series.patchfile import PatchMail, read_patch, unsafe_reason


# What `overlay check` reads, relative to the project root (a folder ends in `/`). The
# pre-commit hook runs the check when a commit changes any of them: its `files` pattern in
# .pre-commit-hooks.yaml is `files_pattern()` (tests/test_precommit_hooks.py holds them
# equal), so a path added here is watched there too.
INPUTS = ("series.yaml", "patches/", "pins/", "evidence/")
EVIDENCE = "evidence"  # every evidence folder an entry names lies in it


def files_pattern() -> str:
    """The pre-commit `files` regex that matches every path under INPUTS."""
    return "^(" + "|".join(re.escape(name) for name in INPUTS) + ")"


@dataclass(frozen=True)
class Finding:
    path: str
    line: int | None
    message: str
    hint: str | None = None

    def one_line(self) -> str:
        return OverlayError(self.message, path=self.path, line=self.line, hint=self.hint).one_line()

    def as_dict(self) -> dict:
        data = asdict(self)
        data["message"] = clean_line(self.message)
        return data

    @classmethod
    def of(cls, exc: OverlayError) -> "Finding":
        return cls(exc.path or "", exc.line, exc.message, exc.hint)


def provenance_gaps(entry: SeriesEntry, root: Path) -> list[str]:
    """What the entry's origin requires but the entry lacks (pure but for one folder check)."""
    p = entry.provenance
    gaps = []
    if p.origin == "backport":
        if not p.upstream:
            gaps.append("a backport needs 'upstream' (the PR or commit it comes from)")
        if not p.original_author:
            gaps.append("a backport needs 'original-author'")
    elif p.origin == "local":
        if not p.forwarded:
            gaps.append("a local patch needs 'forwarded' (where it was or will be sent upstream)")
    elif p.origin == "experimental":
        if not p.switch:
            gaps.append("an experimental patch needs 'switch' (its opt-in environment switch)")
        if not p.evidence:
            gaps.append("an experimental patch needs 'evidence' (its evidence folder)")
        elif not _in_evidence(p.evidence):
            gaps.append(f"evidence folder '{p.evidence}' is not under {EVIDENCE}/ "
                        "(where the check and its pre-commit hook look)")
        elif not (root / p.evidence).is_dir():
            gaps.append(f"evidence folder '{p.evidence}' does not exist")
    return gaps


def _in_evidence(folder: str) -> bool:
    parts = PurePosixPath(folder).parts
    return len(parts) >= 2 and parts[0] == EVIDENCE and ".." not in parts and "\\" not in folder


def _blob_name(blob: str | None) -> str:
    return blob[:12] if blob else "unknown (no index line)"


def shared_file_drift(mails: list[tuple[SeriesEntry, PatchMail]]) -> list[Finding]:
    """Entries for one target that create the same file must create it as the same blob
    (the `index` line's new id): two copies of shared code, say one carried on old pins
    and its port on a new base, cannot drift apart unnoticed."""
    first: dict[tuple[str, str], tuple[SeriesEntry, str | None]] = {}
    findings = []
    revises = {e.patch: e.revises for e, _ in mails}

    def family(patch: str) -> str:  # the first version of a chain of `revises`
        seen = set()
        while revises.get(patch) and patch not in seen:
            seen.add(patch)
            patch = revises[patch]  # type: ignore[assignment]
        return patch

    for entry, mail in mails:
        for change in mail.files:
            if not change.created:
                continue
            blob = change.blobs[1] if change.blobs else None
            key = (entry.target, change.path)
            if key not in first:
                first[key] = (entry, blob)
                continue
            other, other_blob = first[key]
            if family(entry.patch) == family(other.patch):
                continue  # one patch's versions for different pin sets: they differ on purpose
            if blob is None or blob != other_blob:
                findings.append(Finding(
                    "series.yaml", entry.line,
                    f"{entry.patch}: creates {change.path} as blob {_blob_name(blob)}, "
                    f"but {other.patch} creates it as {_blob_name(other_blob)}",
                    "shared files must stay identical: give both patches the same content, "
                    "then `overlay refresh`"))
    return findings


def _same_person(wanted: str, candidate: str) -> bool:
    """Same e-mail address, or (when `wanted` gives none) the same name, ignoring case."""
    w_name, w_addr = email.utils.parseaddr(wanted)
    c_name, c_addr = email.utils.parseaddr(candidate)
    if w_addr and "@" in w_addr:
        return w_addr.lower() == c_addr.lower()
    return bool(w_name or wanted) and (w_name or wanted).strip().lower() == c_name.strip().lower()


_CREDIT_TRAILERS = ("co-authored-by:", "original-author:", "originally-by:")


def header_disagreements(entry: SeriesEntry, mail: PatchMail) -> list[str]:
    out = []
    if entry.subject and entry.subject != mail.subject:
        out.append(f"series subject {entry.subject!r} differs from the patch's {mail.subject!r}")
    for trailer, declared, field in (("upstream-pr:", entry.provenance.upstream, "upstream"),
                                     ("core-change:", entry.provenance.core_change, "core-change")):
        for line in mail.message.splitlines():
            if line.lower().startswith(trailer):
                value = line.split(":", 1)[1].strip()
                if value not in declared:
                    out.append(f"the patch's {line.split(':', 1)[0]}: {value} is not in the entry's "
                               f"'{field}' ({', '.join(declared) or 'empty'})")
    author = entry.provenance.original_author
    if entry.origin == "backport" and author:
        credited = [mail.author] + [line.split(":", 1)[1].strip() for line in mail.message.splitlines()
                                    if line.lower().startswith(_CREDIT_TRAILERS)]
        if not any(_same_person(author, c) for c in credited):
            out.append(f"original author {author!r} is neither the patch's From: ({mail.author}) "
                       f"nor named in a Co-authored-by:/Original-author: trailer")
    return out


def upstream_commit_findings(project: Project, pins: list) -> list[Finding]:
    """With a mirror ($OVERLAY_MIRROR), every upstream commit an entry names exists in its
    target's history and its subject carries the PR the entry names. Without one, the
    form alone (checked when series.yaml is loaded)."""
    from overlay import paths
    from overlay.series import provenance
    from overlay.series.upstream import commit_infos

    named = [e for e in project.series.entries
             if e.provenance.upstream_commits or e.provenance.superseded_by_commit]
    mirror = paths.mirror_root(None, validate=False) if named else None
    if mirror is None:
        return []
    histories = {t: provenance.target_history(mirror, pins, t) for t in dict.fromkeys(e.target for e in named)}
    infos = {}  # per target, every named commit read in one batch
    for target, history in histories.items():
        if history is not None:
            infos[target] = commit_infos(
                history[0], [c for e in named if e.target == target for c in provenance.named_commits(e)])
    out = []
    for entry in named:
        history = histories[entry.target]
        if history is None:
            continue  # the mirror does not hold this target: form only
        for problem in provenance.commit_problems(entry, *history, infos[entry.target]):
            out.append(Finding("series.yaml", entry.line, f"{entry.patch}: {problem}",
                               "write the commit that landed the PR (git log --grep in the mirror)"))
    return out


def run_checks(root: Path) -> list[Finding]:
    findings: list[Finding] = []
    try:
        project = Project.load(root)
    except OverlayError as exc:
        return [Finding.of(exc)]
    try:
        pins = load_all_pins(root)
    except OverlayError as exc:
        findings.append(Finding.of(exc))
        pins = []
    if pins and sum(p.default for p in pins) != 1:
        findings.append(Finding("pins/", None, f"{sum(p.default for p in pins)} pin sets are marked "
                                "'default: true'; expected exactly one",
                                "mark exactly one pin set as the default"))
    if not pins and not findings:
        findings.append(Finding("pins/", None, "no pin sets", "add pins/<name>.yaml"))

    listed = set()
    mails: list[tuple[SeriesEntry, PatchMail]] = []
    for entry in project.series.entries:
        listed.add(entry.patch)
        shown = f"patches/{entry.patch}"
        for gap in provenance_gaps(entry, root):
            findings.append(Finding("series.yaml", entry.line, f"{entry.patch}: {gap}",
                                    "complete the entry's provenance"))
        for pin in pins:
            if entry.target not in pin.target_names:
                findings.append(Finding("series.yaml", entry.line,
                                        f"{entry.patch}: target '{entry.target}' is not in pin set "
                                        f"'{pin.name}'", f"add it to pins/{pin.name}.yaml"))
        try:
            mail = read_patch(root / "patches" / entry.patch, shown)
        except OverlayError as exc:
            findings.append(Finding.of(exc))
            continue
        mails.append((entry, mail))
        for change in mail.files:
            reason = unsafe_reason(change)
            if reason:
                findings.append(Finding(shown, None, f"unsafe patch: {reason}",
                                        "patches may only change text files inside the tree"))
        for problem in header_disagreements(entry, mail):
            findings.append(Finding("series.yaml", entry.line, f"{entry.patch}: {problem}",
                                    "make series.yaml and the patch header agree"))
    findings += shared_file_drift(mails)
    patches_dir = root / "patches"
    if patches_dir.is_dir():
        for p in sorted(patches_dir.iterdir()):
            if p.name.startswith(".") or p.name == "README.md":
                continue
            if p.name not in listed:
                findings.append(Finding(f"patches/{p.name}", None, "not listed in series.yaml",
                                        "add an entry for it or delete the file"))
    findings += stale_doc_findings(root, project, pins)
    return findings + upstream_commit_findings(project, pins)


def stale_doc_findings(root: Path, project: Project, pins) -> list[Finding]:
    """docs/series.md's generated part (when it has one) against what the repository
    gives now."""
    doc = root / seriesdoc.DOC
    if not doc.is_file() or not pins:
        return []
    block = seriesdoc.block_of(doc.read_text(encoding="utf-8", errors="replace"))
    if block is None or block == seriesdoc.render(project.series, pins):
        return []
    return [Finding(seriesdoc.DOC.as_posix(), None, "the generated part is stale (patch count, pin sets, "
                    "locked trees)", "run `make docs` (overlay check --write-docs)")]
