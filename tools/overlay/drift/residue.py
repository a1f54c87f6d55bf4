"""Which hunks of a patch upstream's content carries (pure): provenance proves history, not
content, so a patch merged by upstream-commit is dropped only for what upstream has."""

from __future__ import annotations

from overlay.drift.inmem_apply import FilePatch, apply_hunks


def whole_file_kind(fp: FilePatch) -> str:
    """What a file change with no text hunk does (binary, rename, new file, deletion, mode)."""
    if fp.binary:
        return "binary"
    if fp.old_path and fp.new_path and fp.old_path != fp.new_path:
        return "rename"
    if fp.old_path is None:
        return "new file"
    if fp.new_path is None:
        return "deletion"
    return "mode"


def _whole_file_there(fp: FilePatch, ref_text) -> bool:
    """Whether REF's content shows a file change that has no hunk to reverse-apply. A binary
    change or a mode change cannot be read from text: never."""
    kind = whole_file_kind(fp)
    if kind == "rename":
        return ref_text(fp.new_path) is not None and ref_text(fp.old_path) is None
    if kind == "new file":
        return ref_text(fp.new_path) == ""
    if kind == "deletion":
        return ref_text(fp.old_path) is None
    return False


def item_path(item: str) -> str:
    """The path of a "path hunk i/n" or "path (kind)" item of carried_hunks (pure)."""
    for sep in (" hunk ", " ("):
        if sep in item:
            return item.rsplit(sep, 1)[0]
    return item


def carried_hunks(files, ref_text, upstream_paths: set[str]) -> tuple[list[str], list[str], set]:
    """Which hunks of a patch upstream's content carries at REF (pure): a hunk is carried
    when it reverse-applies exactly to REF's file (its change is there), or when the
    upstream commits that carry the patch changed that file (their own version of those
    lines); a deletion is there when REF has no such file, a new file when REF's is the same
    (reverse-applying either says nothing: a hunk with no context fits anywhere). A file
    change with no text hunk (a binary file, a rename alone, an empty new
    file, a mode change) is one whole item: carried when those commits changed the file or
    REF shows it, else kept whole. The rest is the residue: what the patch does beyond
    upstream's change, which a drop by provenance would lose. (carried, kept) as "path hunk
    i/n" or "path (kind)" lines, and the kept (file index, hunk index or None for the whole
    file) pairs, the file index counting the patch's `diff --git` blocks (as `residue_mail`
    does: paths are not compared, so a quoted path cannot miss). `ref_text(path)`: REF's
    text of a file, or None."""
    carried, kept, keep = [], [], set()
    for k, fp in enumerate(files):
        path = fp.new_path or fp.old_path
        ours = path in upstream_paths or (fp.old_path and fp.old_path in upstream_paths)
        if not fp.hunks:
            where = f"{path} ({whole_file_kind(fp)})"
            if ours or _whole_file_there(fp, ref_text):
                carried.append(where)
            else:
                kept.append(where)
                keep.add((k, None))
            continue
        text = ref_text(path)
        for i, hunk in enumerate(fp.hunks):
            where = f"{path} hunk {i + 1}/{len(fp.hunks)}"
            if fp.new_path is None:  # a deletion is there when the file is gone
                there = text is None
            elif fp.old_path is None:  # a new file, when REF's is the same, line for line
                there = text == "".join(line for h in fp.hunks for line in h.new)
            else:
                there = text is not None and apply_hunks(text, (hunk.reversed(),),
                                                         max_fuzz=0).status in ("clean", "offset")
            if there or ours:
                carried.append(where)
            else:
                kept.append(where)
                keep.add((k, i))
    return carried, kept, keep
