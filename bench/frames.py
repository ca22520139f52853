"""When the whole app finished a frame: the benchmarks' clock for "painted on the screen".

A widget's ``render_line`` being called for the new rows is where a frame starts, not where the
operator sees it: the compositor then composes every dirty region and the app encodes the
update into the bytes a terminal is sent. Pilot runs headless, where Textual skips that
encoding, so this clock does it (and throws the bytes away) to charge each frame what it costs
in a real terminal, then notes the time. A benchmark-only test double; nothing in the app
measures itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import RenderableType
from textual._compositor import CompositorUpdate
from textual.app import App
from textual.screen import Screen


class FrameClock:
    """End times of the frames the app displayed: ``time.perf_counter`` and the process's
    CPU time (``time.process_time``) at each."""

    def __init__(self) -> None:
        self.ends: list[tuple[float, float]] = []
        #: read at the end of each frame when set (what the frame showed: a probe's value)
        self.mark: Callable[[], object] | None = None
        self.marks: list[object] = []

    def first_marked(self, t: float, shows: Callable[[object], bool]) -> tuple[float, float] | None:
        """(wall, CPU) at the end of the first frame finished at or after ``t`` whose mark
        ``shows`` what is waited for (None before one is)."""
        for end, mark in zip(self.ends, self.marks):
            if end[0] >= t and shows(mark):
                return end
        return None

    def after(self, t: float) -> tuple[float, float] | None:
        """(wall, CPU) at the end of the first frame finished at or after ``t`` (None before
        one is)."""
        for end in self.ends:
            if end[0] >= t:
                return end
        return None

    async def end_after(self, t: float, timeout: float = 10.0) -> float:
        """Wait for the first frame finished at or after ``t`` and return its end (``t``
        itself when no frame comes within ``timeout``)."""
        deadline = time.perf_counter() + timeout
        while self.after(t) is None and time.perf_counter() < deadline:
            await asyncio.sleep(0.001)
        frame = self.after(t)
        return frame[0] if frame is not None else t


@contextmanager
def frame_clock() -> Iterator[FrameClock]:
    clock = FrameClock()
    real = App._display

    def display(app: App, screen: Screen, renderable: RenderableType | None) -> None:
        real(app, screen, renderable)
        if renderable is None:
            return
        if app.is_headless and isinstance(renderable, CompositorUpdate):
            renderable.render_segments(app.console)  # what a terminal frame costs to encode
        clock.ends.append((time.perf_counter(), time.process_time()))
        clock.marks.append(clock.mark() if clock.mark is not None else None)

    App._display = display  # type: ignore[method-assign]  # a benchmark's test double
    try:
        yield clock
    finally:
        App._display = real  # type: ignore[method-assign]


_PROCESS_CLOCK: list[object] = []


def process_frame_clock() -> FrameClock:
    """A frame clock installed for the rest of this (benchmark subprocess) life; the context
    manager is kept referenced, since a dropped one would restore the app at once."""
    manager = frame_clock()
    _PROCESS_CLOCK.append(manager)
    return manager.__enter__()
