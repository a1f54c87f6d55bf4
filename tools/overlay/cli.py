"""Thin command-line front: parse arguments, dispatch, turn OverlayError into one line."""

from __future__ import annotations

import signal
import sys


def _interrupted_at_start_up(signum, frame):  # noqa: ARG001 - signal handler signature
    sys.stderr.write("overlay: error: interrupted (run the command again)\n")
    raise SystemExit(130)


# Installed before the imports below (about 50 ms): a Ctrl-C while they run ends with one
# line instead of a traceback. main() puts the normal handler back.
try:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_at_start_up)
except ValueError:  # imported outside the main thread: leave signals alone
    pass

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

from overlay import __version__  # noqa: E402
from overlay.errors import Interrupted, OverlayError, inject_fault, redact  # noqa: E402
from overlay.gitcmd import GitFailed  # noqa: E402

inject_fault("import")

# Each subsystem module exposes `register(subparsers)`; its parsers set `func`,
# a callable taking the parsed arguments and returning the exit code.
SUBSYSTEMS = (
    "overlay.commands",
    "overlay.gate.cli",
    "overlay.drift.cli",
    "overlay.rebase.cli",
    "overlay.evidence.cli",
    "overlay.smoke.cli",
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
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted_at_start_up:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return _main(argv)
    except Interrupted as exc:  # it knows what state it left things in
        print(f"overlay: error: {exc.message}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # also during start-up, while the subsystems import
        print("overlay: error: interrupted (run the command again)", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    inject_fault("startup")
    for stream in (sys.stdout, sys.stderr):  # an ASCII locale prints escapes, not a traceback
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", None) == "strict":
            stream.reconfigure(errors="backslashreplace")
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
            print(json.dumps({"ok": False, "error": redact(exc.message), "path": exc.path,
                              "line": exc.line, "hint": exc.hint}))
        return exc.exit_code
    except GitFailed as exc:
        last = redact((exc.stderr.strip().splitlines() or ["(no message)"])[-1])
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
