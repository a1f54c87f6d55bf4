"""Foundation commands: apply, check, refresh, lock (registered with the CLI)."""

from __future__ import annotations


def register(sub) -> None:  # filled in as the foundation lands
    pass
