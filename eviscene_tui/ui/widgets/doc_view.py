"""A long read-only document through the Line API: wrapped lazily, only as far down as
the view has been, and only the visible lines rendered.

A step's detail holds its whole tool result (page text of ~56 kB in real traces, one
logical line); ``Content.wrap`` wraps such a document whole for each width (and a
scrollbar appearing changes the width once), all before the first paint. This view
wraps from the top just the lines the screen shows, paints, and wraps the rest in short
slices while the app is idle (or at once when a key asks for the end).

The result is exactly ``content.wrap(width)``: the document is split into its logical
lines as ``Content.wrap`` splits it, and each logical line is wrapped on its own. A long
line (no tabs: tab stops depend on the column from the line's start) is wrapped piece
by piece: the wrap is greedy, so a piece wrapped from the start of one of the line's
wrapped lines gives that line's wrapped lines except its last one, which may end at the
cut; the next piece starts where that last line starts. Where the piece's last line is
not a verbatim copy of its source text (so its start cannot be read off), the rest of
the line is wrapped whole.

Until the whole document is wrapped its height is an estimate (its characters over the
width) for the lines not wrapped yet. Scrolling keys come from ScrollView (up/down, page
up/down, home/end).
"""

from __future__ import annotations

import re

from textual import events
from textual.cache import LRUCache
from textual.content import Content
from rich.style import Style
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Style as VisualStyle

_WORD_START = re.compile(r"\s\S")  # the whitespace that ends a word, then the next word
_SPACE = re.compile(r"\s")
PIECE_CELLS = 64  # wrapped lines per piece of a long logical line (times the width)
IDLE_SLICE_LINES = 200  # wrapped lines produced per idle slice
IDLE_PAUSE = 0.01  # seconds between two slices (keys and paints go in between)


def _estimate(line: Content, width: int, start: int = 0) -> int:
    return max(1, -(-(len(line.plain) - start) // width))


class LazyWrap:
    """The wrapped lines of a list of logical lines at one width, produced on demand
    from the top (:meth:`upto`); :attr:`lines` is what is wrapped so far."""

    def __init__(self, logical: list[Content], width: int) -> None:
        self.logical = logical
        self.width = width
        self.lines: list[Content] = []
        self._next = 0  # the logical line being wrapped
        self._offset = 0  # where in it the next piece starts
        self._rest = sum(_estimate(line, width) for line in logical)  # estimate of what is not wrapped

    @property
    def done(self) -> bool:
        return self._next >= len(self.logical)

    @property
    def height(self) -> int:
        """Wrapped lines so far plus an estimate of the rest (exact once done)."""
        return len(self.lines) + self._rest

    def upto(self, count: int) -> None:
        """Wrap until at least ``count`` lines are wrapped (or everything is)."""
        while len(self.lines) < count and not self.done:
            self._step()

    def _step(self) -> None:
        line = self.logical[self._next]
        width = self.width
        self._rest -= _estimate(line, width, self._offset)
        start = self._piece(line)
        if start is not None:
            self._offset = start
            self._rest += _estimate(line, width, start)
            return
        self.lines.extend((line[self._offset :] if self._offset else line).wrap(width))
        self._next += 1
        self._offset = 0

    def _piece(self, line: Content) -> int | None:
        """Wrap one piece of a long logical line from ``_offset`` and keep its wrapped
        lines but the last; where that last line starts (the next piece's start), or
        ``None`` when the rest of the line is to be wrapped whole."""
        text = line.plain
        offset = self._offset
        piece_chars = PIECE_CELLS * self.width
        if offset + 2 * piece_chars >= len(text) or "\t" in text:
            return None
        # the piece ends where a word starts: its words are then the line's own words
        # (the last one with all its trailing whitespace), so its breaks are the line's
        cut = _WORD_START.search(text, offset + piece_chars, offset + 2 * piece_chars)
        if cut is None:
            return None
        end = cut.start() + 1
        wrapped = line[offset:end].wrap(self.width)
        last = wrapped[-1].plain
        start = end - len(last)
        # a restart is exact only at the start of a word (a fold inside a word carries
        # the cells of its last part over) that is not the line's leading one
        if len(wrapped) < 2 or start <= offset or not text.startswith(last, start):
            return None
        if not (_SPACE.match(text, start - 1) and not _SPACE.match(text, start) and (offset > 0 or text[:start].strip())):
            return None
        self.lines.extend(wrapped[:-1])
        return start


class DocView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    DocView { overflow-x: hidden; }
    """

    def __init__(self, content: Content, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.content = content  # the whole document (tests and callers read it)
        self._logical: list[Content] = content.split(allow_blank=True)
        self._wrap: LazyWrap | None = None
        self._cache: LRUCache[tuple[int, int], Strip] = LRUCache(512)
        self._idle_scheduled = False
        # (content width, rich style, visual style) for the lines of one render pass: each is
        # a walk of the DOM in Textual, and a pass asks for them once per line otherwise
        self._pass: tuple[int, Style, VisualStyle] | None = None

    @property
    def wrapped_lines(self) -> list[Content]:
        """The whole document wrapped at the view's width (wraps what is left)."""
        wrap = self._wrapper()
        wrap.upto(1 << 62)
        self._sync_size()
        return list(wrap.lines)

    def _wrapper(self) -> LazyWrap:
        width = max(1, self.scrollable_content_region.width)
        if self._wrap is None or self._wrap.width != width:
            self._wrap = LazyWrap(self._logical, width)
            self._cache.clear()
        return self._wrap

    def _sync_size(self) -> None:
        wrap = self._wrapper()
        size = Size(wrap.width, wrap.height)
        if size != self.virtual_size:
            self.virtual_size = size

    def _ensure(self, count: int) -> None:
        """The first ``count`` lines wrapped, the size updated and the rest scheduled."""
        wrap = self._wrapper()
        wrap.upto(count)
        self._sync_size()
        if not wrap.done and not self._idle_scheduled:
            self._idle_scheduled = True
            self.set_timer(IDLE_PAUSE, self._wrap_more)

    def _wrap_more(self) -> None:
        """One slice of the wrapping left, then the next after the screen refreshed (keys
        are answered between slices)."""
        self._idle_scheduled = False
        if not self.is_attached:
            return
        wrap = self._wrapper()
        self._ensure(len(wrap.lines) + IDLE_SLICE_LINES)

    def update(self, content: Content) -> None:
        self.content = content
        self._logical = content.split(allow_blank=True)
        self._wrap = None
        self._ensure(self.scroll_offset.y + self.scrollable_content_region.height + 1)
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._ensure(self.scroll_offset.y + self.scrollable_content_region.height + 1)

    def action_scroll_end(self) -> None:
        self.wrapped_lines  # noqa: B018 - the end is only known once everything is wrapped
        super().action_scroll_end()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass = (self.scrollable_content_region.width, self.rich_style, self.visual_style)
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None

    def render_line(self, y: int) -> Strip:
        width, rich_style, visual_style = self._pass or (self.scrollable_content_region.width, self.rich_style, self.visual_style)
        index = self.scroll_offset.y + y
        wrap = self._wrap if self._wrap is not None and self._wrap.width == max(1, width) else self._wrapper()
        if index >= len(wrap.lines) and not wrap.done:
            self._ensure(index + self.scrollable_content_region.height + 1)
        if index >= len(wrap.lines):
            return Strip.blank(width, rich_style)
        key = (index, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = Strip(list(wrap.lines[index].render_segments(visual_style))).extend_cell_length(width, rich_style)
            strip = strip.apply_style(rich_style)
            self._cache[key] = strip
        return strip
