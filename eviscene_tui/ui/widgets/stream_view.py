"""Live continuation panes (Line API) with coalesced updates.

- :class:`TextPane`: a buffer-backed ``ScrollView``. ``append(text)`` only
  extends the buffer and re-wraps the tail line; rendering paints visible rows
  (``render_line``). It follows the bottom while the user is at the bottom.
- :class:`StreamView`: reasoning / content / tool-call panes plus a stats line,
  painting a :class:`~eviscene_tui.state.stream_session.LiveFeed`. Producers push
  events into the feed (cheap: appends to pending lists; a worker never calls the
  view); a ``set_interval`` timer flushes ``FLUSH_HZ`` times a second, and a producer
  that batches events itself (a tailed live channel) has them painted at once
  (``flush_soon``). Either way the view paints at most ``MAX_FLUSH_HZ`` times a
  second, and there is never one UI call per token.

All text is sanitised with ``safe_text`` on the way in; nothing is parsed as markup.
"""

from __future__ import annotations

import time
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.cache import LRUCache
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.events import PolicyEvent
from eviscene_tui.probes import ViewProbes
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.stream_session import LiveFeed
from eviscene_tui.ui import gc_hold

FLUSH_HZ = 24  # the timer's rate, for producers that push event by event
MAX_FLUSH_HZ = 30  # the view never paints more often (a paint is the compositor's repaint of the panes)
STRIP_CACHE_ROWS = 512  # rendered rows a pane keeps (a few screens' worth)
BADGE_STYLES = {"attested": "$success", "unattested": "$warning", "refused": "$error", "no policy": "$error"}
# one markup template per badge colour; run-derived values only ever enter as $variables
_STATS_TEMPLATE = "[b {style}]$badge[/]  [b]$state[/]  tokens $tokens  ttft $ttft  tok/s $tps  finish $finish"
STATS_TEMPLATES = {style: _STATS_TEMPLATE.replace("{style}", style) for style in {*BADGE_STYLES.values(), "$warning"}}


class TextPane(ScrollView, can_focus=True):
    """Wrapped plain text, painted line by line; ``append`` is O(tail)."""

    DEFAULT_CSS = """
    TextPane { height: 1fr; border: round $panel; padding: 0 1; overflow-x: hidden; scrollbar-gutter: stable; }
    TextPane:focus { border: round $accent; }
    """

    def __init__(self, title: str = "", *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.border_title = title
        self._lines: list[str] = [""]  # logical lines (sanitised)
        self._rows: list[str] = [""]  # wrapped rows at _wrap_width
        self._tail_rows = 1  # how many rows the last logical line occupies
        self._wrap_width = 0
        # row index -> rendered row (full width, before scroll_x crop); bounded, since a fast
        # stream scrolls thousands of rows past, and every cached row is objects a full
        # garbage collection walks
        self._strips: LRUCache[int, Strip] = LRUCache(STRIP_CACHE_ROWS)
        self._style: Style | None = None
        self.probes = ViewProbes()  # appends, for the tests of the feed's coalescing

    # ------------------------------------------------------------------ data
    @property
    def text(self) -> str:
        return "\n".join(self._lines)

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        self._lines, self._rows, self._tail_rows = [""], [""], 1
        self._strips.clear()
        self._sync(follow=True)

    def set_text(self, text: str) -> None:
        self._lines = safe_text(text).split("\n")
        self._rewrap_all()
        self._sync(follow=False)
        self.scroll_to(y=0, animate=False, immediate=True)

    def append(self, text: str) -> None:
        if not text:
            return
        self.probes.appended()
        follow = self.scroll_offset.y >= self.max_scroll_y - 1
        # split first: a newline defeats safe_text's all-printable fast path (it then checks
        # every character); sanitising the lines separately gives the same result, and a
        # printable ASCII line is already safe (C-speed checks, no per-character Python loop)
        parts = [part if part.isascii() and part.isprintable() else safe_text(part) for part in text.split("\n")]
        self._lines[-1] += parts[0]
        self._lines.extend(parts[1:])
        # only the last wrapped row of the tail line can change: re-wrap it plus the new text
        if self._rows:
            self._strips.discard(len(self._rows) - 1)
        last = self._rows.pop() if self._rows else ""
        rows = self._wrap(last + parts[0])
        self._rows.extend(rows)
        tail = self._tail_rows - 1 + len(rows)
        for line in parts[1:]:
            rows = self._wrap(line)
            self._rows.extend(rows)
            tail = len(rows)
        self._tail_rows = tail
        self._sync(follow=follow)

    def _width(self) -> int:
        return max(10, self.scrollable_content_region.width or self.size.width or 80)

    def _wrap(self, line: str) -> list[str]:
        """Greedy word wrap: a row ends after its last space that fits (the space stays on
        the row, so the rows joined are the line), or at the width when a word is longer.
        Greedy wrapping never moves an earlier row's break when text is appended, which
        is what lets ``append`` re-wrap only the last row."""
        w = self._wrap_width or self._width()
        n = len(line)
        if n <= w:
            return [line]
        rows: list[str] = []
        i = 0
        while n - i > w:
            space = line.rfind(" ", i, i + w)
            cut = space + 1 if space >= i else i + w
            rows.append(line[i:cut])
            i = cut
        rows.append(line[i:])
        return rows

    def _rewrap_all(self) -> None:
        self._strips.clear()
        self._wrap_width = self._width()
        self._rows = []
        for line in self._lines:
            rows = self._wrap(line)
            self._rows.extend(rows)
        self._tail_rows = len(self._wrap(self._lines[-1]))

    def _sync(self, *, follow: bool) -> None:
        size = Size(self._wrap_width or self._width(), len(self._rows))
        if size != self.virtual_size:
            # ``virtual_size`` is a layout reactive: assigning it re-lays out the whole
            # screen on every flush. Growing text only needs the scrollbars updated,
            # unless a scrollbar appears or disappears.
            shown = (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
            try:
                self.set_reactive(ScrollView.virtual_size, size)
                self._scroll_update(size)
            except AttributeError:  # pragma: no cover - Textual internals moved
                self.virtual_size = size
            else:
                if (self.show_vertical_scrollbar, self.show_horizontal_scrollbar) != shown:
                    self.refresh(layout=True)
        if follow:
            self.scroll_to(y=self.max_scroll_y, animate=False)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style = None
        self._strips.clear()

    def on_resize(self) -> None:
        if self._width() != self._wrap_width:
            self._rewrap_all()
            self._sync(follow=self.scroll_offset.y >= self.max_scroll_y - 1)

    # ------------------------------------------------------------------ paint
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        index = self.scroll_offset.y + y
        style = self._style
        if style is None:
            style = self._style = self.rich_style
        if index >= len(self._rows):
            return Strip.blank(width, style)
        strip = self._strips.get(index)
        if strip is None:
            text = self._rows[index]
            strip = Strip([Segment(text, style)], len(text))
            self._strips.set(index, strip)
        x = self.scroll_offset.x
        return strip.crop_extend(x, x + width, style)


class StatsLine(Widget):
    """A one-row line whose updates repaint only itself (no layout pass, unlike ``Static.update``)."""

    DEFAULT_CSS = "StatsLine { height: 1; width: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._content: Content = Content("")

    def set(self, content: Content) -> None:
        if content != self._content:
            self._content = content
            self.refresh()

    def render(self) -> Content:
        return self._content


def _fmt(value: Any, spec: str = "", unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:{spec}}{unit}"


class StreamView(Vertical):
    """Reasoning / content / tool-call panes, a stats line and the attestation badge."""

    DEFAULT_CSS = """
    StreamView { height: 1fr; }
    StreamView #stream-stats { height: 1; padding: 0 1; }
    StreamView #stream-panes { height: 3fr; min-height: 4; }
    StreamView #pane-reasoning { width: 1fr; }
    StreamView #pane-content { width: 1fr; }
    StreamView #pane-tools { height: 1fr; min-height: 3; max-height: 8; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._feed = LiveFeed()
        self._feed.dirty = False
        self._badge = "unattested"  # session kind until a call's attestation result arrives (set_badge / Attested)
        self._idle = True
        self._timings: dict[str, Any] | None = None  # measured timings of a replayed feed (see finish)
        self.probes = ViewProbes()  # its flushes, for the tests and the bench
        self._last_flush = 0.0
        self._flush_due: Timer | None = None  # flush_soon's paint, when the last one is too recent
        self._gc_held = False  # a hold on full garbage collections while a continuation streams

    def compose(self) -> ComposeResult:
        yield StatsLine(id="stream-stats")
        with Horizontal(id="stream-panes"):
            yield TextPane("reasoning", id="pane-reasoning")
            yield TextPane("content", id="pane-content")
        yield TextPane("tool calls", id="pane-tools")

    def on_mount(self) -> None:
        self.set_interval(1 / FLUSH_HZ, self.flush)
        self._render_stats()

    def on_unmount(self) -> None:
        self._release_gc()

    def _hold_gc(self) -> None:
        """While a continuation streams, the interpreter's full collections wait for the
        operator's pause (ui/gc_hold.py): one walks the whole app's heap, and in the middle
        of a fast stream it holds the panes and the keys for several frames."""
        if not self._gc_held:
            gc_hold.hold()
            self._gc_held = True

    def _release_gc(self) -> None:
        if self._gc_held:
            gc_hold.release()
            self._gc_held = False

    # ------------------------------------------------------------------ what is shown
    @property
    def acc(self) -> StreamAccumulator:
        return self._feed.acc

    @property
    def state(self) -> str:
        """idle | streaming | complete | cancelled | failed"""
        return "idle" if self._idle else self._feed.state

    @property
    def badge(self) -> str:
        # the latest attestation result replaces the session kind (or the previous result)
        return self._feed.badge or self._badge

    def attach(self, feed: LiveFeed, *, badge: str | None = None) -> LiveFeed:
        """Paint ``feed`` from now on (the panes are cleared)."""
        # the badge keeps the latest attestation result until this call's arrives
        self._badge = badge or self._feed.badge or self._badge
        self._feed = feed
        self._idle = False
        self._timings = None
        for pane in self.query(TextPane):
            pane.clear()
        feed.dirty = True
        self._hold_gc()
        return feed

    def clear(self) -> None:
        """Back to idle: no continuation shown (the badge stays)."""
        self._badge = self._feed.badge or self._badge
        self._feed = LiveFeed()
        self._feed.dirty = False
        self._idle = True
        for pane in self.query(TextPane):
            pane.clear()
        self._render_stats()
        self._release_gc()

    def reset(self, acc: StreamAccumulator | None = None, *, badge: str | None = None) -> StreamAccumulator:
        """Attach a new feed around ``acc`` (events pushed through :meth:`feed` are buffered only)."""
        return self.attach(LiveFeed(acc), badge=badge).acc

    def set_badge(self, badge: str) -> None:
        """Show ``badge`` (``attested`` / ``unattested`` / ``refused`` / ``no policy``) now."""
        self._badge = badge
        self._feed.badge = None
        if self.is_mounted:
            self._render_stats()

    def feed(self, ev: PolicyEvent) -> None:
        """Buffer one event into the attached feed (for producers that hold the view)."""
        self._feed.push(ev)

    def finish(self, state: str, *, timings: dict[str, Any] | None = None) -> None:
        """The continuation ended. ``timings`` (``ttft_s``, ``tokens_per_s``) are the ones
        measured while it streamed, for a feed replayed from a record: its own arrival
        times say nothing about the stream."""
        self._idle = False
        self._timings = timings
        self._feed.finish(state)
        self.flush(force=True)
        self._release_gc()

    # ------------------------------------------------------------------ consumer side (timer)
    def flush_soon(self) -> None:
        """New events came from a producer that batches them itself (a tailed channel): paint
        them now, or as soon as the last paint is 1/MAX_FLUSH_HZ old."""
        wait = self._last_flush + 1 / MAX_FLUSH_HZ - time.monotonic()
        if wait <= 0:
            self.flush(force=True)
        elif not self._flush_due:  # one pending paint at a time
            self._flush_due = self.set_timer(wait, self._flush_when_due)

    def _flush_when_due(self) -> None:
        self._flush_due = None
        self.flush(force=True)

    def flush(self, force: bool = False) -> None:
        """Paint what the feed holds (``force``: even when the last paint is recent: the
        stream ended, or flush_soon has waited its turn)."""
        feed = self._feed
        if not feed.dirty:
            return
        now = time.monotonic()
        if not force and now - self._last_flush < 1 / MAX_FLUSH_HZ:
            return  # keep buffering: the next tick flushes
        self._last_flush = now
        # how many tokens were painted, and when (benchmarks: a bench record is one token)
        self.probes.flushed(feed.acc.token_count)
        texts, tools = feed.take()
        with self.app.batch_update():
            for kind in ("reasoning", "content"):
                text = texts.get(kind)
                if text:
                    self.query_one(f"#pane-{kind}", TextPane).append(text)
            if tools:
                lines = []
                for tc in self.acc.tool_calls_json():
                    lines.append(f"#{tc['index']} {tc['name'] or '?'}  {tc['arguments']}")
                pane = self.query_one("#pane-tools", TextPane)
                pane.clear()
                pane.append("\n".join(lines))
            self._render_stats()

    def _render_stats(self) -> None:
        acc = self.acc
        t = self._timings if self._timings is not None else acc.timings()
        content = Content.from_markup(
            STATS_TEMPLATES[BADGE_STYLES.get(self.badge, "$warning")],
            badge=self.badge.upper(),
            state=self.state,
            tokens=str(acc.token_count),
            ttft=_fmt(t["ttft_s"], ".2f", " s"),
            tps=_fmt(t["tokens_per_s"], ".0f"),
            finish=safe_text(acc.finish_reason or "—", single_line=True, limit=20),
        )
        # a flush or a status change can arrive while the screen is being torn down (its
        # children already gone): then there is no stats line to update
        for stats in self.query("#stream-stats").results(StatsLine):
            stats.set(content)
