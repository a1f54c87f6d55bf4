"""A series entry as drift reads it: its parsed file patches and its declared upstream.

Below classify and lines (both read it), so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlay.drift.inmem_apply import FilePatch


@dataclass(frozen=True)
class DriftPatch:
    """One series entry as drift needs it."""

    name: str
    target: str
    files: tuple[FilePatch, ...]
    subject: str = ""
    upstream: tuple[str, ...] = ()  # series.yaml upstream / applied-upstream references
    upstream_commits: tuple[str, ...] = ()  # series.yaml upstream-commit: full ids
    superseded_by: tuple[str, str] | None = None  # series.yaml superseded-by: (commit, pr)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the patch reads or writes, in patch order."""
        return tuple(dict.fromkeys(p for fp in self.files for p in fp.paths))

    @property
    def modified(self) -> tuple[str, ...]:
        """Existing paths it needs (modifies, renames or deletes)."""
        return tuple(dict.fromkeys(fp.old_path for fp in self.files if fp.old_path))
