"""yamldoc: every YAML the tool reads has bounded cost (issue 13 item 5).

Each reader is called on an alias bomb and on an oversized file; each must refuse
with one OverlayError naming the file, quickly and without expanding anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.series import yamldoc
from overlay.errors import OverlayError
from overlay.evidence.ledger import load_ledger
from overlay.evidence.protocol import load_deviations, load_protocol
from overlay.evidence.reported import load_reported
from overlay.gate.allowlist import load as load_allowlist
from overlay.series.model import load_pinset, load_series

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefghijkl", "bcdefghijklm"))  # 9**13 leaves if expanded

# reader, the file name it reads inside its folder, and how to call it
READERS = {
    "series": ("series.yaml", lambda d: load_series(d)),
    "pins": ("pins/p.yaml", lambda d: load_pinset(d / "pins" / "p.yaml", d)),
    "protocol": ("protocol.yaml", lambda d: load_protocol(d / "protocol.yaml", d)),
    "deviations": ("deviations.yaml", lambda d: load_deviations(d, d)),
    "allowlist": ("gate-allowlist.yaml", lambda d: load_allowlist(d / "gate-allowlist.yaml")),
    "ledger": ("ledger.yaml", lambda d: load_ledger(d, d)),
    "reported": ("reported.yaml", lambda d: load_reported(d, d)),
}


def _write(tmp_path: Path, name: str, text: str) -> None:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_an_alias_bomb(tmp_path, reader):
    name, call = READERS[reader]
    _write(tmp_path, name, BOMB)
    with pytest.raises(OverlayError) as info:
        call(tmp_path)
    assert info.value.message == "YAML alias '*a' is not allowed"
    assert info.value.line == 2 and info.value.path.endswith(Path(name).name)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_an_oversized_file(tmp_path, reader):
    name, call = READERS[reader]
    _write(tmp_path, name, "# padding\n" * (yamldoc.MAX_BYTES // 10 + 1))
    with pytest.raises(OverlayError) as info:
        call(tmp_path)
    assert info.value.message == f"file is larger than {yamldoc.MAX_BYTES} bytes, the cap for YAML inputs"


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_a_fifo_without_waiting_for_a_writer(tmp_path, reader):
    import os
    import subprocess
    import sys

    name, _ = READERS[reader]
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(tmp_path / name)
    # In a child with a deadline: opening a FIFO for reading blocks until a writer comes.
    code = (f"import sys; from pathlib import Path; sys.path[:0] = {sys.path!r}\n"
            f"from test_yamldoc import READERS\nfrom overlay.errors import OverlayError\n"
            f"try:\n    READERS[{reader!r}][1](Path({str(tmp_path)!r}))\n"
            f"except OverlayError as e:\n    print(e.message)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                         cwd=str(Path(__file__).parent))
    assert out.stdout.strip() == "not a regular file (a FIFO): expected a YAML file", out.stderr


def test_anchors_without_aliases_and_files_at_the_cap_load(tmp_path):
    p = tmp_path / "x.yaml"
    body = "a: &anchor 1\nb: 2\n"
    p.write_text(body + "#" * (yamldoc.MAX_BYTES - len(body) - 1) + "\n")
    assert p.stat().st_size == yamldoc.MAX_BYTES
    node = yamldoc.load(p)
    assert node.value["a"].value == 1 and node.value["b"].line == 2


def test_the_cap_can_be_raised(tmp_path, monkeypatch):
    p = tmp_path / "x.yaml"
    p.write_text("a: 1\n" + "# pad\n" * 300_000)
    with pytest.raises(OverlayError):
        yamldoc.load(p)
    monkeypatch.setenv("OVERLAY_YAML_MAX_BYTES", str(4 << 20))
    assert yamldoc.load(p).value["a"].value == 1


def test_no_yaml_parsing_outside_yamldoc():
    """One capped loader: nothing else in the tool parses YAML."""
    tool = Path(__file__).resolve().parents[2] / "tools" / "overlay"
    offenders = []
    for path in tool.rglob("*.py"):
        if path.name == "yamldoc.py":
            continue
        text = path.read_text()
        for call in ("yaml.safe_load", "yaml.load", "yaml.compose", "yaml.full_load",
                     "yaml.unsafe_load", "yaml.parse(", "yaml.SafeLoader", "yaml.Loader"):
            if call in text:
                offenders.append(f"{path.relative_to(tool)}: {call}")
    assert offenders == []


def test_the_same_text_is_parsed_once_and_a_changed_file_again(tmp_path, monkeypatch):
    """A rebase reads series.yaml and the pins about a hundred times (issue 30 item 9)."""
    from overlay.series import yamldoc as yd

    calls = []
    real = yd._NoAliasLoader.get_single_node
    monkeypatch.setattr(yd._NoAliasLoader, "get_single_node", lambda self: calls.append(1) or real(self))
    f = tmp_path / "series.yaml"
    f.write_text("series:\n  - patch: a.patch\n")
    first, second = yd.load(f), yd.load(f)
    assert first == second and len(calls) == 1
    f.write_text("series:\n  - patch: b.patch\n")
    third = yd.load(f)
    assert len(calls) == 2 and third.value["series"].value[0].value["patch"].value == "b.patch"
    with pytest.raises(OverlayError):  # a file that breaks is never answered from the memo
        f.write_text("series: [\n")
        yd.load(f)
