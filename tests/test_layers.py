"""The layers (docs/architecture.md) hold: import-linter's contracts in pyproject.toml, and no
module imports one that imports it back (issue 22). Each rule is also shown failing on an
import planted in a temporary copy of the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("importlinter", reason="import-linter is in the test extra")
grimp = pytest.importorskip("grimp")


def lint_imports(tools: Path, cwd: Path) -> subprocess.CompletedProcess:
    """import-linter on the `overlay` package found under `tools`, with the project's contracts."""
    shutil.copy(ROOT / "pyproject.toml", cwd / "pyproject.toml")
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    env = {**os.environ, "PYTHONPATH": str(tools), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def mutual_imports(package_dir: Path) -> list[tuple[str, str]]:
    """(a, b) where module a imports b and b imports a, at any level of either (function
    bodies and TYPE_CHECKING blocks included)."""
    code = ("import grimp, json; g = grimp.build_graph('overlay', exclude_type_checking_imports=False); "
            "print(json.dumps(sorted({tuple(sorted((a, b))) for a in g.modules "
            "for b in g.find_modules_directly_imported_by(a) "
            "if a != b and a in g.find_modules_directly_imported_by(b)})))")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(package_dir)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json
    return [tuple(p) for p in json.loads(proc.stdout)]


def test_the_import_contracts_are_kept(tmp_path):
    proc = lint_imports(ROOT / "tools", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 kept, 0 broken" in proc.stdout


def test_no_module_imports_one_that_imports_it_back():
    assert mutual_imports(ROOT / "tools") == []


def _copy(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    shutil.copytree(ROOT / "tools" / "overlay", tools / "overlay",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tools


def _plant(tools: Path, module: str, line: str) -> None:
    path = tools / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\n\ndef _planted():\n    {line}\n")


@pytest.mark.parametrize("module, line, broken", [
    ("overlay.series.model", "from overlay.trees import compose", "Layers"),  # upward, one layer
    ("overlay.errors", "from overlay.commands import apply", "Layers"),  # upward, many layers
    ("overlay.trees.sources", "from overlay import cli", "Layers"),
    ("overlay.gate.engine", "from overlay.drift import scan", "Subsystems are independent"),
    ("overlay.evidence.trees", "from overlay.smoke import run", "Subsystems are independent"),
    ("overlay.drift.scan", "from overlay.rebase import plan", "Subsystems are independent"),
    ("overlay.gate.checks", "from overlay.gate import engine", "No cycles"),  # the tie that was cut
])
def test_a_planted_import_breaks_its_contract(tmp_path, module, line, broken):
    tools = _copy(tmp_path)
    _plant(tools, module, line)
    proc = lint_imports(tools, tmp_path)
    assert proc.returncode == 1, proc.stdout
    broken_lines = [ln for ln in proc.stdout.splitlines() if " BROKEN" in ln]
    assert any(ln.startswith(broken) for ln in broken_lines), proc.stdout


def test_a_planted_type_checking_import_back_is_found(tmp_path):
    tools = _copy(tmp_path)
    path = tools / "overlay" / "drift" / "lines.py"
    path.write_text(path.read_text().replace(
        "from overlay.drift.patch import DriftPatch\n",
        "from overlay.drift.patch import DriftPatch\n\nif TYPE_CHECKING:\n"
        "    from overlay.drift.classify import Verdict  # noqa: F401\n", 1)
        .replace("from typing import Sequence\n", "from typing import TYPE_CHECKING, Sequence\n", 1))
    assert mutual_imports(tools) == [("overlay.drift.classify", "overlay.drift.lines")]
