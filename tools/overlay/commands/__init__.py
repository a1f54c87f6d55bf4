"""Subcommands: one module per `overlay` subcommand (argument parsing and output only).

Each module exposes `register(subparsers)`; its parsers set `func`, a callable taking the
parsed arguments and returning the exit code. overlay.cli (the thin main) lists them.

May import: every layer below (foundation, series, trees, testing, the subsystems) and
other command modules. Nothing imports a command module except overlay.cli and other
command modules.
"""
