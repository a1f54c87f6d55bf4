"""Read `git format-patch` mails: headers, message and diff, with safety checks."""

from __future__ import annotations

import email.header
import email.utils
import re
from dataclasses import dataclass
from pathlib import Path

import unidiff

from overlay.errors import OverlayError

_DIFF_START = re.compile(r"^diff --git ", re.M)
_INDEX = re.compile(r"^index ([0-9a-f]{7,40})\.\.([0-9a-f]{7,40})(?: \d+)?$")
# A mail mangled to CRLF as a whole: its own header and diff lines end in CR. (Lines
# of a CRLF file inside the diff end in CR legitimately: they are the change's bytes.)
# Only lines that can never be hunk lines (those start with ' ', '+', '-' or '\\').
_MANGLED_CRLF = re.compile(r"^(From |From:|Subject:|Date:|diff --git |index )[^\n]*\r$", re.M)


@dataclass(frozen=True)
class FileChange:
    """One file touched by a patch, as the safety checks and drift need it."""

    source: str | None  # path before (None when added)
    target: str | None  # path after (None when deleted)
    is_binary: bool
    mode: str | None  # new mode if the patch sets one (120000 = symlink)
    blobs: tuple[str, str] | None = None  # the index line's (before, after) blob ids

    @property
    def created(self) -> bool:
        return self.source is None

    @property
    def path(self) -> str:
        return self.target or self.source or ""


@dataclass(frozen=True)
class PatchMail:
    path: Path
    author_name: str
    author_email: str
    date: str
    subject: str
    message: str  # commit message body (after the subject, before '---')
    diff: str  # from the first 'diff --git' line to the end
    files: tuple[FileChange, ...]

    @property
    def author(self) -> str:
        return f"{self.author_name} <{self.author_email}>"

    def patchset(self) -> unidiff.PatchSet:
        return unidiff.PatchSet(self.diff)


def _decode_header(value: str) -> str:
    parts = []
    for chunk, charset in email.header.decode_header(value):
        if isinstance(chunk, bytes):
            parts.append(chunk.decode(charset or "utf-8", errors="replace"))
        else:
            parts.append(chunk)
    return "".join(parts)


def _strip_patch_prefix(subject: str) -> str:
    # git am --keep-non-patch semantics: drop only a leading [PATCH ...] tag.
    return re.sub(r"^\s*\[PATCH[^\]]*\]\s*", "", subject)


def _strip_git(path: str | None, prefix: str) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[len(prefix):] if path.startswith(prefix) else path


def parse_patch(text: str, path: Path, shown: str) -> PatchMail:
    """Parse a mail; raise one OverlayError line for anything malformed."""
    if _MANGLED_CRLF.search(text):
        raise OverlayError("patch has CRLF line endings (mangled by an editor or mailer)",
                           path=shown, hint="convert it back to LF (dos2unix) or regenerate with `overlay refresh`")
    if not text.strip():
        raise OverlayError("patch file is empty", path=shown,
                           hint="regenerate it with `overlay refresh` or remove it from series.yaml")
    m = _DIFF_START.search(text)
    if not m:
        raise OverlayError("no 'diff --git' section: not a git patch", path=shown,
                           hint="write patches with `git format-patch` or `overlay refresh`")
    head, diff = text[: m.start()], text[m.start():]
    mails = len(re.findall(r"^From [0-9a-f]{40} ", text, re.M))
    subjects = len(re.findall(r"^Subject: ", text, re.M))
    if mails > 1 or subjects > 1:
        raise OverlayError(f"holds {max(mails, subjects)} mails; a patch file holds exactly one",
                           path=shown, hint="split it into one file per patch (git format-patch does)")
    # Header block: up to the first blank line, with RFC 2822 continuation lines.
    header_text, _, body = head.partition("\n\n")
    headers: dict[str, str] = {}
    current = None
    for line in header_text.splitlines():
        if line.startswith("From ") and current is None and not headers:
            continue  # mbox separator line
        if line[:1] in (" ", "\t") and current:
            headers[current] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise OverlayError(f"malformed mail header line {line!r}", path=shown,
                               hint="the patch must start with From:/Date:/Subject: headers")
        current = key.strip().lower()
        headers[current] = value.strip()
    for needed in ("from", "date", "subject"):
        if needed not in headers:
            raise OverlayError(f"mail header '{needed.capitalize()}:' is missing", path=shown,
                               hint="patches are git format-patch mails; regenerate with `overlay refresh`")
    name, addr = email.utils.parseaddr(_decode_header(headers["from"]))
    if not addr:
        raise OverlayError(f"'From:' header has no e-mail address: {headers['from']!r}", path=shown,
                           hint="write it as 'From: Name <email>'")
    subject = _strip_patch_prefix(_decode_header(headers["subject"]))
    if not subject.strip():
        raise OverlayError("'Subject:' header is empty", path=shown,
                           hint="give the patch a one-line summary")
    try:
        email.utils.parsedate_to_datetime(headers["date"])
    except (TypeError, ValueError, IndexError):
        raise OverlayError(f"'Date:' header {headers['date']!r} is not an RFC 2822 date", path=shown,
                           hint="e.g. 'Date: Wed, 1 Jul 2026 17:59:41 +0800' (git format-patch writes it)") from None
    message = body.split("\n---\n", 1)[0].strip("\n")
    try:
        ps = unidiff.PatchSet(diff)
    except unidiff.UnidiffParseError as exc:
        raise OverlayError(f"diff does not parse: {exc}", path=shown,
                           hint="regenerate the patch with `overlay refresh`") from None
    files = tuple(_file_changes(diff, ps))
    if not files:
        raise OverlayError("patch changes no file", path=shown,
                           hint="drop it from series.yaml or regenerate it")
    return PatchMail(path=path, author_name=name or addr, author_email=addr,
                     date=headers["date"], subject=subject, message=message, diff=diff,
                     files=files)


def _file_changes(diff: str, ps: unidiff.PatchSet) -> list[FileChange]:
    """Per 'diff --git' block: paths, binary flag and new mode (unidiff misses modes)."""
    blocks = _DIFF_START.split(diff)[1:]
    out = []
    for block, pf in zip(blocks, ps):
        mode = blobs = None
        for line in block.splitlines()[1:8]:
            if line.startswith(("new file mode ", "new mode ")):
                mode = line.split()[-1]
            index = _INDEX.match(line)
            if index:
                blobs = (index.group(1), index.group(2))
        binary = pf.is_binary_file or "GIT binary patch" in block or "\nBinary files " in block
        out.append(FileChange(source=_strip_git(pf.source_file, "a/"),
                              target=_strip_git(pf.target_file, "b/"),
                              is_binary=binary, mode=mode, blobs=blobs))
    return out


def read_patch(path: Path, shown: str | None = None) -> PatchMail:
    shown = shown or str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise OverlayError("patch file not found", path=shown,
                           hint="add the file or remove its entry from series.yaml") from None
    except IsADirectoryError:
        raise OverlayError("is a directory, expected a patch file", path=shown) from None
    except OSError as exc:
        raise OverlayError(f"cannot read: {exc.strerror}", path=shown) from None
    if b"\0" in raw:
        raise OverlayError("patch file holds NUL bytes (binary content)", path=shown,
                           hint="binary changes cannot be carried as patches")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise OverlayError("patch file is not UTF-8 text", path=shown) from None
    return parse_patch(text, path, shown)


def unsafe_reason(change: FileChange) -> str | None:
    """Why a file change cannot be carried, or None when it is safe."""
    for p in (change.source, change.target):
        if p is None:
            continue
        parts = p.split("/")
        if p.startswith("/") or re.match(r"^[A-Za-z]:", p):
            return f"absolute path '{p}'"
        if ".." in parts:
            return f"path '{p}' escapes the tree with '..'"
        if ".git" in parts:
            return f"path '{p}' reaches into .git/"
    if change.is_binary:
        return f"binary change to '{change.path}'"
    if change.mode == "120000":
        return f"symlink change at '{change.path}'"
    if change.mode == "160000":
        return f"submodule (gitlink) change at '{change.path}'"
    return None
