"""Keep Python's full garbage collections off big, long-lived data while a screen shows it.

A full collection walks every live container. With a 200 MB trace's rows or a 1,000,000-id
token capture alive, one takes several frames, and it lands in the middle of a key press or a
page scroll. ``gc.freeze()`` moves every object alive now into the permanent generation, which
collections skip; the objects are still freed by reference count when dropped (only a reference
cycle among them waits until the last hold is released). Holds nest: a token screen opened over
a case screen releases its own hold without unfreezing the case's.

Even with the big data frozen, a full collection still walks what the screens built since
(the views' line caches: tens of thousands of objects), which can still cost a whole frame
in the middle of a page scroll. So while a hold is live the interpreter's
automatic full collections are *deferred*: the young generations are collected as usual (they
are small and cheap), and the app runs the pending full collection itself when the operator
pauses (:func:`idle_collection_due`), or regardless once it has waited far longer than the
interpreter would have (:data:`OVERDUE_FACTOR`), so memory held by reference cycles stays
bounded during a long key burst. The last release restores the interpreter's own schedule.
"""

from __future__ import annotations

import gc

from eviscene_tui import switches

#: the generation-2 threshold while deferred: automatic full collections never start
_DEFERRED = 1 << 30
#: a deferred full collection runs even during input once it waited this many times longer
#: than the interpreter's own threshold
OVERDUE_FACTOR = 20
#: seconds without input after which a pending full collection runs
IDLE_SECONDS = 0.5

_holds = 0
_saved_threshold: tuple[int, int, int] | None = None


def hold() -> None:
    """Freeze what is alive now (call on the UI thread, once the big data is loaded), and defer
    automatic full collections to the operator's pauses until the last release."""
    global _holds, _saved_threshold
    if not switches.on("gc_hold"):
        _holds += 1  # counted, so that releases stay balanced; the collector is left as it is
        return
    gc.freeze()
    if _holds == 0:
        first, second, third = gc.get_threshold()
        _saved_threshold = (first, second, third)
        gc.set_threshold(first, second, _DEFERRED)
    _holds += 1


def release() -> None:
    """Drop one hold; the last one unfreezes and gives full collections back to the
    interpreter, so later collections see everything again."""
    global _holds, _saved_threshold
    if _holds == 0:
        return
    _holds -= 1
    if _holds == 0:
        gc.unfreeze()
        if _saved_threshold is not None:
            gc.set_threshold(*_saved_threshold)
            _saved_threshold = None


def freeze_arrived() -> None:
    """Freeze what is alive now, without a hold: long-lived data that just arrived (a scan's
    batch of rows, 10,000 of them in all) is not walked by later full collections, which
    would otherwise take a frame's time and more each while the scan grows the heap. Freed
    by reference count as ever; a reference cycle frozen with it waits until a hold's last
    release unfreezes (call on the UI thread)."""
    if switches.on("gc_hold"):
        gc.freeze()


def holds() -> int:
    """How many holds are live (for tests and the bench)."""
    return _holds


def _full_threshold() -> int:
    return _saved_threshold[2] if _saved_threshold is not None else gc.get_threshold()[2]


def full_collection_pending() -> bool:
    """A full collection the interpreter would have run by now was deferred."""
    return _holds > 0 and _saved_threshold is not None and gc.get_count()[2] > _full_threshold()


def idle_collection_due(idle_seconds: float) -> bool:
    """Run the deferred full collection now? Yes once the operator has paused for
    :data:`IDLE_SECONDS`, or at once when it has been deferred :data:`OVERDUE_FACTOR` times
    as long as the interpreter would have waited."""
    if not full_collection_pending():
        return False
    return idle_seconds >= IDLE_SECONDS or gc.get_count()[2] > OVERDUE_FACTOR * _full_threshold()


def collect_deferred() -> int:
    """Run the deferred full collection (what is frozen is not walked); returns the number of
    unreachable objects found, as :func:`gc.collect` does."""
    return gc.collect(2)
