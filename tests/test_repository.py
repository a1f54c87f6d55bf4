"""The repository's own series and pins are consistent (what `make check` enforces)."""

from __future__ import annotations

from pathlib import Path

from overlay.model import GitSource, load_all_pins, load_series

ROOT = Path(__file__).resolve().parents[1]


def test_make_check_passes_on_this_repository(run):
    code, out, _ = run("check", root=ROOT)
    assert code == 0, out


def test_reference_pins():
    pins = {p.name: p for p in load_all_pins(ROOT)}
    assert {"1f486d96", "a30addc7", "v0.23.0"} <= set(pins)
    assert [n for n, p in pins.items() if p.default] == ["1f486d96"]
    plugin_commits = {p.target("plugin").source.commit for p in pins.values()}
    assert plugin_commits == {"801a6b41d29d23399bd8c9ebc2ea8883e2beefae"}
    core = pins["1f486d96"].target("core").source
    assert isinstance(core, GitSource) and core.commit.startswith("1f486d96")
    assert pins["v0.23.0"].target("core").source.requirement == "vllm==0.23.0"


def test_every_series_target_is_pinned():
    series = load_series(ROOT)
    for pin in load_all_pins(ROOT):
        assert set(series.targets) <= set(pin.target_names)
