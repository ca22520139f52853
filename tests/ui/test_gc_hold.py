"""Holds on the garbage collector nest: the last release unfreezes."""

from __future__ import annotations

import gc

from eviscene_tui.ui import gc_hold


def test_holds_nest_and_the_last_release_unfreezes() -> None:
    assert gc_hold.holds() == 0
    try:
        gc_hold.hold()
        kept = [[i] for i in range(100)]  # containers alive at the first hold
        gc_hold.hold()  # a second screen over the first
        assert gc.get_freeze_count() > 0 and gc_hold.holds() == 2
        gc_hold.release()
        assert gc.get_freeze_count() > 0 and gc_hold.holds() == 1  # the first screen's hold stays
        gc_hold.release()
        assert gc.get_freeze_count() == 0 and gc_hold.holds() == 0
        gc_hold.release()  # one release too many is harmless
        assert gc_hold.holds() == 0
        assert len(kept) == 100
    finally:
        while gc_hold.holds():
            gc_hold.release()
