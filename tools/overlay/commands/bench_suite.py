"""`overlay bench suite [NAME ...]`: the repository's side-by-side benchmarks.

Runs `benchmarks/bench_<NAME>.py` under the project root, each in a fresh process of this
interpreter, in the order given (default: every one, in name order), and stops at the
first that fails. They are this repository's own development measurements (several
build their inputs with the test fixtures); the tool only finds and runs them, so that
`make bench` is an alias like every other target (docs/architecture.md). The project
root is found upward from the working directory, so nothing runs unless the root, its
benchmarks/ folder and every script (as it resolves, and the folder holding it) belong to
the current user and no one else may write them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from overlay import paths
from overlay.errors import OverlayError

FOLDER = "benchmarks"


def benchmark_scripts(root: Path, names: list[str]) -> list[Path]:
    """The scripts to run, in order; a name that is not there is refused, naming the folder."""
    folder = root / FOLDER
    if not folder.is_dir():
        raise OverlayError(f"no {FOLDER}/ folder under {root}", path=str(folder),
                           hint="run it from this repository (benchmarks are not part of the installed tool)")
    found = {p.stem[len("bench_"):]: p for p in sorted(folder.glob("bench_*.py")) if p.is_file()}
    missing = [n for n in names if n not in found]
    if missing:
        raise OverlayError(f"no benchmark named {', '.join(missing)} in {FOLDER}/", path=str(folder),
                           hint=f"choose from: {', '.join(found) or '(none)'}")
    scripts = [found[n] for n in names] if names else list(found.values())
    _require_ours(root, folder, scripts)
    return scripts


def _require_ours(root: Path, folder: Path, scripts: list[Path]) -> None:
    """Every place the scripts' code comes from is the current user's alone."""
    hint = "run benchmarks only from your own checkout (chown it, or chmod go-w)"
    checked: list[Path] = []
    for where in (root, folder, *[q for s in scripts for q in (s, s.resolve().parent)]):
        if where not in checked:
            checked.append(where)
            paths.require_ours_to_run(where, hint)


def register_suite(bench_subparsers) -> None:
    p = bench_subparsers.add_parser("suite", help="the repository's side-by-side benchmarks (make bench)",
                                    description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="benchmarks/bench_NAME.py to run (default: all, in name order)")
    p.add_argument("--arg", dest="script_args", action="append", default=[], metavar="ARG",
                   help="an argument for the benchmark script (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scripts = benchmark_scripts(Path(args.root), list(args.names))
    env = dict(os.environ)
    tools = str(Path(args.root) / "tools")
    env["PYTHONPATH"] = os.pathsep.join(x for x in (tools, env.get("PYTHONPATH", "")) if x)
    for script in scripts:
        code = subprocess.run([sys.executable, str(script), *args.script_args], cwd=args.root, env=env).returncode
        if code != 0:
            print(f"overlay: error: {script.relative_to(args.root)} exited with {code}", file=sys.stderr)
            return code
    return 0
