"""Hostile text for generated tests: what must never reach a terminal raw, and a
hypothesis strategy that draws it often. Upstream writes subjects, author names and file
names, and a campaign's nodes write their outcomes: the tool shows each through the one
sanitiser (overlay.errors.printable)."""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st

# C0/C1 controls and DEL (escape sequences, carriage returns), lone surrogates
# (unprintable: the write fails), line and paragraph separators, and the bidirectional
# controls that reorder what is shown.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
DANGEROUS = ["\x1b", "\x9b", "\r", "\n", "\x7f", "\x00", "\x85", "\u2028", "\u2029", "\udc80", "\ud800",
             "\udfff", "\u202e", "\u2066", "\u061c", "\x1b[31m", "\x1b]0;title\x07", "\x1b]8;;http://x\x1b\\"]

# any code point, lone surrogates included, with the dangerous ones drawn often (lists
# joined: text() would merge the two alphabets and draw the dangerous ones rarely)
TEXT = st.lists(st.one_of(st.sampled_from(DANGEROUS), st.characters(blacklist_categories=()))).map("".join)


def unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in BIDI


def unsafe_in(text: str, newlines: bool = False) -> list[str]:
    """The characters of `text` no terminal may be shown raw (newlines allowed if asked)."""
    return [c for c in text if unsafe(c) and not (newlines and c == "\n")]
