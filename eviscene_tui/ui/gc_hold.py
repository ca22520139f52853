"""Keep Python's full garbage collections off big, long-lived data while a screen shows it.

A full collection walks every live container. With a 200 MB trace's rows or a 1,000,000-id
token capture alive, one took 100-160 ms, and it landed in the middle of a key press or a page
scroll. ``gc.freeze()`` moves every object alive now into the permanent generation, which
collections skip; the objects are still freed by reference count when dropped (only a reference
cycle among them waits until the last hold is released). Holds nest: a token screen opened over
a case screen releases its own hold without unfreezing the case's.
"""

from __future__ import annotations

import gc

_holds = 0


def hold() -> None:
    """Freeze what is alive now (call on the UI thread, once the big data is loaded)."""
    global _holds
    gc.freeze()
    _holds += 1


def release() -> None:
    """Drop one hold; the last one unfreezes, so later full collections see everything again."""
    global _holds
    if _holds == 0:
        return
    _holds -= 1
    if _holds == 0:
        gc.unfreeze()


def holds() -> int:
    """How many holds are live (for tests and the bench)."""
    return _holds
