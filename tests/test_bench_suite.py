"""`overlay bench suite` (issue 22 item 2): `make bench` is an alias of it. It runs the
repository's benchmarks/bench_<NAME>.py, in order, each in a fresh process, and stops at the
first failure."""

from __future__ import annotations

import json
from pathlib import Path

SCRIPT = """\
import json, os, sys
with open(os.environ["BENCH_LOG"], "a") as f:
    f.write(json.dumps([{name!r}, sys.argv[1:], os.getcwd()]) + "\\n")
sys.exit({code})
"""


def _project(tmp_path: Path, scripts: dict[str, int]) -> Path:
    root = tmp_path / "project"
    (root / "benchmarks").mkdir(parents=True)
    (root / "series.yaml").write_text("series: []\n")
    for name, code in scripts.items():
        (root / "benchmarks" / f"bench_{name}.py").write_text(SCRIPT.format(name=name, code=code))
    return root


def _log(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_runs_the_named_benchmarks_in_order_with_their_arguments(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"gate": 0, "compose": 0, "drift": 0})
    log = tmp_path / "log"
    monkeypatch.setenv("BENCH_LOG", str(log))
    code, _, err = run("bench", "suite", "gate", "compose", "--arg=--rounds", "--arg=2", root=root)
    assert code == 0, err
    assert _log(log) == [["gate", ["--rounds", "2"], str(root)], ["compose", ["--rounds", "2"], str(root)]]
    log.unlink()
    assert run("bench", "suite", root=root)[0] == 0  # all of them, in name order
    assert [entry[0] for entry in _log(log)] == ["compose", "drift", "gate"]


def test_stops_at_the_first_failure_with_its_status(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"a": 0, "b": 3, "c": 0})
    log = tmp_path / "log"
    monkeypatch.setenv("BENCH_LOG", str(log))
    code, _, err = run("bench", "suite", root=root)
    assert code == 3 and [entry[0] for entry in _log(log)] == ["a", "b"]
    assert err.strip() == "overlay: error: benchmarks/bench_b.py exited with 3"


def test_an_unknown_name_or_no_benchmarks_folder_is_one_line(run, tmp_path, monkeypatch):
    root = _project(tmp_path, {"gate": 0})
    monkeypatch.setenv("BENCH_LOG", str(tmp_path / "log"))
    code, _, err = run("bench", "suite", "gates", root=root)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no benchmark named gates" in err and "gate" in err and not (tmp_path / "log").exists()
    (root / "benchmarks" / "bench_gate.py").unlink()
    (root / "benchmarks").rmdir()
    code, _, err = run("bench", "suite", root=root)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no benchmarks/ folder" in err
