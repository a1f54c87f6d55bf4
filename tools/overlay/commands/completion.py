"""`overlay completion bash|zsh|tcsh|man`: shell completion and the man page, both
generated from the parser the CLI runs (completion by shtab), so neither can drift."""

from __future__ import annotations

import argparse
import sys

from overlay import __version__
from overlay.errors import OverlayError
from overlay.reporting import manpage

SHELLS = ("bash", "zsh", "tcsh")
HELP = "print shell completion (bash, zsh, tcsh) or the man page (man), generated from --help"


def register(sub) -> None:
    p = sub.add_parser("completion", help=HELP, description=HELP + ". Install: "
                       "`overlay completion bash > ~/.local/share/bash-completion/completions/overlay`; "
                       "`overlay completion man > overlay.1 && man ./overlay.1`.")
    p.add_argument("what", choices=(*SHELLS, "man"), metavar="{bash,zsh,tcsh,man}",
                   help="a shell's completion script, or `man` for the man page (roff)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    parser = args.root_parser
    if args.what == "man":
        sys.stdout.write(manpage.render(parser, "overlay", __version__))
        return 0
    try:
        import shtab
    except ImportError:
        raise OverlayError("shell completion needs shtab, which is not installed",
                           hint="pip install -e . from the checkout (shtab is a dependency)") from None
    sys.stdout.write(shtab.complete(parser, shell=args.what))
    return 0
