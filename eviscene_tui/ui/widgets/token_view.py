"""A Line-API token grid: one row shows N cells; never a widget per token.

- rows are computed lazily from :class:`~eviscene_tui.tokens.layout.RowLayout`
  (O(log segments) per row), so 1,000,000 ids cost nothing until a row is visible;
- a run of image pads is one cell on a row of its own (``<|image_pad|> ×1024 · image #1``),
  between the ``<|vision_start|>`` / ``<|vision_end|>`` cells;
- a gutter (index ruler) shows the id offset of each row and ``P``/``C`` for prompt /
  completion; cells alternate two backgrounds so token boundaries are visible;
- cursor (left/right/up/down/page/home/end), jump to offset, search by id or text
  (next/previous match), optional logprob overlay on completion tokens;
- rendered rows go through an LRU Strip cache cleared on style change;
- every colour comes from component classes (theme variables), pieces are already
  ``safe_text``'ed by the decoder, and no markup is ever built from token text.

The widget does no I/O: when a remote decoder has not fetched a piece yet, it posts
:class:`TokenView.PiecesNeeded` and the screen's worker fetches them.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from eviscene_tui.tokens.capture import CaptureData, logprob_bucket
from eviscene_tui.tokens.decode import RawDecoder, TokenDecoder
from eviscene_tui.tokens.layout import CellLayout, PadRun, RowLayout
from eviscene_tui.tokens.search import find_offset, find_text, matching_ids, parse_query
from eviscene_tui.tokens.vision import VisionIds

_VISIBLE_WS = str.maketrans({" ": "·", "\n": "↵", "\t": "→", "\r": "␍"})


def display_piece(piece: str) -> str:
    """Make whitespace inside a piece visible (pieces are already safe_text'ed)."""
    return piece.translate(_VISIBLE_WS)


def run_label(run: PadRun, pad_name: str | None) -> str:
    name = pad_name or ("<|image_pad|>" if run.kind == "image" else "<|video_pad|>")
    return f"{name} ×{run.length} · {run.kind} #{run.number}"


class TokenView(ScrollView, can_focus=True):
    """Virtualized grid of tokens for one :class:`CaptureData`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "token-view--gutter",
        "token-view--gutter-completion",
        "token-view--even",
        "token-view--odd",
        "token-view--special",
        "token-view--image",
        "token-view--pending",
        "token-view--cursor",
        "token-view--match",
        "token-view--highlight",
        "token-view--lp-high",
        "token-view--lp-mid",
        "token-view--lp-low",
        "token-view--lp-vlow",
    }

    DEFAULT_CSS = """
    TokenView {
        background: $surface;
        color: $foreground;
        & > .token-view--gutter { color: $foreground-muted; background: $surface; }
        & > .token-view--gutter-completion { color: $accent; background: $surface; text-style: bold; }
        & > .token-view--even { background: $surface; }
        & > .token-view--odd { background: $panel; }
        & > .token-view--special { color: $warning; text-style: bold; }
        & > .token-view--image { color: $secondary; text-style: bold; }
        & > .token-view--pending { color: $foreground-muted; }
        & > .token-view--cursor { background: $primary; color: $text; text-style: bold; }
        & > .token-view--match { background: $warning-muted; }
        & > .token-view--highlight { background: $success-muted; }
        & > .token-view--lp-high { color: $success; }
        & > .token-view--lp-mid { color: $foreground; }
        & > .token-view--lp-low { color: $warning; }
        & > .token-view--lp-vlow { color: $error; text-style: bold; }
    }
    TokenView:focus { background-tint: $foreground 3%; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "cursor(-1)", "Prev token", show=False),
        Binding("right", "cursor(1)", "Next token", show=False),
        Binding("up", "cursor_row(-1)", "Row up", show=False),
        Binding("down", "cursor_row(1)", "Row down", show=False),
        Binding("pageup", "cursor_page(-1)", "Page up", show=False),
        Binding("pagedown", "cursor_page(1)", "Page down", show=False),
        Binding("home", "cursor_home", "First", show=False),
        Binding("end", "cursor_end", "Last", show=False),
        Binding("n", "next_match", "Next match", id="token_view.next_match"),
        Binding("N", "previous_match", "Prev match", show=False, id="token_view.previous_match"),
        Binding("l", "toggle_overlay", "Logprobs", id="token_view.logprobs"),
        Binding("plus,equals_sign", "cell_width(2)", "Wider", show=False),
        Binding("minus", "cell_width(-2)", "Narrower", show=False),
    ]

    cursor: var[int] = var(0, init=False)
    overlay: var[bool] = var(True, init=False)
    cell_width: var[int] = var(10, init=False)

    class CursorMoved(Message):
        """The selected cell changed."""

        def __init__(self, view: "TokenView", cell: int, offset: int, length: int) -> None:
            super().__init__()
            self.view = view
            self.cell = cell
            self.offset = offset
            self.length = length

        @property
        def control(self) -> "TokenView":
            return self.view

    class PiecesNeeded(Message):
        """A remote decoder lacks the pieces of these ids (visible rows)."""

        def __init__(self, view: "TokenView", ids: list[int]) -> None:
            super().__init__()
            self.view = view
            self.ids = ids

    class SearchResult(Message):
        def __init__(self, view: "TokenView", query: str, offset: int | None, message: str) -> None:
            super().__init__()
            self.view = view
            self.query = query
            self.offset = offset
            self.message = message

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.data: CaptureData | None = None
        self.decoder: TokenDecoder = RawDecoder()
        self.vision: VisionIds | None = None
        self.cells: CellLayout | None = None
        self.rows: RowLayout | None = None
        self._strip_cache: LRUCache[tuple, Strip] = LRUCache(2048)
        self._styles: dict[str, Style] = {}
        self._pieces_gen = 0
        self._search_gen = 0
        self._match_ids: set[int] | None = None
        self._match_id: int | None = None
        self._match_text: str | None = None
        self._match_span: tuple[int, int] | None = None
        self._query: str = ""
        self._requested: set[int] = set()
        self._unique: set[int] | None = None

    # ------------------------------------------------------------------ data
    def load(
        self,
        data: CaptureData,
        decoder: TokenDecoder,
        cells: CellLayout | None = None,
        *,
        vision: VisionIds | None = None,
    ) -> None:
        """Show ``data``. ``cells`` may be pre-built in a worker (it scans the ids once);
        ``vision`` overrides the decoder's vision ids (e.g. guessed from framing)."""
        self.data = data
        self.decoder = decoder
        self.vision = vision or decoder.vision
        self.cells = cells if cells is not None else CellLayout(data.ids, self.vision)
        self._unique = None
        self._match_ids = None
        self._match_id = None
        self._query = ""
        self._requested.clear()
        self._strip_cache.clear()
        self._relayout()
        self.set_reactive(TokenView.cursor, 0)
        self.scroll_to(0, 0, animate=False)
        self._post_cursor()
        self.refresh()

    def pieces_updated(self) -> None:
        """The decoder cache grew: re-render."""
        self._pieces_gen += 1
        self._strip_cache.clear()
        self.refresh()

    @property
    def per_row(self) -> int:
        return self.rows.per_row if self.rows is not None else 1

    @property
    def gutter_width(self) -> int:
        n = len(self.data.ids) if self.data is not None else 0
        return len(f"{n:,}") + 4  # "P " + number + " │"

    def _relayout(self) -> None:
        if self.cells is None or self.data is None:
            self.rows = None
            self.virtual_size = Size(0, 0)
            return
        width = max(1, self.scrollable_content_region.width or self.size.width or 80)
        per_row = max(1, (width - self.gutter_width - 1) // max(2, self.cell_width))
        breaks = []
        if self.data.completion_start:
            breaks.append(self.data.completion_start)
        if self.data.highlight:
            breaks.extend(x for x in self.data.highlight)
        if self.rows is None or self.rows.per_row != per_row or self.rows.cells is not self.cells:
            self.rows = RowLayout(self.cells, per_row, break_offsets=breaks)
        self.virtual_size = Size(self.gutter_width + per_row * self.cell_width, len(self.rows))
        self._strip_cache.clear()

    def on_resize(self) -> None:
        if self.cells is not None:
            self._relayout()
            self._scroll_cursor_visible()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strip_cache.clear()

    # ------------------------------------------------------------------ helpers
    def _style(self, name: str) -> Style:
        got = self._styles.get(name)
        if got is None:
            got = self.get_component_rich_style(f"token-view--{name}", partial=True)
            self._styles[name] = got
        return got

    def cell_info(self, cell: int) -> tuple[int, int, PadRun | None]:
        assert self.cells is not None
        return self.cells.cell(cell)

    @property
    def cursor_offset(self) -> int:
        if self.cells is None or self.cells.n_cells == 0:
            return 0
        return self.cells.cell(self.cursor)[0]

    def token_label(self, token_id: int) -> str | None:
        """Special-token name of ``token_id`` (tokenizer / server / vision table), else None."""
        name = self.decoder.special_name(token_id)
        if name is None and self.vision is not None:
            # with a tokenizer or server the vocabulary is authoritative; without one
            # (raw ids) the family table labels the well-known Qwen specials
            if self.decoder.source == "raw":
                name = self.vision.family_special(token_id)
            else:
                name = self.vision.name_of(token_id)
        return name

    def _pad_name(self, run: PadRun) -> str | None:
        return self.token_label(run.pad_id)

    def _cell_text(self, cell: int) -> tuple[str, str | None, int, int, PadRun | None]:
        """(display text, kind-style, offset, length, run)."""
        offset, length, run = self.cells.cell(cell)  # type: ignore[union-attr]
        if run is not None:
            return run_label(run, self._pad_name(run)), "image", offset, length, run
        tid = self.data.ids[offset]  # type: ignore[union-attr]
        name = self.token_label(tid)
        if name is not None:
            return name, "special", offset, 1, None
        piece = self.decoder.piece(tid)
        if piece is None:
            return f"#{tid}", "pending", offset, 1, None
        return display_piece(piece), None, offset, 1, None

    # ------------------------------------------------------------------ rendering
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row_index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if self.rows is None or row_index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows.row(row_index)
        cursor_col = self.cursor - row.cell_start if row.cell_start <= self.cursor < row.cell_end else -1
        key = (row_index, cursor_col, self.rows.per_row, self.cell_width, self.overlay, self._search_gen, self._pieces_gen)
        strip = self._strip_cache.get(key)
        if strip is None:
            strip = self._render_row(row_index, row.cell_start, row.cell_end, row.kind, cursor_col, base)
            self._strip_cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_offsets(scroll_x, row_index)

    def _render_row(self, row_index: int, start: int, end: int, kind: str, cursor_col: int, base: Style) -> Strip:
        data = self.data
        assert data is not None and self.cells is not None
        first_offset = self.cells.cell(start)[0]
        in_completion = data.completion_start is not None and first_offset >= data.completion_start
        gutter_style = base + self._style("gutter-completion" if in_completion else "gutter")
        mark = "C" if in_completion else ("P" if data.completion_start is not None else " ")
        digits = self.gutter_width - 4
        segments = [Segment(f"{mark} {first_offset:>{digits},} │", gutter_style), Segment(" ", base)]
        w = self.cell_width
        missing: list[int] = []
        for col, cell in enumerate(range(start, end)):
            text, kind_style, offset, length, run = self._cell_text(cell)
            if kind_style == "pending":
                missing.append(data.ids[offset])
            style = base + self._style("odd" if cell % 2 else "even")
            if kind_style:
                style += self._style(kind_style)
            hl = data.highlight
            if hl is not None and hl[0] <= offset < hl[1]:
                style += self._style("highlight")
            if self.overlay and run is None and data.logprobs is not None:
                bucket = logprob_bucket(data.logprob_at(offset))
                if bucket:
                    style += self._style(f"lp-{bucket}")
            span = self._match_span
            if span is not None and span[0] <= offset < span[1]:
                style += self._style("match")
            elif self._match_ids is not None and run is None and data.ids[offset] in self._match_ids:
                style += self._style("match")
            elif self._match_id is not None and run is None and data.ids[offset] == self._match_id:
                style += self._style("match")
            if col == cursor_col:
                style += self._style("cursor")
            if kind == "run":
                label = f"{text}  (ids {offset:,}–{offset + length - 1:,})"
                segments.append(Segment(label, style))
                break
            if len(text) > w - 1:
                text = text[: max(1, w - 2)] + "…"
            segments.append(Segment(text.ljust(w - 1), style))
            segments.append(Segment(" ", base))
        if missing:
            todo = [i for i in missing if i not in self._requested]
            if todo:
                self._requested.update(todo)
                self.post_message(self.PiecesNeeded(self, todo))
        return Strip(segments)

    # ------------------------------------------------------------------ cursor
    def _post_cursor(self) -> None:
        if self.cells is None or self.cells.n_cells == 0:
            return
        offset, length, _ = self.cells.cell(self.cursor)
        self.post_message(self.CursorMoved(self, self.cursor, offset, length))

    def watch_cursor(self, old: int, new: int) -> None:
        if self.rows is not None:
            for c in {old, new}:
                if 0 <= c < (self.cells.n_cells if self.cells else 0):
                    r = self.rows.row_of_cell(c)
                    self.refresh_lines(r - self.scroll_offset.y, 1)
        self._scroll_cursor_visible()
        self._post_cursor()

    def watch_overlay(self) -> None:
        self._strip_cache.clear()
        self.refresh()

    def watch_cell_width(self) -> None:
        self._relayout()
        self._scroll_cursor_visible()
        self.refresh()

    def validate_cursor(self, value: int) -> int:
        n = self.cells.n_cells if self.cells is not None else 0
        return max(0, min(value, n - 1)) if n else 0

    def validate_cell_width(self, value: int) -> int:
        return max(4, min(value, 40))

    def _scroll_cursor_visible(self) -> None:
        if self.rows is None or self.cells is None or self.cells.n_cells == 0:
            return
        r = self.rows.row_of_cell(self.cursor)
        self.scroll_to_region(Region(0, r, 1, 1), animate=False, immediate=True)

    def action_cursor(self, delta: int) -> None:
        self.cursor = self.cursor + int(delta)

    def action_cursor_row(self, delta: int) -> None:
        if self.rows is None or len(self.rows) == 0:
            return
        r = self.rows.row_of_cell(self.cursor)
        col = self.cursor - self.rows.row(r).cell_start
        target = max(0, min(len(self.rows) - 1, r + int(delta)))
        row = self.rows.row(target)
        self.cursor = min(row.cell_start + col, row.cell_end - 1)

    def action_cursor_page(self, delta: int) -> None:
        height = max(1, self.scrollable_content_region.height - 1)
        self.action_cursor_row(int(delta) * height)

    def action_cursor_home(self) -> None:
        self.cursor = 0

    def action_cursor_end(self) -> None:
        self.cursor = (self.cells.n_cells - 1) if self.cells else 0

    def action_toggle_overlay(self) -> None:
        self.overlay = not self.overlay

    def action_cell_width(self, delta: int) -> None:
        self.cell_width = self.cell_width + int(delta)

    # ------------------------------------------------------------------ navigation API
    def jump_to_offset(self, offset: int) -> bool:
        """Put the cursor on the cell holding id ``offset``. False when out of range."""
        if self.cells is None or self.data is None or not 0 <= offset < len(self.data.ids):
            return False
        self.cursor = self.cells.cell_of_offset(offset)
        return True

    def unique_ids(self) -> set[int]:
        if self._unique is None:
            self._unique = set(self.data.ids) if self.data is not None else set()
        return self._unique

    def set_query(self, raw: str) -> None:
        q = parse_query(raw)
        self._query = raw
        self._match_id = None
        self._match_ids = None
        self._match_text = None
        self._match_span = None
        if q is not None and self.data is not None:
            if q.kind == "id":
                self._match_id = q.token_id
            else:
                self._match_text = q.text
                self._match_ids = matching_ids(self.unique_ids(), self.decoder, q.text)
        self._search_gen += 1
        self._strip_cache.clear()
        self.refresh()

    def find(self, raw: str | None = None, *, forward: bool = True) -> int | None:
        """Search (or continue searching) from the cursor; moves the cursor to the match."""
        if raw is not None and raw != self._query:
            self.set_query(raw)
        if self.data is None or self.cells is None:
            return None
        start = self.cursor_offset
        if forward:
            _, length, _ = self.cells.cell(self.cursor)
            start = start + length - 1
        if self._match_text is not None:
            span = find_text(self.data.ids, self.decoder, self._match_text, start, forward=forward)
            found = span[0] if span is not None else None
            self._match_span = span
            self._search_gen += 1
            self._strip_cache.clear()
            self.refresh()
        else:
            found = find_offset(self.data.ids, start, target=self._match_id, forward=forward)
        if found is None:
            msg = f"no match for {self._query!r}" if self._query else "no search"
        else:
            self.jump_to_offset(found)
            if self._match_span is not None and self._match_span[1] - self._match_span[0] > 1:
                msg = f"match at offsets {self._match_span[0]:,}–{self._match_span[1] - 1:,}"
            else:
                msg = f"match at offset {found:,}"
        self.post_message(self.SearchResult(self, self._query, found, msg))
        return found

    def action_next_match(self) -> None:
        self.find(forward=True)

    def action_previous_match(self) -> None:
        self.find(forward=False)
