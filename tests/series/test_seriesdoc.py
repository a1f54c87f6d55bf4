"""docs/series.md's numbers come from the repository (issue 28): `make docs` writes them,
and `overlay check` fails while the committed text says something else."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from overlay.series import seriesdoc
from overlay.series.model import load_all_pins, load_series

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_docs_series_md_is_what_the_repository_gives_now():
    """Fails when series.yaml or a lock changed and `make docs` was not run."""
    text = (REPO / seriesdoc.DOC).read_text()
    block = seriesdoc.block_of(text)
    assert block is not None, "docs/series.md has no generated part: run `make docs`"
    assert block == seriesdoc.render(load_series(REPO), load_all_pins(REPO)), \
        "docs/series.md is stale: run `make docs`"


def test_the_block_names_every_pin_set_and_its_locked_trees():
    pins = load_all_pins(REPO)
    block = seriesdoc.render(load_series(REPO), pins)
    assert f"{len(load_series(REPO).entries)} patches in `series.yaml`" in block
    for pin in pins:
        for target in pin.targets:
            if target.tree:
                assert f"`{target.tree[:12]}`" in block


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("series.yaml", "patches", "pins", "evidence", "gate-allowlist.yaml"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / name)
    (root / "docs").mkdir()
    shutil.copy(REPO / seriesdoc.DOC, root / seriesdoc.DOC)
    return root


def test_check_reports_a_stale_doc_and_write_docs_fixes_it(tmp_path, run):
    root = _project(tmp_path)
    doc = root / seriesdoc.DOC
    assert run("check", "--write-docs", root=root)[0] == 0
    doc.write_text(doc.read_text().replace(" patches in `series.yaml`", "0 patches in `series.yaml`", 1))
    code, out, _ = run("check", root=root)
    assert code == 1 and "docs/series.md: the generated part is stale" in out
    code, out, _ = run("check", "--write-docs", root=root)
    assert code == 0 and "wrote the generated part of docs/series.md" in out
    assert seriesdoc.block_of(doc.read_text()) == seriesdoc.render(load_series(root), load_all_pins(root))
    before = doc.read_text()
    assert run("check", "--write-docs", root=root)[0] == 0 and doc.read_text() == before  # idempotent


@given(st.lists(st.integers(1, 40), unique=True).map(sorted))
def test_ranges_cover_exactly_the_numbers(numbers):
    names = [f"{n:04d}" for n in numbers]
    shown = seriesdoc._ranges(names)
    back = []
    for part in shown.split(", ") if names else []:
        lo, _, hi = part.partition("-")
        back += range(int(lo), int(hi or lo) + 1)
    assert back == numbers
