"""The gate's on-disk cache, keyed by tree ids (under the tool's cache, `<cache>/gate/`).

Two things survive a process:
- per file content (its blob id), the names the file calls (the text index `Callers`
  builds first, a full read and a regex pass over both trees), in `<cache>/gate/blobs/`
  (BlobNames): releases, checkouts and commits that hold a file unchanged share its
  entry, so a forward view over six releases extracts each distinct file once;
- per (core tree id, plugin tree id, version, gate code), the gate's raw result: a
  warm run on unchanged trees answers from it without parsing anything.

Parsed syntax trees are not stored: loading them back costs about as much as parsing
(measured on vLLM 0.27.1: 12.3 s to unpickle 300 files' trees against 11.2 s to parse
them, under load). Within one process they are shared by content instead (see
engine.Cache), which is what the forward view and bisection reuse between cores.

Every entry is written atomically (temporary file, then rename) and read fail-closed:
a file that does not load, or whose format or key does not match, is a miss. An entry is
read only from a folder the current user owns and no one else may write (else the run
says so in one note and recomputes); the blob folder also carries a marker naming it as
the gate's, and each of its entries a digest of its blob id and names, so a corrupt,
moved or hand-made entry is a miss (counted in one note), never an answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import stat
import tempfile
from pathlib import Path

FORMAT = 1


def code_digest() -> str:
    """The gate's own code: a changed check invalidates every cached result."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _path(root: Path, kind: str, key: str) -> Path:
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    return root / f"{kind}-{name}.pickle"


def load(root: Path | None, kind: str, key: str):
    """The value stored under (kind, key), or None."""
    if root is None or not_ours(root) is not None:
        return None
    path = _path(root, kind, key)
    try:
        if not_ours(path) is not None:
            return None
        with path.open("rb") as fh:
            doc = pickle.load(fh)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
        return None
    return doc.get("value")


def save(root: Path | None, kind: str, key: str, value) -> None:
    """Store `value`; a cache that cannot be written is skipped (the run still stands)."""
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{kind}-", suffix=".tmp", dir=root)
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump({"format": FORMAT, "key": key, "value": value}, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, _path(root, kind, key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return


def not_ours(path: Path) -> str | None:
    """Why `path` (as it resolves) is no place to read a cache entry from: another user
    owns it, or its group or others may write it; None when it is ours alone, or absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_uid != os.geteuid():
        return f"owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by its group or by others"
    return None


# ----------------------------------------------------------------------------- blob facts

BLOBS = "blobs"
MARKER = ".overlay-gate-blobs"
MARKER_TEXT = "overlay gate: names each file calls, by blob id (format 1); safe to delete\n"
ENTRY_MAX = 4 << 20  # bytes: the names of one file; anything larger is not ours
BLOB = re.compile(r"^[0-9a-f]{40}$")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _digest(blob: str, names: list[str]) -> str:
    return hashlib.sha256(("%s\0%s" % (blob, "\n".join(names))).encode()).hexdigest()


def entry_text(blob: str, names) -> str:
    """One entry, as `BlobNames` writes it (pure)."""
    items = sorted(n.decode("ascii") if isinstance(n, bytes) else n for n in names)
    return json.dumps({"format": FORMAT, "blob": blob, "names": items, "digest": _digest(blob, items)})


def parse_entry(blob: str, raw: bytes) -> frozenset[bytes] | None:
    """The names an entry holds for `blob`, or None when it is not a sound entry for
    exactly that blob (not JSON, another format or blob, a name that is no identifier,
    a digest that does not match). Pure."""
    if len(raw) > ENTRY_MAX:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("blob") != blob:
        return None
    names = doc.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) and NAME.match(n) for n in names):
        return None
    if doc.get("digest") != _digest(blob, names):
        return None
    return frozenset(n.encode("ascii") for n in names)


class BlobNames(dict):
    """`TextCache.names` (content key -> names the file calls) backed by `<cache>/gate/
    blobs/`: a `blob:` key missing in memory is looked up there, and `flush` writes what
    this process computed. The folder is used only when it carries the gate's marker and
    is the current user's alone (`refused` says why not, once); a bad entry is a miss,
    counted in `bad`. `computed` counts the files whose names were extracted here."""

    def __init__(self, root: Path, known: dict | None = None) -> None:
        super().__init__(known or {})
        self.folder = root / BLOBS
        self.refused: str | None = None
        self.bad = 0
        self.computed: set[str] = set()
        self._stored: set[str] = set()
        self._usable = self._check_folder()

    def _check_folder(self) -> bool:
        folder = self.folder
        if not os.path.lexists(folder):
            return True  # made, with its marker, on the first flush
        if folder.is_symlink() or not folder.is_dir():
            self.refused = f"the gate's file cache {folder} is not a folder: not used (remove it)"
            return False
        why = not_ours(folder)
        if why is not None:
            self.refused = f"the gate's file cache {folder} is {why}: not used (remove it)"
            return False
        try:
            marker = (folder / MARKER).read_text(encoding="utf-8") if not (folder / MARKER).is_symlink() else ""
        except (OSError, UnicodeDecodeError):
            marker = ""
        if marker != MARKER_TEXT:
            self.refused = (f"the gate's file cache {folder} lacks the gate's marker {MARKER}: not used "
                            "(remove the folder; the gate makes it again)")
            return False
        return True

    def _entry(self, blob: str) -> Path:
        return self.folder / blob[:2] / f"{blob[2:]}.json"

    def get(self, key, default=None):
        found = super().get(key)
        if found is not None or not self._usable or not isinstance(key, str) or not key.startswith("blob:"):
            return found if found is not None else default
        blob = key[len("blob:"):]
        if not BLOB.match(blob):
            return default
        path = self._entry(blob)
        try:
            if path.is_symlink() or not_ours(path) is not None:
                raise OSError("not ours")
            with path.open("rb") as fh:
                raw = fh.read(ENTRY_MAX + 1)
        except FileNotFoundError:
            return default
        except OSError:
            self.bad += 1
            return default
        names = parse_entry(blob, raw)
        if names is None:
            self.bad += 1
            return default
        super().__setitem__(key, names)
        self._stored.add(key)
        return names

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.computed.add(key)

    def flush(self) -> None:
        """Write the entries this process computed (a folder that cannot be written, or
        one refused, is skipped: the run still stands)."""
        if not self._usable:
            return
        todo = [k for k in self.computed if k.startswith("blob:") and BLOB.match(k[5:]) and k not in self._stored]
        if not todo:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not (self.folder / MARKER).exists():
                _write_atomic(self.folder / MARKER, MARKER_TEXT.encode())
            for key in todo:
                blob = key[5:]
                path = self._entry(blob)
                path.parent.mkdir(exist_ok=True)
                _write_atomic(path, entry_text(blob, self[key]).encode())
                self._stored.add(key)
        except OSError:
            return

    def notes(self) -> list[str]:
        """One line for a refused folder; one for the bad entries met since the last call."""
        out = [self.refused] if self.refused else []
        bad, self.bad = self.bad, 0
        if bad:
            out.append(f"{bad} entr{'y' if bad == 1 else 'ies'} of the gate's file cache {self.folder} "
                       "did not match the file they name (corrupt or not the gate's): ignored, recomputed")
        return out


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
