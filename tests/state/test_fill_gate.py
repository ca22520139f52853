"""The gate a background fill waits at while the UI waits for rows or a detail."""

from __future__ import annotations

import threading

from eviscene_tui.state.trace_rows import FillGate


def test_open_gate_does_not_wait() -> None:
    gate = FillGate()
    assert not gate.held and gate.wait(0)


def test_the_gate_opens_only_when_every_holder_released() -> None:
    gate = FillGate()
    gate.hold()
    gate.hold()
    gate.release()
    assert gate.held and not gate.wait(0)  # one holder left: the fill still waits
    passed = threading.Event()

    def fill() -> None:
        if gate.wait(30):
            passed.set()

    worker = threading.Thread(target=fill)
    worker.start()
    gate.release()
    worker.join(30)
    assert passed.is_set() and not gate.held


def test_a_holder_that_never_releases_only_delays_the_fill() -> None:
    gate = FillGate()
    gate.hold()
    assert gate.wait(0.01) is False  # returns after the timeout, the fill goes on
    gate.release()
    gate.release()  # an extra release does not make the gate negative
    gate.hold()
    assert gate.held
