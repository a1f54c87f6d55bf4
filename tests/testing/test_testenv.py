"""tools/overlay/testing/testenv.py on synthetic inputs: a fake pip, a small core repository."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from fixtures import commit_all, init_repo, write
from overlay.testing import testenv
from overlay.errors import OverlayError

# Pretends to be the venv's python running `pip install ... --target DIR SRC`: copies SRC/vllm
# to DIR and records the environment pip would see. Output lines are pip's own wording.
FAKE_PIP = textwrap.dedent("""\
    #!{python}
    import json, os, shutil, sys
    args = sys.argv[1:]
    log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
    with open(log, "a") as fh:
        fh.write(json.dumps({{"args": args, "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE"),
                             "PRETEND": os.environ.get("SETUPTOOLS_SCM_PRETEND_VERSION"),
                             "PYTHONPATH": os.environ.get("PYTHONPATH")}}) + "\\n")
    target, src = args[args.index("--target") + 1], args[-1]
    print("Processing " + src, flush=True)
    print("Building wheel for vllm (pyproject.toml): started", flush=True)
    if os.path.isdir(os.path.join(src, "vllm")):
        shutil.copytree(os.path.join(src, "vllm"), os.path.join(target, "vllm"))
    else:
        os.makedirs(target)
    print("Successfully installed vllm-0.0.1", flush=True)
    """)


def fake_python(tmp: Path) -> Path:
    bindir = tmp / "fakebin"
    bindir.mkdir()
    py = bindir / "python"
    py.write_text(FAKE_PIP.format(python=sys.executable))
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return py


def calls(py: Path) -> list[dict]:
    import json

    log = py.parent / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def core_repo(tmp: Path, name: str, marker: str) -> dict:
    repo = init_repo(tmp / name)
    write(repo, {"vllm/__init__.py": f"MARK = {marker!r}\n", "setup.py": "# synthetic\n"})
    commit_all(repo, "core")
    from fixtures import run_git

    return {"target": "core", "path": str(repo), "tree": run_git(["rev-parse", "HEAD^{tree}"], repo)}


def test_default_venv(monkeypatch, tmp_path):
    monkeypatch.setenv("OVERLAY_COMPOSED_VENV", str(tmp_path / "v"))
    assert testenv.default_venv() == tmp_path / "v"
    monkeypatch.delenv("OVERLAY_COMPOSED_VENV")
    assert testenv.default_venv() == Path.home() / ".cache" / "overlay" / "composed-test-venv"


def test_core_version_reads_the_pypi_requirement():
    assert testenv.core_version("targets:\n  core:\n    pypi: vllm==0.25.0\n") == "0.25.0"
    assert testenv.core_version("  core:\n    pypi: \"vllm==0.24.0\"  # sdist\n") == "0.24.0"
    assert testenv.core_version("  core:\n    repo: x\n    commit: abc\n") is None


def test_entry_points_from_setup_py():
    setup = "from setuptools import setup\nsetup(name='p', entry_points={'vllm.platform_plugins': ['ascend = p:register']})\n"
    groups = testenv.plugin_entry_points(setup)
    assert groups == {"vllm.platform_plugins": ["ascend = p:register"]}
    assert testenv.entry_points_txt(groups) == "[vllm.platform_plugins]\nascend = p:register\n"


@pytest.mark.parametrize("source, message", [
    ("setup(name='p')\n", "declares no entry_points"),
    ("setup(entry_points=make())\n", "not a literal"),
    ("setup(\n", "cannot parse"),
])
def test_bad_setup_py_is_one_error_naming_the_file(source, message):
    with pytest.raises(OverlayError) as err:
        testenv.plugin_entry_points(source, where="plugin/setup.py")
    assert message in err.value.one_line() and err.value.one_line().startswith("plugin/setup.py")


def test_pip_progress_counts_requirements_and_names_the_phases():
    p = testenv.PipProgress(3)
    lines = [p.line(t) for t in (
        "Looking in links: somewhere",
        "Collecting torch==2.13.0+cpu (from -r req.txt (line 1))",
        "  Downloading torch-2.13.0+cpu-cp311-linux_x86_64.whl (190.2 MB)",
        "Processing ./wheels/numpy-2.3.5.whl",
        "Collecting six==1.0",
        "Installing collected packages: six, numpy, torch",
        "Successfully installed numpy six torch",
    )]
    assert lines == [None, "[1/3] torch==2.13.0+cpu", "  downloading torch-2.13.0+cpu-cp311-linux_x86_64.whl (190.2 MB)",
                     "[2/3] numpy-2.3.5.whl", "[3/3] six==1.0", "installing 3 package(s)", "installed"]


def test_requirement_names_skips_comments_and_blanks():
    assert testenv.requirement_names("# head\n\ntorch==2.13.0+cpu  # cpu\nsix==1\n") == ["torch==2.13.0+cpu", "six==1"]


def test_stream_reports_progress_and_a_heartbeat_while_silent():
    seen: list[str] = []
    code = "import time; print('Collecting a==1', flush=True); time.sleep(2.5); print('Successfully installed a')"
    testenv.stream([sys.executable, "-c", code], what="pip install", progress=seen.append,
                   parse=testenv.PipProgress(1).line, heartbeat_s=1.0)
    assert seen[0] == "pip install: [1/1] a==1"
    assert any(s.startswith("pip install: still working (") for s in seen[1:-1])
    assert seen[-1] == "pip install: installed"


def test_stream_quiet_without_progress_and_one_line_error_on_failure():
    code = "print('Collecting a==1'); print('ERROR: No matching distribution found for a==1'); raise SystemExit(1)"
    with pytest.raises(OverlayError) as err:
        testenv.stream([sys.executable, "-c", code], what="pip install", progress=None,
                       parse=testenv.PipProgress(1).line)
    line = err.value.one_line()
    assert "pip install failed" in line and "exited 1" in line
    assert line.endswith("ERROR: No matching distribution found for a==1")


def test_ensure_venv_reuses_a_venv_whose_stamp_matches(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("six==1\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / testenv.REQUIREMENTS_STAMP).write_text(testenv.requirements_digest(req))
    seen: list[str] = []
    assert testenv.ensure_venv(venv, seen.append, requirements=req) == venv / "bin" / "python"
    assert seen == []  # nothing built, nothing said


def test_ensure_core_installs_once_per_tree_and_keeps_cores_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/leaks/into/the/build")
    py = fake_python(tmp_path)
    venv = tmp_path / "venv"
    a, b = core_repo(tmp_path, "core-a", "a"), core_repo(tmp_path, "core-b", "b")
    seen: list[str] = []
    dir_a = testenv.ensure_core(py, venv, a, "0.24.0", seen.append)
    dir_b = testenv.ensure_core(py, venv, b, None, None)
    assert dir_a == venv / "cores" / f"{a['tree']}-0.24.0" and dir_b == venv / "cores" / b["tree"]
    assert (dir_a / "vllm" / "__init__.py").read_text() == "MARK = 'a'\n"
    assert (dir_b / "vllm" / "__init__.py").read_text() == "MARK = 'b'\n"
    first = calls(py)[0]
    assert first["VLLM_TARGET_DEVICE"] == "empty" and first["PRETEND"] == "0.24.0"
    assert first["PYTHONPATH"] is None
    assert {"--no-deps", "--no-build-isolation", "--target"} <= set(first["args"])
    assert seen[0].startswith("installing vLLM from the composed core tree") and "vLLM install: installed" in seen
    # Installed already: no pip call, no message; no build leftovers beside the cores.
    assert testenv.ensure_core(py, venv, a, "0.24.0", seen.append) == dir_a
    assert len(calls(py)) == 2 and len(seen) == 4
    assert sorted(p.name for p in (venv / "cores").iterdir()) == sorted([dir_a.name, dir_b.name])


def test_ensure_core_two_builders_of_one_tree_both_succeed(tmp_path):
    py = fake_python(tmp_path)
    venv = tmp_path / "venv"
    core = core_repo(tmp_path, "core", "x")
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(testenv.ensure_core(py, venv, core, None, None)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [venv / "cores" / core["tree"]] * 2
    assert [p.name for p in (venv / "cores").iterdir()] == [core["tree"]]


def test_ensure_core_refuses_a_tree_without_vllm(tmp_path):
    py = fake_python(tmp_path)
    repo = init_repo(tmp_path / "notcore")
    write(repo, {"README": "x\n"})
    commit_all(repo, "x")
    from fixtures import run_git

    core = {"path": str(repo), "tree": run_git(["rev-parse", "HEAD^{tree}"], repo)}
    with pytest.raises(OverlayError, match="produced no vllm package"):
        testenv.ensure_core(py, tmp_path / "venv", core, None, None)
    assert not (tmp_path / "venv" / "cores" / core["tree"]).exists()


def test_shims_build_info_and_test_env(tmp_path):
    plugin = tmp_path / "plugin"
    write(plugin, {"setup.py": "setup(entry_points={'vllm.platform_plugins': ['ascend = vllm_ascend:register']})\n",
                   "vllm_ascend/__init__.py": ""})
    shim = tmp_path / "shim"
    testenv.write_shims(shim, plugin)
    testenv.write_build_info(plugin)
    assert "__device_type__ = 'A2'" in (plugin / "vllm_ascend" / "_build_info.py").read_text()
    assert (shim / f"{testenv.TORCHVISION_SHIM_MODULE}.py").is_file()
    eps = (shim / testenv.PLUGIN_DIST / "entry_points.txt").read_text()
    assert eps == "[vllm.platform_plugins]\nascend = vllm_ascend:register\n"
    env = testenv.test_env(shim, tmp_path / "core", [tmp_path / "x"])
    assert env["PYTHONPATH"].split(os.pathsep) == [str(shim), str(tmp_path / "core"), str(tmp_path / "x")]
    assert env["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    # The dist-info is what importlib.metadata (and so vLLM's plugin loader) reads.
    from importlib.metadata import distributions

    found = [d for d in distributions(path=[str(shim)]) if d.metadata["Name"] == "vllm_ascend"]
    assert [ep.name for ep in found[0].entry_points] == ["ascend"]


def test_export_tree_leaves_the_work_tree_alone(tmp_path):
    repo = init_repo(tmp_path / "r")
    write(repo, {"a.txt": "committed\n"})
    commit_all(repo, "a")
    (repo / "a.txt").write_text("edited\n")
    out = testenv.export_tree(repo, "HEAD", tmp_path / "out")
    assert (out / "a.txt").read_text() == "committed\n" and (repo / "a.txt").read_text() == "edited\n"
    assert not (tmp_path / "out.tar").exists()


def test_ensure_venv_builds_with_progress_and_stamps_only_on_success(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("# nothing to install: the build, the stamp and the progress are what is tested\n")
    venv = tmp_path / "venv"
    seen: list[str] = []
    python = testenv.ensure_venv(venv, seen.append, requirements=req)
    assert python == venv / "bin" / "python" and python.exists()
    assert (venv / testenv.REQUIREMENTS_STAMP).read_text() == testenv.requirements_digest(req)
    assert seen[0].startswith(f"building the test environment in {venv} from req.txt: 0 packages")
    # A changed requirements file rebuilds; a failed install leaves no stamp behind.
    missing = tmp_path / "nope-1.0-py3-none-any.whl"
    req.write_text(f"{missing}\n")
    with pytest.raises(OverlayError) as err:
        testenv.ensure_venv(venv, None, requirements=req)
    assert "pip install failed" in err.value.one_line() and "No such file or directory" in err.value.one_line()
    assert not (venv / testenv.REQUIREMENTS_STAMP).exists()
