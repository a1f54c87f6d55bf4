"""Issue 26, case 8: the gate reads plugin (and core) files through the one bounded reader
(paths.read_capped): regular files only, inside the tree, at most a cap. A file it will not
read, or cannot parse (nested too deeply, too large), is skipped and said so in one note
line naming it; the run goes on, with no traceback. Each run is a fresh process with a
timeout, so a reader that blocks fails the test instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gatekit
from hypothesis import given
from hypothesis import strategies as st

from overlay.gate import run_gate, run_gate_on_commit

CORE = {"vllm/__init__.py": "", "vllm/a.py": "def f(x):\n    return x\n"}
PLUGIN = {"vllm_ascend/__init__.py": "import vllm.a\n", "vllm_ascend/ok.py": "from vllm.a import f\n"}


def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    core = gatekit.tree(tmp_path / "core", CORE)
    plugin = gatekit.tree(tmp_path / "plugin", PLUGIN)
    outside = gatekit.tree(tmp_path / "outside", {"evil.py": "from vllm.a import SECRET_OUTSIDE\n",
                                                  "pkg/__init__.py": "from vllm.a import SECRET_PKG\n"})
    return core, plugin, outside


def gate(tmp_path: Path, core: Path, plugin: Path, **env: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "overlay", "gate", "--core", str(core), "--plugin", str(plugin)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OVERLAY_CACHE": str(tmp_path / "cache"), **env})
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def notes(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("note: ")]


def test_links_out_of_the_plugin_tree_are_not_followed(tmp_path):
    core, plugin, outside = trees(tmp_path)
    (plugin / "vllm_ascend" / "x.py").symlink_to(outside / "evil.py")
    (plugin / "vllm_ascend" / "sub").symlink_to(outside / "pkg")
    (plugin / "vllm_ascend" / "ok.py").write_text("from vllm.a import f\nimport vllm_ascend.sub\n")
    code, out, err = gate(tmp_path, core, plugin)
    assert "SECRET" not in out + err  # the outside content shows nowhere
    (x,) = [n for n in notes(out) if "vllm_ascend/x.py" in n]
    assert "leads out of the tree" in x and "not gated" in x
    assert any("vllm_ascend/sub/__init__.py" in n and "leads out of the tree" in n for n in notes(out)), out
    assert code == 0, out + err


def test_a_fifo_or_a_device_in_either_tree_is_skipped_without_blocking(tmp_path):
    core, plugin, _ = trees(tmp_path)
    os.mkfifo(plugin / "vllm_ascend" / "fifo.py")
    (plugin / "vllm_ascend" / "zero.py").symlink_to("/dev/zero")
    os.mkfifo(core / "vllm" / "b.py")
    (plugin / "vllm_ascend" / "ok.py").write_text("from vllm.a import f\nimport vllm.b\n")
    code, out, err = gate(tmp_path, core, plugin)
    found = notes(out)
    assert any("plugin file vllm_ascend/fifo.py" in n and "a FIFO" in n for n in found), out
    assert any("plugin file vllm_ascend/zero.py" in n and "a device" in n for n in found), out
    assert any("core file vllm/b.py" in n and "a FIFO" in n for n in found), out
    assert code == 0, out + err


def test_a_file_over_the_cap_is_skipped(tmp_path):
    core, plugin, _ = trees(tmp_path)
    (plugin / "vllm_ascend" / "big.py").write_text("from vllm.a import MISSING_NAME\n" + "x = 1\n" * 1000)
    code, out, err = gate(tmp_path, core, plugin, OVERLAY_GATE_FILE_MAX_BYTES="2000")
    (big,) = [n for n in notes(out) if "vllm_ascend/big.py" in n]
    assert "larger than 2000 bytes" in big and "OVERLAY_GATE_FILE_MAX_BYTES" in big
    assert "MISSING_NAME" not in out and code == 0
    code, out, _ = gate(tmp_path, core, plugin)  # under the default cap it is gated
    assert "MISSING_NAME" in out and code == 1


def test_an_expression_too_deep_to_parse_is_skipped(tmp_path):
    core, plugin, _ = trees(tmp_path)
    (plugin / "vllm_ascend" / "deep.py").write_text("import vllm.a\nx = " + "+".join(["1"] * 100_000) + "\n")
    code, out, err = gate(tmp_path, core, plugin)
    (deep,) = [n for n in notes(out) if "vllm_ascend/deep.py" in n]
    assert "not gated" in deep and code == 0, out + err


NESTINGS = {  # each repeated `depth` times: shapes the parser accepts far deeper than Python recursion goes
    "elif": ("import vllm.a\nif vllm.a.f:\n    pass\n", "elif vllm.a.f:\n    pass\n", ""),
    "attribute": ("import vllm.a\nx = vllm", ".a", "\n"),
    "call": ("import vllm.a\nx = vllm.a.f", "(1)", "\n"),
    "subscript": ("import vllm.a\nx = vllm.a.f", "[0]", "\n"),
    "lambda": ("import vllm.a\nx = ", "lambda: ", "vllm.a.f(1)\n"),
    "conditional": ("import vllm.a\nx = ", "vllm.a.f(1) if vllm.a.f else ", "0\n"),
    "unary": ("import vllm.a\nx = ", "-", "vllm.a.f(1)\n"),
    "sum": ("import vllm.a\nx = vllm.a.f(1)", " + vllm.a.f(1)", "\n"),
    "decorator": ("import vllm.a\n", "@vllm.a.f\n", "def g():\n    pass\n"),
}


@given(shape=st.sampled_from(sorted(NESTINGS)), depth=st.one_of(st.integers(1, 40), st.integers(300, 4000)),
       where=st.sampled_from(["plugin module", "core module", "plugin setup.py"]))
def test_any_nesting_is_gated_or_noted_never_a_traceback(tmp_path_factory, shape, depth, where):
    """The class, generated: however deep a file nests, the run returns a report; a file
    it could not take in is named in a note."""
    tmp = tmp_path_factory.mktemp("nest")
    core, plugin, _ = trees(tmp)
    head, step, tail = NESTINGS[shape]
    text = head + step * depth + tail
    target = {"plugin module": plugin / "vllm_ascend" / "deep.py", "core module": core / "vllm" / "deep.py",
              "plugin setup.py": plugin / "setup.py"}[where]
    target.write_text(text)
    (plugin / "vllm_ascend" / "ok.py").write_text("from vllm.a import f\nimport vllm.deep\n")
    report = run_gate(core, plugin)
    assert all(isinstance(n, str) and "\n" not in n for n in report.notes)


def test_a_blob_over_the_cap_in_a_core_commit_is_not_read(tmp_path, monkeypatch):
    """The same cap on a core read from git objects (`drift --gate`, bisection)."""
    core, plugin, _ = trees(tmp_path)
    (core / "vllm" / "big.py").write_text("def f():\n    pass\n" + "x = 1\n" * 1000)
    (plugin / "vllm_ascend" / "ok.py").write_text("from vllm.a import f\nfrom vllm.big import MISSING_NAME\n")
    git = ["git", "-C", str(core), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "core"], check=True)
    monkeypatch.setenv("OVERLAY_GATE_FILE_MAX_BYTES", "2000")
    report = run_gate_on_commit(core / ".git", "HEAD", plugin)
    assert any("core file vllm/big.py is larger than 2000 bytes" in n for n in report.notes), report.notes
    assert not any("MISSING_NAME" in f.message and f.severity == "error" for f in report.findings)
    monkeypatch.delenv("OVERLAY_GATE_FILE_MAX_BYTES")
    report = run_gate_on_commit(core / ".git", "HEAD", plugin)
    assert any("MISSING_NAME" in f.summary for f in report.findings) and not report.notes
