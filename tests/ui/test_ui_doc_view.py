"""The step detail's document view wraps lazily, piece by piece, and shows exactly what
``Content.wrap`` of the whole document gives (every width, long lines, folds, wide
characters, styled spans)."""

from __future__ import annotations

from conftest import wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.app import App, ComposeResult
from textual.content import Content

from ui_helpers import wait_for

from eviscene_tui.ui.widgets import doc_view
from eviscene_tui.ui.widgets.doc_view import DocView, LazyWrap

_WORDS = st.sampled_from(["a", "word", "longerword", "x" * 30, "  ", " ", "日本語", "\u00e9t\u00e9", "-", "end."])


def _text(parts: list[str]) -> str:
    return " ".join(parts)


@st.composite
def documents(draw) -> Content:
    lines = draw(st.lists(st.lists(_WORDS, max_size=400).map(_text), min_size=1, max_size=6))
    content = Content("\n".join(lines))
    if draw(st.booleans()) and content.plain:
        # a styled span across piece boundaries
        start = draw(st.integers(0, len(content.plain) - 1))
        content = content.stylize("bold", start, draw(st.integers(start, len(content.plain))))
    return content


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.integers(1, 50), st.integers(1, 8))
def test_lazy_wrap_equals_content_wrap(content: Content, width: int, piece: int) -> None:
    doc_view.PIECE_CELLS, saved = piece, doc_view.PIECE_CELLS
    try:
        wrap = LazyWrap(content.split(allow_blank=True), width)
        wrap.upto(3)
        early = list(wrap.lines)
        wrap.upto(1 << 62)
    finally:
        doc_view.PIECE_CELLS = saved
    expected = content.wrap(width)
    assert [line.plain for line in wrap.lines] == [line.plain for line in expected]
    assert list(wrap.lines) == expected  # the spans too
    assert early == expected[: len(early)]
    assert wrap.done and wrap.height == len(expected)


class _DocApp(App[None]):
    def __init__(self, content: Content) -> None:
        super().__init__()
        self.doc = content

    def compose(self) -> ComposeResult:
        yield DocView(self.doc, id="doc")


async def test_doc_view_paints_the_top_first_then_the_end_on_end(monkeypatch) -> None:
    monkeypatch.setattr(doc_view, "IDLE_PAUSE", 3600.0)  # no idle slices: only what the keys ask for
    page = " ".join(f"word{i}" for i in range(20_000))
    content = Content("\n").join([Content("Step 3"), Content(page), Content("the last line")])
    app = _DocApp(content)
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(DocView)
        await pilot.pause()
        width = view.scrollable_content_region.width
        expected = content.wrap(width)
        lines = view._wrapper().lines
        assert lines == expected[: len(lines)]
        # painted from a part of the page (it is wrapped piece by piece, later in slices)
        assert 0 < len(lines) < len(expected)
        view.focus()
        await pilot.press("end")
        # the scroll to the end is applied after the refresh that lays out the new height
        bottom = len(expected) - view.scrollable_content_region.height
        assert await wait_for(pilot, lambda: view.scroll_offset.y == bottom)
        assert view.wrapped_lines == expected
        assert view.virtual_size.height == len(expected)


async def test_doc_view_wraps_the_rest_in_idle_slices() -> None:
    page = " ".join(f"word{i}" for i in range(20_000))
    content = Content("\n").join([Content("Step 3"), Content(page), Content("the last line")])
    app = _DocApp(content)
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(DocView)
        await wait_until(lambda: view._wrap is not None and view._wrap.done, pilot=pilot, what="the wrap done in idle slices")
        assert view._wrap.lines == content.wrap(view.scrollable_content_region.width)
        assert view.virtual_size.height == len(view._wrap.lines)
