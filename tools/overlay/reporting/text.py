"""Untrusted text made safe to show. The sanitiser itself is `overlay.errors.printable`,
below every layer (the one error line uses it too); reporting offers it under its own
name, as the package's docstring lists it."""

from __future__ import annotations

from overlay.errors import printable

__all__ = ["printable"]
