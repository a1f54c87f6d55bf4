"""Python 3.10 (issue 22): where the standard library has no tomllib, the gate reads a plugin's
pyproject entry points with tomli instead of skipping them."""

from __future__ import annotations

import importlib
import sys

try:
    import tomllib
except ModuleNotFoundError:  # on 3.10 itself: tomli, a dependency there
    import tomli as tomllib

PYPROJECT = b'[project.entry-points."vllm.platform_plugins"]\nascend = "vllm_ascend:register"\n'


def test_entry_points_are_read_without_tomllib(monkeypatch):
    import overlay.gate.startup as startup

    monkeypatch.setitem(sys.modules, "tomllib", None)  # as on 3.10: `import tomllib` fails
    monkeypatch.setitem(sys.modules, "tomli", tomllib)  # tomli is the same parser, installed there
    try:
        reloaded = importlib.reload(startup)
        assert reloaded.tomllib is tomllib
        assert reloaded._pyproject(PYPROJECT) == [("vllm.platform_plugins", "ascend = vllm_ascend:register")]
        assert reloaded._pyproject(b"[project\n") == []  # a broken file still yields nothing, no error
    finally:
        monkeypatch.undo()
        importlib.reload(startup)
