"""One composed-test environment per torch family (issue 30 item 7): the core's own torch
pin picks the requirements file and the environment, reused by every pin set of that family."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.errors import OverlayError
from overlay.testing import testenv


def core(tmp_path: Path, torch_line: str | None) -> Path:
    tree = tmp_path / "core"
    (tree / "requirements").mkdir(parents=True)
    if torch_line is not None:
        (tree / "requirements" / "cpu.txt").write_text(f"numpy\n{torch_line}\n")
    return tree


def test_the_default_family_keeps_the_default_environment(tmp_path):
    family = testenv.torch_pin(testenv.REQUIREMENTS.read_text())
    venv = tmp_path / "venv"
    assert testenv.select_environment(venv, core(tmp_path, f"torch=={family}.0+cpu; x")) == \
        (venv, testenv.REQUIREMENTS)
    assert testenv.select_environment(venv, core(tmp_path / "b", None)) == (venv, testenv.REQUIREMENTS)


def test_another_family_gets_its_own_requirements_and_environment(tmp_path, monkeypatch):
    reqs = tmp_path / "requirements"
    reqs.mkdir()
    (reqs / "composed-test.txt").write_text("torch==2.13.0+cpu\n")
    (reqs / "composed-test-torch9.9.txt").write_text("torch==9.9.0+cpu\n")
    monkeypatch.setattr(testenv, "REQUIREMENTS", reqs / "composed-test.txt")
    venv, requirements = testenv.select_environment(tmp_path / "venv", core(tmp_path, "torch==9.9.0+cpu"))
    assert venv == tmp_path / "venv-torch9.9" and requirements == reqs / "composed-test-torch9.9.txt"


def test_a_family_without_requirements_is_one_clear_error(tmp_path, monkeypatch):
    reqs = tmp_path / "requirements"
    reqs.mkdir()
    (reqs / "composed-test.txt").write_text("torch==2.13.0+cpu\n")
    monkeypatch.setattr(testenv, "REQUIREMENTS", reqs / "composed-test.txt")
    with pytest.raises(OverlayError) as e:
        testenv.select_environment(tmp_path / "venv", core(tmp_path, "torch==9.9.0+cpu"))
    assert "pins torch 9.9" in str(e.value) and "composed-test-torch9.9.txt" in str(e.value)


def test_torch_pin_reads_only_an_exact_torch_pin():
    assert testenv.torch_pin("torchvision==0.28.0\ntorch==2.14.0+cpu; x\n") == "2.14"
    assert testenv.torch_pin("torchaudio==2.13.0\n") is None and testenv.torch_pin(None) is None
