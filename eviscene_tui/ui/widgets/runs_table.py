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
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from eviscene_tui.probes import ViewProbes
from eviscene_tui.ui.actions import bindings
from eviscene_tui.state.rows import (
    COLUMNS,
    CaseRow,
    Column,
    cell_text,
    column_widths,
    empty_columns,
    longest_cells,
    shorten_middle,
    shorten_start,
)

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

    #: no repaint of its own: the two rows it left and reached are painted again (watch_cursor)
    cursor: reactive[int] = reactive(0, always_update=True, init=False, repaint=False)

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
        self._longest: list[int] | None = None  # the widest cell of each column over the rows (None: to count)
        self._painted: dict[int, tuple | None] = {}  # display line -> the key of the strip it last painted

    # -- data --------------------------------------------------------------------------
    def set_rows(self, rows: list[CaseRow], *, sort_key: str = "key", sort_reverse: bool = False,
                 groups: list[tuple[int, str, int, int]] | None = None, selected: frozenset[str] | set[str] = frozenset(),
                 longest: list[int] | None = None) -> None:
        """Show ``rows``. ``longest``: the widest cell of each column over them, when the
        caller keeps it (``RunsStore.visible_stats``); else it is counted over every row.
        Only the lines that look different are painted again (a batch of rows added
        below the page repaints nothing of it)."""
        current = self.current_row
        self.rows = rows
        self.sort_key = sort_key
        self.sort_reverse = sort_reverse
        self.groups = list(groups or [])
        self.selected = frozenset(selected)
        self._longest = list(longest) if longest is not None else None
        self._number_lines()
        if current is not None:
            # where the highlighted case is now: most often where it was
            at = self.cursor
            if not (0 <= at < len(rows) and rows[at].key == current.key):
                at = next((i for i, row in enumerate(rows) if row.key == current.key), -1)
            if at >= 0:
                self.set_reactive(RunsTable.cursor, at)
        if self.cursor >= len(rows):
            self.set_reactive(RunsTable.cursor, max(0, len(rows) - 1))
        if self._layout_columns():
            self.refresh()
            return
        # against what each line last painted (a row changed in place since looks the same
        # now as then: its old strip is what is on screen)
        painted = self._painted
        for y, key in enumerate(self._page_keys()):
            if painted.get(y, ()) != key:
                self.refresh(Region(0, y, max(self.virtual_size.width, self.size.width), 1))

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
        count = len(self.rows)
        # runs of rows between the group headers, as ranges (10,000 rows: no loop over them)
        starts = sorted({start: n for n, (start, _t, _c, _l) in enumerate(self.groups) if 0 <= start < count}.items())
        lines: list[int] = []
        line_of: list[int] = []
        prev = offset = 0  # offset: the header lines above the rows from prev on
        for start, n in starts:
            lines.extend(range(prev, start))
            line_of.extend(range(prev + offset, start + offset))
            lines.append(-(n + 1))
            offset += 1
            prev = start
        lines.extend(range(prev, count))
        line_of.extend(range(prev + offset, count + offset))
        self._lines, self._line_of = lines, line_of

    # -- layout ------------------------------------------------------------------------
    def _longest_cells(self) -> list[int]:
        if self._longest is None:
            self._longest = longest_cells(self.rows)
        return self._longest

    def _layout_columns(self) -> bool:
        """Lay the columns out for the rows and the width; True when the layout changed
        (every line is painted again: the strips cached for the old one are dropped)."""
        width = max(self.scrollable_content_region.width, 20) if self.is_mounted else 100
        old = self._layout
        self._layout = column_widths(self.rows, width, sort_key=self.sort_key, longest=self._longest_cells())
        if self.is_mounted and [c.key for c, _w in self._layout] != [c.key for c, _w in old]:
            self.post_message(self.ColumnsChanged())
        changed = [(c.key, w) for c, w in self._layout] != [(c.key, w) for c, w in old]
        if changed:
            self._cache.clear()
        total = sum(w for _c, w in self._layout) + len(SEP) * (len(self._layout) - 1)
        self.virtual_size = Size(total, len(self._lines) + 1)
        return changed

    @property
    def shown_columns(self) -> list[tuple[Column, int]]:
        """The columns on screen now, with their widths (narrow terminals drop some)."""
        if not self._layout:
            self._layout_columns()
        return list(self._layout)

    @property
    def hidden_columns(self) -> list[Column]:
        shown = {c.key for c, _w in self.shown_columns} | empty_columns(self.rows, self._longest_cells())
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

    def _line_key(self, y: int) -> tuple | None:
        """What display line ``y`` shows, as the key of its cached strip: the same key, the
        same strip (None: a blank line below the rows). Row lines are keyed by what their
        strip is made of, not by their index, so rows arriving elsewhere leave them be."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if y == 0:
            return ("header", self.sort_key, self.sort_reverse, scroll_x, width)
        line = scroll_y + y - 1
        if line >= len(self._lines):
            return None
        index = self._lines[line]
        if index < 0:
            return ("group", self.groups[-index - 1], self.virtual_size.width, scroll_x, width)
        row = self.rows[index]
        # the cursor's row: its look follows the focus (a focus change repaints, it does
        # not always restyle: the key holds it)
        cursor = self.has_focus if index == self.cursor else None
        return (row.key, row.cells(), row.key in self.selected, row.tone, row.being_written, row.problems > 0,
                cursor, scroll_x, width)

    def _page_keys(self) -> list[tuple | None]:
        """The keys of the lines on screen now (none before the table is laid out)."""
        if not self.is_mounted or not self._layout:
            return []
        return [self._line_key(y) for y in range(self.scrollable_content_region.height)]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if not self._layout:
            self._layout_columns()
        key = self._line_key(y)
        self._painted[y] = key
        if key is None:
            return Strip.blank(width, self.rich_style)
        group = index = -1
        if y > 0:
            index = self._lines[scroll_y + y - 1]
            if index < 0:
                group, index = -index - 1, -1
            elif index == self.cursor:
                self.probes.painted_cursor(index)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if group >= 0:
            strip = self._group_strip(group)
        else:
            strip = self._header_strip() if index < 0 else self._row_strip(index, index == self.cursor)
        if index >= 0:
            self.probes.painted_first_row()
        strip = strip.crop_extend(scroll_x, scroll_x + max(width, 1), self.rich_style)
        self._cache[key] = strip
        return strip

    def _group_strip(self, group: int) -> Strip:
        _start, title, count, labelled = self.groups[group]
        style = self.get_component_rich_style("runs-table--header")
        text = f"\u25be {title} \u00b7 {count} case{'s' if count != 1 else ''} \u00b7 {labelled} labelled"
        return Strip([Segment(fit(text, max(self.virtual_size.width, 1)), style)])

    # -- cursor ------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        top = self.scroll_offset.y
        self._scroll_cursor_into_view()
        if self.scroll_offset.y == top:
            # only the two rows the cursor left and reached look different (a scroll
            # repaints everything itself)
            self._refresh_row(old)
            self._refresh_row(new)
        self.post_message(self.Highlighted(self.current_row))

    def _refresh_row(self, index: int) -> None:
        """Paint the line of row ``index`` again (when it is on screen)."""
        if not 0 <= index < len(self._line_of):
            return
        y = self._line_of[index] - self.scroll_offset.y + 1  # the header is line 0
        if 1 <= y < self.scrollable_content_region.height:
            self.refresh(Region(0, y, max(self.virtual_size.width, self.size.width), 1))

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
