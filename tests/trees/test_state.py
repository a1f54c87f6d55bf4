"""Issue 16, cases 5, 6 and 12: what a run may delete, interrupted writes, and overlapping runs.

- `--into DIR` removes or moves back only folders whose marker proves a run made them.
- refresh swaps a new patches/ and series.yaml in as one transaction: a kill at any
  moment, or a full disk, leaves the old state or the new one.
- apply, refresh and lock share the checkout lock; the object cache has its own lock,
  which runs wait for.
"""

from __future__ import annotations

import errno
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures import PATCH_AUTHOR, run_git


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _overlay(world, *args: str, fault: str | None = None, env: dict | None = None,
             **popen) -> subprocess.Popen:
    full = dict(os.environ, **(env or {}))
    if fault:
        full["OVERLAY_FAULT_INJECT"] = fault
    return subprocess.Popen([sys.executable, "-m", "overlay", "--root", str(world.project), *args],
                            env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **popen)


# ----------------------------------------------------------------------------- case 5: ownership

USER_FOLDERS = {
    ".discard-notes/keep.txt": "the user's discarded notes\n",
    ".staging-area/draft.md": "a draft\n",
    ".old-drafts/notes/todo.txt": "moved out by name before\n",  # <p>/<t> shape: was moved
    ".old-drafts/p1/plugin/mine.txt": "looks like a tree\n",
}


def _user_folders(into: Path) -> None:
    for rel, text in USER_FOLDERS.items():
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_text(text)


@pytest.mark.parametrize("killed_at", [None, "mid-swap"])
def test_into_never_removes_or_moves_folders_it_did_not_make(world, run, tmp_path, killed_at):
    into = tmp_path / "trees"
    into.mkdir()
    _user_folders(into)
    assert run("apply", "--mirror", world.mirror, "--into", into, root=world.project)[0] == 0
    if killed_at:  # a killed run's own leftovers are still cleaned up, the user's are not
        proc = _overlay(world, "apply", "--mirror", str(world.mirror), "--into", str(into),
                        fault=killed_at)
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        assert any(p.name.startswith(".old-") and p.name != ".old-drafts" for p in into.iterdir())
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, root=world.project)
    assert code == 0, err
    for rel, text in USER_FOLDERS.items():
        assert (into / rel).read_text() == text, rel
    assert not (into / "notes").exists()  # nothing was moved out of .old-drafts
    ours = sorted(p.name for p in into.iterdir() if p.name.startswith("."))
    assert ours == [".discard-notes", ".old-drafts", ".overlay.lock", ".staging-area"]
    assert (into / "p1" / "plugin" / "vllm_ascend" / "envs.py").is_file()


def _start_time(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: what the marker's `started` records."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _forge(folder: Path, marker: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / ".overlay-owner.json").write_text(json.dumps(marker))
    (folder / "p1" / "plugin").mkdir(parents=True)
    (folder / "p1" / "plugin" / "user.txt").write_text("mine\n")
    return folder


def test_a_marker_that_does_not_fit_its_folder_or_names_a_live_run_proves_nothing(world, run, tmp_path):
    into = tmp_path / "trees"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        started = _start_time(live.pid)
        record = {"tool": "overlay", "pid": live.pid, "started": started, "since": "then"}
        running = _forge(into / ".staging-p1-0123456789abcdef", dict(record, nonce="0123456789abcdef"))
        copied = _forge(into / ".old-copied", dict(record, nonce="0123456789abcdef", started=-1))
        malformed = _forge(into / ".discard-fedcba9876543210", {"pid": "x"})
        gone = _forge(into / ".discard-00112233445566ff", dict(record, nonce="00112233445566ff", started=-1))
        assert run("apply", "--mirror", world.mirror, "--into", into, root=world.project)[0] == 0
        for kept in (running, copied, malformed):  # a live run's, or not provably ours
            assert (kept / "p1" / "plugin" / "user.txt").read_text() == "mine\n", kept.name
        assert not gone.exists()  # marked by a run that is gone: cleaned up
    finally:
        live.kill()
        live.wait()


# ----------------------------------------------------------------------------- case 6: atomic refresh

N_PATCHES = 200


def _fast_import(work: Path, first_parent: str, items: list[tuple[int, str]]) -> None:
    """One commit per (number, content) on overlay/p1, each adding extra/fNNN.txt."""
    lines = []
    for k, (i, content) in enumerate(items):
        subject = f"Add extra file {i}"
        lines += ["commit refs/heads/overlay/p1",
                  f"author {PATCH_AUTHOR[0]} <{PATCH_AUTHOR[1]}> 1780000000 +0000",
                  "committer Compo Ser <composer@example.org> 1780000000 +0000",
                  f"data {len(subject)}", subject]
        if k == 0:
            lines.append(f"from {first_parent}")
        lines += [f"M 100644 inline extra/f{i:03d}.txt", f"data {len(content)}", content]
    subprocess.run(["git", "fast-import", "--quiet", "--force"], cwd=work, check=True,
                   input="\n".join(lines) + "\n", text=True, capture_output=True)
    run_git(["reset", "-q", "--hard", "overlay/p1"], work)


class Checkout:
    """patches/, series.yaml and the composed trees' records, to compare and restore."""

    def __init__(self, world) -> None:
        self.project = world.project
        self.trees = [world.project / "build" / "p1" / t for t in ("core", "plugin")]

    def series(self) -> dict[str, bytes]:
        return {"series.yaml": (self.project / "series.yaml").read_bytes(),
                **{f"patches/{k}": v for k, v in _files(self.project / "patches").items()}}

    def save(self) -> dict:
        return {"series": self.series(),
                "trees": [((t / ".git" / "overlay-state.json").read_bytes(),
                           run_git(["rev-parse", "refs/notes/overlay"], t)) for t in self.trees]}

    def restore(self, saved: dict) -> None:
        shutil.rmtree(self.project / "patches")
        for rel, data in saved["series"].items():
            (self.project / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.project / rel).write_bytes(data)
        for t, (state, notes) in zip(self.trees, saved["trees"]):
            (t / ".git" / "overlay-state.json").write_bytes(state)
            run_git(["update-ref", "refs/notes/overlay", notes], t)

    def records(self) -> list[tuple[bytes, str]]:
        """Each composed tree's state file and the content (tree) of its notes: what the
        next refresh compares with the series before it reads the branch back."""
        return [((t / ".git" / "overlay-state.json").read_bytes(),
                 run_git(["rev-parse", "refs/notes/overlay^{tree}"], t)) for t in self.trees]


@pytest.fixture
def many(world, run):
    """200 more plugin patches, all provenance complete; and the branch reworked so that
    refresh reorders (renaming most files), rewrites and drops some of them."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = world.project / "build" / "p1" / "plugin"
    top = run_git(["rev-parse", "HEAD"], plugin)
    _fast_import(plugin, top, [(i, f"line {i}") for i in range(N_PATCHES)])
    assert run("refresh", root=world.project)[0] == 0
    series = world.project / "series.yaml"
    series.write_text(series.read_text().replace(
        "origin: local  # added by refresh: set origin and provenance",
        "origin: local\n    forwarded: example/plugin#1"))
    code, out, err = run("check", root=world.project)
    assert code == 0, out
    checkout = Checkout(world)
    old = dict(checkout.save(), records=checkout.records())
    kept = [i for i in reversed(range(N_PATCHES)) if i % 50 != 7]
    _fast_import(plugin, top, [(i, f"line {i} v2" if i % 20 == 3 else f"line {i}") for i in kept])
    branch = checkout.save()["trees"]
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "renamed" in out and "updated" in out and "dropped" in out
    new = dict(checkout.save(), records=checkout.records())
    checkout.restore(old)
    assert checkout.series() == old["series"] and branch == checkout.save()["trees"]
    return checkout, old, new


def _write_phase_started(project: Path, before: int) -> bool:
    """The first write refresh makes: a folder in .overlay/ or an entry in patches/."""
    try:
        return (project / "patches").stat().st_mtime_ns != before or any(
            (project / ".overlay").glob("refresh-*"))
    except OSError:
        return True


def test_refresh_killed_at_random_moments_leaves_the_old_or_the_new_series(world, run, many):
    checkout, old, new = many
    rng = random.Random(16)
    # One uninterrupted run: how long the whole run and its write phase take.
    mtime = (world.project / "patches").stat().st_mtime_ns
    began = time.monotonic()
    proc = _overlay(world, "refresh")
    writing = None
    while proc.poll() is None:
        if writing is None and _write_phase_started(world.project, mtime):
            writing = time.monotonic()
        time.sleep(0.0005)
    ended = time.monotonic()
    assert proc.returncode == 0 and checkout.series() == new["series"]
    total, write_phase = ended - began, ended - (writing or began)
    outcomes = {"old": 0, "new": 0}
    for i in range(30):
        checkout.restore(old)
        mtime = (world.project / "patches").stat().st_mtime_ns
        proc = _overlay(world, "refresh")
        if i % 3 == 0:  # any moment of the run
            time.sleep(rng.uniform(0, total))
        else:  # a moment of the write phase
            while proc.poll() is None and not _write_phase_started(world.project, mtime):
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, write_phase * 1.2))
        proc.kill()
        proc.communicate()
        code, out, err = run("check", root=world.project)  # finishes an interrupted swap first
        assert code == 0, (i, out, err)
        state = checkout.series()
        assert state in (old["series"], new["series"]), f"iteration {i}: a mix of old and new"
        outcomes["old" if state == old["series"] else "new"] += 1
        # and the composed trees' records belong to that same state: else the next refresh
        # would blame patches pulled from a teammate
        assert checkout.records() == (old if state == old["series"] else new)["records"], (
            f"iteration {i}: the composed trees' records are not the {state == old['series'] and 'old' or 'new'} "
            f"state's: the next refresh would blame patches pulled from a teammate")
        assert not list((world.project / ".overlay").glob("refresh-*"))
    # the checkout is usable after the last kill: refresh reads the branch back as the new state
    code, out, err = run("refresh", root=world.project)
    assert code == 0 and "teammate" not in err, err
    assert checkout.series() == new["series"]
    assert outcomes["old"] and outcomes["new"], outcomes


@pytest.mark.parametrize("point", ["owner-unmarked", "owner-unmarking"])
def test_a_refresh_killed_as_it_makes_or_removes_its_folder_leaves_no_folder_behind(world, run, point):
    """The two moments the folder exists without its marker: made, not yet marked; and
    its marker deleted, the folder not yet. The random-kill test above hits them only
    now and then (a CI flake); here they are hit every time."""
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = world.project / "build" / "p1" / "plugin"
    run_git(["commit", "-q", "--amend", "-m", "[Perf] Add an opt-in fast path switch, reworded"], plugin)
    before = Checkout(world).series()
    proc = _overlay(world, "refresh", fault=point)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert list((world.project / ".overlay").glob("refresh-*")), "the kill left no folder: nothing was tested"
    code, out, err = run("check", root=world.project)
    assert code == 0, err
    assert not list((world.project / ".overlay").glob("refresh-*"))
    after = Checkout(world).series()
    assert (after == before) == (point == "owner-unmarked")  # the swap had not begun / had finished
    code, out, err = run("refresh", root=world.project)
    assert code == 0 and "teammate" not in err, err


@pytest.mark.parametrize("point", ["owner-unmarked", "owner-unmarking"])
def test_an_apply_killed_as_it_makes_or_removes_a_folder_leaves_none_behind(world, run, tmp_path, point):
    into = tmp_path / "trees"
    into.mkdir()
    _user_folders(into)
    (into / ".staging-empty").mkdir()  # a user's empty folder of a familiar name: kept
    if point == "owner-unmarking":  # the first folder removed is the swap's: it needs trees to replace
        assert run("apply", "--mirror", world.mirror, "--into", into, root=world.project)[0] == 0
    proc = _overlay(world, "apply", "--mirror", str(world.mirror), "--into", str(into), "--force", fault=point)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    ours = {p.name for p in into.iterdir()} - {".staging-empty", ".overlay.lock", "p1"} - {
        rel.split("/")[0] for rel in USER_FOLDERS}
    assert ours, "the kill left no folder: nothing was tested"
    code, out, err = run("apply", "--mirror", world.mirror, "--into", into, "--force", root=world.project)
    assert code == 0, err
    for rel, text in USER_FOLDERS.items():
        assert (into / rel).read_text() == text, rel
    left = sorted(p.name for p in into.iterdir() if p.name.startswith("."))
    assert left == [".discard-notes", ".old-drafts", ".overlay.lock", ".staging-area", ".staging-empty"]


@pytest.mark.parametrize("point", ["refresh-before-commit", "refresh-mid-swap", "refresh-after-swap"])
def test_a_refresh_killed_mid_write_is_finished_or_dropped_and_not_blamed_on_a_teammate(world, run, point):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = world.project / "build" / "p1" / "plugin"
    run_git(["commit", "-q", "--amend", "-m", "[Perf] Add an opt-in fast path switch, reworded"], plugin)
    before = Checkout(world).series()
    proc = _overlay(world, "refresh", fault=point)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    code, out, err = run("refresh", root=world.project)
    assert code == 0, err
    assert "teammate" not in err
    after = Checkout(world).series()
    assert after != before and b"reworded" in after["patches/0003-plugin-switch.patch"]
    assert "(nothing to do)" in out if point != "refresh-before-commit" else "1 updated" in out
    assert not list((world.project / ".overlay").glob("refresh-*"))
    assert run("check", root=world.project)[0] == 0


class _FullDisk:
    """Writes under `where` fail with ENOSPC once `budget` bytes were written, as on a
    full filesystem (the file is created, its data does not fit): every file object that
    `open` returns there counts what is written through it."""

    def __init__(self, monkeypatch, where: Path, budget: int) -> None:
        self.where, self.budget, self.failed = str(where), budget, None
        real_open, disk = io.open, self

        class Counting(io.BufferedWriter):
            def write(self, data) -> int:
                disk.budget -= len(data)
                if disk.budget < 0:
                    disk.failed = disk.failed or self.raw.name
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.raw.name)
                return super().write(data)

        def fake_open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None,
                      closefd=True, opener=None):
            if (isinstance(file, int) or not any(m in mode for m in "wxa+")
                    or not os.fspath(file).startswith(disk.where)):
                return real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
            raw = real_open(file, mode.replace("t", "").replace("b", "") + "b", buffering=0)
            counted = Counting(raw)
            if "b" in mode:
                return counted
            return io.TextIOWrapper(counted, encoding=encoding or "utf-8", errors=errors,
                                    newline=newline)

        # and what is written through a descriptor os.open gave (the ownership marker,
        # written nameless with O_TMPFILE, then linked): counted the same way
        real_os_open, real_os_write, real_os_close, fds = os.open, os.write, os.close, {}

        def fake_os_open(path, flags, mode=0o777, *, dir_fd=None):
            fd = real_os_open(path, flags, mode, dir_fd=dir_fd)
            if flags & (os.O_WRONLY | os.O_RDWR) and os.fspath(path).startswith(disk.where):
                fds[fd] = os.fspath(path)
            return fd

        def fake_os_write(fd, data) -> int:
            if fd in fds:
                disk.budget -= len(data)
                if disk.budget < 0:
                    disk.failed = disk.failed or fds[fd]
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_os_write(fd, data)

        def fake_os_close(fd) -> None:
            fds.pop(fd, None)  # a number the system may give again, for another file
            real_os_close(fd)

        monkeypatch.setattr(io, "open", fake_open)
        monkeypatch.setattr("builtins.open", fake_open)
        monkeypatch.setattr(os, "open", fake_os_open)
        monkeypatch.setattr(os, "write", fake_os_write)
        monkeypatch.setattr(os, "close", fake_os_close)
        monkeypatch.setattr(shutil, "_USE_CP_SENDFILE", False)  # copies go through write()


@pytest.mark.parametrize("full_at", ["first-write", "a-patch", "series.yaml"])
def test_a_full_disk_changes_nothing_and_names_the_file_and_the_space_needed(world, run, many,
                                                                           monkeypatch, full_at):
    """The disk fills up at the first byte, halfway through the new patches' bytes, or
    halfway through series.yaml (written last)."""
    checkout, old, new = many
    records = checkout.save()["trees"]
    patch_bytes = sum(len(data) for rel, data in new["series"].items()
                      if rel.startswith("patches/") and data not in old["series"].values())
    budget = {"first-write": 0, "a-patch": patch_bytes // 2,
              "series.yaml": patch_bytes + 1000 + len(new["series"]["series.yaml"]) // 2}[full_at]
    disk = _FullDisk(monkeypatch, world.project, budget)
    code, out, err = run("refresh", root=world.project)
    monkeypatch.undo()
    assert disk.failed, "the refresh wrote nothing under the project"
    assert checkout.series() == old["series"]  # not one stray or truncated file
    assert checkout.save()["trees"] == records
    assert not list((world.project / ".overlay").glob("refresh-*"))
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "no space left" in err and "nothing was changed" in err
    assert Path(disk.failed).name in err  # the file it was writing
    assert err.startswith("overlay: error: series.yaml: ") == (full_at == "series.yaml"), err
    assert err.startswith("overlay: error: patches/0") == (full_at == "a-patch"), err
    assert "needs about" in err and " free" in err
    code, out, err = run("refresh", root=world.project)  # space again: no teammate blamed
    assert code == 0, err
    assert checkout.series() == new["series"]


def test_export_of_a_whole_branch_is_the_mail_of_each_commit(world, run):
    from overlay.trees import refresh

    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    plugin = world.project / "build" / "p1" / "plugin"
    (plugin / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    (plugin / "no-eol.txt").write_bytes(b"no newline at the end")
    run_git(["add", "-A"], plugin)
    run_git(["commit", "-q", "-m", "Files\n\nFrom 0000000000000000000000000000000000000000 "
             "Mon Sep 17 00:00:00 2001\nquoted in a body"], plugin)
    commits = run_git(["rev-list", "--reverse", f"{run_git(['rev-parse', 'HEAD~3'], plugin)}..HEAD"],
                      plugin).split()
    batch = refresh.export_patches(plugin, commits)
    assert batch == {c: refresh.export_patch(plugin, c) for c in commits}


# ----------------------------------------------------------------------------- case 12: locks

def _stopped(proc: subprocess.Popen, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "T":
            return True
        time.sleep(0.01)
    return False


def test_apply_refresh_and_lock_during_a_refresh_are_refused_naming_it(world, run, many):
    """A refresh stopped from outside as its write phase begins (the moment an apply
    used to read half-renamed patches): other runs are refused, naming it."""
    checkout, old, new = many
    for _ in range(5):
        checkout.restore(old)
        mtime = (world.project / "patches").stat().st_mtime_ns
        refreshing = _overlay(world, "refresh")
        while refreshing.poll() is None and not _write_phase_started(world.project, mtime):
            time.sleep(0.0002)
        refreshing.send_signal(signal.SIGSTOP)
        if _stopped(refreshing):
            break
        refreshing.communicate()  # it finished first: try again
    else:
        pytest.fail("never stopped the refresh in its write phase")
    try:
        # --force: the composed branch's own commits would refuse a plain apply anyway
        for argv in (["apply", "--mirror", world.mirror, "--force"], ["refresh"], ["lock"]):
            code, out, err = run(*argv, root=world.project)
            assert code == 2, (argv, out, err)
            assert err.startswith("overlay: error: ") and len(err.splitlines()) == 1, err
            assert f"pid {refreshing.pid} (overlay refresh --pin p1) since 20" in err, err
            assert "drift" not in err and "failed" not in err
    finally:
        refreshing.send_signal(signal.SIGCONT)
        refreshing.communicate()
    assert refreshing.returncode == 0
    assert checkout.series() == new["series"]
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err  # it sees the whole new series


def test_runs_sharing_an_object_cache_wait_for_each_other(world, tmp_path):
    from overlay.trees import runlock

    cache = tmp_path / "cache"
    env = {"OVERLAY_CACHE": str(cache)}
    with runlock.cache(cache, "a test holding the cache"):
        proc = _overlay(world, "apply", "--mirror", str(world.mirror), "--json", env=env)
        line = proc.stderr.readline()  # blocks until it says why it waits
        assert "waiting for the object cache" in line and f"pid {os.getpid()}" in line, line
        assert proc.poll() is None  # still waiting: it did not fail, and fetched nothing
        assert not list((cache / "git").glob("*/shallow"))
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert json.loads(out)["installed"] is True


def test_two_applies_sharing_a_fresh_cache_both_compose(world, tmp_path):
    second = tmp_path / "second"
    shutil.copytree(world.project, second, symlinks=True)
    for round_ in range(3):
        env = dict(os.environ, OVERLAY_CACHE=str(tmp_path / f"cache{round_}"))
        procs = [subprocess.Popen([sys.executable, "-m", "overlay", "--root", str(root), "apply",
                                   "--mirror", str(world.mirror)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for root in (world.project, second)]
        results = [p.communicate() for p in procs]
        for p, (out, err) in zip(procs, results):
            assert p.returncode == 0, err
            assert "Traceback" not in err
