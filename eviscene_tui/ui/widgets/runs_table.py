"""The runs table: a Line-API ScrollView that paints only the visible rows.

It is handed display-ready :class:`~eviscene_tui.state.rows.CaseRow` objects (all
strings already sanitised) and never reads files. 10,000 rows cost nothing until
they scroll into view.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
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
from eviscene_tui.state.rows import COLUMNS, CaseRow, Column, cell_text, column_widths, empty_columns, shorten_middle, shorten_start

SEP = " "


def fit(text: str, width: int, align: str = "left") -> str:
    """Pad or truncate ``text`` to exactly ``width`` cells (with an ellipsis)."""
    if width <= 0:
        return ""
    length = cell_len(text)
    if length > width:
        return set_cell_size(text, width - 1) + "\u2026"
    if align == "right":
        return " " * (width - length) + text
    return text + " " * (width - length)


class RunsTable(ScrollView, can_focus=True):
    """Virtualized table of cases with a fixed header line."""

    COMPONENT_CLASSES = {
        "runs-table--header",
        "runs-table--cursor",
        "runs-table--ok",
        "runs-table--warn",
        "runs-table--bad",
        "runs-table--run",
        "runs-table--dim",
        "runs-table--writing",
    }

    DEFAULT_CSS = """
    RunsTable {
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    RunsTable > .runs-table--header { text-style: bold; color: $foreground; background: $panel; }
    RunsTable > .runs-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    RunsTable:focus > .runs-table--cursor { background: $primary 40%; text-style: bold; }
    RunsTable > .runs-table--ok { color: $success; }
    RunsTable > .runs-table--warn { color: $warning; }
    RunsTable > .runs-table--bad { color: $error; }
    RunsTable > .runs-table--run { color: $primary; }
    RunsTable > .runs-table--dim { color: $foreground 70%; }
    RunsTable > .runs-table--writing { color: $accent; text-style: italic; }
    """

    BINDINGS = bindings("table")

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    class Selected(Message):
        def __init__(self, row: CaseRow) -> None:
            super().__init__()
            self.row = row

    class Highlighted(Message):
        def __init__(self, row: CaseRow | None) -> None:
            super().__init__()
            self.row = row

    class Marked(Message):
        """Space on a row: select or unselect it."""

        def __init__(self, row: CaseRow) -> None:
            super().__init__()
            self.row = row

    class ColumnsChanged(Message):
        """The set of shown columns changed (a resize or new rows): notes about hidden
        columns are redrawn."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[CaseRow] = []
        self.sort_key = "key"
        self.sort_reverse = False
        self._cache: LRUCache[tuple, Strip] = LRUCache(2048)
        self._layout: list[tuple[Column, int]] = []
        self.probes = ViewProbes()  # when the first case row was painted, for the bench
        self.selected: frozenset[str] = frozenset()  # row keys selected with space
        self.groups: list[tuple[int, str, int, int]] = []  # (first row, title, rows, labelled) per group
        self._lines: list[int] = []  # display line -> row index (>= 0) or group header -(n + 1)
        self._line_of: list[int] = []  # row index -> display line

    # -- data --------------------------------------------------------------------------
    def set_rows(self, rows: list[CaseRow], *, sort_key: str = "key", sort_reverse: bool = False,
                 groups: list[tuple[int, str, int, int]] | None = None, selected: frozenset[str] | set[str] = frozenset()) -> None:
        current = self.current_row
        self.rows = rows
        self.sort_key = sort_key
        self.sort_reverse = sort_reverse
        self.groups = list(groups or [])
        self.selected = frozenset(selected)
        self._number_lines()
        self._cache.clear()
        self._layout_columns()
        if current is not None:
            for i, row in enumerate(rows):
                if row.key == current.key:
                    self.set_reactive(RunsTable.cursor, i)
                    break
        if self.cursor >= len(rows):
            self.set_reactive(RunsTable.cursor, max(0, len(rows) - 1))
        self.refresh()

    @property
    def current_row(self) -> CaseRow | None:
        if 0 <= self.cursor < len(self.rows):
            return self.rows[self.cursor]
        return None

    def select_key(self, key: str) -> bool:
        for i, row in enumerate(self.rows):
            if row.key == key:
                self.cursor = i
                return True
        return False

    def _number_lines(self) -> None:
        """The display lines: a header line before each group's first row, then rows."""
        starts = {start: n for n, (start, _t, _c, _l) in enumerate(self.groups)}
        lines: list[int] = []
        line_of: list[int] = []
        for i in range(len(self.rows)):
            if i in starts:
                lines.append(-(starts[i] + 1))
            line_of.append(len(lines))
            lines.append(i)
        self._lines, self._line_of = lines, line_of

    # -- layout ------------------------------------------------------------------------
    def _layout_columns(self) -> None:
        width = max(self.scrollable_content_region.width, 20) if self.is_mounted else 100
        before = [c.key for c, _w in self._layout]
        self._layout = column_widths(self.rows, width, sort_key=self.sort_key)
        if self.is_mounted and [c.key for c, _w in self._layout] != before:
            self.post_message(self.ColumnsChanged())
        total = sum(w for _c, w in self._layout) + len(SEP) * (len(self._layout) - 1)
        self.virtual_size = Size(total, len(self._lines) + 1)

    @property
    def shown_columns(self) -> list[tuple[Column, int]]:
        """The columns on screen now, with their widths (narrow terminals drop some)."""
        if not self._layout:
            self._layout_columns()
        return list(self._layout)

    @property
    def hidden_columns(self) -> list[Column]:
        shown = {c.key for c, _w in self.shown_columns} | empty_columns(self.rows)
        return [c for c in COLUMNS if c.key not in shown]

    def on_resize(self, event: events.Resize) -> None:
        self._cache.clear()
        self._layout_columns()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    # -- rendering ---------------------------------------------------------------------
    def _header_strip(self) -> Strip:
        style = self.get_component_rich_style("runs-table--header")
        segments: list[Segment] = []
        for i, (column, width) in enumerate(self._layout):
            title = column.title
            if column.key == self.sort_key:
                title += "\u25bc" if self.sort_reverse else "\u25b2"
            if i:
                segments.append(Segment(SEP, style))
            segments.append(Segment(fit(title, width, column.align), style))
        return Strip(segments)

    def _row_strip(self, index: int, is_cursor: bool) -> Strip:
        row = self.rows[index]
        base = self.rich_style
        tone_style = self.get_component_rich_style(f"runs-table--{row.tone}")
        dim = self.get_component_rich_style("runs-table--dim")
        writing = self.get_component_rich_style("runs-table--writing")
        segments: list[Segment] = []
        for i, (column, width) in enumerate(self._layout):
            if column.key == "key":
                mark = "\u25cf " if row.key in self.selected else ""
                text = fit(mark + shorten_middle(cell_text(row, column), width - len(mark)), width)
            elif column.key in ("case_id", "candidate_id"):
                # ids share their start (case-rally-...): their end tells them apart
                text = fit(shorten_start(cell_text(row, column), width), width)
            else:
                text = fit(cell_text(row, column), width, column.align)
            style: Style = base
            if column.key == "status":
                style = writing if row.being_written else tone_style
            elif column.key == "problems" and row.problems:
                style = self.get_component_rich_style("runs-table--bad")
            elif column.key in ("mtime", "layout"):
                style = dim
            if i:
                segments.append(Segment(SEP, base))
            segments.append(Segment(text, style))
        strip = Strip(segments)
        if is_cursor:
            strip = strip.apply_style(self.get_component_rich_style("runs-table--cursor"))
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if not self._layout:
            self._layout_columns()
        group = -1
        if y == 0:
            key: tuple = ("header", self.sort_key, self.sort_reverse, scroll_x, width)
            index = -1
        else:
            line = scroll_y + y - 1
            if line >= len(self._lines):
                return Strip.blank(width, self.rich_style)
            index = self._lines[line]
            if index < 0:
                group, index = -index - 1, -1
                key = ("group", group, scroll_x, width)
            else:
                key = (index, index == self.cursor, scroll_x, width)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if group >= 0:
            strip = self._group_strip(group)
        else:
            strip = self._header_strip() if index < 0 else self._row_strip(index, index == self.cursor)
        if index >= 0:
            self.probes.painted_first_row()
        total = self.virtual_size.width
        strip = strip.crop_extend(scroll_x, scroll_x + max(width, 1), self.rich_style)
        del total
        self._cache[key] = strip
        return strip

    def _group_strip(self, group: int) -> Strip:
        _start, title, count, labelled = self.groups[group]
        style = self.get_component_rich_style("runs-table--header")
        text = f"\u25be {title} \u00b7 {count} case{'s' if count != 1 else ''} \u00b7 {labelled} labelled"
        return Strip([Segment(fit(text, max(self.virtual_size.width, 1)), style)])

    # -- cursor ------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self._cache.clear()
        self._scroll_cursor_into_view()
        self.refresh()
        self.post_message(self.Highlighted(self.current_row))

    def _scroll_cursor_into_view(self) -> None:
        height = max(1, self.scrollable_content_region.height - 1)
        top = self.scroll_offset.y
        line = self._line_of[self.cursor] if 0 <= self.cursor < len(self._line_of) else self.cursor
        if self.cursor < len(self._line_of) and line > 0 and self._lines[line - 1] < 0:
            line -= 1  # the group's header line comes into view with its first row
        if line < top:
            self.scroll_to(y=line, animate=False, force=True)
        elif self._line_of and self._line_of[self.cursor] >= top + height:
            self.scroll_to(y=self._line_of[self.cursor] - height + 1, animate=False, force=True)

    def action_cursor(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        height = max(1, self.scrollable_content_region.height - 2)
        self.action_cursor(direction * height)

    def action_edge(self, end: int) -> None:
        if self.rows:
            self.cursor = len(self.rows) - 1 if end else 0

    def action_select(self) -> None:
        row = self.current_row
        if row is not None:
            self.post_message(self.Selected(row))

    def action_mark(self) -> None:
        row = self.current_row
        if row is not None:
            self.post_message(self.Marked(row))
            self.action_cursor(1)

    class HeaderClicked(Message):
        def __init__(self, column_key: str) -> None:
            super().__init__()
            self.column_key = column_key

    def on_click(self, event: events.Click) -> None:
        if event.y <= 0:
            x = event.x + self.scroll_offset.x
            for column, width in self._layout:
                if x < width + len(SEP):
                    self.post_message(self.HeaderClicked(column.key))
                    break
                x -= width + len(SEP)
            return
        line = self.scroll_offset.y + event.y - 1
        index = self._lines[line] if 0 <= line < len(self._lines) else -1
        if 0 <= index < len(self.rows):
            if index == self.cursor and event.chain >= 2:
                self.action_select()
            self.cursor = index
