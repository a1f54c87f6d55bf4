"""Issue 16, Why-1/8/11: a pinned source archive is data, imported as a sandboxed copy.

Each archive here is synthetic, built by the test member by member. Its sha256 is
pinned, so only the import's own checks stand between it and the machine: one line
naming the archive and the member, exit 2, nothing composed, nothing written outside.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

TOP = "core-1.0"
GOOD = {"vllm/__init__.py": b"__version__ = '1.0'\n", "vllm/graph.py": b"X = 1\n"}


def _reg(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o777 if kind == tarfile.SYMTYPE else 0o644
    return info, None


def _tar_gz(path: Path, members) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path


def _good_members(extra=()):
    dirs = [_special(TOP, tarfile.DIRTYPE), _special(f"{TOP}/vllm", tarfile.DIRTYPE)]
    return dirs + [_reg(f"{TOP}/{k}", v) for k, v in GOOD.items()] + list(extra)


def _pin_core_to(world, archive: Path) -> None:
    """Pin p1's core to `archive` (already under <mirror>/pypi) and drop the core patch."""
    digest = hashlib.sha256(archive.read_bytes()).hexdigest() if archive.is_file() else "ab" * 32
    pin = world.project / "pins" / "p1.yaml"
    text = pin.read_text()
    core_block = text[text.index("  core:"):text.index("  plugin:")]
    pin.write_text(text.replace(core_block, f"  core:\n    pypi: core==1.0\n    sha256: {digest}\n"))
    series = world.project / "series.yaml"
    s = series.read_text()
    series.write_text(s[:s.index("  - patch: 0002")] + s[s.index("  - patch: 0003"):])
    world.patch_file("0002-core-rename-helper.patch").unlink()


def _pypi(world) -> Path:
    folder = world.mirror / "pypi"
    folder.mkdir(exist_ok=True)
    return folder


def _refused(world, run, archive: Path, *words: str) -> str:
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)
    assert code == 2, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("overlay: error: "), err
    assert "Traceback" not in err
    assert str(archive) in err, err
    for word in words:
        assert word in err, (word, err)
    assert not (world.project / "build" / "p1" / "core").exists()
    return err


@pytest.fixture
def victim(world) -> Path:
    """A file outside the project whose content must survive every archive."""
    p = world.tmp / "victim.txt"
    p.write_text("precious\n")
    return p


def _up(levels: int) -> str:
    return "/".join([".."] * levels)


# ----------------------------------------------------------------------------- member kinds

def test_hardlink_then_regular_member_does_not_overwrite_outside(world, run, victim, tmp_path):
    """The issue's case: `hl` hardlinks to a file outside, then a regular `hl` writes it."""
    depth = len(Path(tmp_path).parts) + 8
    target = _up(depth) + str(victim)
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/hl", tarfile.LNKTYPE, target), _reg(f"{TOP}/hl", b"overwritten\n")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/hl", "hardlink")
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_hardlink_to_an_outside_file_is_refused(world, run, victim, tmp_path, how):
    """Its content would be imported into the composed tree."""
    link = str(victim) if how == "absolute" else _up(len(Path(tmp_path).parts) + 8) + str(victim)
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/copy", tarfile.LNKTYPE, link)]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/copy", "hardlink")


def test_hardlink_inside_the_archive_is_refused_too(world, run):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/again.py", tarfile.LNKTYPE, f"{TOP}/vllm/graph.py")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/again.py", "hardlink")


def test_relative_symlink_to_etc_shadow_is_not_committed(world, run):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/vllm/shadow", tarfile.SYMTYPE, _up(12) + "/etc/shadow")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/vllm/shadow", "symlink", "outside")


@pytest.mark.parametrize("link", ["..", ".", "../core-1.0", "vllm/../..", "/etc/passwd"])
def test_symlink_to_the_top_folder_or_above_is_refused(world, run, link):
    """After the top folder is stripped, these would point at or above the composed tree."""
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/up", tarfile.SYMTYPE, link)]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/up", "symlink")


def test_a_chain_of_symlinks_that_escapes_is_refused(world, run):
    """Each link alone looks inside (`s` -> the top folder, `t` -> s/../..), together they
    leave it: physical resolution, not the link text, decides."""
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/g", tarfile.DIRTYPE), _special(f"{TOP}/g/h", tarfile.DIRTYPE),
        _special(f"{TOP}/g/h/s", tarfile.SYMTYPE, "../x"),
        _special(f"{TOP}/g/h/t", tarfile.SYMTYPE, "s/../../..")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, "symlink", "outside")


def test_writing_through_a_symlink_member_is_refused_in_one_line(world, run, victim):
    """Why-11: tarfile's own filter error used to surface as a traceback."""
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/l", tarfile.SYMTYPE, "vllm/../../../.."),
        _reg(f"{TOP}/l/x", b"planted\n")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/l")
    assert not (world.mirror / "x").exists() and not (world.tmp / "x").exists()


@pytest.mark.parametrize("kind,word", [(tarfile.CHRTYPE, "device"), (tarfile.BLKTYPE, "device"),
                                       (tarfile.FIFOTYPE, "FIFO")])
def test_devices_and_fifos_are_refused(world, run, kind, word, monkeypatch, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/vllm/odd", kind)]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/vllm/odd", word)
    made = [p for p in scratch.rglob("*") if not p.is_dir() and not p.is_file()]
    assert made == [], made  # nothing special was created in the temporary folder


@pytest.mark.parametrize("name,word", [("/abs.py", "absolute"), (f"{TOP}/../evil.py", ".."),
                                       (f"{TOP}/.git/config", ".git"),
                                       (f"{TOP}/a\nb.py", "line break")])
def test_bad_member_names_are_refused(world, run, name, word):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([_reg(name, b"x\n")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, word)


def test_a_member_listed_twice_is_refused(world, run):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _reg(f"{TOP}/vllm/graph.py", b"X = 2\n")]))
    _pin_core_to(world, archive)
    _refused(world, run, archive, f"{TOP}/vllm/graph.py", "twice")


def test_a_symlink_inside_the_top_folder_is_kept(world, run):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _special(f"{TOP}/docs", tarfile.DIRTYPE),
        _special(f"{TOP}/docs/graph.py", tarfile.SYMTYPE, "../vllm/graph.py"),
        _special(f"{TOP}/latest", tarfile.SYMTYPE, "vllm")]))
    _pin_core_to(world, archive)
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)
    assert code == 0, err
    tree = world.project / "build" / "p1" / "core"
    assert os.readlink(tree / "docs" / "graph.py") == "../vllm/graph.py"
    assert (tree / "docs" / "graph.py").read_text() == "X = 1\n"
    assert os.readlink(tree / "latest") == "vllm"


# ----------------------------------------------------------------------------- caps

def test_a_small_archive_that_expands_hugely_is_refused(world, run):
    """Why-8: a few KB of gzip that expand to 20 MB of zeros (ratio about 1000)."""
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members([
        _reg(f"{TOP}/zeros.bin", bytes(20 << 20))]))
    assert archive.stat().st_size < 100_000
    _pin_core_to(world, archive)
    _refused(world, run, archive, "OVERLAY_ARCHIVE_MAX_RATIO")


def test_total_size_cap_has_an_environment_override(world, run, monkeypatch):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members())
    _pin_core_to(world, archive)
    monkeypatch.setenv("OVERLAY_ARCHIVE_MAX_BYTES", "2000")
    _refused(world, run, archive, "OVERLAY_ARCHIVE_MAX_BYTES", "2000 bytes")
    monkeypatch.setenv("OVERLAY_ARCHIVE_MAX_BYTES", "20000000")
    assert run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)[0] == 0


def test_member_count_cap_has_an_environment_override(world, run, monkeypatch):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members())
    _pin_core_to(world, archive)
    monkeypatch.setenv("OVERLAY_ARCHIVE_MAX_MEMBERS", "3")
    _refused(world, run, archive, "more than 3 members", "OVERLAY_ARCHIVE_MAX_MEMBERS")


def test_a_bad_cap_value_is_one_line(world, run, monkeypatch):
    archive = _tar_gz(_pypi(world) / "core-1.0.tar.gz", _good_members())
    _pin_core_to(world, archive)
    monkeypatch.setenv("OVERLAY_ARCHIVE_MAX_RATIO", "lots")
    code, _, err = run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)
    assert code == 2 and len(err.splitlines()) == 1
    assert "OVERLAY_ARCHIVE_MAX_RATIO='lots' is not a positive whole number" in err


def test_a_corrupt_gzip_is_one_line(world, run):
    archive = _pypi(world) / "core-1.0.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 50)
    _pin_core_to(world, archive)
    _refused(world, run, archive, "not a readable gzip-compressed tar")


# ----------------------------------------------------------------------------- formats

def test_tar_bz2_is_refused_in_one_line(world, run):
    archive = _pypi(world) / "core-1.0.tar.bz2"
    with tarfile.open(archive, "w:bz2") as tf:
        for info, data in _good_members():
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    _pin_core_to(world, archive)
    _refused(world, run, archive, "is not a .tar.gz or .zip archive")


def _zip(path: Path, entries) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


_ZIP_GOOD = [(f"{TOP}/{k}", v, 0o100644) for k, v in GOOD.items()]


def test_zip_archives_compose(world, run):
    archive = _zip(_pypi(world) / "core-1.0.zip", _ZIP_GOOD + [
        (f"{TOP}/bin/run.sh", b"#!/bin/sh\n", 0o100755), (f"{TOP}/same.py", b"vllm/graph.py", 0o120777)])
    _pin_core_to(world, archive)
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)
    assert code == 0, err
    tree = world.project / "build" / "p1" / "core"
    assert (tree / "vllm" / "graph.py").read_text() == "X = 1\n"
    assert os.access(tree / "bin" / "run.sh", os.X_OK)
    assert os.readlink(tree / "same.py") == "vllm/graph.py"


@pytest.mark.parametrize("entry,word", [
    ((f"{TOP}/shadow", b"../../../../../../../../etc/shadow", 0o120777), "symlink"),
    ((f"{TOP}/../evil.py", b"x", 0o100644), ".."),
    ((f"{TOP}/fifo", b"", 0o010644), "not a regular file"),
])
def test_zip_members_are_vetted_like_tar_members(world, run, entry, word):
    archive = _zip(_pypi(world) / "core-1.0.zip", _ZIP_GOOD + [entry])
    _pin_core_to(world, archive)
    _refused(world, run, archive, word)


_WHEEL_GOOD = [(k, v, 0o100644) for k, v in GOOD.items()] + [
    ("core-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: core\nVersion: 1.0\n", 0o100644)]


def test_a_wheel_composes_with_its_members_where_they_are(world, run):
    """A release that publishes wheels only: the wheel is the archive. Its members sit at its
    top (the package and `<name>-<version>.dist-info/`), so nothing is stripped."""
    archive = _zip(_pypi(world) / "core-1.0-py3-none-any.whl", _WHEEL_GOOD)
    _pin_core_to(world, archive)
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)
    assert code == 0, err
    tree = world.project / "build" / "p1" / "core"
    assert (tree / "vllm" / "graph.py").read_text() == "X = 1\n"
    assert (tree / "core-1.0.dist-info" / "METADATA").is_file()


def test_the_pinned_digest_picks_the_wheel_where_an_sdist_is_there_too(world, run):
    _zip(_pypi(world) / "core-1.0.zip", [(f"{TOP}/{k}", b"SDIST = 1\n", 0o100644) for k in GOOD])
    archive = _zip(_pypi(world) / "core-1.0-py3-none-any.whl", _WHEEL_GOOD)
    _pin_core_to(world, archive)
    code, out, err = run("apply", "--mirror", world.mirror, "--targets", "core", root=world.project)
    assert code == 0, err
    assert (world.project / "build" / "p1" / "core" / "vllm" / "graph.py").read_text() == "X = 1\n"


@pytest.mark.parametrize("entry,word", [
    (("shadow", b"../../../../../../../../etc/shadow", 0o120777), "symlink"),
    (("../evil.py", b"x", 0o100644), ".."),
    (("vllm/fifo", b"", 0o010644), "not a regular file"),
])
def test_wheel_members_are_vetted_like_sdist_members(world, run, entry, word):
    archive = _zip(_pypi(world) / "core-1.0-py3-none-any.whl", _WHEEL_GOOD + [entry])
    _pin_core_to(world, archive)
    _refused(world, run, archive, word)


def test_a_corrupt_wheel_is_one_line_and_nothing_is_imported(world, run):
    archive = _pypi(world) / "core-1.0-py3-none-any.whl"
    archive.write_bytes(b"PK\x03\x04 not really a zip" * 8)
    _pin_core_to(world, archive)
    _refused(world, run, archive, "not a readable zip")


def test_a_lookup_by_name_prefers_the_sdist_where_a_wheel_is_there_too(tmp_path):
    """Core trees and `--onto pypi:NAME==VERSION` look a release up by name (no pinned digest):
    the sdist, which also carries the packaging files; the wheel only where there is no sdist."""
    from overlay.series.model import ArchiveSource
    from overlay.trees import sources

    wheel = _zip(tmp_path / "core-1.0-py3-none-any.whl", _WHEEL_GOOD)
    for placeholder in ("", "0" * 64):
        assert sources.find_archive(tmp_path, ArchiveSource("core", "1.0", placeholder)) == wheel
    sdist = _zip(tmp_path / "core-1.0.zip", _ZIP_GOOD)
    for placeholder in ("", "0" * 64):
        assert sources.find_archive(tmp_path, ArchiveSource("core", "1.0", placeholder)) == sdist
    # other names and versions, and a wheel name that is not one, are not this release
    _zip(tmp_path / "core-1.01-py3-none-any.whl", _WHEEL_GOOD)
    _zip(tmp_path / "core-1.0-x.whl", _WHEEL_GOOD)
    assert sources.find_archive(tmp_path, ArchiveSource("core", "2.0", "")) is None


def test_zip_bomb_is_refused(world, run):
    archive = _zip(_pypi(world) / "core-1.0.zip", _ZIP_GOOD)
    with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{TOP}/zeros.bin", bytes(20 << 20))
    assert archive.stat().st_size < 100_000
    _pin_core_to(world, archive)
    _refused(world, run, archive, "OVERLAY_ARCHIVE_MAX_RATIO")


# ----------------------------------------------------------------------------- not regular files

def _apply_in_a_process(world, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "overlay", "--root", str(world.project),
                               "apply", "--mirror", str(world.mirror), "--targets", "core"],
                              capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        pytest.fail(f"apply hung on a mirror archive that is not a regular file (> {timeout}s)")


def test_an_archive_that_is_a_fifo_does_not_hang(world):
    archive = _pypi(world) / "core-1.0.tar.gz"
    os.mkfifo(archive)
    _pin_core_to(world, archive)
    proc = _apply_in_a_process(world)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "not a regular file" in proc.stderr and str(archive) in proc.stderr


def test_an_archive_that_is_dev_zero_does_not_hang(world):
    archive = _pypi(world) / "core-1.0.tar.gz"
    archive.symlink_to("/dev/zero")
    _pin_core_to(world, archive)
    proc = _apply_in_a_process(world, timeout=30)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "not a regular file" in proc.stderr
