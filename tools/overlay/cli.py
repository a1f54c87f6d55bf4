"""Thin command-line front: parse arguments, dispatch, turn OverlayError into one line."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
from pathlib import Path

from overlay import __version__
from overlay.errors import OverlayError
from overlay.gitcmd import GitFailed

# Each subsystem module exposes `register(subparsers)`; its parsers set `func`,
# a callable taking the parsed arguments and returning the exit code.
SUBSYSTEMS = (
    "overlay.commands",
    "overlay.gate.cli",
    "overlay.drift.cli",
    "overlay.rebase.cli",
    "overlay.evidence.cli",
)


def _terminate(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def find_root(start: Path) -> Path:
    """The project root: the nearest directory above `start` holding series.yaml."""
    for d in (start, *start.parents):
        if (d / "series.yaml").is_file():
            return d
    return start


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="overlay",
        description="Compose pinned upstream trees from an attributed patch series.",
    )
    parser.add_argument("--version", action="version", version=f"overlay {__version__}")
    parser.add_argument("--root", type=Path, default=None,
                        help="project root holding series.yaml and pins/ (default: found upward from cwd)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBSYSTEMS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if args.root is None:
        env_root = os.environ.get("OVERLAY_ROOT")
        args.root = Path(env_root) if env_root else find_root(Path.cwd())
    args.root = args.root.resolve()
    # SIGTERM unwinds like Ctrl-C, so staging folders and child servers are cleaned up.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        if not args.root.is_dir():
            raise OverlayError("the project root is not a directory", path=str(args.root),
                               hint="pass --root DIR holding series.yaml, or run inside the project")
        return int(args.func(args) or 0)
    except OverlayError as exc:
        print(f"overlay: error: {exc.one_line()}", file=sys.stderr)
        if getattr(args, "json", False):  # machines get the error on stdout too
            print(json.dumps({"ok": False, "error": exc.message, "path": exc.path,
                              "line": exc.line, "hint": exc.hint}))
        return exc.exit_code
    except GitFailed as exc:
        last = (exc.stderr.strip().splitlines() or ["(no message)"])[-1]
        print(f"overlay: error: git {exc.args_[0]} failed: {last} (run again; if it persists, "
              f"report it with the command you ran)", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `overlay ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # anything the filesystem refused that no module anticipated: still one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"overlay: error: {where}{exc.strerror or exc} (check the path and its permissions)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("overlay: error: interrupted; partial work was discarded (run the command again)",
              file=sys.stderr)
        return 130
