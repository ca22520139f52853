"""Runs screen and the operator gate: a gated search waiting for a decision is
marked ``awaiting operator`` (its own filter, and in the triage queue), ``G``
opens its gate, and a gated driver that dies is marked gone."""

from __future__ import annotations

import signal

from conftest import wait_until
from ui_helpers import make_app, screen_text, wait_scan

from eviscene_tui.ui.screens.gate import GateCard, GateScreen

from gate_fixtures import make_case, pending, start_gate, wait_until as wait_sync


async def test_awaiting_operator_marker_filter_and_gate_key(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_sync(pending(case, "round", 0), "the round-0 gate")
        app = make_app(case.root.parent)  # the folder holding the search root (and its gate sidecar)
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_scan(pilot, app)
            rows = app.store.rows()
            assert [r.key for r in rows] == ["search-0001"]  # the sidecar is not a case
            assert rows[0].gate == "awaiting operator" and rows[0].in_triage
            await wait_until(lambda: "awaiting operator" in screen_text(app), pilot=pilot, what="the marker painted")
            await pilot.press("w")
            await wait_until(lambda: app.store.filter_name == "awaiting", pilot=pilot, what="the awaiting filter")
            assert [r.key for r in app.store.visible()] == ["search-0001"]

            await pilot.press("G")
            await wait_until(lambda: isinstance(app.screen, GateScreen), pilot=pilot, what="the gate screen")
            await wait_until(lambda: "ROUND GATE · round 0" in str(app.screen.query_one(GateCard).render()),
                             pilot=pilot, what="the round-0 card")
            await pilot.press("escape")
            await wait_until(lambda: not isinstance(app.screen, GateScreen), pilot=pilot, what="back on the runs screen")

            proc.send_signal(signal.SIGKILL)
            proc.wait()
            await wait_until(lambda: app.store.rows()[0].gate == "awaiting operator · driver gone", pilot=pilot,
                             what="the driver-gone marker")
            assert app.store.rows()[0].awaiting_operator
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_case_screen_shows_the_pending_gate_as_a_card(tmp_path):
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.widgets.gate_panel import GatePanel

    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_sync(pending(case, "round", 0), "the round-0 gate")
        app = make_app(case.root.parent)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_scan(pilot, app)
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, CaseScreen) and app.screen.query(GatePanel), pilot=pilot,
                             what="the case screen with its gate card")
            card = app.screen.query_one(GateCard)
            await wait_until(lambda: "ROUND GATE · round 0" in str(card.render()), pilot=pilot, what="the round-0 card")
            await pilot.press("a")  # the trace has focus: not a decision
            await pilot.pause(0.2)
            assert read_decisions(case) == []
            card.focus()
            await pilot.press("a")
            await wait_until(lambda: read_decisions(case) == ["approve-round"], pilot=pilot, what="the decision from the card")
            wait_sync(pending(case, "hint", 0), "the round-0 hint gate")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def read_decisions(case) -> list[str]:
    from eviscene_tui.gate.sidecar import read_status

    return [d.action for d in read_status(case.root).decisions]
