"""When the operator last gave input (a key, a click, a scroll), for work the UI does ahead of
need: it yields to a key instead of making the key wait (rendering the next page ahead of the
scroll, a deferred garbage collection).

One clock for the process, like the keyboard it follows; the app notes each input event as it
arrives, before the event travels to the focused widget.
"""

from __future__ import annotations

import time

_last_input = time.monotonic()


def note_input() -> None:
    global _last_input
    _last_input = time.monotonic()


def last_input() -> float:
    """``time.monotonic()`` of the last input event the app saw."""
    return _last_input


def idle_seconds() -> float:
    return time.monotonic() - _last_input
