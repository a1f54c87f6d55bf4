"""Read `git format-patch` mails: headers, message and diff, with safety checks."""

from __future__ import annotations

import email.header
import email.utils
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import unidiff

from overlay.errors import OverlayError, quoted, shortened

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
    names: tuple[str, ...] = ()  # every other path the block names (diff --git, rename/copy)

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
        return patch_set(self.diff)


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


# git's C quoting (quote.c, unquote_c_style): these escapes, and \ooo for one byte.
_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}


def _unquote_at(text: str, start: int) -> tuple[str, int]:
    """Decode the C-quoted string that opens at text[start] ('"'); return it and the
    index after its closing quote. Raise ValueError for quoting git never writes."""
    out = bytearray()
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape"), i + 1
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = text[i + 1:i + 2]
        if nxt and nxt in _C_ESCAPES:
            out.append(_C_ESCAPES[nxt])
            i += 2
        elif nxt and nxt in "0123" and re.fullmatch(r"[0-7]{3}", text[i + 1:i + 4]):
            out.append(int(text[i + 1:i + 4], 8))
            i += 4
        else:
            raise ValueError(f"unknown escape '\\{nxt}'")
    raise ValueError("no closing quote")


def unquote_path(name: str) -> str:
    """A path as git writes it in a diff, decoded: `"b/\\303\\274.py"` -> `b/ü.py`."""
    if not name.startswith('"'):
        return name
    path, end = _unquote_at(name, 0)
    if end != len(name):
        raise ValueError("text after the closing quote")
    return path


def diff_git_names(header: str) -> tuple[str, ...]:
    """The two paths of a `diff --git` line (after 'diff --git '), decoded, as git reads
    them (builtin/apply.c, git_header_name): either may be quoted; two unquoted names
    are split where both halves name the same file, else at ' b/'."""
    header = header.rstrip("\n")
    if header.startswith('"'):
        first, end = _unquote_at(header, 0)
        rest = header[end:]
        if not rest.startswith(" "):
            raise ValueError("no second path")
        return first, unquote_path(rest[1:])
    quoted = header.find(' "')
    if quoted != -1 and header.endswith('"'):
        return header[:quoted], unquote_path(header[quoted + 1:])
    half = (len(header) - 1) // 2
    if len(header) % 2 == 1 and header[half] == " " and header[:half].split("/", 1)[-1] == \
            header[half + 1:].split("/", 1)[-1]:
        return header[:half], header[half + 1:]
    if " b/" in header:
        a, b = header.split(" b/", 1)
        return a, "b/" + b
    return (header,)


def _ambiguous_to_unidiff(names: str) -> bool:
    """unidiff splits an unquoted `diff --git` line at its last ' b/' and cannot read a
    quoted one: either way it may take another target than the `+++` line's and refuse the
    block ('Target without source'). A path holding ' b/' (`diff --git a/x/ b/y b/x/ b/y`,
    as git writes it) or one git quotes is such a line."""
    return names.startswith('"') or ' "' in names or names.count(" b/") > 1


def patch_set(diff: str) -> unidiff.PatchSet:
    """unidiff's PatchSet of `diff`, each file with its names as written. A block whose
    `diff --git` line unidiff would split wrongly (`_ambiguous_to_unidiff`) is parsed under a
    placeholder name, then given back its own header, `---` and `+++` names, so `str()` of
    a file still round-trips. Raises unidiff.UnidiffParseError as unidiff does, and
    ValueError for a header quoted the way git never writes it."""
    lines = diff.split("\n")
    originals: dict[int, tuple[str, str | None, str | None]] = {}  # block -> (header, ---, +++)
    block, in_header = -1, False
    for i, line in enumerate(lines):
        if line.startswith("diff --git "):
            block += 1
            in_header = _ambiguous_to_unidiff(line[len("diff --git "):])
            if in_header:
                originals[block] = (line, None, None)
                lines[i] = f"diff --git a/overlay-path-{block} b/overlay-path-{block}"
        elif in_header and line.startswith(("@@", "GIT binary patch")):
            in_header = False
        elif in_header and line.startswith(("--- ", "+++ ")):
            name, tail = (line[4:].split("\t", 1) + [""])[:2]
            if name != "/dev/null":
                header, source, target = originals[block]
                originals[block] = (header, name, target) if line[0] == "-" else (header, source, name)
                side = "a" if line[0] == "-" else "b"
                lines[i] = f"{line[:4]}{side}/overlay-path-{block}" + (f"\t{tail}" if tail else "")
    ps = unidiff.PatchSet("\n".join(lines))
    for k, pf in enumerate(ps):
        if k not in originals:
            continue
        header, source, target = originals[k]
        if source is None and pf.source_file != "/dev/null" or target is None and pf.target_file != "/dev/null":
            names = diff_git_names(header[len("diff --git "):])  # ValueError for a quoting git never writes
            source = source if source is not None or pf.source_file == "/dev/null" else names[0]
            target = target if target is not None or pf.target_file == "/dev/null" else names[-1]
        pf.source_file = source if source is not None else pf.source_file
        pf.target_file = target if target is not None else pf.target_file
        if pf.patch_info and pf.patch_info[0].startswith("diff --git "):
            pf.patch_info[0] = header + "\n"
    return ps


def _strip_git(path: str | None, prefix: str) -> str | None:
    if path is None or path == "/dev/null":
        return None
    path = unquote_path(path)
    return path[len(prefix):] if path.startswith(prefix) else path


_NAMED = ("rename from ", "rename to ", "copy from ", "copy to ")


_PARSED: dict[tuple[str, str, str], PatchMail] = {}  # (text, path, shown) -> its mail, this process
_PARSED_MAX = 512


def parse_patch(text: str, path: Path, shown: str) -> PatchMail:
    """Parse a mail; raise one OverlayError line for anything malformed. A text parsed
    before in this process is answered from memory (a rebase reads the series once per
    pin set; the mail is immutable)."""
    key = (text, str(path), shown)
    known = _PARSED.get(key)
    if known is not None and known.path == path:
        return known
    mail = _parse_patch(text, path, shown)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[key] = mail
    return mail


def _parse_patch(text: str, path: Path, shown: str) -> PatchMail:
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
            raise OverlayError(f"malformed mail header line {quoted(line)}", path=shown,
                               hint="the patch must start with From:/Date:/Subject: headers")
        current = key.strip().lower()
        headers[current] = value.strip()
    for needed in ("from", "date", "subject"):
        if needed not in headers:
            raise OverlayError(f"mail header '{needed.capitalize()}:' is missing", path=shown,
                               hint="patches are git format-patch mails; regenerate with `overlay refresh`")
    name, addr = email.utils.parseaddr(_decode_header(headers["from"]))
    if not addr:
        raise OverlayError(f"'From:' header has no e-mail address: {quoted(headers['from'])}", path=shown,
                           hint="write it as 'From: Name <email>'")
    subject = _strip_patch_prefix(_decode_header(headers["subject"]))
    if not subject.strip():
        raise OverlayError("'Subject:' header is empty", path=shown,
                           hint="give the patch a one-line summary")
    try:
        email.utils.parsedate_to_datetime(headers["date"])
    except (TypeError, ValueError, IndexError):
        raise OverlayError(f"'Date:' header {quoted(headers['date'])} is not an RFC 2822 date", path=shown,
                           hint="e.g. 'Date: Wed, 1 Jul 2026 17:59:41 +0800' (git format-patch writes it)") from None
    message = body.split("\n---\n", 1)[0].strip("\n")
    try:
        ps = patch_set(diff)
        files = tuple(_file_changes(diff, ps))
    except unidiff.UnidiffParseError as exc:
        raise OverlayError(f"diff does not parse: {shortened(str(exc))}", path=shown,
                           hint="regenerate the patch with `overlay refresh`") from None
    except ValueError as exc:
        raise OverlayError(f"a path in the diff is quoted the way git never writes it ({shortened(str(exc))})",
                           path=shown, hint="regenerate the patch with `overlay refresh`") from None
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
        header, *rest = block.split("\n")
        names = [_strip_git(n, p) for n, p in zip(diff_git_names(header), ("a/", "b/"))]
        for line in rest:
            if line.startswith(("@@", "--- ", "+++ ", "GIT binary patch")):
                break  # the extended header ends here
            if line.startswith(("new file mode ", "new mode ")):
                mode = line.split()[-1]
            index = _INDEX.match(line)
            if index:
                blobs = (index.group(1), index.group(2))
            for named in _NAMED:
                if line.startswith(named):
                    names.append(unquote_path(line[len(named):]))
        binary = pf.is_binary_file or "GIT binary patch" in block or "\nBinary files " in block
        out.append(FileChange(source=_strip_git(pf.source_file, "a/"),
                              target=_strip_git(pf.target_file, "b/"),
                              is_binary=binary, mode=mode, blobs=blobs,
                              names=tuple(n for n in names if n is not None)))
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


def _shown(path: str) -> str:
    return quoted(path) if path.isprintable() else shortened(ascii(path))


def _is_dot_git(part: str) -> bool:
    # as git's verify_path refuses it: any case, and NTFS's trailing dots/spaces and 8.3 name
    return part.rstrip(". ").lower() == ".git" or part.lower() == "git~1"


PATH_MAX_BYTES = 1024  # a path a patch names; the longest in vLLM's trees is under 150
NAME_MAX_BYTES = 255  # one component, as every filesystem takes it


def path_problem(p: str) -> str | None:
    """Why a path a patch names cannot be carried, or None: it must be relative and
    canonical (no empty, '.' or '..' component: git and the filesystem would each read
    another spelling their own way), outside .git/, free of line breaks and NUL, and of
    a length every filesystem takes. The one check of a patch path (check, apply, refresh)."""
    parts = p.split("/")
    if p.startswith("/") or re.match(r"^[A-Za-z]:", p):
        return f"absolute path {_shown(p)}"
    if ".." in parts:
        return f"path {_shown(p)} escapes the tree with '..'"
    if any(_is_dot_git(part) for part in parts):
        return f"path {_shown(p)} reaches into .git/"
    if any(c in p for c in "\n\r\0"):
        return f"path {_shown(p)} holds a line break (git and the tool read paths one a line)"
    if any(part in ("", ".") for part in parts):
        return f"path {_shown(p)} is not canonical (an empty or '.' component): write it as git does"
    size = len(p.encode("utf-8", "surrogateescape"))
    if size > PATH_MAX_BYTES or any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX_BYTES
                                    for part in parts):
        return (f"path {_shown(p)} is too long ({size} bytes; at most {PATH_MAX_BYTES}, "
                f"{NAME_MAX_BYTES} a component)")
    return None


def unsafe_reason(change: FileChange) -> str | None:
    """Why a file change cannot be carried, or None when it is safe. Paths are decoded
    (git's C quoting) before they get here; every path the block names is checked."""
    for p in dict.fromkeys(x for x in (change.source, change.target, *change.names) if x is not None):
        problem = path_problem(p)
        if problem:
            return problem
    if change.is_binary:
        return f"binary change to '{change.path}'"
    if change.mode == "120000":
        return f"symlink change at '{change.path}'"
    if change.mode == "160000":
        return f"submodule (gitlink) change at '{change.path}'"
    return None


def link_problem(change: FileChange, is_link: Callable[[str], bool]) -> str | None:
    """A path of `change` that is, or goes through, a symlink of the tree it is applied
    to (`is_link(relative path)`): a change is written into the tree itself, never
    through one of upstream's links, wherever they point. Paths are canonical here."""
    for p in dict.fromkeys(x for x in (change.source, change.target, *change.names) if x is not None):
        parts = p.split("/")
        for i in range(1, len(parts) + 1):
            if is_link("/".join(parts[:i])):
                link = "/".join(parts[:i])
                return (f"path {_shown(p)} is a symlink of the pinned tree" if i == len(parts) else
                        f"path {_shown(p)} goes through {_shown(link)}, a symlink of the pinned tree")
    return None
