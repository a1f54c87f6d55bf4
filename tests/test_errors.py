"""overlay.errors, the foundation every layer prints through: the one sanitiser for
untrusted text (`printable`), values from files quoted shortened (`quoted`), credentials
redacted (`redact`), and the one error line (`OverlayError.one_line`). Generated inputs
(hypothesis) for each class the module claims."""

from __future__ import annotations

from hypothesis import given, strategies as st

from overlay.errors import LINE_MAX, SHOWN_MAX, OverlayError, printable, quoted, redact
from tests.hostile_text import TEXT, unsafe


@given(TEXT)
def test_printable_leaves_no_control_character(text):
    shown = printable(text)
    assert not [c for c in shown if unsafe(c)]
    shown.encode("utf-8")  # a lone surrogate (from surrogateescape) would fail here


@given(TEXT)
def test_printable_keeps_newlines_only_where_asked(text):
    shown = printable(text, newlines=True)
    assert not [c for c in shown if unsafe(c) and c != "\n"]
    assert shown.count("\n") == text.count("\n")
    assert "\n" not in printable(text)


def test_printable_writes_what_it_replaces_visibly():
    assert printable("a\x1b[31mred\x1b[0m\x07") == "a\\x1b[31mred\\x1b[0m\\x07"
    assert printable("\u202egnp.exe") == "\\u202egnp.exe"
    assert printable("x\udc80y\u2028z") == "x\\udc80y\\u2028z"
    assert printable("plain ü and 漢字, tabs\tgo") == "plain ü and 漢字, tabs\\x09go"


@given(st.one_of(TEXT, st.text(max_size=3000)))
def test_quoted_is_short_and_says_how_long_the_value_was(value):
    shown = quoted(value)
    assert not [c for c in shown if unsafe(c)]
    if len(value) <= SHOWN_MAX:
        assert shown == f"'{printable(value)}'"
    else:
        assert shown.startswith("'" + printable(value[:SHOWN_MAX])) and shown.endswith(
            f"…' ({len(value)} characters)")


def test_a_900_kB_value_is_quoted_in_a_few_dozen_characters():
    shown = quoted("f" * 900_000)
    assert shown == "'" + "f" * SHOWN_MAX + "…' (900000 characters)"


@given(st.one_of(TEXT, st.text(min_size=900, max_size=5000)), st.one_of(st.none(), TEXT),
       st.one_of(st.none(), TEXT))
def test_an_error_is_one_bounded_printable_line_whatever_its_message(message, path, hint):
    line = OverlayError(message, path=path, line=3, hint=hint).one_line()
    assert "\n" not in line and not [c for c in line if unsafe(c)]
    assert len(line) <= LINE_MAX


def test_an_error_quoting_upstream_text_prints_no_escape_sequence():
    err = OverlayError("git am failed: \x1b]0;pwned\x07 subject \x1b[2J", hint="\x9b31m")
    assert "\x1b" not in err.one_line() and "\x07" not in err.one_line() and "\x9b" not in err.one_line()
    assert "\\x1b]0;pwned\\x07" in err.one_line()


def test_a_long_error_keeps_its_start_and_its_end():
    line = OverlayError("field 'x': '" + "a" * 50_000 + "' is not a commit id", path="series.yaml",
                        hint="write the full id").one_line()
    assert line.startswith("series.yaml: field 'x': 'aaa") and line.endswith("is not a commit id (write the full id)")
    assert "characters cut" in line


# user info is everything before the LAST '@' of the authority (RFC 3986, urllib.parse);
# it holds no '/', '?', '#' (they end the authority), blank or bracket (an IPv6 host's)
# (the delimiters drawn often: lists joined, as text() would draw them rarely)
USERINFO = st.lists(st.one_of(st.sampled_from("@:%!$&'()*+,;=.-_~"),
                              st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#[]")),
                    min_size=1, max_size=40).map("".join).filter(lambda s: not any(c.isspace() for c in s))


@given(USERINFO, USERINFO)
def test_redaction_hides_the_whole_password_whatever_it_holds(user, password):
    from urllib.parse import urlsplit

    url = f"https://{user}:{password}@host.example/org/repo.git"
    assert urlsplit(url).hostname == "host.example"  # the URL as urllib reads it
    text = f"fatal: unable to access '{url}': 403"
    redacted = "fatal: unable to access 'https://***@host.example/org/repo.git': 403"
    assert redact(text) == redacted
    assert OverlayError(text).one_line() == redacted


def test_redaction_of_a_password_with_an_at_sign():
    assert redact("https://user:p@ss@host/x and http://tok@en@h2/y") == "https://***@host/x and http://***@h2/y"
    assert redact("https://host/path@v1 git@github.com:o/r") == "https://host/path@v1 git@github.com:o/r"
