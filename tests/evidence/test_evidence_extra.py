"""numpy and matplotlib are the `evidence` extra (issue 22): without them an evidence command
says in one line how to install it, and exits 2 (no traceback)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from overlay import cli

ROOT = Path(__file__).resolve().parents[2]


def _without(monkeypatch, module: str) -> None:
    """As if `module` were not installed: importing it raises ModuleNotFoundError, and the
    evidence modules are imported afresh."""
    for name in [n for n in sys.modules if n.startswith(("overlay.evidence", module))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


def test_analyze_without_numpy_says_how_to_get_it(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "numpy")
    code = cli.main(["--root", str(ROOT), "evidence", "analyze", "evidence/cpu-engine-smoke-pilot",
                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == ("overlay: error: overlay evidence analyze needs numpy, which is not installed "
                   "(pip install -e '.[evidence]' in the overlay checkout)\n")
    assert not (tmp_path / "out").exists()


def test_plots_without_matplotlib_say_how_to_get_it(monkeypatch):
    """matplotlib is imported only when the plots are drawn, after the analysis."""
    from overlay.commands.evidence import needs_evidence_extra
    from overlay.errors import OverlayError
    from overlay.evidence import plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(OverlayError) as raised:
        needs_evidence_extra("evidence analyze")(lambda args: plots._plt())(None)
    assert raised.value.exit_code == 2
    assert raised.value.one_line() == ("overlay evidence analyze needs matplotlib, which is not installed "
                                       "(pip install -e '.[evidence]' in the overlay checkout)")


def test_bench_ab_without_numpy_says_how_to_get_it(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "numpy")
    code = cli.main(["--root", str(ROOT), "bench", "ab", "--protocol",
                     "evidence/cpu-engine-smoke/protocol.yaml", "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1
    assert f"overlay bench ab needs numpy, which is not installed (pip install -e '.[evidence]' in the overlay checkout)" in err


def test_another_missing_module_is_not_blamed_on_the_extra(monkeypatch, capsys):
    from overlay.commands.evidence import needs_evidence_extra

    def handler(args):
        import overlay_no_such_module  # noqa: F401

    with pytest.raises(ModuleNotFoundError):
        needs_evidence_extra("evidence plan")(handler)(None)
