"""Which hunks of a patch upstream's content carries (pure): provenance proves history, not
content, so a patch merged by upstream-commit is dropped only for what upstream has."""

from __future__ import annotations

from overlay.drift.inmem_apply import apply_hunks


def carried_hunks(files, ref_text, upstream_paths: set[str]) -> tuple[list[str], list[str], set]:
    """Which hunks of a patch upstream's content carries at REF (pure): a hunk is carried
    when it reverse-applies exactly to REF's file (its change is there), or when the
    upstream commits that carry the patch changed that file (their own version of those
    lines). The rest is the residue: what the patch does beyond upstream's change, which a
    drop by provenance would lose. (carried, kept) as "path hunk i/n" lines, and the kept
    (path, index) pairs. `ref_text(path)`: REF's text of a file, or None."""
    carried, kept, keep = [], [], set()
    for fp in files:
        path = fp.new_path or fp.old_path
        text = ref_text(path)
        for i, hunk in enumerate(fp.hunks):
            where = f"{path} hunk {i + 1}/{len(fp.hunks)}"
            there = text is not None and apply_hunks(text, (hunk.reversed(),), max_fuzz=0).status in ("clean", "offset")
            if there or path in upstream_paths or (fp.old_path and fp.old_path in upstream_paths):
                carried.append(where)
            else:
                kept.append(where)
                keep.add((path, i))
    return carried, kept, keep
