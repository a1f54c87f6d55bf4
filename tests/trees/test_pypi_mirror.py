"""`overlay mirror`: the mirror's pypi/ made again from benchmarks/mirror.yaml (trees.pypi_mirror).

Everything here is synthetic: a local simple index (PEP 503 HTML pages as files, read through
a file:// index URL, as pip reads one), release files the test writes, and a small git
repository the test commits and clones bare into the mirror as `<owner>+<name>/repo`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from fixtures import commit_all, init_repo, make_sdist, run_git, write

from overlay.errors import OverlayError
from overlay.trees import pypi_mirror
from overlay.trees.index_config import IndexConfig

ROOT = Path(__file__).resolve().parents[2]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(folder: Path, name: str, files: dict[str, str]) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


class Upstream:
    """A file:// simple index over `files/`, and a mirror holding one git snapshot."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.files = tmp / "files"
        self.files.mkdir()
        self.simple = tmp / "simple"
        self.sdist = make_sdist(self.files, "demo-1.0", {"demo/__init__.py": "X = 1\n", "PKG-INFO": "x\n"})
        self.wheel = make_wheel(self.files, "demo_extra-2.0-py3-none-any.whl",
                                {"demo_extra/__init__.py": "Y = 2\n"})
        self.binary = make_wheel(self.files, "core-3.0-cp38-abi3-manylinux_2_31_x86_64.whl", {
            "core/__init__.py": "Z = 3\n", "core/ops/b.py": "B = 1\n", "core/ops/a.py": "A = 1\n",
            "core/_C.abi3.so": "\x7fELF not python", "core-3.0.dist-info/METADATA": "Name: core\n"})
        self.publish("demo", [self.sdist])
        self.publish("demo-extra", [self.wheel])
        self.publish("core", [self.binary])
        self.config = IndexConfig(index_urls=(self.simple.as_uri(),))
        # a plugin repository, its snapshot in the mirror as a bare clone (as `fetch` lays it out)
        work = init_repo(tmp / "widget")
        write(work, {"widget/__init__.py": "V = 1\n", "docs/guide.md": "guide\n", "README.md": "w\n"})
        self.tagged = commit_all(work, "widget 1.0", date="2026-03-01T10:00:00+0000")
        run_git(["tag", "v1.0"], work)
        write(work, {"widget/__init__.py": "V = 2\n"})
        self.later = commit_all(work, "after 1.0", date="2026-03-02T10:00:00+0000")
        self.mirror = tmp / "mirror"
        self.mirror.mkdir()
        run_git(["clone", "-q", "--bare", str(work), str(self.mirror / "acme+widget" / "repo")], tmp)

    def publish(self, project: str, files: list[Path], hashes: bool = True) -> None:
        page = self.simple / project
        page.mkdir(parents=True, exist_ok=True)
        links = [f'<a href="{f.as_uri()}{"#sha256=" + sha(f.read_bytes()) if hashes else ""}">{f.name}</a>'
                 for f in files]
        (page / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")

    def entries(self, **overrides) -> list[pypi_mirror.Entry]:
        """The manifest a maintainer would commit for these files (the git archive's and the
        wheel sources' sha256 as `make_reference` computes them)."""
        made = self.reference()
        out = [
            pypi_mirror.Entry("demo-1.0.tar.gz", sha(self.sdist.read_bytes()), "index", "demo", "1.0"),
            pypi_mirror.Entry(self.wheel.name, sha(self.wheel.read_bytes()), "index", "demo-extra", "2.0"),
            pypi_mirror.Entry("core-3.0.tar.gz", made["core-3.0.tar.gz"], "wheel-sources", "core", "3.0",
                              wheel=self.binary.name, wheel_sha256=sha(self.binary.read_bytes())),
            pypi_mirror.Entry("widget-1.0.tar.gz", made["widget-1.0.tar.gz"], "git", "widget", "1.0",
                              repo="acme+widget", ref="v1.0", commit=self.tagged, exclude=("docs",)),
        ]
        return [e if e.name not in overrides else overrides[e.name] for e in out]

    def reference(self) -> dict[str, str]:
        """The two made files' sha256, made once by the module's own builders in a scratch folder."""
        scratch = self.tmp / "reference"
        if not scratch.exists():
            scratch.mkdir()
            git = pypi_mirror.Entry("widget-1.0.tar.gz", "0" * 64, "git", "widget", "1.0",
                                    repo="acme+widget", ref="v1.0", exclude=("docs",))
            pypi_mirror.git_archive(self.mirror / "acme+widget" / "repo", git, scratch / git.name)
            core = pypi_mirror.Entry("core-3.0.tar.gz", "0" * 64, "wheel-sources", "core", "3.0")
            pypi_mirror.sdist_from_wheel(self.binary, core, scratch / core.name)
        return {p.name: sha(p.read_bytes()) for p in scratch.iterdir()}

    def run(self, entries, **kw) -> pypi_mirror.Outcome:
        kw.setdefault("config", self.config)
        return pypi_mirror.run(self.mirror, entries, jobs=2, **kw)


@pytest.fixture
def up(tmp_path) -> Upstream:
    return Upstream(tmp_path)


def statuses(outcome) -> dict[str, str]:
    return {r.entry.name: r.status for r in outcome.results}


def pypi_names(up) -> list[str]:
    return sorted(p.name for p in (up.mirror / "pypi").iterdir())


# ------------------------------------------------------------------------------ making

def test_every_source_is_made_checked_and_kept_on_the_next_run(up):
    entries = up.entries()
    outcome = up.run(entries)
    assert outcome.ok and set(statuses(outcome).values()) == {"made"}, outcome.results
    pypi = up.mirror / "pypi"
    assert (pypi / "demo-1.0.tar.gz").read_bytes() == up.sdist.read_bytes()
    assert (pypi / up.wheel.name).read_bytes() == up.wheel.read_bytes()
    assert pypi_names(up) == sorted(e.name for e in entries)  # no temporary or wheel left behind
    assert oct((pypi / "widget-1.0.tar.gz").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    before = {p.name: p.stat().st_mtime_ns for p in pypi.iterdir()}
    again = up.run(entries, config=IndexConfig(index_urls=()))  # nothing may be fetched now
    assert again.ok and set(statuses(again).values()) == {"kept"}
    assert {p.name: p.stat().st_mtime_ns for p in pypi.iterdir()} == before


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_index_file_with_another_sha256_is_refused_and_nothing_is_left(up):
    wrong = pypi_mirror.Entry("demo-1.0.tar.gz", "a" * 64, "index", "demo", "1.0")
    outcome = up.run([wrong])
    [result] = outcome.results
    assert result.status == "failed" and not outcome.ok
    assert f"lists demo-1.0.tar.gz with sha256 {sha(up.sdist.read_bytes())}" in result.detail
    assert "benchmarks/mirror.yaml says " + "a" * 64 in result.detail and "not downloaded" in result.detail
    assert pypi_names(up) == []
    # an index that vouches for nothing: downloaded, hashed, discarded
    up.publish("demo", [up.sdist], hashes=False)
    [result] = up.run([wrong]).results
    assert result.status == "failed" and "discarded" in result.detail
    assert "benchmarks/mirror.yaml says " + "a" * 64 in result.detail
    assert pypi_names(up) == []


def test_a_made_file_with_another_sha256_is_discarded_and_a_wrong_one_there_is_replaced(up):
    entries = up.entries()
    git = entries[3]
    bad = pypi_mirror.Entry(git.name, "b" * 64, "git", "widget", "1.0", repo=git.repo, ref="v1.0",
                            exclude=git.exclude)
    [result] = up.run([bad]).results
    assert result.status == "failed"
    assert result.detail.startswith(f"made with sha256 {git.sha256}, benchmarks/mirror.yaml says {'b' * 64}; discarded")
    assert pypi_names(up) == []
    (up.mirror / "pypi" / git.name).mkdir()  # a folder under the name: that file fails, one line
    [result] = up.run([git]).results
    assert result.status == "failed" and "Is a directory" in result.detail
    (up.mirror / "pypi" / git.name).rmdir()
    (up.mirror / "pypi" / git.name).write_bytes(b"not the archive")
    outcome = up.run([git])
    assert statuses(outcome) == {git.name: "made"}
    assert sha((up.mirror / "pypi" / git.name).read_bytes()) == git.sha256


def test_git_archive_with_pkg_info_is_the_same_bytes_every_time(up, tmp_path, monkeypatch):
    entry = up.entries()[3]
    repo = up.mirror / "acme+widget" / "repo"
    first, second = tmp_path / "one.tar.gz", tmp_path / "two.tar.gz"
    pypi_mirror.git_archive(repo, entry, first)
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # another clock, another day: the same bytes
    pypi_mirror.git_archive(repo, entry, second)
    data = first.read_bytes()
    assert data == second.read_bytes() and sha(data) == entry.sha256
    assert data[4:8] == b"\0\0\0\0"  # gzip without a timestamp
    with tarfile.open(first) as tar:
        names = tar.getnames()
        pkg_info = tar.extractfile("widget-1.0/PKG-INFO").read().decode()
        init = tar.extractfile("widget-1.0/widget/__init__.py").read().decode()
    assert pkg_info == "Metadata-Version: 2.1\nName: widget\nVersion: 1.0\n"
    assert init == "V = 1\n"  # the tag's commit, not the later one
    assert all(n.partition("/")[0] == "widget-1.0" for n in names) and not any("docs" in n for n in names)


def test_a_tag_that_moved_and_a_missing_snapshot_fail_their_file_only(up):
    entries = up.entries()
    moved = pypi_mirror.Entry("widget-1.0.tar.gz", entries[3].sha256, "git", "widget", "1.0",
                              repo="acme+widget", ref="v1.0", commit=up.later)
    [result] = up.run([moved]).results
    assert result.status == "failed" and f"the manifest says {up.later[:12]}" in result.detail
    gone = pypi_mirror.Entry("gone-1.0.tar.gz", "c" * 64, "git", "gone", "1.0", repo="acme+gone", ref="v1.0")
    outcome = up.run([gone, entries[0]])
    assert statuses(outcome) == {"gone-1.0.tar.gz": "failed", "demo-1.0.tar.gz": "made"}
    assert "the mirror has no snapshot acme+gone" in outcome.results[0].detail
    assert not outcome.ok and pypi_names(up) == ["demo-1.0.tar.gz"]


def test_a_file_the_index_does_not_list_fails_and_is_said(up):
    missing = pypi_mirror.Entry("demo-9.9.tar.gz", "d" * 64, "index", "demo", "9.9")
    outcome = up.run([missing])
    assert not outcome.ok and "the package index lists no demo-9.9.tar.gz" in outcome.results[0].detail
    nothing = up.run([missing], config=IndexConfig(index_urls=()))
    assert "no package index is configured" in nothing.results[0].detail


def test_wheel_sources_are_the_wheel_s_python_files_the_same_bytes_every_time(up, tmp_path):
    entry = up.entries()[2]
    one, two = tmp_path / "one.tar.gz", tmp_path / "two.tar.gz"
    pypi_mirror.sdist_from_wheel(up.binary, entry, one)
    pypi_mirror.sdist_from_wheel(up.binary, entry, two)
    assert one.read_bytes() == two.read_bytes() and sha(one.read_bytes()) == entry.sha256
    with tarfile.open(one) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["core-3.0/core/__init__.py", "core-3.0/core/ops/a.py",
                                         "core-3.0/core/ops/b.py"]
    assert {(m.mode, m.mtime, m.uname, m.gname) for m in members} == {(0o644, 0, "", "")}
    outcome = up.run([entry])
    assert statuses(outcome) == {"core-3.0.tar.gz": "made"} and pypi_names(up) == ["core-3.0.tar.gz"]
    # the wheel is checked before it is read
    wrong = pypi_mirror.Entry(entry.name, entry.sha256, "wheel-sources", "core", "3.0",
                              wheel=entry.wheel, wheel_sha256="e" * 64)
    (up.mirror / "pypi" / entry.name).unlink()
    [result] = up.run([wrong]).results
    assert result.status == "failed" and "(wheel-sha256) says " + "e" * 64 in result.detail
    assert pypi_names(up) == []


def test_a_wheel_member_that_leaves_its_folder_is_refused(up, tmp_path):
    evil = make_wheel(tmp_path, "core-3.0-cp38-abi3-manylinux_2_31_x86_64.whl",
                      {"core/__init__.py": "", "../escape.py": "boom"})
    entry = pypi_mirror.Entry("core-3.0.tar.gz", "0" * 64, "wheel-sources", "core", "3.0")
    with pytest.raises(pypi_mirror._Failed, match=r"member '\.\./escape\.py' escapes the archive"):
        pypi_mirror.sdist_from_wheel(evil, entry, tmp_path / "out.tar.gz")
    assert not (tmp_path / "out.tar.gz").exists()


def test_a_run_where_nothing_ran_is_not_a_success(up):
    assert not up.run([]).ok and not up.run([], check=True).ok


# ------------------------------------------------------------------------------ --check

def test_check_verifies_and_downloads_nothing(up):
    entries = up.entries()
    outcome = up.run(entries, check=True)
    assert not outcome.ok and set(statuses(outcome).values()) == {"failed"}
    assert "is missing" in outcome.results[0].detail and not (up.mirror / "pypi").exists()
    assert up.run(entries).ok
    (up.mirror / "pypi" / "stray-0.1.tar.gz").write_bytes(b"x")
    checked = up.run(entries, check=True, config=IndexConfig(index_urls=()))
    assert checked.ok and set(statuses(checked).values()) == {"verified"}
    assert checked.extra == ["stray-0.1.tar.gz"]
    (up.mirror / "pypi" / "demo-1.0.tar.gz").write_bytes(b"changed")
    before = pypi_names(up)
    checked = up.run(entries, check=True)
    assert statuses(checked)["demo-1.0.tar.gz"] == "failed" and not checked.ok
    assert f"has sha256 {sha(b'changed')}" in checked.results[0].detail
    assert pypi_names(up) == before and (up.mirror / "pypi" / "demo-1.0.tar.gz").read_bytes() == b"changed"
    (up.mirror / "pypi" / "demo-1.0.tar.gz").unlink()
    (up.mirror / "pypi" / "demo-1.0.tar.gz").mkdir()
    detail = up.run(entries, check=True).results[0].detail
    assert detail.startswith("pypi/demo-1.0.tar.gz is not a readable regular file (remove it")


# ------------------------------------------------------------------------------ the manifest

GOOD = {"name": "widget-1.0.tar.gz", "sha256": "f" * 64, "git": "acme+widget", "release": "widget==1.0",
        "ref": "v1.0", "exclude": ["docs"]}


def load(tmp_path: Path, files) -> list[pypi_mirror.Entry]:
    path = tmp_path / "benchmarks" / "mirror.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"files": files}, indent=1))  # JSON is YAML, and has no aliases
    return pypi_mirror.load_manifest(path, "benchmarks/mirror.yaml")


@pytest.mark.parametrize("change, message", [
    ({"name": "../widget-1.0.tar.gz"}, "is not a plain file name"),
    ({"name": "sub/widget-1.0.tar.gz"}, "is not a plain file name"),
    ({"name": ".widget-1.0.tar.gz"}, "is not a plain file name"),
    ({"name": "-widget-1.0.tar.gz"}, "is not a plain file name"),
    ({"name": "widget-1.0.sh"}, "does not end in .tar.gz"),
    ({"ref": "-oops"}, "starts with '-'"),
    ({"ref": "--output=x.tar"}, "starts with '-'"),
    ({"ref": "v0.9..v1.0"}, "is not a plain revision"),
    ({"exclude": ["../outside"]}, "is not a plain relative path"),
    ({"exclude": [":(top)x"]}, "is not a plain relative path"),
    ({"git": "../acme+widget"}, "is not OWNER+NAME"),
    ({"sha256": "F" * 64}, "is not 64 lowercase hex digits"),
    ({"sha256": "f" * 64 + "\n"}, "is not 64 lowercase hex digits"),
    ({"release": "widget==1.0\nName: evil"}, "is not DIST==VERSION"),
    ({"commit": "v1.0"}, "is not a full hex commit id"),
    ({"index": "widget==1.0"}, "exactly one source"),
    ({"url": "somewhere"}, "unknown key 'url'"),
])
def test_hostile_or_broken_entries_are_refused_in_one_line_naming_the_manifest(tmp_path, change, message):
    with pytest.raises(OverlayError) as refused:
        load(tmp_path, [{**GOOD, **change}])
    line = refused.value.one_line()
    assert line.startswith("benchmarks/mirror.yaml:") and message in line and "\n" not in line


def test_a_manifest_entry_loads_and_names_are_unique(tmp_path):
    [entry] = load(tmp_path, [GOOD])
    assert (entry.kind, entry.repo, entry.ref, entry.exclude, entry.dist) == \
        ("git", "acme+widget", "v1.0", ("docs",), "widget")
    with pytest.raises(OverlayError, match="listed twice"):
        load(tmp_path, [GOOD, GOOD])
    with pytest.raises(OverlayError, match="non-empty list"):
        load(tmp_path, [])
    with pytest.raises(OverlayError, match="not a release file of demo==1.0"):
        load(tmp_path, [{"name": "other-1.0.tar.gz", "sha256": "f" * 64, "index": "demo==1.0"}])


PLAIN = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,12}", fullmatch=True)
HOSTILE = st.sampled_from(["/", "\\", "..", "../", "\n", "\x00", " ", ":", "\x1b", "é", "*", "\t", "@{"])
EXT = st.sampled_from([".tar.gz", ".whl", ".zip"])
ANY_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@given(head=PLAIN, bad=HOSTILE, tail=PLAIN, ext=EXT)
def test_a_name_with_any_hostile_part_is_refused_and_a_plain_one_taken(head, bad, tail, ext):
    assert pypi_mirror.name_problem(f"{head}.{tail}{ext}") is None
    assert pypi_mirror.name_problem(f"{head}{bad}{tail}{ext}") is not None
    assert pypi_mirror.name_problem(f"{bad}{head}{ext}") is not None
    assert pypi_mirror.name_problem(f"-{head}{ext}") is not None
    assert pypi_mirror.name_problem(f".{head}{ext}") is not None
    assert pypi_mirror.name_problem(f"{head}.{tail}") is not None  # not an archive


@given(head=PLAIN, tail=PLAIN, bad=HOSTILE, dash=st.sampled_from(["-", "--", "--output=", "-c"]))
def test_a_ref_or_path_that_reads_as_an_option_or_leaves_the_tree_is_refused(head, tail, bad, dash):
    assert pypi_mirror.ref_problem(f"{head}^") is None and pypi_mirror.ref_problem(f"v{head}/{tail}~1") is None
    assert pypi_mirror.ref_problem(f"{dash}{head}") is not None
    assert pypi_mirror.ref_problem(f"{head}..{tail}") is not None
    assert pypi_mirror.path_problem(f"{head}/{tail}") is None
    for path in (f"{dash}{head}", f"../{head}", f"{head}/../{tail}", f"/{head}", f":(top){head}", f"{head}/",
                 *([f"{head}{bad}{tail}"] if bad not in ("..", "/", "../") else [])):  # `a../b`: plain
        assert pypi_mirror.path_problem(path) is not None, path


@given(text=ANY_TEXT, ext=st.sampled_from([".tar.gz", ".whl", ""]))
def test_whatever_is_accepted_is_a_plain_name_ref_or_path(text, ext):
    name = text + ext
    if pypi_mirror.name_problem(name) is None:
        assert "/" not in name and "\\" not in name and ".." not in name and name.isascii()
        assert not name.startswith((".", "-")) and Path(name).name == name
    if pypi_mirror.ref_problem(text) is None:
        assert not text.startswith("-") and ".." not in text and ":" not in text and text.isascii()
    if pypi_mirror.path_problem(text) is None:
        assert not text.startswith(("-", "/", ":")) and ".." not in text.split("/") and text.isascii()


# ------------------------------------------------------------------------------ the command

@pytest.fixture
def project(up, tmp_path, monkeypatch):
    """A project whose benchmarks/mirror.yaml names the synthetic files; pip's index setting
    is the synthetic file:// index and nothing else of this machine's."""
    proj = tmp_path / "project"
    (proj / "benchmarks").mkdir(parents=True)
    (proj / "series.yaml").write_text("")
    lines = ["files:"]
    for e in up.entries():
        lines += [f"  - name: {e.name}", f"    sha256: {e.sha256}"]
        if e.kind == "git":
            lines += [f"    git: {e.repo}", f'    release: "{e.dist}=={e.version}"', f"    ref: {e.ref}",
                      f"    commit: {e.commit}", f"    exclude: [{', '.join(e.exclude)}]"]
        else:
            lines.append(f'    {e.kind}: "{e.dist}=={e.version}"')
            if e.wheel:
                lines += [f"    wheel: {e.wheel}", f"    wheel-sha256: {e.wheel_sha256}"]
    (proj / "benchmarks" / "mirror.yaml").write_text("\n".join(lines) + "\n")
    for var in list(os.environ):
        if var.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", up.simple.as_uri())
    return proj


def test_the_command_makes_the_mirror_and_says_so_as_json(up, project, run):
    code, out, err = run("mirror", "--mirror", up.mirror, "--json", root=project)
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == ["schema_version", "mirror", "manifest", "check", "ok", "counts", "files", "extra"]
    assert doc["ok"] is True and doc["check"] is False and doc["manifest"] == "benchmarks/mirror.yaml"
    assert doc["counts"] == {"made": 4, "kept": 0, "verified": 0, "failed": 0}
    assert [set(f) for f in doc["files"]] == [{"name", "source", "status", "detail"}] * 4
    assert [f["source"] for f in doc["files"]] == ["index demo==1.0", "index demo-extra==2.0",
                                                   "wheel-sources core==3.0", "git acme+widget v1.0"]
    assert err == ""  # --json is quiet
    code, out, _ = run("mirror", "--mirror", up.mirror, "--check", root=project)
    assert code == 0 and out.strip().endswith("4 files in benchmarks/mirror.yaml: 4 verified, 0 failed")
    code, out, _ = run("mirror", "--mirror", up.mirror, root=project)
    assert code == 0 and "0 made, 4 kept, 0 failed" in out


def test_the_command_fails_when_a_file_cannot_be_made(up, project, run, monkeypatch):
    monkeypatch.setenv("OVERLAY_MIRROR", str(up.mirror))
    (up.mirror / "acme+widget" / "repo").rename(up.mirror / "elsewhere")
    code, out, _ = run("mirror", root=project)
    assert code == 1
    assert "FAILED widget-1.0.tar.gz: the mirror has no snapshot acme+widget" in out
    assert out.strip().endswith("3 made, 0 kept, 1 failed")
    code, out, _ = run("mirror", "--check", "--json", root=project)
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["counts"]["failed"] == 1
    assert [f["status"] for f in doc["files"]] == ["verified"] * 3 + ["failed"]


def test_the_command_refuses_bad_input_in_one_line(up, project, run):
    code, _, err = run("mirror", root=project)
    assert code == 2 and "needs the upstream mirror" in err and "OVERLAY_MIRROR" in err
    manifest = project / "benchmarks" / "mirror.yaml"
    manifest.write_text(manifest.read_text().replace("name: demo-1.0.tar.gz", "name: ../../demo-1.0.tar.gz"))
    code, _, err = run("mirror", "--mirror", up.mirror, root=project)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("overlay: error: benchmarks/mirror.yaml:2: file name '../../demo-1.0.tar.gz'")
    assert not (up.mirror / "pypi").exists()
