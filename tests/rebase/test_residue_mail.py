"""A patch upstream carries only in part is applied as its residue (drift.residue.carried_hunks
decides what upstream's content carries, rebase.plan.residue_mail writes the rest as a mail
for git am). What the residue keeps, applied on REF, must give exactly the patched tree when
REF carries the rest as the patch does it: also for a renamed file, a binary file, a file
renamed without a change, and a path git quotes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overlay.drift.inmem_apply import parse_diff
from overlay.drift.residue import carried_hunks
from overlay.rebase.plan import residue_mail

LINES = "".join(f"line {i}\n" for i in range(1, 12))


def git(repo: Path, *args: str, data: bytes | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.org", GIT_COMMITTER_NAME="A",
               GIT_COMMITTER_EMAIL="a@example.org", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", *args], cwd=repo, env=env, input=data, check=True,
                          capture_output=True).stdout.decode("utf-8", "surrogateescape")


def _write(repo: Path, files: dict[str, bytes | None]) -> None:
    for rel, data in files.items():
        path = repo / rel
        if data is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def _commit(repo: Path, files: dict[str, bytes | None], message: str) -> str:
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


BASE = {"moved.txt": LINES.encode(), "same.txt": b"kept as it is\n", "carried.txt": LINES.encode(),
        "\u00fcber.txt": LINES.encode(), "old.bin": b"\x00\x01old\xff", "gone.txt": b"deleted by the patch\n" * 3}
PATCH = {  # what the patch does, file by file
    "moved.txt": None, "renamed.txt": LINES.replace("line 4\n", "line four\n").encode(),  # rename + hunk
    "same.txt": None, "same-renamed.txt": b"kept as it is\n",  # a rename alone
    "carried.txt": LINES.replace("line 6\n", "line six\n").encode(),  # upstream carries this one
    "\u00fcber.txt": LINES.replace("line 2\n", "line two\n").encode(),  # a quoted path
    "logo.bin": b"\x00\x01\x02binary\xff",  # a new binary file
    "old.bin": b"\x00\x01new\xff",  # a binary change
    "empty.txt": b"",  # a new empty file
    "added.txt": b"new\nlines\n",  # a new file
    "gone.txt": None,  # a deletion
}
# What REF may already hold as the patch does it (a binary change cannot be read as text:
# it is always kept), each as the files it writes.
CARRIABLE = {
    "rename and hunk": {"moved.txt": None, "renamed.txt": PATCH["renamed.txt"]},
    "rename alone": {"same.txt": None, "same-renamed.txt": PATCH["same-renamed.txt"]},
    "text": {"carried.txt": PATCH["carried.txt"]},
    "quoted path": {"\u00fcber.txt": PATCH["\u00fcber.txt"]},
    "empty new file": {"empty.txt": b""},
    "new file": {"added.txt": PATCH["added.txt"]},
    "deletion": {"gone.txt": None},
}


@pytest.fixture
def history(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = _commit(repo, BASE, "base")
    patched = _commit(repo, PATCH, "the patch")
    mail = git(repo, "format-patch", "-1", "--binary", "--stdout", patched)
    git(repo, "checkout", "-q", "-b", "upstream", base)
    ref = _commit(repo, {"carried.txt": PATCH["carried.txt"]}, "upstream takes carried.txt")
    return repo, mail, ref, patched


def _ref_text(repo: Path, ref: str):
    def text(path: str) -> str | None:
        proc = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=repo, capture_output=True)
        return proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else None
    return text


def test_the_residue_applied_on_ref_gives_the_patched_tree(history):
    repo, mail, ref, patched = history
    files = parse_diff(mail[mail.index("diff --git "):])
    carried, kept, keep = carried_hunks(files, _ref_text(repo, ref), set())
    assert carried == ["carried.txt hunk 1/1"]
    assert {line.split(" ")[0] for line in kept} == {"renamed.txt", "same-renamed.txt", "\u00fcber.txt",
                                                     "logo.bin", "old.bin", "empty.txt", "added.txt",
                                                     "gone.txt"}
    residue = residue_mail(mail, keep)
    git(repo, "checkout", "-q", "--detach", ref)
    git(repo, "apply", "--index", "--binary", "-", data=residue.encode("utf-8", "surrogateescape"))
    assert git(repo, "write-tree").strip() == git(repo, "rev-parse", f"{patched}^{{tree}}").strip()


def test_what_upstream_changed_itself_is_carried_whole(history):
    """Upstream's commits that changed a file carry it (their own version): a binary file and
    a bare rename as well as text hunks; a residue of nothing keeps nothing."""
    repo, mail, ref, _ = history
    files = parse_diff(mail[mail.index("diff --git "):])
    everything = {p for fp in files for p in fp.paths}
    carried, kept, keep = carried_hunks(files, _ref_text(repo, ref), everything)
    assert kept == [] and keep == set()
    assert "logo.bin (binary)" in carried and "same-renamed.txt (rename)" in carried


@given(st.sets(st.sampled_from(sorted(CARRIABLE))))
def test_any_part_ref_carries_is_left_out_and_the_rest_kept(history, upstream_has):
    """Property: whichever of the patch's changes REF already holds, the residue applied on
    REF gives the patched tree (nothing lost, nothing applied twice)."""
    repo, mail, _, patched = history
    base = git(repo, "rev-parse", "main~1").strip()
    git(repo, "checkout", "-q", "-f", "--detach", base)
    git(repo, "clean", "-fdxq")
    ref = base
    if upstream_has:
        ref = _commit(repo, {k: v for name in sorted(upstream_has) for k, v in CARRIABLE[name].items()},
                      "upstream takes " + ", ".join(sorted(upstream_has)))
    files = parse_diff(mail[mail.index("diff --git "):])
    _, _, keep = carried_hunks(files, _ref_text(repo, ref), set())
    git(repo, "apply", "--index", "--binary", "-",
        data=residue_mail(mail, keep).encode("utf-8", "surrogateescape"))
    assert git(repo, "write-tree").strip() == git(repo, "rev-parse", f"{patched}^{{tree}}").strip()
    git(repo, "reset", "-q", "--hard")


def test_a_new_file_is_carried_only_when_refs_is_the_same():
    """A new file's hunk has no context: reverse-applied it fits any file holding its lines."""
    files = parse_diff("diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0000000..1111111\n"
                       "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n")
    assert carried_hunks(files, {"n.py": "a = 1\nb = 2\n"}.get, set())[:2] == (["n.py hunk 1/1"], [])
    assert carried_hunks(files, {"n.py": "a = 1\nb = 2\nc = 3\n"}.get, set())[:2] == ([], ["n.py hunk 1/1"])
