"""Holds on the garbage collector nest, the last release unfreezes, and while a hold is live
the interpreter's automatic full collections wait for the operator's pause."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from conftest import wait_until
from eviscene_tui import pace
from eviscene_tui.ui import gc_hold
from ui_helpers import make_app, sample_root


@pytest.fixture
def no_holds() -> Iterator[None]:
    assert gc_hold.holds() == 0
    threshold = gc.get_threshold()
    yield
    while gc_hold.holds():
        gc_hold.release()
    assert gc.get_threshold() == threshold


def _age_full_generation(times: int) -> None:
    """Make the interpreter owe a full collection: each generation-1 collection counts one
    towards generation 2's threshold."""
    for _ in range(times):
        gc.collect(1)


def test_holds_nest_and_the_last_release_unfreezes(no_holds: None) -> None:
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


def test_a_hold_defers_automatic_full_collections_and_the_last_release_restores_them(no_holds: None) -> None:
    before = gc.get_threshold()
    gc_hold.hold()
    gc_hold.hold()
    young, middle, full = gc.get_threshold()
    assert (young, middle) == before[:2]  # young collections run as usual
    assert full > 1000 * before[2]  # the interpreter never starts a full one itself
    gc_hold.release()
    assert gc.get_threshold()[2] == full  # the outer screen's hold still defers
    gc_hold.release()
    assert gc.get_threshold() == before


def test_a_deferred_collection_waits_for_a_pause_unless_long_overdue(no_holds: None) -> None:
    full = gc.get_threshold()[2]
    _age_full_generation(full + 1)
    assert not gc_hold.full_collection_pending()  # nothing is deferred without a hold
    gc.collect()
    gc_hold.hold()
    _age_full_generation(full + 1)
    assert gc_hold.full_collection_pending()
    assert not gc_hold.idle_collection_due(0.0)  # the operator is typing
    assert gc_hold.idle_collection_due(gc_hold.IDLE_SECONDS)
    _age_full_generation(gc_hold.OVERDUE_FACTOR * full)
    assert gc_hold.idle_collection_due(0.0)  # deferred far too long: memory comes first
    gc_hold.collect_deferred()
    assert gc.get_count()[2] == 0
    assert not gc_hold.full_collection_pending() and not gc_hold.idle_collection_due(60.0)


def test_a_collection_deferred_by_a_hold_breaks_reference_cycles_the_young_ones_miss(no_holds: None) -> None:
    gc_hold.hold()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    gc.collect(1)
    gc.collect(1)  # the cycle, still referenced, ages into the old generation
    del a, b
    gc.collect(1)
    assert alive() is not None  # young collections do not look at the old generation
    gc_hold.collect_deferred()
    assert alive() is None  # the deferred full collection does


async def test_the_app_runs_a_deferred_collection_when_the_operator_pauses(tmp_path_factory, monkeypatch: pytest.MonkeyPatch, no_holds: None) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 40)) as pilot:
        started = pace.last_input()
        await pilot.press("down")
        assert pace.last_input() > started  # the key counted as input
        full = gc.get_threshold()[2]
        gc_hold.hold()  # as a screen showing big data does
        _age_full_generation(full + 1)
        with monkeypatch.context() as typing:
            typing.setattr(pace, "idle_seconds", lambda: 0.0)  # an operator who never stops typing
            app.collect_garbage_when_idle()
            assert app.probes.deferred_collections == 0 and gc_hold.full_collection_pending()
        # then pauses: the app's own timer collects
        await wait_until(lambda: app.probes.deferred_collections >= 1, pilot=pilot, what="the deferred collection in the pause")
        assert not gc_hold.full_collection_pending()


def test_a_scans_rows_are_frozen_as_they_arrive_and_a_holds_release_unfreezes_them(no_holds) -> None:
    from eviscene_tui import switches

    gc.unfreeze()
    try:
        rows = [[i] for i in range(100)]
        gc_hold.freeze_arrived()
        assert gc.get_freeze_count() >= len(rows)  # full collections no longer walk them
        gc_hold.hold()
        gc_hold.release()
        assert gc.get_freeze_count() == 0
        switches.set_off("gc_hold")
        try:
            gc_hold.freeze_arrived()
            assert gc.get_freeze_count() == 0  # the switch off: the collector is left as it is
        finally:
            switches.set_off("gc_hold", False)
    finally:
        gc.unfreeze()
