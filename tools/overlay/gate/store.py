"""The gate's on-disk cache, keyed by tree ids (under the tool's cache, `<cache>/gate/`).

Two things survive a process:
- per tree id, the name index of every file (which identifiers each file calls: the
  text index `Callers` builds first, a full read and a regex pass over both trees);
- per (core tree id, plugin tree id, version, gate code), the gate's raw result: a
  warm run on unchanged trees answers from it without parsing anything.

Parsed syntax trees are not stored: loading them back costs about as much as parsing
(measured on vLLM 0.27.1: 12.3 s to unpickle 300 files' trees against 11.2 s to parse
them, under load). Within one process they are shared by content instead (see
engine.Cache), which is what the forward view and bisection reuse between cores.

Every entry is written atomically (temporary file, then rename) and read fail-closed:
a file that does not load, or whose format or key does not match, is a miss.
"""

from __future__ import annotations

import hashlib
import os
import pickle
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
    if root is None:
        return None
    path = _path(root, kind, key)
    try:
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
