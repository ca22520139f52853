"""A Line-API token view in two modes: a grid (N cells a row) or flowing text; never a
widget per token.

Flowing mode (``f`` toggles): the decoded text wrapped as text
(:class:`~eviscene_tui.tokens.flow.FlowLayout`, wrapped lazily segment by segment), token
boundaries shown by alternating backgrounds, special tokens as labelled chips, image-pad
runs collapsed into one chip, and the same logprob colours, cursor, search and highlight.

Grid mode:

- rows are computed lazily from :class:`~eviscene_tui.tokens.layout.RowLayout`
  (O(log segments) per row), so 1,000,000 ids cost nothing until a row is visible;
- a run of image pads is one cell on a row of its own (``<|image_pad|> ×1024 · image #1``),
  between the ``<|vision_start|>`` / ``<|vision_end|>`` cells;
- a gutter (index ruler) shows the id offset of each row and ``P``/``C`` for prompt /
  completion; cells alternate two backgrounds so token boundaries are visible;
- cursor (left/right/up/down/page/home/end), jump to offset, search by id (here, C-speed)
  or by text (the view posts :class:`TokenView.TextSearchRequested`; the screen scans the
  whole capture in a worker and hands the match back), optional logprob overlay;
- rendered rows go through an LRU Strip cache cleared on style change;
- every colour comes from component classes (theme variables), pieces are already
  ``safe_text``'ed by the decoder, and no markup is ever built from token text.

The widget does no I/O: when a remote decoder has not fetched a piece yet, it posts
:class:`TokenView.PiecesNeeded` and the screen's worker fetches them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip

from eviscene_tui.tokens.capture import CaptureData, logprob_bucket
from eviscene_tui.tokens.decode import RawDecoder, TokenDecoder
from eviscene_tui.tokens.flow import FlowLayout, Frag, id_positions
from eviscene_tui.tokens.layout import CellLayout, PadRun, RowLayout
from eviscene_tui.tokens.search import find_offset, parse_query
from eviscene_tui import pace, switches
from eviscene_tui.probes import ViewProbes
from eviscene_tui.ui.actions import bindings
from eviscene_tui.ui.widgets.lean_scrollbar import LeanScrollBar, plain_box
from eviscene_tui.tokens.vision import FAMILY_SPECIALS, VisionIds

MODES = ("grid", "flow")

_VISIBLE_WS = str.maketrans({" ": "·", "\n": "↵", "\t": "→", "\r": "␍"})


def display_piece(piece: str) -> str:
    """Make whitespace inside a piece visible (pieces are already safe_text'ed)."""
    return piece.translate(_VISIBLE_WS)


#: what an image's check status means, in a chip
IMAGE_FAULTS = {"sha_mismatch": "bytes differ from the record", "missing": "image file missing", "unreadable": "image unreadable"}


def run_label(run: PadRun, pad_name: str | None) -> str:
    name = pad_name or ("<|image_pad|>" if run.kind == "image" else "<|video_pad|>")
    return f"{name} ×{run.length} · {run.kind} #{run.number}"


class TokenView(ScrollView, can_focus=True):
    """Virtualized view of the tokens of one :class:`CaptureData` (grid or flowing text)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "token-view--gutter",
        "token-view--gutter-completion",
        "token-view--even",
        "token-view--odd",
        "token-view--special",
        "token-view--image",
        "token-view--pending",
        "token-view--newline",
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
        & > .token-view--newline { color: $foreground-muted; }
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

    BINDINGS: ClassVar[list[BindingType]] = bindings("token_view")

    cursor: var[int] = var(0, init=False)
    overlay: var[bool] = var(True, init=False)
    cell_width: var[int] = var(10, init=False)
    mode: var[str] = var("grid", init=False)

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

    class TextSearchRequested(Message):
        """Find ``text`` after (``forward``) or before offset ``start``: the screen scans in a worker."""

        def __init__(self, view: "TokenView", query: str, text: str, start: int, forward: bool) -> None:
            super().__init__()
            self.view = view
            self.query = query
            self.text = text
            self.start = start
            self.forward = forward

        @property
        def control(self) -> "TokenView":
            return self.view

    class OverlayToggled(Message):
        def __init__(self, view: "TokenView", on: bool) -> None:
            super().__init__()
            self.view = view
            self.on = on

        @property
        def control(self) -> "TokenView":
            return self.view

    class ModeChanged(Message):
        def __init__(self, view: "TokenView", mode: str) -> None:
            super().__init__()
            self.view = view
            self.mode = mode

        @property
        def control(self) -> "TokenView":
            return self.view

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.data: CaptureData | None = None
        self.decoder: TokenDecoder = RawDecoder()
        self.vision: VisionIds | None = None
        self.cells: CellLayout | None = None
        self.rows: RowLayout | None = None
        self.flow: FlowLayout | None = None
        self._strip_cache: LRUCache[tuple, Strip] = LRUCache(1024)
        self._ahead: deque[int] = deque()  # rows to render ahead of the scroll (see _plan_ahead)
        self._ahead_plan: tuple[int, str, int, int, int] | None = None
        self._ahead_scheduled = False
        self._size_drifted = False  # the flowing line count drifted in a paint; synced once idle
        self._ahead_since = 0.0  # when the plan was made (input after it stops the plan)
        self.probes = ViewProbes()  # lines rendered afresh (not from the cache), for tests and the bench
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
        self._line_starts: list[int] | None = None  # cells where a chat message starts (flow segments)
        self._labels: dict[int, str | None] = {}  # token id -> special-token label (or None)
        self._combos: dict[tuple, Style] = {}  # combined cell styles
        self._base: Style | None = None  # the widget's rich style, cached per style update
        self._extra_rows = 0  # blank rows after the end, so a row near the end can be scrolled to the top

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
        self._match_text = None
        self._match_span = None
        self._query = ""
        self._requested.clear()
        self._forget_strips()
        self._line_starts = None
        self._extra_rows = 0
        self._labels.clear()
        self.rows = None
        self.flow = None
        self._relayout()
        self.set_reactive(TokenView.cursor, 0)
        self.scroll_to(0, 0, animate=False)
        self._post_cursor()
        self.refresh()

    def set_highlight(self, span: tuple[int, int] | None) -> None:
        """Highlight ``span`` (id offsets, end exclusive), e.g. the hint once it is located."""
        if self.data is None:
            return
        self.data.highlight = span
        self.rows = None  # rows break at the highlight's ends
        self._relayout()
        self._scroll_cursor_visible()
        self.refresh()

    def pieces_updated(self) -> None:
        """The decoder cache grew: re-render."""
        self._pieces_gen += 1
        self._forget_strips()
        if self.flow is not None:
            self.flow.invalidate()
        self.refresh()

    @property
    def per_row(self) -> int:
        return self.rows.per_row if self.rows is not None else 1

    @property
    def gutter_width(self) -> int:
        n = len(self.data.ids) if self.data is not None else 0
        return len(f"{n:,}") + 4  # "P " + number + " │"

    def _text_width(self) -> int:
        """The flowing text's width: the view's, less the gutter and the vertical scrollbar.
        The bar's columns are kept whether it shows yet or not: laid out before it appeared
        (the text is not long yet), lines were two columns too wide and their ends (the
        last id on a line) hidden under it."""
        if self.size.width:
            bar = self.styles.scrollbar_size_vertical if self.styles.overflow_y in ("auto", "scroll") else 0
            width = max(1, self.size.width - bar)
        else:
            width = max(1, self.scrollable_content_region.width or 80)
        return max(8, width - self.gutter_width - 1)

    def _relayout(self) -> None:
        if self.cells is None or self.data is None:
            self.rows = None
            self.flow = None
            self.virtual_size = Size(0, 0)
            return
        breaks = []
        if self.data.completion_start:
            breaks.append(self.data.completion_start)
        if self.data.highlight:
            breaks.extend(x for x in self.data.highlight)
        if self.mode == "flow":
            width = self._text_width()
            if self.flow is None or self.flow.width != width or self.flow.cells is not self.cells:
                cells = self.cells
                comp = self.data.completion_start
                self.flow = FlowLayout(
                    cells, width, self._flow_text,
                    line_starts=self._message_starts(),
                    break_cells=[cells.cell_of_offset(comp)] if comp is not None and 0 < comp < len(self.data.ids) else [],
                )
            self.virtual_size = Size(self.gutter_width + 1 + width, len(self.flow) + self._extra_rows)
        else:
            width = max(1, self.scrollable_content_region.width or self.size.width or 80)
            per_row = max(1, (width - self.gutter_width - 1) // max(2, self.cell_width))
            if self.rows is None or self.rows.per_row != per_row or self.rows.cells is not self.cells:
                self.rows = RowLayout(self.cells, per_row, break_offsets=breaks)
            self.virtual_size = Size(self.gutter_width + per_row * self.cell_width, len(self.rows) + self._extra_rows)
        self._forget_strips()

    def _message_starts(self) -> list[int]:
        """Cells holding ``<|im_start|>`` (found from the ids: the decoder's or the family's id)."""
        if self._line_starts is None:
            assert self.data is not None and self.cells is not None
            im_start = next((sp.id for sp in self.decoder.specials.values() if sp.content == "<|im_start|>"), None)
            if im_start is None and self.vision is not None and self.vision.family is not None:
                im_start = next((i for i, n in FAMILY_SPECIALS.get(self.vision.family, {}).items() if n == "<|im_start|>"), None)
            offsets = id_positions(self.data.ids, im_start) if im_start is not None else []
            self._line_starts = [self.cells.cell_of_offset(o) for o in offsets]
        return self._line_starts

    def on_resize(self) -> None:
        """Lay out again for the new width, keeping the cursor's token on the same screen row."""
        if self.cells is None or self.cells.n_cells == 0:
            return
        before = self._cursor_screen_row()
        self._relayout()
        height = max(1, self.scrollable_content_region.height)
        self.scroll_cursor_to(min(max(0, before), height - 1))

    def _cursor_screen_row(self) -> int:
        """Where the cursor's row is on screen in the current layout (before a relayout)."""
        if self.mode == "flow" and self.flow is not None:
            return self.flow.line_of_cell(self.cursor) - self.scroll_offset.y
        if self.mode == "grid" and self.rows is not None:
            return self.rows.row_of_cell(self.cursor) - self.scroll_offset.y
        return 0

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._combos.clear()
        self._base = None
        self._forget_strips()

    # ------------------------------------------------------------------ helpers
    def _style(self, name: str) -> Style:
        got = self._styles.get(name)
        if got is None:
            got = self.get_component_rich_style(f"token-view--{name}", partial=True)
            self._styles[name] = got
        return got

    @property
    def cursor_offset(self) -> int:
        if self.cells is None or self.cells.n_cells == 0:
            return 0
        return self.cells.cell(self.cursor)[0]

    def token_label(self, token_id: int) -> str | None:
        """Special-token name of ``token_id`` (tokenizer / server / vision table), else None."""
        try:
            return self._labels[token_id]
        except KeyError:
            pass
        name = self._token_label(token_id)
        self._labels[token_id] = name
        return name

    def _token_label(self, token_id: int) -> str | None:
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

    def _image_flag(self, run: PadRun) -> str:
        """`` ✗ …`` after an image run whose bound image failed its check (the capture's own
        media verification, or what the integrity check found about it), else ""."""
        data = self.data
        if data is None or run.kind != "image":
            return ""
        report = data.media_report
        images = report.images if report is not None else []
        if 0 < run.number <= len(images):
            img = images[run.number - 1]
            if img.status != "ok":
                return " \u2717 " + IMAGE_FAULTS.get(img.status, img.status)
        if data.media_drift:
            return " \u2717 media binding drift (see Checks)"
        return ""

    def _cell_text(self, cell: int) -> tuple[str, str | None, int, int, PadRun | None]:
        """(display text, kind-style, offset, length, run)."""
        offset, length, run = self.cells.cell(cell)  # type: ignore[union-attr]  # cells are drawn only once data is set
        if run is not None:
            return run_label(run, self._pad_name(run)) + self._image_flag(run), "image", offset, length, run
        tid = self.data.ids[offset]  # type: ignore[union-attr]  # cells are drawn only once data is set
        name = self.token_label(tid)
        if name is not None:
            return name, "special", offset, 1, None
        piece = self.decoder.piece(tid)
        if piece is None:
            return f"#{tid}", "pending", offset, 1, None
        return display_piece(piece), None, offset, 1, None

    def _flow_text(self, cell: int) -> tuple[str, str | None]:
        """What ``cell`` shows in flowing mode: its decoded text, or a chip."""
        offset, length, run = self.cells.cell(cell)  # type: ignore[union-attr]  # cells are drawn only once data is set
        if run is not None:
            return f"[{run_label(run, self._pad_name(run))}{self._image_flag(run)}]", "image"
        tid = self.data.ids[offset]  # type: ignore[union-attr]  # cells are drawn only once data is set
        name = self.token_label(tid)
        if name is not None:
            return name, "special"
        if self.decoder.source == "raw":
            return f"#{tid}", "id"  # no tokenizer: one chip per id, never split, set apart
        piece = self.decoder.piece(tid)
        if piece is None:
            if tid not in self._requested:
                self._requested.add(tid)
                self.post_message(self.PiecesNeeded(self, [tid]))
            return f"#{tid}", "pending"
        if piece == "":
            return "∅", "pending"
        return piece, None

    # ------------------------------------------------------------------ rendering
    def render_lines(self, crop: Region) -> list[Strip]:
        if self.mode == "flow" and self.flow is not None:
            self._settle_flow()
        lean = switches.on("lean_token_view") and plain_box(self)
        lines = self._render_plain_lines(crop) if lean else super().render_lines(crop)
        self._request_margin()
        self._plan_ahead()
        return lines

    #: rows rendered ahead in one idle slice: a key pressed meanwhile waits for one slice at most
    AHEAD_SLICE = 4

    @property
    def ahead_pending(self) -> int:
        """Rows still to be rendered ahead of the scroll."""
        return len(self._ahead)

    def _forget_strips(self) -> None:
        """Drop every rendered line (layout, pieces, styles or marks changed)."""
        self._strip_cache.clear()
        self._ahead_plan = None
        self._ahead.clear()

    def _plan_ahead(self) -> None:
        """Once this frame is painted, render the page below the view and the page above it
        (see :meth:`_rows_above`) a few rows per idle slice, so the next page key shows
        cached lines. A new scroll position, layout, search or set of pieces plans afresh."""
        if self.data is None or not plain_box(self):
            return
        total = len(self.flow) if self.mode == "flow" and self.flow is not None else len(self.rows) if self.rows is not None else 0
        top = self.scroll_offset.y
        plan = (top, self.mode, total, self._search_gen, self._pieces_gen)
        if plan != self._ahead_plan:
            self._ahead_plan = plan
            self._ahead_since = time.monotonic()
            height = max(1, self.scrollable_content_region.height)
            self._ahead = deque([*range(top + height, min(total, top + 2 * height)), *self._rows_above(top, height)])
        if not self._ahead_scheduled and (self._ahead or self._size_drifted):
            self._ahead_scheduled = True
            self.call_after_refresh(self._render_ahead)

    def _rows_above(self, top: int, height: int) -> list[int]:
        """The rows of the page above the view, nearest first. Flowing text stops at the first
        segment still laid out by estimate: wrapping it would change the line count above the
        view and shift what is on screen."""
        rows = list(range(top - 1, max(0, top - height) - 1, -1))
        flow = self.flow
        if self.mode != "flow" or flow is None:
            return rows
        for i, row in enumerate(rows):
            if not flow.exact[flow.lines.find(row)]:
                return rows[:i]
        return rows

    def _render_ahead(self) -> None:
        """One idle slice of :meth:`_plan_ahead`: the rows' strips, cropped and filtered as
        :meth:`_render_plain_lines` will ask for them (each strip keeps what it made)."""
        self._ahead_scheduled = False
        if self.data is None:
            return
        if pace.last_input() > self._ahead_since:
            # a key arrived since the plan: it goes first (its frame plans afresh)
            self._ahead.clear()
            self._ahead_plan = None
        filters = self.get_line_filters()
        base_background, background = self.background_colors
        scroll_x = self.scroll_offset.x
        width = self.scrollable_content_region.width
        base = self._base_style
        pad = Style(bgcolor=(base_background + background).rich_color)
        for _ in range(self.AHEAD_SLICE):
            if not self._ahead:
                break
            strip = self._line_strip(self._ahead.popleft(), scroll_x, width, base).crop_extend(0, self.size.width, pad)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
        if not self._ahead:
            if self._size_drifted:  # the line count drifted while frames were painted
                self._size_drifted = False
                self._sync_flow_size()
            return
        # the next slice is queued from the event loop, not straight into this view's
        # messages: a message pump runs its queued messages back to back without yielding,
        # so a key (which reaches this view through the app and the screen) would wait for
        # every slice; from the loop, the key's hops run before the next slice is queued
        self._ahead_scheduled = True
        asyncio.get_running_loop().call_soon(self.call_later, self._render_ahead)

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Textual's vertical scrollbar as a :class:`LeanScrollBar`: the same bar (styles,
        hover, grab, mouse actions) whose rows render without Textual's general pipeline,
        which cost a fifth of every page's frame. Textual creates its bar in this property;
        this creates the lean kind the same way (the two private names are Textual's own
        slot for the bar and its way to start a child widget)."""
        if not switches.on("lean_token_view"):
            return super().vertical_scrollbar
        bar = self._vertical_scrollbar
        if bar is None:
            bar = LeanScrollBar(vertical=True, name="vertical", thickness=self.scrollbar_size_vertical)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return bar

    def _render_plain_lines(self, crop: Region) -> list[Strip]:
        """Textual's line pipeline without its per-frame copy of every line.

        Textual wraps each line a widget renders in a new strip before the app's line filters
        run, so a line is filtered again in every frame that paints it. Here the view's own
        (cached) strips go to the filters, whose results each strip keeps: a page rendered
        ahead of the scroll (see :meth:`_render_ahead`) costs next to nothing when it is shown.
        The output equals Textual's (tests compare them)."""
        filters = self.get_line_filters()
        base_background, background = self.background_colors
        width = self.size.width  # the lines reach under the scrollbar, as Textual pads them
        pad = Style(bgcolor=(base_background + background).rich_color)
        strips: list[Strip] = []
        for y in crop.line_range:
            strip = self.render_line(y).crop_extend(0, width, pad)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        x1, x2 = crop.column_span
        if (x1, x2) != (0, self.size.width):
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _request_margin(self) -> None:
        """A remote decoder: ask for the pieces of a page above and below the view too, so
        scrolling a page shows decoded text at once (a local tokenizer decodes on demand)."""
        if self.data is None or self.cells is None or self.cells.n_cells == 0 or self.decoder.source != "server":
            return
        height = max(1, self.scrollable_content_region.height)
        top = self.scroll_offset.y
        first_row, last_row = max(0, top - height), top + 2 * height
        if self.mode == "flow" and self.flow is not None:
            flow = self.flow
            a = flow.seg_starts[flow.lines.find(first_row)]
            b = flow.seg_ends[flow.lines.find(min(last_row, len(flow) - 1))]
        elif self.rows is not None and len(self.rows):
            a = self.rows.row(min(first_row, len(self.rows) - 1)).cell_start
            b = self.rows.row(min(last_row, len(self.rows) - 1)).cell_end
        else:
            return
        lo = self.cells.cell(a)[0]
        hi = self.cells.cell(max(a, b - 1))[0] + 1
        todo = [i for i in self.decoder.pending(self.data.ids[lo:hi][:20_000]) if i not in self._requested]
        if todo:
            self._requested.update(todo)
            self.post_message(self.PiecesNeeded(self, todo))

    def _settle_flow(self) -> None:
        """Wrap every segment the viewport shows before painting it (so a frame is laid out
        with exact line counts), and follow the new total line count."""
        flow = self.flow
        assert flow is not None
        top = self.scroll_offset.y
        height = max(1, self.scrollable_content_region.height)
        for _ in range(4):
            if not flow.wrap_lines(top, top + height - 1):
                break
        self._sync_flow_size(need=top + height, drift_later=True)

    def _sync_flow_size(self, need: int = 0, *, drift_later: bool = False) -> None:
        """Follow the flowing layout's line count (it changes as estimates become exact).

        A new virtual size costs a layout pass and an extra frame, so it is set only when the
        count drifted by more than 1 % (the scrollbar would lie), or when row ``need`` (a
        scroll target) lies beyond the current size."""
        flow = self.flow
        if flow is None:
            return
        want = Size(self.gutter_width + 1 + flow.width, len(flow) + self._extra_rows)
        have = self.virtual_size
        if have == want:
            return
        drift = abs(have.height - want.height)
        if have.width != want.width or need >= have.height:
            self.virtual_size = want
        elif drift > max(64, have.height // 100):
            if drift_later:  # a frame is being painted: the layout pass waits for the idle slices
                self._size_drifted = True
            else:
                self.virtual_size = want

    @property
    def _base_style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def render_line(self, y: int) -> Strip:
        # no apply_offsets: nothing here reads mouse offsets, and it copies every segment of the line
        scroll_x, scroll_y = self.scroll_offset
        return self._line_strip(scroll_y + y, scroll_x, self.scrollable_content_region.width, self._base_style)

    def _line_strip(self, row_index: int, scroll_x: int, width: int, base: Style) -> Strip:
        """Content row ``row_index`` as shown: cropped to the view from column ``scroll_x``
        (the same strip object while the row, the cursor on it and the styles are unchanged)."""
        if self.mode == "flow" and self.flow is not None:
            strip = self._flow_strip(row_index, base)
            return strip.crop_extend(scroll_x, scroll_x + width, base)
        if self.rows is None or row_index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows.row(row_index)
        cursor_col = self.cursor - row.cell_start if row.cell_start <= self.cursor < row.cell_end else -1
        key = (row_index, cursor_col, self.rows.per_row, self.cell_width, self.overlay, self._search_gen, self._pieces_gen)
        cached = self._strip_cache.get(key)
        if cached is None:
            cached = self._render_row(row_index, row.cell_start, row.cell_end, row.kind, cursor_col, base)
            self._strip_cache[key] = cached
            self.probes.line_built()
        return cached.crop_extend(scroll_x, scroll_x + width, base)

    def _gutter(self, first_offset: int, base: Style) -> list[Segment]:
        data = self.data
        assert data is not None
        in_completion = data.completion_start is not None and first_offset >= data.completion_start
        gutter_style = base + self._style("gutter-completion" if in_completion else "gutter")
        mark = "C" if in_completion else ("P" if data.completion_start is not None else " ")
        digits = self.gutter_width - 4
        return [Segment(f"{mark} {first_offset:>{digits},} │", gutter_style), Segment(" ", base)]

    def _cell_style(self, cell: int, offset: int, run: PadRun | None, kind_style: str | None, base: Style, *, cursor: bool) -> Style:
        data = self.data
        assert data is not None
        hl = data.highlight
        in_hl = hl is not None and hl[0] <= offset < hl[1]
        bucket = None
        if self.overlay and run is None and data.logprobs is not None:
            bucket = logprob_bucket(data.logprob_at(offset))
        span = self._match_span
        matched = (
            (span is not None and span[0] <= offset < span[1])
            or (self._match_ids is not None and run is None and data.ids[offset] in self._match_ids)
            or (self._match_id is not None and run is None and data.ids[offset] == self._match_id)
        )
        key = (cell % 2, kind_style, in_hl, bucket, matched, cursor)
        style = self._combos.get(key)
        if style is None:
            style = base + self._style("odd" if cell % 2 else "even")
            if kind_style:
                style += self._style(kind_style)
            if in_hl:
                style += self._style("highlight")
            if bucket:
                style += self._style(f"lp-{bucket}")
            if matched:
                style += self._style("match")
            if cursor:
                style += self._style("cursor")
            self._combos[key] = style
        return style

    def _flow_strip(self, y: int, base: Style) -> Strip:
        flow = self.flow
        assert flow is not None and self.cells is not None
        if y >= len(flow):
            return Strip.blank(self.gutter_width + 1 + flow.width, base)
        seg, k = flow.segment_of_line(y)
        wrapped = flow.wrap(seg)
        frags = wrapped[k] if k < len(wrapped) else []
        on_line = bool(frags) and frags[0].cell <= self.cursor <= frags[-1].cell
        # keyed by the segment's own line, not the view row: a line's content does not change
        # when segments above it are wrapped (their line counts move the rows, not the lines);
        # a new wrap width, new pieces or new styles clear the cache
        key = ("flow", seg, k, self.cursor if on_line else -1, self.overlay, self._search_gen, self._pieces_gen)
        strip = self._strip_cache.get(key)
        if strip is None:
            strip = self._render_flow_line(frags, base)
            self._strip_cache[key] = strip
            self.probes.line_built()
        return strip

    def _render_flow_line(self, frags: list[Frag], base: Style) -> Strip:
        cells = self.cells
        assert cells is not None
        if not frags:
            return Strip([Segment(" " * (self.gutter_width + 1), base)])
        first_offset = cells.cell(frags[0].cell)[0]
        segments = self._gutter(first_offset, base)
        last_cell = -1
        style = base
        for frag in frags:
            if frag.kind == "sep":
                segments.append(Segment(frag.text, base))
                continue
            if frag.cell != last_cell:
                offset, _length, run = cells.cell(frag.cell)
                kind = frag.kind if frag.kind not in (None, "nl", "id") else None
                style = self._cell_style(frag.cell, offset, run, kind, base, cursor=frag.cell == self.cursor)
                last_cell = frag.cell
            if frag.kind == "nl":
                segments.append(Segment(frag.text, style + self._style("newline")))
            else:
                segments.append(Segment(frag.text, style))
        return Strip(segments)

    def _render_row(self, row_index: int, start: int, end: int, kind: str, cursor_col: int, base: Style) -> Strip:
        data = self.data
        assert data is not None and self.cells is not None
        first_offset = self.cells.cell(start)[0]
        segments = self._gutter(first_offset, base)
        w = self.cell_width
        missing: list[int] = []
        for col, cell in enumerate(range(start, end)):
            text, kind_style, offset, length, run = self._cell_text(cell)
            if kind_style == "pending":
                missing.append(data.ids[offset])
            style = self._cell_style(cell, offset, run, kind_style, base, cursor=col == cursor_col)
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

    def row_of_cell(self, cell: int) -> int:
        """The view row (grid row or wrapped line) where ``cell`` is shown."""
        if self.mode == "flow" and self.flow is not None:
            row = self.flow.line_of_cell(cell)
            self._sync_flow_size(need=row + max(1, self.scrollable_content_region.height), drift_later=True)
            return row
        return self.rows.row_of_cell(cell) if self.rows is not None else 0

    def watch_cursor(self, old: int, new: int) -> None:
        if self.mode == "flow":
            self.refresh()
        elif self.rows is not None:
            for c in {old, new}:
                if 0 <= c < (self.cells.n_cells if self.cells else 0):
                    r = self.rows.row_of_cell(c)
                    self.refresh_lines(r - self.scroll_offset.y, 1)
        self._scroll_cursor_visible()
        self._post_cursor()

    def watch_overlay(self) -> None:
        self._forget_strips()
        self.refresh()
        self.post_message(self.OverlayToggled(self, self.overlay))

    def watch_cell_width(self) -> None:
        self._relayout()
        self._scroll_cursor_visible()
        self.refresh()

    def watch_mode(self, old: str, new: str) -> None:
        """Switch grid <-> flowing text, keeping the cursor's token at the same screen row."""
        before = 0
        if self.cells is not None and self.cells.n_cells:
            if old == "flow" and self.flow is not None:
                before = self.flow.line_of_cell(self.cursor) - self.scroll_offset.y
            elif old == "grid" and self.rows is not None:
                before = self.rows.row_of_cell(self.cursor) - self.scroll_offset.y
        if new == "flow":
            self.flow = None  # wrapped afresh for the current width and pieces
        self._relayout()
        if self.cells is not None and self.cells.n_cells:
            self.scroll_cursor_to(before)
        self._forget_strips()
        self.refresh()
        self.post_message(self.ModeChanged(self, new))

    def validate_cursor(self, value: int) -> int:
        n = self.cells.n_cells if self.cells is not None else 0
        return max(0, min(value, n - 1)) if n else 0

    def validate_cell_width(self, value: int) -> int:
        return max(4, min(value, 40))

    def validate_mode(self, value: str) -> str:
        return value if value in MODES else "grid"

    def _scroll_cursor_visible(self) -> None:
        if self.cells is None or self.cells.n_cells == 0:
            return
        if (self.mode == "grid" and self.rows is None) or (self.mode == "flow" and self.flow is None):
            return
        r = self.row_of_cell(self.cursor)
        height = max(1, self.scrollable_content_region.height)
        if r >= self.scroll_offset.y + height:
            r = self._settled_cursor_row(height - 1)  # shown on the bottom row
        self.scroll_to_region(Region(0, r, 1, 1), animate=False, immediate=True)

    def _settled_cursor_row(self, screen_row: int) -> int:
        """The cursor's view row once the ``screen_row`` lines that will be shown above it
        are laid out exactly. Flowing text not shown yet has estimated line counts; were they
        wrapped only when painted, the cursor's line would move down after the scroll was
        chosen and end up below the view."""
        if self.mode != "flow" or self.flow is None:
            return self.row_of_cell(self.cursor)
        flow = self.flow
        row = flow.line_of_cell(self.cursor)
        for _ in range(8):  # each pass wraps more of the lines above: a few passes settle it
            if screen_row <= 0 or not flow.wrap_lines(row - screen_row, row - 1):
                break
            row = flow.line_of_cell(self.cursor)
        return self.row_of_cell(self.cursor)

    def scroll_cursor_to(self, screen_row: int) -> None:
        """Scroll so that the cursor's row is ``screen_row`` rows below the top."""
        self.scroll_row_to(self._settled_cursor_row(screen_row), screen_row)

    def scroll_row_to(self, row: int, screen_row: int) -> None:
        """Scroll so that view row ``row`` is shown ``screen_row`` rows below the top (blank
        rows are added after the end when the content is too short to scroll that far)."""
        target = max(0, row - max(0, screen_row))
        height = max(1, self.scrollable_content_region.height)
        if self.mode == "flow" and self.flow is not None:
            rows = len(self.flow)
        elif self.rows is not None:
            rows = len(self.rows)
        else:
            rows = self.virtual_size.height - self._extra_rows
        extra = max(0, target + height - rows)
        if extra != self._extra_rows or self.virtual_size.height != rows + extra:
            self._extra_rows = extra
            self.virtual_size = Size(self.virtual_size.width, rows + extra)
            # the new height reaches the scrollbars on the next refresh: scroll once it has
            self.call_after_refresh(self.scroll_to, y=target, animate=False, immediate=True)
        self.scroll_to(y=target, animate=False, immediate=True)

    def action_cursor(self, delta: int) -> None:
        self.cursor = self.cursor + int(delta)

    def action_cursor_row(self, delta: int) -> None:
        if self.cells is None or self.cells.n_cells == 0:
            return
        if self.mode == "flow" and self.flow is not None:
            flow = self.flow
            y = flow.line_of_cell(self.cursor)
            col = flow.column_of_cell(y, self.cursor)
            target = max(0, min(len(flow) - 1, y + int(delta)))
            cell = flow.cell_at(target, col)
            self._sync_flow_size(drift_later=True)
            if cell is not None:
                self.cursor = cell
            return
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

    def action_toggle_mode(self) -> None:
        self.mode = "flow" if self.mode == "grid" else "grid"

    def action_cell_width(self, delta: int) -> None:
        self.cell_width = self.cell_width + int(delta)

    # ------------------------------------------------------------------ navigation API
    def jump_to_offset(self, offset: int, *, screen_row: int | None = None) -> bool:
        """Put the cursor on the cell holding id ``offset``. False when out of range.
        With ``screen_row``, the cursor's row is scrolled to that many rows below the top."""
        if self.cells is None or self.data is None or not 0 <= offset < len(self.data.ids):
            return False
        self.cursor = self.cells.cell_of_offset(offset)
        if screen_row is not None:
            self.scroll_cursor_to(screen_row)
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
        self._search_gen += 1
        self._forget_strips()
        self.refresh()

    @property
    def search_query(self) -> str:
        """The search text in force (``n`` / ``N`` continue it)."""
        return self._query

    def find(self, raw: str | None = None, *, forward: bool = True) -> int | None:
        """Search (or continue searching) from the cursor. An id is found here and the cursor
        moves to it; a text search is handed to the screen (:class:`TextSearchRequested`)."""
        if raw is not None and raw != self._query:
            self.set_query(raw)
        if self.data is None or self.cells is None:
            return None
        start = self.cursor_offset
        if forward:
            _, length, _ = self.cells.cell(self.cursor)
            start = start + length - 1
        if self._match_text is not None:
            self.post_message(self.TextSearchRequested(self, self._query, self._match_text, start, forward))
            return None
        found = find_offset(self.data.ids, start, target=self._match_id, forward=forward)
        if found is None:
            msg = f"no match for {self._query!r}" if self._query else "no search"
        else:
            self.jump_to_offset(found)
            msg = f"match at offset {found:,}"
        self.post_message(self.SearchResult(self, self._query, found, msg))
        return found

    def show_text_match(self, query: str, span: tuple[int, int] | None, members: set[int] | None) -> None:
        """The screen's worker found ``span`` for ``query`` (None: no match); ``members``
        are the ids whose own piece holds the text (marked everywhere)."""
        if query != self._query:
            return  # a newer search started meanwhile
        self._match_span = span
        if members is not None:
            self._match_ids = members
        self._search_gen += 1
        self._forget_strips()
        self.refresh()
        if span is None:
            msg = f"no match for {self._query!r}"
            found = None
        else:
            found = span[0]
            self.jump_to_offset(found)
            msg = f"match at offsets {span[0]:,}–{span[1] - 1:,}" if span[1] - span[0] > 1 else f"match at offset {found:,}"
        self.post_message(self.SearchResult(self, self._query, found, msg))

    def action_next_match(self) -> None:
        self.find(forward=True)

    def action_previous_match(self) -> None:
        self.find(forward=False)
