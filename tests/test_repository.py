"""The repository's own series and pins are consistent (what `make check` enforces)."""

from __future__ import annotations

from pathlib import Path

from overlay.series.model import ArchiveSource, GitSource, load_all_pins, load_series

ROOT = Path(__file__).resolve().parents[1]


def test_make_check_passes_on_this_repository(run):
    code, out, _ = run("check", root=ROOT)
    assert code == 0, out


def test_reference_pins():
    pins = {p.name: p for p in load_all_pins(ROOT)}
    assert {"1f486d96", "a30addc7", "v0.23.0"} <= set(pins)
    assert [n for n, p in pins.items() if p.default] == ["v0.30.0"]
    git_pins = {n: p for n, p in pins.items() if isinstance(p.target("plugin").source, GitSource)}
    plugin_commits = {p.target("plugin").source.commit for n, p in git_pins.items() if n != "v0.27.1"}
    assert plugin_commits == {"801a6b41d29d23399bd8c9ebc2ea8883e2beefae"}
    # the pin set `overlay rebase` made: the newest plugin with the release it declares
    newest = pins["v0.27.1"]
    assert newest.target("plugin").source.commit == "182b75ea84ff13ece27b57391331ef8935410aea"
    assert (newest.target("core").source.requirement, newest.target("core").source.sha256) == (
        "vllm==0.27.1", "eec2d54d137ac1e59cb4c39226dfee1943eefc8f4788f5821d7300d6acbdb646")
    # upstream's own plugin releases, each with the core release it declares (issue 30)
    for name, plugin in (("v0.28.0", "0.28.0rc1"), ("v0.29.0", "0.29.0rc1"), ("v0.30.0", "0.30.0rc2")):
        release, core_ = pins[name].target("plugin").source, pins[name].target("core").source
        assert isinstance(release, ArchiveSource) and release.requirement == f"vllm-ascend=={plugin}"
        assert release.history == "https://github.com/vllm-project/vllm-ascend"
        assert core_.requirement == f"vllm=={name[1:]}" and all(t.tree for t in pins[name].targets)
    core = pins["1f486d96"].target("core").source
    assert isinstance(core, GitSource) and core.commit.startswith("1f486d96")
    assert pins["v0.23.0"].target("core").source.requirement == "vllm==0.23.0"


def test_every_series_target_is_pinned():
    series = load_series(ROOT)
    for pin in load_all_pins(ROOT):
        assert set(series.targets) <= set(pin.target_names)


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10, which the tool supports
        import tomli as tomllib  # pytest depends on it there
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_declared_dependency_is_imported():
    """Issue 13 item 15: no unused dependency is shipped."""
    import re

    imports = {"GitPython": "git", "PyYAML": "yaml", "unidiff": "unidiff", "numpy": "numpy",
               "matplotlib": "matplotlib"}
    source = "\n".join(p.read_text() for p in (ROOT / "tools" / "overlay").rglob("*.py"))
    for requirement in _pyproject()["project"]["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
        module = imports.get(name, name.lower())
        assert re.search(rf"^\s*(import|from) {module}\b", source, re.M), f"{name} is declared but never imported"


def test_one_python_version_story():
    """The tool runs on the version pyproject.toml requires; only the composed-test
    environment is 3.11, and README, docs and requirements say exactly that."""
    import re

    minimum = re.fullmatch(r">=(3\.\d+)", _pyproject()["project"]["requires-python"]).group(1)
    readme = (ROOT / "README.md").read_text()
    assert f"The tool itself runs on Python {minimum}+" in readme
    assert "(`make composed-test`) is Python 3.11" in re.sub(r"\s+", " ", readme)
    mentions = set(re.findall(r"Python (3\.\d+)", readme))
    assert mentions == {minimum, "3.11"}, mentions
    assert "Verified on Python 3.11" in (ROOT / "requirements" / "composed-test.txt").read_text()
    assert "Python 3.11" in (ROOT / "docs" / "series.md").read_text()


# A path of someone's machine or a registry's host in a committed file: the project's rule is
# that neither is ever committed (benchmarks' provenance comments name `<trees>/...` instead).
_MACHINE_OR_REGISTRY = r"(?<![\w.<])/(?:work|home/[\w.-]+|Users/[\w.-]+|root)/|pypi\.org|pythonhosted\.org"


def test_no_committed_file_names_a_machine_path_or_a_registry_host():
    import re
    import subprocess

    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    pattern = re.compile(_MACHINE_OR_REGISTRY)
    found = []
    for rel in filter(None, files.decode().split("\0")):
        path = ROOT / rel
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue  # binary
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if pattern.search(line) and rel != "tests/test_repository.py":
                found.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not found, "\n".join(found[:20])
