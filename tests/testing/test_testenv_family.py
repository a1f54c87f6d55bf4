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
        (venv, testenv.REQUIREMENTS, None)
    assert testenv.select_environment(venv, core(tmp_path / "b", None)) == (venv, testenv.REQUIREMENTS, None)


def test_another_family_gets_its_own_requirements_and_environment(tmp_path, monkeypatch):
    reqs = tmp_path / "requirements"
    reqs.mkdir()
    (reqs / "composed-test.txt").write_text("torch==2.13.0+cpu\n")
    (reqs / "composed-test-torch9.9.txt").write_text("torch==9.9.0+cpu\n")
    monkeypatch.setattr(testenv, "REQUIREMENTS", reqs / "composed-test.txt")
    venv, requirements, deviation = testenv.select_environment(tmp_path / "venv", core(tmp_path, "torch==9.9.0+cpu"))
    assert venv == tmp_path / "venv-torch9.9" and requirements == reqs / "composed-test-torch9.9.txt"
    assert deviation is None


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


def _requirements(tmp_path: Path, substitutes: str | None) -> Path:
    reqs = tmp_path / "requirements"
    reqs.mkdir()
    (reqs / "composed-test.txt").write_text("torch==2.13.0+cpu\n")
    if substitutes is not None:
        (reqs / "composed-test-substitutes.yaml").write_text(substitutes)
    return reqs / "composed-test.txt"


def test_a_listed_substitute_runs_in_the_other_family_and_says_so(tmp_path, monkeypatch):
    """A family with no CPU wheel on the index (torch 2.11 for cores 0.23.0-0.26.0) runs in
    another family's environment only where composed-test-substitutes.yaml lists it, and
    the environment carries the deviation, so every run can report it."""
    monkeypatch.setattr(testenv, "REQUIREMENTS", _requirements(
        tmp_path, '"2.11":\n  use: "2.13"\n  why: no CPU wheel of torch 2.11 on the index\n'))
    env = testenv.select_environment(tmp_path / "venv", core(tmp_path, "torch==2.11.0+cpu; x"))
    assert (env.venv, env.requirements) == (tmp_path / "venv", testenv.REQUIREMENTS)
    assert "2.11" in env.deviation and "2.13" in env.deviation and "no CPU wheel" in env.deviation
    plain = testenv.select_environment(tmp_path / "venv", core(tmp_path / "b", "torch==2.13.0+cpu"))
    assert plain.deviation is None


def test_an_unlisted_family_is_still_refused_and_a_substitute_must_name_an_existing_family(tmp_path, monkeypatch):
    monkeypatch.setattr(testenv, "REQUIREMENTS", _requirements(
        tmp_path, '"2.11":\n  use: "2.12"\n  why: x\n'))
    with pytest.raises(OverlayError) as e:
        testenv.select_environment(tmp_path / "venv", core(tmp_path, "torch==2.10.0+cpu"))
    assert "pins torch 2.10" in str(e.value)
    with pytest.raises(OverlayError) as e:
        testenv.select_environment(tmp_path / "venv", core(tmp_path / "b", "torch==2.11.0+cpu"))
    assert "composed-test-substitutes.yaml" in e.value.path and "2.12" in str(e.value)


@pytest.mark.parametrize("text", ["[1, 2", "- a\n", '"2.11": 3\n', '"2.11":\n  use: "2.13"\n', "\x00"])
def test_a_malformed_substitutes_file_is_one_clear_error(tmp_path, monkeypatch, text):
    monkeypatch.setattr(testenv, "REQUIREMENTS", _requirements(tmp_path, text))
    with pytest.raises(OverlayError) as e:
        testenv.select_environment(tmp_path / "venv", core(tmp_path, "torch==2.11.0+cpu"))
    assert e.value.path.endswith("composed-test-substitutes.yaml")
