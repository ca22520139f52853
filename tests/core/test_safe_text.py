"""The single display boundary: nothing that can drive a terminal survives safe_text."""

from hypothesis import given, strategies as st

from eviscene_tui.safe_text import _BIDI, _escape_char, _is_safe, safe_bytes, safe_text

HOSTILE = [
    "A\x1b]52;c;ZXZpbA==\x07B",
    "\x1b]0;PWNED-TITLE\x1b\\",
    "\x1b[2J\x1b[31mRED",
    "\x9b31m C1 CSI",
    "left\u202eright\u2066iso\u2069",
    "nul\x00bel\x07bs\x08del\x7f",
]


def test_escape_sequences_are_made_visible():
    for s in HOSTILE:
        out = safe_text(s)
        assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
        assert "\u202e" not in out and "\u2066" not in out
        assert all(ch.isprintable() or ch in "\n\t" for ch in out)
    assert safe_text("\x1b[2J") == "\u241b[2J"
    assert safe_text("\x7f") == "\u2421"
    assert safe_text("\x9b") == "\\x9b"
    assert safe_text("a\u202eb") == "a\\u202eb"


def test_plain_text_passes_unchanged_and_newlines_stay():
    assert safe_text("Grüße, 世界 [b]x[/b]\n\tok") == "Grüße, 世界 [b]x[/b]\n\tok"
    assert safe_text(None) == ""
    assert safe_text(12) == "12"


def test_single_line_and_limit():
    assert safe_text("a\nb\tc", single_line=True) == "a\u23ceb c"
    out = safe_text("x" * 100, limit=10)
    assert len(out) == 10 and out.endswith("\u2026")


def test_safe_bytes_replaces_invalid_utf8():
    assert safe_bytes(b"\xff\x1b[2J") == "\ufffd\u241b[2J"


@given(st.text())
def test_output_is_always_printable(s):
    out = safe_text(s)
    assert all(ch.isprintable() or ch in "\n\t" for ch in out)
    assert "\x1b" not in out


def _one_by_one(text: str) -> str:
    """safe_text's rule applied to each character (the reference its fast path must equal)."""
    return "".join(ch if _is_safe(ch) else _escape_char(ch) for ch in text)


def test_no_bidi_control_is_printable():
    # the fast path takes a printable text as it is: that holds no bidi control only while
    # every one of them is a non-printable (format) character
    assert not any(chr(code).isprintable() for code in _BIDI)


@given(st.lists(st.sampled_from(["page text ", "\n", "\t", "\u202e", "\x1b", "\x85", "\u2028", "é", "\u061c", "\ud800"])
                | st.text(), max_size=40).map("".join) | st.text())
def test_whole_texts_are_shown_as_each_character_would_be(s):
    assert safe_text(s) == _one_by_one(s)
    assert safe_text(s, single_line=True) == _one_by_one(s).replace("\n", "\u23ce").replace("\t", " ")
