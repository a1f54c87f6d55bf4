"""Bounded reads of the files in a results folder (and the evidence inputs beside them).

A results folder is data someone else may have written: a result file that is a FIFO
would block the reader forever, a symlink to /dev/zero would fill memory, and JSON
nested 100,000 deep makes Python's parser raise RecursionError. Every file is opened
without blocking, must be a regular file (checked on the opened descriptor, so a swap
after the check does not count), inside the results folder when the caller names it (a
link out is refused), is read up to a cap, and JSON must nest at most
MAX_JSON_DEPTH levels (a `vllm bench serve` result nests 3). Each refusal is one
OverlayError naming the file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from overlay import paths
from overlay.errors import OverlayError

# A detailed client result holds every inter-token gap: 10,000 requests of 2,000 tokens
# are about 400 MB of JSON; nothing the tool writes or reads here comes near that.
RESULT_MAX_BYTES = 512 << 20
RECORD_MAX_BYTES = 16 << 20  # run.json, trees.json, server.pid, reason.txt, protocol.sha256
MAX_JSON_DEPTH = 64
ENV_MAX_BYTES = "OVERLAY_RESULT_MAX_BYTES"  # raises (or lowers) every cap above


def cap(default: int) -> int:
    try:
        return int(os.environ.get(ENV_MAX_BYTES, "")) or default
    except ValueError:
        return default


def read_bytes(path: Path, shown: str | None = None, limit: int = RECORD_MAX_BYTES,
               within: Path | None = None) -> bytes:
    """The file's bytes: a regular file, at most `limit` bytes (OVERLAY_RESULT_MAX_BYTES);
    with `within` (the results folder), one that resolves inside it."""
    where = shown or str(path)
    limit = cap(limit)
    try:
        data = paths.read_capped(path, limit, within=within)
    except paths.OutsideTree:
        raise OverlayError("is a link that leads out of the results folder; refusing to read it", path=where,
                           hint="a results folder holds the files `overlay bench ab` and the client wrote, "
                                "not links to others") from None
    except FileNotFoundError:
        raise OverlayError("file not found", path=where) from None
    except IsADirectoryError:
        raise OverlayError("is a directory, expected a file", path=where) from None
    except paths.NotARegularFile as exc:
        raise OverlayError(f"is {exc.kind}, not a regular file; refusing to read it", path=where,
                           hint="results folders hold the files `overlay bench ab` and the client wrote") from None
    except OSError as exc:
        raise OverlayError(f"cannot read: {exc.strerror}", path=where) from None
    if len(data) > limit:
        raise OverlayError(f"file is larger than {limit} bytes, the cap for this input", path=where,
                           hint=f"check what wrote it ({ENV_MAX_BYTES} raises the cap)")
    return data


def read_text(path: Path, shown: str | None = None, limit: int = RECORD_MAX_BYTES,
              encoding: str = "utf-8", within: Path | None = None) -> str:
    try:
        return read_bytes(path, shown, limit, within).decode(encoding)
    except UnicodeDecodeError:
        raise OverlayError("not UTF-8 text", path=shown or str(path)) from None


_KEEP = b"[]{}\""
_DROP = bytes(c for c in range(256) if c not in _KEEP)
_STRING = re.compile(rb'"[^"]*"')
_STEP = np.zeros(256, dtype=np.int32)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_CHUNK = 1 << 22


def json_depth(text: str, stop: int | None = None) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings do
    not count), linear and without recursion; stops counting once past `stop`. Pure.
    Escapes go first (an escaped backslash, then an escaped quote), so every quote left
    delimits a string; then only brackets and quotes are kept, in C, so the scan is over
    a few bytes per record, not the whole file."""
    raw = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = _STRING.sub(b"", raw.translate(None, _DROP))
    depth = deepest = 0
    for i in range(0, len(kept), _CHUNK):
        run = np.cumsum(_STEP[np.frombuffer(kept, dtype=np.uint8, count=min(_CHUNK, len(kept) - i),
                                            offset=i)]) + depth
        deepest = max(deepest, int(run.max()))
        depth = int(run[-1])
        if stop is not None and deepest > stop:
            break
    return deepest


def parse_json(text: str, where: str) -> Any:
    depth = json_depth(text, stop=MAX_JSON_DEPTH)
    if depth > MAX_JSON_DEPTH:
        raise OverlayError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep (at most {MAX_JSON_DEPTH} "
                           "are read)",
                           path=where, hint="not a file `vllm bench serve` or `overlay bench ab` wrote")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OverlayError(f"not valid JSON: {exc}", path=where) from None
    except RecursionError:  # cannot happen within MAX_JSON_DEPTH; kept so it is never a traceback
        raise OverlayError("JSON nested too deeply", path=where) from None


def load_json(path: Path, shown: str | None = None, limit: int = RECORD_MAX_BYTES,
              within: Path | None = None) -> Any:
    """A JSON file from a results folder: regular, capped, nesting bounded (inside `within`)."""
    where = shown or str(path)
    return parse_json(read_text(path, where, limit, within=within), where)
