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
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

from overlay import __version__  # noqa: E402
from overlay.errors import Interrupted, OverlayError, clean_line, inject_fault  # noqa: E402
from overlay.gitcmd import GitFailed  # noqa: E402
from overlay.reporting.colour import coloured  # noqa: E402
from overlay.reporting.progress import COLOUR_MODES, set_colour_mode  # noqa: E402

inject_fault("import")

# One module per subcommand (overlay.commands); each exposes `register(subparsers)`; its
# parsers set `func`, a callable taking the parsed arguments and returning the exit code.
COMMANDS = tuple(f"overlay.commands.{name}" for name in (
    "apply", "check", "refresh", "lock", "gate", "drift", "rebase", "evidence", "smoke",
    "composed_test", "mutation_check", "gate_eval", "mirror", "evidence_e2e", "forward", "completion",
    "status", "show", "range_diff", "site",
))


# Exit statuses, one line per command (shown in its --help). Every command also exits 130
# when interrupted; usage errors (argparse) exit 2.
EXIT_STATUS = {
    "overlay": "0 the command succeeded; otherwise the command's own status (see COMMAND --help); "
               "2 usage error",
    "apply": "0 composed (with --gate: and the gate passed); 1 a patch does not apply (with --gate: "
             "or the gate found errors); 2 bad input or an unreachable target; 3 composed, but a "
             "tree differs from its lock",
    "check": "0 consistent; 1 problems found (each listed); 2 bad input (also: not a project, "
             "no series.yaml here or above)",
    "refresh": "0 patches regenerated; 2 bad input (nothing composed, a branch rebased onto upstream)",
    "lock": "0 trees recorded; 2 bad input (nothing composed, a tree older than the series)",
    "gate": "0 no errors; 1 errors (see --fail-on); 2 bad input",
    "forward": "0 the matrix was written (a forecast, whatever it finds); 2 bad input or setup",
    "drift": "0 no patch in a --fail-on class; 1 a patch's class is in --fail-on; 2 bad input",
    "rebase": "0 moved, and the new pin set checks and gates clean; 1 a patch conflicts (resolve, "
              "then --continue) or the new pin set's check or gate fails; 2 bad input",
    "evidence": "2 usage error; otherwise the subcommand's (see evidence SUBCOMMAND --help)",
    "evidence plan": "0 plan printed; 2 bad input",
    "evidence analyze": "0 analysed (whatever the decisions say); 2 bad input",
    "evidence counters": "0 counted; 2 bad input",
    "evidence tails": "0 tails reported; 2 bad input",
    "evidence ledger": "0 ledger printed; 2 bad input",
    "bench": "2 usage error; otherwise the subcommand's (see bench SUBCOMMAND --help)",
    "bench ab": "0 every run complete; 1 a run failed (kept under excluded/); 2 bad input; 3 a "
                "variant's composed tree differs from its lock",
    "bench suite": "0 every benchmark ran; otherwise the status of the first that failed; 2 bad input "
                   "(no benchmarks/ folder, an unknown name)",
    "smoke": "0 every step passed; 1 a step failed or nothing ran; 2 bad input or setup",
    "composed-test": "0 passed; 1 the run failed (a collection error, a test below the floor, a "
                     "series test that did not run, an unknown failure, a stale known failure); "
                     "2 bad input or setup (mirror, compose, environment)",
    "mutation-check": "0 every mutant killed; 1 a mutant survived or could not be judged; 2 bad input "
                      "or setup",
    "gate-eval": "0 every finding classified; 1 some finding is not classified yet; 2 bad input",
    "mirror": "0 every file of the manifest made, kept or (--check) verified; 1 some file could not "
              "be made or is missing or differs (each listed); 2 bad input (no mirror, a manifest "
              "entry refused)",
    "status": "0 status printed (whatever the states are); 2 bad input (an unknown pin set)",
    "show": "0 shown; 2 bad input (an unknown patch or pin set, an unreadable report)",
    "range-diff": "0 compared (whatever differs); 1 a side's series does not apply; 2 bad input "
                  "(neither a pin set nor a revision, mixed kinds, an unreachable target)",
    "site": "0 the site was written; 2 bad input (a folder that is not the site's, an unreadable "
            "document)",
    "completion": "0 the script or page was printed; 2 bad input (an unknown shell)",
    "evidence-e2e": "0 bench ab and analyze ran; otherwise the status of the step that failed "
                    "(bench ab, evidence analyze); 2 bad input",
}
# Every --json document carries this (docs/json.md); raised when a document changes incompatibly.
SCHEMA_VERSION = 1


def _walk_parsers(parser: argparse.ArgumentParser, name: str = "overlay"):
    yield name, parser
    for action in parser._actions:  # argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _walk_parsers(sub, f"{name} {sub_name}")


def _add_descriptions(parser: argparse.ArgumentParser) -> None:
    """A subcommand registered with only its `help=` gets that as its --help description
    line too (tests/test_cli_conventions29.py requires one everywhere)."""
    for _, p in _walk_parsers(parser):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for sub_name, sub in action.choices.items():
                    if not (sub.description or "").strip() and helps.get(sub_name):
                        sub.description = helps[sub_name][:1].upper() + helps[sub_name][1:] + "."


def _add_exit_status(parser: argparse.ArgumentParser) -> None:
    for name, p in _walk_parsers(parser):
        command = name.split(" ", 1)[1] if " " in name else "overlay"
        status = EXIT_STATUS.get(command)
        if status is None:  # a new command without its line: tests/test_cli_conventions.py says so
            continue
        text = f"exit status: {status}; 130 interrupted."
        p.epilog = f"{p.epilog}\n\n{text}" if p.epilog else text


def add_schema_version(text: str) -> str:
    """`text` (what a --json command printed) with `schema_version` first in each JSON object
    document; anything that is not JSON passes through unchanged."""
    decoder, out, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        start = len(text) - len(text[pos:].lstrip())
        if start >= len(text):
            out.append(text[pos:])
            break
        try:
            doc, end = decoder.raw_decode(text, start)
        except ValueError:
            out.append(text[pos:])
            break
        raw = text[start:end]
        if isinstance(doc, dict) and "schema_version" not in doc:
            doc = {"schema_version": SCHEMA_VERSION, **doc}
            raw = json.dumps(doc, indent=2 if "\n" in raw else None)
        out.append(text[pos:start] + raw)
        pos = end
    return "".join(out)


class _JsonCapture:
    """While a --json command runs, stdout is kept here, then written once with the envelope."""

    def __enter__(self):
        self.real, self.buffer = sys.stdout, io.StringIO()
        sys.stdout = self.buffer
        return self

    def __exit__(self, *exc_info):
        sys.stdout = self.real
        text = self.buffer.getvalue()
        if text:
            self.real.write(add_schema_version(text))
            self.real.flush()
        return False


def _terminate(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def find_root(start: Path) -> Path:
    """The project root: the nearest directory above `start` holding series.yaml."""
    for d in (start, *start.parents):
        if (d / "series.yaml").is_file():
            return d
    return start


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that help a reader did not take is not a success:
    argparse swallows the broken pipe; main() turns it into the SIGPIPE status."""

    def _print_message(self, message, file=None):
        if message:
            file = file or sys.stderr
            file.write(message)
            file.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="overlay",
        description="Compose pinned upstream trees from an attributed patch series.",
    )
    parser.add_argument("--version", action="version", version=f"overlay {__version__}")
    parser.add_argument("--root", type=Path, default=None,
                        help="project root holding series.yaml and pins/ (default: found upward from cwd)")
    parser.add_argument("--color", "--colour", dest="color", choices=COLOUR_MODES, default="auto",
                        help="colour FAILED and errors: auto (on a terminal, unless NO_COLOR or "
                             "TERM=dumb; the default), always, never")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    _add_descriptions(parser)
    _add_exit_status(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted_at_start_up:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return _main(argv)
        finally:  # also after --help: output that cannot reach its reader shows here
            sys.stdout.flush()
    except BrokenPipeError:
        # `overlay ... | head`: the reader left before the output ended; say so by the
        # status (as a process SIGPIPE ended would), and write nothing more to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
        return EXIT_BROKEN_PIPE
    except Interrupted as exc:  # it knows what state it left things in
        print(f"overlay: error: {exc.message}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # also during start-up, while the subsystems import
        print("overlay: error: interrupted (run the command again)", file=sys.stderr)
        return 130


# What a process killed by SIGPIPE reports (128 + 13), as the shell would show it: a run
# whose reader left (`overlay ... | head`) did not finish its output, so it did not succeed.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def _main(argv: list[str] | None) -> int:
    inject_fault("startup")
    for stream in (sys.stdout, sys.stderr):  # an ASCII locale prints escapes, not a traceback
        # (strict, or surrogateescape, which Python picks for the C/POSIX locale: neither can
        # write a non-ASCII subject to an ASCII terminal)
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", None) in ("strict", "surrogateescape"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    set_colour_mode(args.color)
    args.root_parser = parser  # `overlay completion` renders the whole command line
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = coloured(sys.stdout), coloured(sys.stderr)
    try:
        return _dispatch(parser, args)
    finally:
        sys.stdout, sys.stderr = real
        set_colour_mode("auto")


def _error(args: argparse.Namespace, shown: str, message: str, *, path=None, line=None,
           hint=None) -> None:
    """The one error report: `overlay: error: <shown>` on stderr, and with --json the
    error document (`message` and where) on stdout too: machines read that."""
    print(f"overlay: error: {shown}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps({"schema_version": SCHEMA_VERSION, "ok": False, "error": message,
                          "path": path, "line": line, "hint": hint}))


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
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
        if getattr(args, "json", False):
            with _JsonCapture():
                code = int(args.func(args) or 0)
        else:
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that left shows here, not at exit
        return code
    except OverlayError as exc:
        _error(args, exc.one_line(), clean_line(exc.message), path=exc.path, line=exc.line,
               hint=exc.hint)
        return exc.exit_code
    except GitFailed as exc:
        last = (exc.stderr.strip().splitlines() or ["(no message)"])[-1]
        hint = "run again; if it persists, report it with the command you ran"
        failed = f"git {exc.args_[0]} failed: {last}"
        _error(args, clean_line(f"{failed} ({hint})"), clean_line(failed), hint=hint)
        return 2
    except BrokenPipeError:
        raise  # main() says what a reader that left means
    except OSError as exc:
        # anything the filesystem refused that no module anticipated: still one line
        where = f"{exc.filename}: " if exc.filename else ""
        hint = "check the path and its permissions"
        message = f"{where}{exc.strerror or exc}"
        _error(args, clean_line(f"{message} ({hint})"), clean_line(message),
               path=None if exc.filename is None else clean_line(str(exc.filename)), hint=hint)
        return 2
