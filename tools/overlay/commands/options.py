"""Options and argument parsing shared by the commands (apply, refresh, lock; the
environment options of composed-test and mutation-check)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from overlay.errors import OverlayError
from overlay.testing import testenv


def target_names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not names:
        raise OverlayError("--targets needs at least one target name", hint="e.g. --targets plugin")
    return names


def add_common(p: argparse.ArgumentParser, targets: bool = True) -> None:
    p.add_argument("--pin", default=None, metavar="NAME",
                   help="pin set name or unambiguous prefix (default: the default pin set)")
    p.add_argument("--into", type=Path, default=None, metavar="DIR",
                   help="where composed trees live (default: <root>/build)")
    if targets:
        p.add_argument("--targets", default=None, metavar="T1,T2",
                       help="only these targets (default: every target of the pin set)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_composed_env(ap: argparse.ArgumentParser) -> None:
    """--mirror and --venv as composed-test and mutation-check take them (read at parse time)."""
    ap.add_argument("--mirror", default=os.environ.get("OVERLAY_MIRROR"),
                    help="mirror directory (default: $OVERLAY_MIRROR)")
    ap.add_argument("--venv", type=Path, default=testenv.default_venv(),
                    help="the composed-test environment, outside the repository (default: "
                         "$OVERLAY_COMPOSED_VENV or ~/.cache/overlay/composed-test-venv)")
