"""Untrusted text made safe to show: control characters and bidirectional overrides
written as visible escapes (pure)."""

from __future__ import annotations

import re

# Upstream writes commit subjects and file names: an escape sequence in one must not
# recolour, retitle or hyperlink a maintainer's terminal, nor hide in a Markdown
# summary, nor make a JUnit file invalid XML. Control characters (C0, DEL, C1) and
# the bidirectional overrides that reorder text on screen are shown as escapes.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every unsafe character written as a visible escape (\\x1b, \\u202e)."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", text)
