"""`overlay show PATCH`: one patch as a reviewer reads it: its header (DEP-3 fields), its
provenance with links, the pin sets carrying it and its state there, drift at the newest
upstream measured, the tests it adds, its mutation-check result, then the diff."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from overlay.errors import OverlayError, printable, quoted, shortened
from overlay.series.model import ArchiveSource, GitSource, PinSet, Project, SeriesEntry, load_all_pins
from overlay.series.patchfile import read_patch
from overlay.testing.mutation import is_test_path
from overlay.views import records, status

GITHUB = "https://github.com/"
_PR_REF = re.compile(r"^([\w.-]+/[\w.-]+)#(\d+)$")


def find_entry(project: Project, wanted: str) -> SeriesEntry:
    """The entry named by its file name, its file name without `.patch`, or an unambiguous
    prefix (`0003`)."""
    entries = project.series.entries
    for e in entries:
        if wanted in (e.patch, e.patch.removesuffix(".patch")):
            return e
    matches = [e for e in entries if wanted and e.patch.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise OverlayError(f"patch {quoted(wanted)} is ambiguous: it matches "
                           + ", ".join(e.patch for e in matches[:5]), path="series.yaml",
                           hint="give more of the file name")
    raise OverlayError(f"unknown patch {quoted(wanted)}", path="series.yaml",
                       hint="name a patch file listed in series.yaml (`overlay status` lists them)")


def pr_link(ref: str) -> str | None:
    """owner/name#N as a link to its pull request; a GitHub URL as itself."""
    m = _PR_REF.match(ref.strip())
    if m:
        return f"{GITHUB}{m.group(1)}/pull/{m.group(2)}"
    if ref.startswith(GITHUB) and urlparse(ref).scheme == "https":
        return ref
    return None


def repo_slug(pins: list[PinSet], target: str) -> str | None:
    """owner/name of the GitHub repository a target comes from (a git pin, or an archive's
    `history:`), for commit links."""
    for pin in pins:
        if target not in pin.target_names:
            continue
        src = pin.target(target).source
        url = (src.url if isinstance(src, GitSource)
               else src.history if isinstance(src, ArchiveSource) else None)
        if url and url.startswith(GITHUB):
            parts = [p for p in urlparse(url).path.removesuffix(".git").split("/") if p]
            if len(parts) == 2:
                return "/".join(parts)
    return None


@dataclass(frozen=True)
class Link:
    kind: str  # upstream PR, upstream commit, core change, superseded by, ...
    text: str
    url: str | None

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "url": self.url}


@dataclass(frozen=True)
class TestFile:
    path: str
    added: bool

    def to_json(self) -> dict:
        return {"path": self.path, "added": self.added}


@dataclass(frozen=True)
class PatchView:
    entry: SeriesEntry
    header: tuple[tuple[str, str], ...]  # (DEP-3 field, value), in order
    links: tuple[Link, ...]
    pins: tuple[status.PinStatus, ...]  # the pin sets that list it, with its row in each
    drift: tuple[records.DriftAt, ...]
    drift_measured: bool
    tests: tuple[TestFile, ...]
    declared_tests: tuple[str, ...]
    mutation: records.MutationAt | None
    diff: str

    def rows(self) -> list[tuple[str, status.PatchState]]:
        return [(s.pin, r) for s in self.pins for r in s.patches if r.patch == self.entry.patch]

    def to_json(self) -> dict:
        return {"patch": self.entry.patch, "target": self.entry.target,
                "header": {k: v for k, v in self.header},
                "links": [link.to_json() for link in self.links],
                "pins": [{"pin": pin, **row.to_json()} for pin, row in self.rows()],
                "drift": ([d.to_json() for d in self.drift] if self.drift_measured else None),
                "tests": [t.to_json() for t in self.tests], "declared_tests": list(self.declared_tests),
                "mutation": self.mutation.to_json() if self.mutation else None,
                "diff": self.diff}


def _header(entry: SeriesEntry, mail) -> tuple[tuple[str, str], ...]:
    prov = entry.provenance
    fields = [("Description", mail.subject), ("Author", mail.author), ("Date", mail.date),
              ("Origin", prov.origin + (f", {', '.join(prov.upstream)}" if prov.upstream else ""))]
    if prov.original_author:
        fields.append(("Original-Author", prov.original_author))
    if prov.upstream_commits:
        fields.append(("Upstream-Commit", ", ".join(prov.upstream_commits)))
    if prov.core_change:
        fields.append(("Core-Change", ", ".join(prov.core_change)))
    if prov.forwarded:
        fields.append(("Forwarded", prov.forwarded))
    if prov.applied_upstream:
        fields.append(("Applied-Upstream", prov.applied_upstream))
    if prov.superseded_by_pr:
        fields.append(("Superseded-By", f"{prov.superseded_by_pr} ({prov.superseded_by_commit})"))
    if entry.revises:
        fields.append(("Revises", entry.revises))
    if entry.only_pins:
        fields.append(("Only-Pins", ", ".join(entry.only_pins)))
    if prov.switch:
        fields.append(("Switch", prov.switch))
    if prov.evidence:
        fields.append(("Evidence", prov.evidence))
    if mail.message.strip():
        fields.append(("Message", mail.message.strip()))
    return tuple(fields)


def _links(entry: SeriesEntry, pins: list[PinSet]) -> tuple[Link, ...]:
    prov = entry.provenance
    out = [Link("upstream PR", ref, pr_link(ref)) for ref in prov.upstream]
    slug = repo_slug(pins, entry.target)
    out += [Link("upstream commit", sha, f"{GITHUB}{slug}/commit/{sha}" if slug else None)
            for sha in prov.upstream_commits]
    out += [Link("core change", ref, pr_link(ref)) for ref in prov.core_change]
    if prov.forwarded:
        out.append(Link("forwarded", prov.forwarded, pr_link(prov.forwarded)))
    if prov.superseded_by_pr:
        out.append(Link("superseded by", prov.superseded_by_pr, pr_link(prov.superseded_by_pr)))
    for record in prov.applied_upstream_records:
        if record.commit:
            out.append(Link(f"applied upstream ({', '.join(record.pins)})", record.commit,
                            f"{GITHUB}{slug}/commit/{record.commit}" if slug else None))
    return tuple(out)


def patch_view(project: Project, wanted: str, only: PinSet | None = None, *,
               into: Path | None = None, reports: Path | None = None) -> PatchView:
    """One patch's review view; `only`: that pin set's state and drift alone."""
    entry = find_entry(project, wanted)
    mail = read_patch(project.patches_dir / entry.patch, f"patches/{entry.patch}")
    every = load_all_pins(project.root)
    chosen = [only] if only is not None else every
    pins = tuple(s for s in (status.pin_status(project, p, into) for p in chosen
                             if entry.target in p.target_names)
                 if any(r.patch == entry.patch for r in s.patches))
    where = records.reports_dir(project.root, reports)
    drift_doc = records.read_report(where / records.DRIFT_FILE)
    drift = records.drift_of(drift_doc, entry.patch)
    if only is not None:
        drift = [d for d in drift if d.pin == only.name]
    mutation = records.mutation_of(records.read_report(where / records.MUTATION_FILE), entry.patch)
    tests = tuple(TestFile(f.path, f.created) for f in mail.files if is_test_path(f.path))
    return PatchView(entry, _header(entry, mail), _links(entry, every), pins, tuple(drift),
                     drift_doc is not None and bool(drift), tests, entry.tests, mutation, mail.diff)


def text(view: PatchView) -> str:
    e = view.entry
    out = [f"patch {e.patch} ({e.target})"]
    for key, value in view.header:
        lines = printable(value, newlines=True).splitlines() or [""]
        out.append(f"{key}: {lines[0]}")
        out += [f"  {line}" for line in lines[1:]]
    out.append("")
    out.append("provenance:")
    if not view.links:
        out.append("  (none recorded)")
    for link in view.links:
        out.append(f"  {link.kind}: {shortened(link.text, 200)}" + (f" <{link.url}>" if link.url else ""))
    out.append("pin sets:")
    if not view.rows():
        out.append("  (no pin set lists it)")
    for pin, row in view.rows():
        detail = f" - {printable(row.detail)}" if row.detail else ""
        out.append(f"  {pin}: {row.state}{detail}; lock: {row.lock}")
    out.append("drift at the newest upstream measured:")
    if not view.drift_measured:
        out.append("  not measured (no drift report for it: save `overlay drift --onto TARGET=REF "
                   "--json` as reports/drift.json)")
    for d in view.drift:
        out.append(f"  {printable(d.line())}")
    out.append("tests it adds:")
    if not view.tests:
        out.append("  (no test file in the diff)")
    for t in view.tests:
        out.append(f"  {printable(t.path)} ({'new' if t.added else 'changed'})")
    out.append("mutation check: " + (printable(view.mutation.line()) if view.mutation else
                                     "not recorded (save `overlay mutation-check --json` as "
                                     "reports/mutation-check.json)"))
    out.append("")
    out.append(printable(view.diff, newlines=True).rstrip("\n"))
    return "\n".join(out) + "\n"
