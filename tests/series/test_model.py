"""The data model: loading, validation and pin-name resolution (pure, no git)."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.errors import OverlayError
from overlay.series.model import ArchiveSource, GitSource, load_pinset, load_series, resolve_pin_name
from overlay.paths import find_mirror_repo
from overlay.trees.refresh import _reorder, renumber, slug
from overlay.trees.lockfile import set_tree_ids
from overlay.series import yamldoc


def write_pin(root: Path, name: str, body: str) -> Path:
    (root / "pins").mkdir(exist_ok=True)
    p = root / "pins" / f"{name}.yaml"
    p.write_text(body)
    return p


GIT_PIN = """\
default: true
targets:
  core:
    repo: https://github.com/vllm-project/vllm.git
    commit: 1F486D96A17303CE8DB8E02BE39545B2BE338446
  plugin:
    pypi: vllm_ascend==0.23.0rc1
    sha256: %s
toolchain:
  torch: 2.13.0
  cann: 8.5
""" % ("A" * 64)


def test_pin_loads_typed_sources(tmp_path):
    pin = load_pinset(write_pin(tmp_path, "x", GIT_PIN), tmp_path)
    core, plugin = pin.targets
    assert core.source == GitSource("https://github.com/vllm-project/vllm.git",
                                    "1f486d96a17303ce8db8e02be39545b2be338446")
    assert core.source.mirror_name == "vllm-project+vllm"
    assert plugin.source == ArchiveSource("vllm_ascend", "0.23.0rc1", "a" * 64)
    assert plugin.source.requirement == "vllm_ascend==0.23.0rc1"
    assert pin.toolchain == {"torch": "2.13.0", "cann": "8.5"}
    assert pin.default and pin.name == "x"
    assert (core.line, plugin.line) == (4, 7)


@pytest.mark.parametrize("url, name", [
    ("https://github.com/vllm-project/vllm-ascend", "vllm-project+vllm-ascend"),
    ("git@github.com:CubeLander/vllm-ascend-hust.git", "CubeLander+vllm-ascend-hust"),
    ("file:///tmp/remote/example/core/", "example+core"),
])
def test_mirror_names(url, name):
    assert GitSource(url, "0" * 40).mirror_name == name


def test_pin_prefix_resolution(tmp_path):
    for n in ("1f486d96", "a30addc7", "v0.23.0"):
        write_pin(tmp_path, n, GIT_PIN.replace("default: true", f"default: {str(n == 'a30addc7').lower()}"))
    assert resolve_pin_name(tmp_path, "1f48") == "1f486d96"
    assert resolve_pin_name(tmp_path, "v0.23.0") == "v0.23.0"
    assert resolve_pin_name(tmp_path, None) == "a30addc7"
    write_pin(tmp_path, "a30addc8", GIT_PIN.replace("default: true", "default: false"))
    with pytest.raises(OverlayError, match="ambiguous: it matches a30addc7, a30addc8"):
        resolve_pin_name(tmp_path, "a30")


def test_series_entries(tmp_path):
    (tmp_path / "series.yaml").write_text(
        "series:\n  - patch: 0001-a.patch\n    target: plugin\n    origin: backport\n"
        "    upstream: [o/r#1, o/r#2]\n    original-author: A <a@x>\n    tests: t::x\n")
    s = load_series(tmp_path)
    (e,) = s.entries
    assert e.provenance.upstream == ("o/r#1", "o/r#2")
    assert e.tests == ("t::x",)
    assert s.for_target("plugin") == (e,) and s.for_target("core") == ()


def test_empty_series(tmp_path):
    (tmp_path / "series.yaml").write_text("series:\n")
    assert load_series(tmp_path).entries == ()


def test_yaml_lines_and_duplicate_keys(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text("a: 1\nb:\n  c: x\n")
    node = yamldoc.load(p)
    assert node.value["b"].value["c"].line == 3
    p.write_text("a: 1\na: 2\n")
    with pytest.raises(OverlayError, match="duplicate key 'a'"):
        yamldoc.load(p)


def test_mirror_layouts(tmp_path):
    for layout in ("normal/.git", "bare", "nested/repo"):
        d = tmp_path / layout
        (d / "objects").mkdir(parents=True)
        (d / "HEAD").write_text("ref: refs/heads/main\n")
    assert find_mirror_repo(tmp_path, "normal") == tmp_path / "normal" / ".git"
    assert find_mirror_repo(tmp_path, "bare") == tmp_path / "bare"
    assert find_mirror_repo(tmp_path, "nested") == tmp_path / "nested" / "repo"
    assert find_mirror_repo(tmp_path, "absent") is None


def test_reorder_keeps_other_targets_in_place():
    order = ["p1", "c1", "p2", "c2", "p3"]
    target_of = {"p1": "plugin", "p2": "plugin", "p3": "plugin", "c1": "core", "c2": "core"}
    assert _reorder(order, target_of, "plugin", ["p3", "p1", "p2"]) == ["p3", "c1", "p1", "c2", "p2"]
    assert _reorder(order, target_of, "plugin", ["p1", "p3"]) == ["p1", "c1", "c2", "p3"]
    assert _reorder(order, target_of, "plugin", ["p1", "p2", "p3", "p4"]) == ["p1", "c1", "p2", "c2", "p3", "p4"]
    assert _reorder(order, target_of, "core", ["c2", "c1"]) == ["p1", "c2", "p2", "c1", "p3"]


def test_slug():
    assert slug("[BugFix][MRV2] Accept lora_capture_cases in factory") == "accept-lora-capture-cases-in-factory"
    assert slug("[x]") == "patch"


def test_slug_is_cut_between_words_and_folds_accents():
    """Issue 13 item 13: no word cut in half, no letter dropped for its accent."""
    long = "[Perf] Fuse the mHC pre and post stages into one kernel for the hc post tiling path"
    assert slug(long) == "fuse-the-mhc-pre-and-post-stages-into-one-kernel"
    assert len(slug(long)) <= 50 and long.lower().split("] ")[1].replace(" ", "-").startswith(slug(long))
    assert slug("Añadir módulo test") == "anadir-modulo-test"
    assert slug("Straße für Œuvre, Łódź") == "strasse-fur-oeuvre-lodz"
    assert slug("x" * 80) == "x" * 50  # one word longer than the limit is cut, nothing else is
    assert slug("修复 bug") == "bug"


def test_renumber_makes_numbers_follow_the_order():
    assert renumber(["0001-a.patch", "0002-b.patch", "0004-d.patch"]) == {}  # gaps are fine
    assert renumber(["0001-a.patch", "0003-c.patch", "0002-b.patch"]) == {"0002-b.patch": "0004-b.patch"}
    assert renumber(["0001-a.patch", "0000-new.patch", "0002-b.patch"]) == {
        "0000-new.patch": "0002-new.patch", "0002-b.patch": "0003-b.patch"}
    assert renumber(["fix.patch", "0002-b.patch", "0001-a.patch"]) == {"0001-a.patch": "0003-a.patch"}


def test_set_tree_ids_inserts_and_replaces(tmp_path):
    p = write_pin(tmp_path, "x", GIT_PIN)
    text = p.read_text()
    t1, t2 = "1" * 40, "2" * 40
    out = set_tree_ids(text, yamldoc.load(p), {"core": t1})
    assert f"    commit: 1F486D96A17303CE8DB8E02BE39545B2BE338446\n    tree: {t1}\n" in out
    p.write_text(out)
    out2 = set_tree_ids(out, yamldoc.load(p), {"core": t2, "plugin": t1})
    assert out2.count("tree:") == 2 and t2 in out2 and t1 in out2.split("plugin:")[1]
