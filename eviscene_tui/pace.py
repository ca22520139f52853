"""When the operator last gave input (a key, a click, a scroll), and background work that
gives way to it.

One clock for the process, like the keyboard it follows: the app notes each input event as
it arrives, before the event travels to the focused widget (:func:`note_input`). Work the UI
does ahead of need yields to a key instead of making the key wait (rendering the next page
ahead of the scroll, a deferred garbage collection: :func:`last_input`, :func:`idle_seconds`).

Background work yields too. Python runs one thread at a time: a worker parsing a trace's
steps, re-checking a case a driver is writing or hashing its inputs holds the interpreter
lock (or, while hashing, a core of a 2-core machine beside the driver), and the UI thread
then answers a key in two or three times the time it needs. Work nobody waits for (the
background fill of a trace's rows, the integrity checks that follow a driver's writes) runs
inside :func:`background`; the loops it runs through call :func:`yield_to_input` between
their units of work (a step, a chunk of lines, a MiB hashed), which right after an input
sleeps until the input is :data:`QUIET_AFTER_INPUT` old (at most ``max_wait``): by then the
key has been answered and painted. Anywhere else - the UI thread, a worker the operator is
waiting for (a capture opened with ``k``), a headless command, the gate inside the driver -
it returns at once.

Work the operator waits for past the key itself (a token capture opened with ``k``, read,
laid out and painted; a step's detail) is *foreground* work: from the key until it is on
screen (:func:`hold_foreground` / :func:`release_foreground`), :func:`yield_to_input` in
background work sleeps (at most :data:`FOREGROUND_MAX_WAIT` in all), so the integrity check
hashing a trace or the trace's fill never shares the cores with it.

Across processes too: a process that runs the app's background work (the open case's
integrity check, ``state/case_check.py``) follows the app's clock (:func:`share_clock` in the
app, :func:`follow_clock` in that process, at its start), so its loops give way to the
operator's keys and to the foreground work of the app exactly as a thread of the app does.

No Textual import here: the artifact loaders and services use it too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


#: seconds after an input during which background work waits: long enough for the key to be
#: answered and painted even beside a busy driver, short enough that the work resumes
#: before the operator notices it paused
QUIET_AFTER_INPUT = 0.12
#: the longest one call waits: a stream of keys (auto-repeat) slows background work down,
#: never stops it
MAX_WAIT = 0.25

#: the longest background work waits for foreground work (a hold that is never released
#: must not stop it for good)
FOREGROUND_MAX_WAIT = 3.0
#: how often a background loop looks whether the foreground work is done
FOREGROUND_POLL = 0.01

_last_input = float("-inf")
_local = threading.local()
_foreground = 0
_foreground_lock = threading.Lock()
#: this process's clock in shared memory ([last input, foreground holds]) once another
#: process follows it (share_clock), and the clock of the process this one follows
_shared: Any = None
_followed: Any = None


def note_input() -> None:
    """An input event arrived (called by the app, on its own thread)."""
    global _last_input
    _last_input = time.monotonic()
    if _shared is not None:
        _shared[0] = _last_input


def share_clock() -> Any:
    """This process's input clock and foreground holds in shared memory, kept up to date
    from now on: handed to a process that runs this one's background work (which passes it
    to :func:`follow_clock`). None where shared memory cannot be made."""
    global _shared
    with _foreground_lock:
        if _shared is None:
            try:
                from multiprocessing.sharedctypes import RawArray  # lazy: only a process that hands its clock to another pays for it

                shared = RawArray("d", 2)
            except (ImportError, OSError):
                return None
            shared[0], shared[1] = _last_input, float(_foreground)
            _shared = shared
        return _shared


def follow_clock(shared: Any) -> None:
    """In a process that runs another's background work (its start): the input and the
    foreground holds this process's background loops give way to are that process's
    (``shared``: its :func:`share_clock`; None: this process's own)."""
    global _followed
    _followed = shared


def _clock() -> tuple[float, float]:
    """(last input, foreground holds): this process's, or those of the process it follows."""
    followed = _followed
    if followed is None:
        return _last_input, _foreground
    return followed[0], followed[1]


def last_input() -> float:
    """``time.monotonic()`` of the last input event the app saw (-inf before the first)."""
    return _clock()[0]


def idle_seconds() -> float:
    """Seconds since the last input event (inf before the first)."""
    return time.monotonic() - _clock()[0]


@contextmanager
def background() -> Iterator[None]:
    """Run the block as background work on this thread: :func:`yield_to_input` in it gives
    way to the operator's input. Nests."""
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth = depth


def in_background() -> bool:
    """This thread is running background work (inside :func:`background`)."""
    return getattr(_local, "depth", 0) > 0


def hold_foreground() -> None:
    """Work the operator waits for has started (any thread); background work waits for it
    until :func:`release_foreground`. Holds nest."""
    global _foreground
    with _foreground_lock:
        _foreground += 1
        if _shared is not None:
            _shared[1] = float(_foreground)


def release_foreground() -> None:
    """One hold of :func:`hold_foreground` ends (one release too many is harmless)."""
    global _foreground
    with _foreground_lock:
        _foreground = max(0, _foreground - 1)
        if _shared is not None:
            _shared[1] = float(_foreground)


class ForegroundHold:
    """One hold of foreground work (:func:`hold_foreground`), taken when made and released
    by the first :meth:`release` (later calls do nothing: a paint, a timer and a failure
    may each end it)."""

    __slots__ = ("_released",)

    def __init__(self) -> None:
        self._released = False
        hold_foreground()

    def release(self) -> None:
        if not self._released:
            self._released = True
            release_foreground()

    @property
    def released(self) -> bool:
        return self._released


def foreground_held() -> bool:
    """Work the operator waits for is running."""
    return _clock()[1] > 0


def yield_to_input(max_wait: float = MAX_WAIT) -> float:
    """Between two units of work: in background work (:func:`background`), while the last
    input is younger than :data:`QUIET_AFTER_INPUT`, sleep until it is not (at most
    ``max_wait`` seconds in all), and while foreground work is held, until it is released
    (at most :data:`FOREGROUND_MAX_WAIT`); elsewhere return at once. Returns the seconds
    slept."""
    if not getattr(_local, "depth", 0):
        return 0.0
    slept = 0.0
    while slept < max_wait:
        wait = _clock()[0] + QUIET_AFTER_INPUT - time.monotonic()
        if wait <= 0:
            break
        step = min(wait, max_wait - slept)
        time.sleep(step)
        slept += step
    held = 0.0
    while _clock()[1] > 0 and held < FOREGROUND_MAX_WAIT:
        time.sleep(FOREGROUND_POLL)
        held += FOREGROUND_POLL
    return slept + held
