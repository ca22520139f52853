"""Rendering of state documents: no markup is ever parsed from run data, privileged
runs collapse into one mask line, and the trace/runs widgets paint safe text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content

from eviscene_tui.state.case_view import L, S, Seg, block
from eviscene_tui.ui.widgets.doc import MASK, _mask_only, doc_content, line_content, seg_parts

HOSTILE = "[@click=app.quit]x[/] [/] [bold red]y \x1b]0;T\x1b\\ \u202e"


def test_markup_in_run_data_is_plain_text() -> None:
    content = line_content(L(S(HOSTILE, "hint")))
    assert "[@click=app.quit]x[/]" in content.plain
    for span in content.spans:
        assert "@click" not in str(span.style)
        assert "red" not in str(span.style)
    assert "\x1b" not in content.plain and "\u202e" not in content.plain


def test_privileged_lines_are_masked_and_collapsed() -> None:
    lines = [L(Seg("explanation:", "key"))] + block("secret one\nsecret two\nsecret three", privileged=True) + [L(Seg("after"))]
    hidden = doc_content(lines, revealed=False).plain
    assert "secret" not in hidden
    assert hidden.count(MASK) == 1
    shown = doc_content(lines, revealed=True).plain
    assert "secret one" in shown and "secret three" in shown and MASK not in shown


def test_inline_privileged_value_is_masked() -> None:
    line = L(Seg("expected verdict: ", "key"), S("fake", privileged=True))
    assert "fake" not in line_content(line, False).plain
    assert "fake" in line_content(line, True).plain


_TEXT = st.text(alphabet=st.sampled_from(["a", " ", "é", "\n", "\t", "\r", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\u202e", "["]), max_size=12)
_SEG = st.builds(Seg, _TEXT, st.sampled_from(["", "key", "bad", "title"]), st.booleans())


@given(st.lists(st.lists(_SEG, max_size=4).map(tuple), max_size=6), st.booleans())
def test_the_document_is_what_textual_builds_line_by_line(lines: list, revealed: bool) -> None:
    # doc_content assembles one Content and leaves Textual's control-code strip out when every
    # text is shown as itself: the result is the one joining each line's Content gives
    expected = Content("\n").join(
        Content.assemble(*(seg_parts(seg, revealed) for seg in line)) for line in _collapsed(lines, revealed))
    got = doc_content(lines, revealed)
    assert got.plain == expected.plain
    assert _styled(got) == _styled(expected)  # (an empty text's zero-width span styles nothing)
    for line in lines:
        one, reference = line_content(line, revealed), Content.assemble(*(seg_parts(seg, revealed) for seg in line))
        assert one.plain == reference.plain and list(one.spans) == list(reference.spans)


def _styled(content: Content) -> list[tuple]:
    return [tuple(span) for span in content.spans if span.start < span.end]


def _collapsed(lines: list, revealed: bool) -> list:
    """The lines a masked document shows (a run of privileged-only lines as one)."""
    out, previous = [], False
    for line in lines:
        masked = not revealed and _mask_only(line)
        if not (masked and previous):
            out.append(line)
        previous = masked
    return out
