"""Rendering of state documents: no markup is ever parsed from run data, privileged
runs collapse into one mask line, and the trace/runs widgets paint safe text."""

from __future__ import annotations

from eviscene_tui.state.case_view import L, S, Seg, block
from eviscene_tui.ui.widgets.doc import MASK, doc_content, line_content

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
