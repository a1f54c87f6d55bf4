"""Rebase drift: classify each patch of the series against newer upstream commits.

blobs (read touched blobs through one long-lived git process) -> inmem_apply (apply
hunks to text) -> classify (series semantics, pure) -> scan (onto / history walk /
bisect) -> report (terminal, JSON, Markdown, JUnit); patch (DriftPatch, read by classify and
lines) and targets (repositories, refs, the series as drift reads it, the --gate plan).
The command is overlay.commands.drift.

May import: the foundation, overlay.series, overlay.trees and
overlay.testing; of the other subsystems only the gate's library entry points
(`overlay.gate`, for --gate in targets.py).
"""
