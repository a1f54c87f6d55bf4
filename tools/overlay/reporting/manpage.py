"""A man page (roff, man(7) macros) rendered from the argparse parser the CLI itself uses,
so the page and `--help` never disagree: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, then one
section per subcommand with its description, options and exit status.

Standard library only (argparse); the caller passes the parser."""

from __future__ import annotations

import argparse
import re
from typing import Iterator


def walk(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(`name`, parser), then each subcommand's, depth first, as `name sub sub`."""
    yield name, parser
    for action in parser._actions:  # argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from walk(sub, f"{name} {sub_name}")


def _roff(text: str) -> str:
    """Plain text safe in roff: backslashes doubled, hyphens unambiguous, no line that
    starts with a control character."""
    text = " ".join(str(text).split()).replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        if action.option_strings:
            label = ", ".join(action.option_strings)
            if action.nargs != 0:
                label += " " + (action.metavar or (action.dest.upper() if not action.choices
                                                   else "{" + ",".join(map(str, action.choices)) + "}"))
        else:
            label = action.metavar or action.dest
        out += [".TP", f"\\fB{_roff(label)}\\fR", _roff(action.help or "")]
    return out


def render(parser: argparse.ArgumentParser, prog: str, version: str, date: str = "") -> str:
    """The whole page for `prog`."""
    lines = [f'.TH {prog.upper()} 1 "{date}" "{prog} {version}" "User Commands"',
             ".SH NAME", f"{prog} \\- {_roff(parser.description or '')}",
             ".SH SYNOPSIS", f"\\fB{prog}\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]",
             ".SH OPTIONS", *_options(parser)]
    commands = [(n, p) for n, p in walk(parser, prog) if n != prog]
    if commands:
        lines.append(".SH COMMANDS")
    for name, sub in commands:
        lines += [f".SS {_roff(name)}", _roff(sub.description or ""), *_options(sub)]
        if sub.epilog:
            lines += [".PP", _roff(sub.epilog)]
    if parser.epilog:
        lines += [".SH EXIT STATUS", _roff(parser.epilog)]
    return "\n".join(lines) + "\n"
