from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def evroot(tmp_path: Path) -> Path:
    """A project root (series.yaml) for CLI runs."""
    (tmp_path / "series.yaml").write_text("series: []\n")
    return tmp_path
