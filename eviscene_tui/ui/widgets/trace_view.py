"""The source trace: a Line-API ScrollView, two lines per step.

Data arrives as :class:`~eviscene_tui.state.trace_rows.TraceRows` (built by a
worker); the widget paints only the visible lines, caching Strips in an LRU.
Rows not built yet paint as a dim placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from eviscene_tui.probes import ViewProbes
from eviscene_tui.ui.actions import bindings
from eviscene_tui.state.trace_rows import StepRow, TraceRows

LINES_PER_STEP = 2  # a step's header line and its result / thought line, cut at the edge
WRAPPED_LINES_PER_STEP = 5  # wrapped: the header and up to four lines of result and thought
WIDTH = 600  # virtual width: previews are cropped to it
GUTTER = 8


class TraceView(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {
        "trace--index",
        "trace--stage",
        "trace--tool",
        "trace--result",
        "trace--text",
        "trace--dim",
        "trace--policy",
        "trace--reject",
        "trace--teacher",
        "trace--cursor",
        "trace--failure",
        "trace--failure-label",
        "trace--match",
    }

    DEFAULT_CSS = """
    TraceView { background: $surface; overflow-x: hidden; }
    TraceView > .trace--index { color: $foreground 60%; }
    TraceView > .trace--stage { color: $secondary; }
    TraceView > .trace--tool { color: $primary; text-style: bold; }
    TraceView > .trace--result { color: $foreground 80%; }
    TraceView > .trace--text { color: $foreground; }
    TraceView > .trace--dim { color: $foreground 50%; text-style: italic; }
    TraceView > .trace--policy { color: $accent; }
    TraceView > .trace--reject { color: $warning; text-style: bold; }
    TraceView > .trace--teacher { color: $success; }
    TraceView > .trace--cursor { background: $block-cursor-background; }
    TraceView:focus > .trace--cursor { background: $primary 35%; }
    TraceView > .trace--failure { background: $error 25%; }
    TraceView > .trace--failure-label { color: $error; text-style: bold reverse; }
    TraceView > .trace--match { color: $accent; text-style: bold; }
    """

    BINDINGS = bindings("trace")

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    class StepHighlighted(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class FailureShown(Message):
        """The failure step was painted for the first time since the trace was set (posted
        from the paint: it arrives once that frame is out)."""

    class RowsWanted(Message):
        """Rows ``start..end`` are on screen but not built yet (an indexed trace whose
        background fill has not reached them): the screen builds them on demand."""

        def __init__(self, start: int, end: int) -> None:
            super().__init__()
            self.start = start
            self.end = end

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: TraceRows | None = None
        self.probes = ViewProbes()  # when rows and the failure step were painted, for the bench
        self.marks: frozenset[int] = frozenset()  # steps matching the current search (a marker in the gutter)
        self._cache: LRUCache[tuple, Strip] = LRUCache(4096)
        self._wanted: tuple[int, int] | None = None  # the last RowsWanted range posted
        self._failure_shown = False  # FailureShown posted for the trace set
        # every step takes the same number of lines, so a line maps to its step in O(1)
        # however long the trace; wrapping only changes that number
        self.lines_per_step = LINES_PER_STEP

    @property
    def wrapped(self) -> bool:
        return self.lines_per_step != LINES_PER_STEP

    def set_wrap(self, wrap: bool) -> None:
        """Wrap each step's result and thought over several lines instead of cutting them."""
        lines = WRAPPED_LINES_PER_STEP if wrap else LINES_PER_STEP
        if lines == self.lines_per_step:
            return
        self.lines_per_step = lines
        self._cache.clear()
        if self.data is not None:
            self.virtual_size = Size(WIDTH, max(1, self.data.step_count * lines))
            self._scroll_to_cursor(center=True)
        self.refresh()

    # -- data --------------------------------------------------------------------------
    def set_trace(self, data: TraceRows, *, focus_step: int | None = None) -> None:
        self.data = data
        self._failure_shown = False
        self._cache.clear()
        self.virtual_size = Size(WIDTH, max(1, data.step_count * self.lines_per_step))
        target = focus_step if focus_step is not None else (data.failure_index if data.failure_index is not None else 0)
        self.goto(target, center=True)
        self.refresh()

    def set_marks(self, indices: Iterable[int]) -> None:
        """Mark these steps (search matches); an empty collection clears the marks."""
        marks = frozenset(indices)
        if marks != self.marks:
            self.marks = marks
            self._cache.clear()
            self.refresh()

    def rows_updated(self, start: int, end: int) -> None:
        """Rows ``start..end`` were filled in by the worker: repainted when one of them is
        on screen (a cached line names the row it was built from, so a row filled while
        scrolled away is rebuilt when it comes back)."""
        if self._wanted is not None and start <= self._wanted[0] and self._wanted[1] <= end:
            self._wanted = None
        top, bottom = self._steps_on_screen()
        if start < bottom and top < end:
            self.refresh()

    def _steps_on_screen(self) -> tuple[int, int]:
        """The steps the viewport shows (first, one past the last, partly shown ones included)."""
        lines = self.lines_per_step
        y = self.scroll_offset.y
        return y // lines, (y + max(1, self.scrollable_content_region.height)) // lines + 1

    def _want(self, index: int) -> None:
        """Ask (once per screenful) for the unbuilt rows around ``index``."""
        height = max(1, self.scrollable_content_region.height // self.lines_per_step)
        top = self.scroll_offset.y // self.lines_per_step
        span = (max(0, top - height), top + 2 * height + 1)
        if self._wanted is not None and self._wanted[0] <= index < self._wanted[1]:
            return
        self._wanted = span
        self.post_message(self.RowsWanted(*span))

    def _want_on_screen(self) -> None:
        """After a jump (End, a page key, a far step): ask for the unbuilt rows of the new
        screenful now, not when the next frame paints their placeholders; the worker
        builds them while that frame is drawn (a frame, and the message it posts, later)."""
        if self.data is None:
            return
        missing = self.data.missing_between(*self._steps_on_screen())
        if missing:
            self._want(missing[0])

    @property
    def step_count(self) -> int:
        return self.data.step_count if self.data else 0

    # -- navigation --------------------------------------------------------------------
    def goto(self, index: int, *, center: bool = True) -> None:
        if not self.data or self.data.step_count == 0:
            return
        index = max(0, min(self.data.step_count - 1, index))
        self.set_reactive(TraceView.cursor, index)
        self._cache.clear()
        self._scroll_to_cursor(center=center)
        self._want_on_screen()
        self.refresh()
        self.post_message(self.StepHighlighted(index))

    def _scroll_to_cursor(self, *, center: bool) -> None:
        height = max(1, self.scrollable_content_region.height or self.size.height or 1)
        lines = self.lines_per_step
        top_line = self.cursor * lines
        if center:
            y = max(0, top_line - height // 2 + 1)
            self.scroll_to(y=y, animate=False, force=True, immediate=True)
            return
        current = self.scroll_offset.y
        if top_line < current:
            self.scroll_to(y=top_line, animate=False, force=True, immediate=True)
        elif top_line + lines > current + height:
            self.scroll_to(y=top_line + lines - height, animate=False, force=True, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self._cache.clear()
        if self.data:
            self._scroll_to_cursor(center=True)

    def watch_cursor(self, old: int, new: int) -> None:
        self._cache.clear()
        self._scroll_to_cursor(center=False)
        self._want_on_screen()
        self.refresh()
        self.post_message(self.StepHighlighted(new))

    def action_move(self, delta: int) -> None:
        if self.data and self.data.step_count:
            self.cursor = max(0, min(self.data.step_count - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        height = max(1, self.scrollable_content_region.height // self.lines_per_step)
        self.action_move(direction * height)

    def action_edge(self, end: int) -> None:
        if self.data and self.data.step_count:
            self.cursor = self.data.step_count - 1 if end else 0

    def on_click(self, event: events.Click) -> None:
        index = (self.scroll_offset.y + event.y) // self.lines_per_step
        if self.data and 0 <= index < self.data.step_count:
            self.cursor = index

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    # -- rendering ---------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        line = scroll_y + y
        index, part = divmod(line, self.lines_per_step)
        if self.data is None or index >= self.data.step_count:
            return Strip.blank(width, self.rich_style)
        is_cursor = index == self.cursor
        is_failure = index == self.data.failure_index
        row = self.data.rows[index] if index < len(self.data.rows) else None  # None: still being built by the worker
        key = (index, part, is_cursor, scroll_x, width, self.lines_per_step, row)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if row is None:
            self._want(index)
        strip = self._build(index, part, row, is_failure, width)
        if row is not None and part == 0:
            self.probes.painted_row(index)
        if is_failure:
            strip = strip.apply_style(self.get_component_rich_style("trace--failure"))
            self.probes.painted_failure()
            if not self._failure_shown and row is not None:
                self._failure_shown = True
                self.post_message(self.FailureShown())
        if is_cursor:
            strip = strip.apply_style(self.get_component_rich_style("trace--cursor"))
        strip = strip.crop_extend(scroll_x, scroll_x + max(width, 1), self.rich_style)
        self._cache[key] = strip
        return strip

    def _build(self, index: int, part: int, row: StepRow | None, is_failure: bool, width: int = WIDTH) -> Strip:
        s = self.get_component_rich_style
        base: Style = self.rich_style
        gutter = GUTTER
        if part == 0:
            mark = "\u25b6" if index == self.cursor else " "
            number = f"{mark}{index:>6} "
            segments = [Segment(number, s("trace--index"))]
            if row is None:
                segments.append(Segment("\u2026 loading step", s("trace--dim")))
                return Strip(segments)
            if is_failure:
                segments.append(Segment(" FAILURE ", s("trace--failure-label")))
                segments.append(Segment(" ", base))
            if row.is_policy:
                segments.append(Segment("\u25c6 ", s("trace--policy")))
            elif row.is_teacher:
                segments.append(Segment("\u2691 ", s("trace--teacher")))
            else:
                segments.append(Segment("  ", base))
            segments.append(Segment(row.stage or "-", s("trace--stage")))
            segments.append(Segment("  ", base))
            action_style = s("trace--reject") if row.is_rejection else s("trace--text")
            segments.append(Segment(row.action_type or "-", action_style))
            if row.tool:
                segments.append(Segment("  ", base))
                segments.append(Segment(row.tool, s("trace--tool")))
            return Strip(segments)
        if index in self.marks and part == 1:
            segments = [Segment("   \u25cf    ", s("trace--match"))]  # a search match
        else:
            segments = [Segment(" " * gutter, base)]
        if row is None:
            return Strip(segments)
        if self.wrapped:
            return Strip(segments + self._wrapped_part(row, part - 1, max(10, width - gutter)))
        if row.result:
            segments.append(Segment("\u2192 ", s("trace--dim")))
            segments.append(Segment(row.result, s("trace--result")))
            if row.text:
                segments.append(Segment("   ", base))
        if row.text:
            segments.append(Segment(row.text, s("trace--text")))
        if not row.result and not row.text:
            segments.append(Segment("(no result, thought or output)", s("trace--dim")))
        return Strip(segments)

    def _detail_segments(self, row: StepRow) -> list[Segment]:
        s = self.get_component_rich_style
        base: Style = self.rich_style
        segments: list[Segment] = []
        if row.result:
            segments.append(Segment("\u2192 ", s("trace--dim")))
            segments.append(Segment(row.result, s("trace--result")))
            if row.text:
                segments.append(Segment("   ", base))
        if row.text:
            segments.append(Segment(row.text, s("trace--text")))
        if not row.result and not row.text:
            segments.append(Segment("(no result, thought or output)", s("trace--dim")))
        return segments

    def _wrapped_part(self, row: StepRow, line: int, width: int) -> list[Segment]:
        """Line ``line`` of the step's result and thought wrapped at ``width`` cells; the
        last line ends in an ellipsis when there is more (step detail shows it all)."""
        chopped = _chop(self._detail_segments(row), width)
        last = self.lines_per_step - 2
        if line >= len(chopped):
            return []
        segments = chopped[line]
        if line == last and len(chopped) > last + 1:
            segments = Segment.adjust_line_length(segments, width - 1) + [Segment("\u2026", self.get_component_rich_style("trace--dim"))]
        return segments


def _chop(segments: list[Segment], width: int) -> list[list[Segment]]:
    """Split segments into lines of at most ``width`` cells (hard wrap)."""
    lines: list[list[Segment]] = []
    current: list[Segment] = []
    room = width
    for segment in segments:
        while segment.text:
            if segment.cell_length <= room:
                current.append(segment)
                room -= segment.cell_length
                break
            head, segment = segment.split_cells(room)
            current.append(head)
            lines.append(current)
            current, room = [], width
        if room == 0:
            lines.append(current)
            current, room = [], width
    if current:
        lines.append(current)
    return lines
