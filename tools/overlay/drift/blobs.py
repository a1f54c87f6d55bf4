"""Read the blobs a patch series touches, straight from the object database.

Drift never checks out a tree: for each upstream commit it asks git for the object
ids of the few paths the series touches (`<commit>:<path>`), and reads a blob's text
only when that id has not been seen before. Two long-lived processes serve every
request of a run: `git cat-file --batch-check` (ids, a few bytes per path) and
`git cat-file --batch` (contents, only for new ids). Each request is one pipe
round trip, so the per-commit cost is bounded by the number of touched paths,
not by the size of the tree.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import IO, Iterable, Mapping

from overlay import gitcmd
from overlay.errors import OverlayError


def _spawn(git_dir: Path, mode: str) -> subprocess.Popen:
    # Objects only, through a view: no attribute, filter or textconv of the mirror applies.
    cmd = gitcmd.command(gitcmd.data_view(git_dir), data=True) + ["cat-file", mode]
    try:
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=gitcmd.data_env())
    except FileNotFoundError:
        raise OverlayError("git is not installed", hint="install git (apt-get install git)") from None


def _header(stream: IO[bytes], what: str) -> list[str]:
    line = stream.readline()
    if not line:
        raise OverlayError(f"git cat-file stopped while reading {what}",
                           hint="check that the repository is not corrupt (git fsck)")
    return line.decode("utf-8", "surrogateescape").rstrip("\n").split(" ")


class BlobReader:
    """Object ids of paths at commits, and blob texts by id, through two pipes.

    Texts are cached by blob id for the life of the reader: consecutive upstream
    commits share almost all blobs, so a scan reads each version once.
    """

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._check = _spawn(git_dir, "--batch-check")
        self._batch: subprocess.Popen | None = None  # started on first content read
        self._texts: dict[str, str] = {}
        self.requests = 0  # path look-ups sent (for benchmarks)
        self.reads = 0  # blob contents read (for benchmarks)

    # -- ids -----------------------------------------------------------------

    def oids(self, commit: str, paths: Iterable[str]) -> dict[str, str | None]:
        """`{path: blob id or None}` for each path at `commit` (None: absent or not a file)."""
        wanted = list(paths)
        if not wanted:
            return {}
        # Paths cannot hold newlines in a patch we accept, so one line per request is safe.
        proc = self._check
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(f"{commit}:{p}\n" for p in wanted).encode("utf-8", "surrogateescape"))
        proc.stdin.flush()
        self.requests += len(wanted)
        result: dict[str, str | None] = {}
        for p in wanted:
            fields = _header(proc.stdout, f"{commit[:12]}:{p}")
            # "<oid> blob <size>" or "<name> missing" / "<name> ambiguous"
            result[p] = fields[0] if len(fields) == 3 and fields[1] == "blob" else None
        return result

    # -- contents ------------------------------------------------------------

    def text(self, oid: str) -> str:
        """The blob's content decoded as UTF-8 (undecodable bytes survive round trips)."""
        cached = self._texts.get(oid)
        if cached is not None:
            return cached
        self.prefetch([oid])
        return self._texts[oid]

    def prefetch(self, oids: Iterable[str | None]) -> None:
        """Read every blob not yet cached in one round trip (one write, then the answers)."""
        wanted = list(dict.fromkeys(o for o in oids if o and o not in self._texts))
        if not wanted:
            return
        if self._batch is None:
            self._batch = _spawn(self.git_dir, "--batch")
        proc = self._batch
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(f"{o}\n" for o in wanted).encode())
        proc.stdin.flush()
        for oid in wanted:
            fields = _header(proc.stdout, oid)
            if len(fields) != 3 or fields[1] != "blob":
                raise OverlayError(f"object {oid} is not a blob in {self.git_dir}")
            size = int(fields[2])
            data = proc.stdout.read(size + 1)[:size]  # content, then one LF (buffered: never short)
            self.reads += 1
            self._texts[oid] = data.decode("utf-8", "surrogateescape")

    def texts(self, oids: Mapping[str, str | None]) -> dict[str, str | None]:
        return {p: (self.text(o) if o else None) for p, o in oids.items()}

    def forget(self) -> None:
        """Drop the cached texts (benchmarks measure a cold read this way)."""
        self._texts.clear()

    # -- life cycle ----------------------------------------------------------

    def close(self) -> None:
        for proc in (self._check, self._batch):
            if proc is None:
                continue
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
        self._batch = None

    def __enter__(self) -> "BlobReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
