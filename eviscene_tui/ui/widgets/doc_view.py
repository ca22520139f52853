"""A long read-only document through the Line API: wrapped once per width, only the
visible lines rendered.

A step's detail holds its whole tool result (page text of ~56 kB in real traces); a
``Static`` lays out and renders every one of its hundreds of lines before the screen is
shown (about 0.4 s), this paints a screenful. Scrolling keys come from ScrollView
(up/down, page up/down, home/end).
"""

from __future__ import annotations

from textual import events
from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


class DocView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    DocView { overflow-x: hidden; }
    """

    def __init__(self, content: Content, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.content = content  # the whole document (tests and callers read it)
        self._lines: list[Content] = []
        self._wrapped_at = -1
        self._cache: LRUCache[tuple[int, int], Strip] = LRUCache(512)

    def _wrap(self) -> None:
        width = max(1, self.scrollable_content_region.width)
        if width == self._wrapped_at:
            return
        self._wrapped_at = width
        self._lines = self.content.wrap(width)
        self._cache.clear()
        self.virtual_size = Size(width, len(self._lines))

    def update(self, content: Content) -> None:
        self.content = content
        self._wrapped_at = -1
        self._wrap()
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._wrap()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        self._wrap()
        width = self.scrollable_content_region.width
        index = self.scroll_offset.y + y
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        key = (index, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = Strip(list(self._lines[index].render_segments(self.visual_style))).extend_cell_length(width, self.rich_style)
            strip = strip.apply_style(self.rich_style)
            self._cache[key] = strip
        return strip
