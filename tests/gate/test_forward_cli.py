"""`overlay gate --against` end to end on an empty cache (issues 27 item 5, 30 item 8).

A move once left the forward view calling a function that no longer existed
(`sources._extract`), and no test ran it: this one runs the CLI from an empty cache with
two synthetic core releases in `<mirror>/pypi/`, the second of which drops what the plugin
imports.
"""

from __future__ import annotations

import json
from pathlib import Path

from fixtures import CORE_FILES, PLUGIN_FILES, make_sdist


def _sdist(folder: Path, version: str, files: dict[str, str]) -> Path:
    return make_sdist(folder, f"core-{version}", files)


def _plugin(tmp: Path) -> Path:
    for name, text in PLUGIN_FILES.items():
        (tmp / "plugin" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "plugin" / name).write_text(text)
    return tmp / "plugin"


def test_forward_view_from_an_empty_cache(world, run, tmp_path):
    pypi = world.mirror / "pypi"
    pypi.mkdir(exist_ok=True)
    _sdist(pypi, "1.0", CORE_FILES)
    broken = {k: v for k, v in CORE_FILES.items() if k != "vllm/graph.py"}
    broken["vllm/graph.py"] = "class OtherManager:\n    pass\n"
    _sdist(pypi, "2.0", broken)
    cache = world.project / ".overlay" / "cache"
    assert not cache.exists()
    plugin = _plugin(tmp_path)
    code, out, err = run("gate", "--plugin", plugin, "--against", "core==1.0,core==2.0",
                         "--mirror", world.mirror, "--json", root=world.project)
    assert code == 0, err
    rows = {r["release"]: r for r in json.loads(out)["releases"]}
    assert set(rows) == {"1.0", "2.0"}
    assert rows["1.0"]["errors"] == 0
    assert rows["2.0"]["errors"] >= 1 and any("GraphManager" in t for t in rows["2.0"]["top"]), rows["2.0"]
    # Checked out from the vetted import, once: a second run reuses it.
    trees = sorted(p.name for p in (cache / "gate" / "cores").iterdir())
    assert trees == ["core-1.0", "core-2.0"]
    # what the releases hold unchanged was extracted once, by content, under the gate's marker
    blobs = cache / "gate" / "blobs"
    assert (blobs / ".overlay-gate-blobs").is_file()
    entries = list(blobs.glob("*/*.json"))
    files = [f.read_bytes() for t in (cache / "gate" / "cores").iterdir() for f in (t / "tree").rglob("*.py")]
    files += [f.read_bytes() for f in plugin.rglob("*.py")]
    assert 0 < len(entries) <= len(set(files)) < len(files), (len(entries), len(set(files)), len(files))
    code2, out2, _ = run("gate", "--plugin", plugin, "--against", "core==2.0", "--mirror", world.mirror,
                         "--json", root=world.project)
    assert code2 == 0 and json.loads(out2)["releases"][0]["errors"] == rows["2.0"]["errors"]


def test_the_forward_views_releases_share_one_pause_of_the_collector(world, run, tmp_path, monkeypatch):
    """The releases share one Cache of syntax trees (millions of objects on vLLM): the
    cyclic collector resumes once, after the last release, not after each (every resume
    collected over all the trees the cache holds)."""
    import gc

    pypi = world.mirror / "pypi"
    pypi.mkdir(exist_ok=True)
    for version in ("1.0", "2.0", "3.0"):
        _sdist(pypi, version, CORE_FILES)
    plugin = _plugin(tmp_path)
    resumed = []
    real = gc.enable

    def enable():
        resumed.append(1)
        real()

    monkeypatch.setattr(gc, "enable", enable)
    assert gc.isenabled()
    code, out, err = run("gate", "--plugin", plugin, "--against", "core==1.0,core==2.0,core==3.0",
                         "--mirror", world.mirror, "--json", root=world.project)
    assert code == 0, err
    assert len(json.loads(out)["releases"]) == 3
    assert len(resumed) == 1 and gc.isenabled()
