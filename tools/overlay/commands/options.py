"""Options and argument parsing shared by the commands (apply, refresh, lock; the
environment options of composed-test and mutation-check; the review views status, show
and site)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from overlay.errors import OverlayError
from overlay.series.model import PinSet, Project, load_all_pins, load_pin
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


def add_view_options(p: argparse.ArgumentParser, *, pin_help: str | None = None,
                     reports: bool = False) -> None:
    """The review views' options: --pin (only where `pin_help` says what it limits), --into,
    --reports (for the views that read saved reports), --json."""
    if pin_help is not None:
        p.add_argument("--pin", default=None, metavar="NAME", help=pin_help)
    p.add_argument("--into", type=Path, default=None, metavar="DIR",
                   help="where composed trees live (default: <root>/build)")
    if reports:
        p.add_argument("--reports", type=Path, default=None, metavar="DIR",
                       help="where saved drift/mutation-check --json reports are (default: <root>/reports)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


@dataclass(frozen=True)
class ViewInputs:
    project: Project
    pins: list[PinSet]  # the pin set --pin names, else every pin set
    chosen: bool  # whether --pin chose one
    into: Path | None
    reports: Path | None


def view_inputs(args: argparse.Namespace) -> ViewInputs:
    """What a review view reads, from the options `add_view_options` added: the project, the
    pin sets (--pin: that one, by name or unambiguous prefix; else all), --into, --reports."""
    project = Project.load(args.root)
    name = getattr(args, "pin", None)
    pins = [load_pin(project.root, name)] if name is not None else load_all_pins(project.root)
    return ViewInputs(project, pins, name is not None, args.into, getattr(args, "reports", None))
