"""Runs screen and the operator gate: a gated search waiting for a decision is
marked ``awaiting operator`` (its own filter, and in the triage queue), ``G``
opens its gate, and a gated driver that dies is marked gone."""

from __future__ import annotations

import signal

from conftest import wait_until
from ui_helpers import make_app, scanned, screen_text, wait_scan

from eviscene_tui.ui.screens.gate import GateCard, GateScreen

from gate_fixtures import TIMEOUT, make_case, pending, start_gate, wait_until as wait_sync


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
            await wait_until(lambda: "awaiting operator" in screen_text(app), timeout=TIMEOUT, pilot=pilot, what="the marker painted")
            await pilot.press("w")
            await wait_until(lambda: app.store.filter_name == "awaiting", timeout=TIMEOUT, pilot=pilot, what="the awaiting filter")
            assert [r.key for r in app.store.visible()] == ["search-0001"]

            await pilot.press("G")
            await wait_until(lambda: isinstance(app.screen, GateScreen), timeout=TIMEOUT, pilot=pilot, what="the gate screen")
            await wait_until(lambda: "ROUND GATE · round 0" in str(app.screen.query_one(GateCard).render()),
                             timeout=TIMEOUT, pilot=pilot, what="the round-0 card")
            await pilot.press("escape")
            await wait_until(lambda: not isinstance(app.screen, GateScreen), timeout=TIMEOUT, pilot=pilot, what="back on the runs screen")

            proc.send_signal(signal.SIGKILL)
            proc.wait()
            await wait_until(lambda: app.store.rows()[0].gate == "awaiting operator · driver gone", timeout=TIMEOUT, pilot=pilot,
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
            await wait_until(lambda: isinstance(app.screen, CaseScreen) and app.screen.query(GatePanel), timeout=TIMEOUT, pilot=pilot,
                             what="the case screen with its gate card")
            card = app.screen.query_one(GateCard)
            await wait_until(lambda: "ROUND GATE · round 0" in str(card.render()), timeout=TIMEOUT, pilot=pilot, what="the round-0 card")
            await pilot.press("a")  # the trace has focus: not a decision
            await pilot.pause(0.2)
            assert read_decisions(case) == []
            card.focus()
            await pilot.press("a")
            await wait_until(lambda: read_decisions(case) == ["approve-round"], timeout=TIMEOUT, pilot=pilot, what="the decision from the card")
            wait_sync(pending(case, "hint", 0), "the round-0 hint gate")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def read_decisions(case) -> list[str]:
    from eviscene_tui.gate.sidecar import read_status

    return [d.action for d in read_status(case.root).decisions]


async def test_a_gated_root_outside_the_opened_folder_is_a_row_and_G_opens_only_the_highlighted_gate(tmp_path, notices):
    """The demo's case: the app opens a folder while the gated stand-in search lives in the
    app's work directory (outside it). The search becomes a row once its driver wrote it
    (also after a rescan), marked awaiting operator and found by ``w``; ``G`` on another
    row says that case has no gate instead of opening some other search's gate."""
    import argparse
    import shutil
    from pathlib import Path

    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    from gate_fixtures import Case

    opened = tmp_path / "runs"
    sample = Path(__file__).resolve().parents[2] / "sample_runs" / "feedback-converged-3-rounds"
    shutil.copytree(sample, opened / "feedback-converged-3-rounds")
    from eviscene_tui.scaffold.standin import write_inputs

    demo = tmp_path / "runs.eviscene-tui" / "demo" / "gated-standin"
    case = Case(demo, write_inputs(demo / "inputs" / "standin-flood-photo"), demo / "repairs" / "search-0001")
    args = argparse.Namespace(theme=None, poll=False, operator="tester", workdir=None, config=None, gate_roots=[str(case.root)])
    app = EvisceneApp(AppOptions.from_args(opened, args, settings=Settings()), watch=False)
    proc = None
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_scan(pilot, app)
            assert [r.key for r in app.store.rows()] == ["feedback-converged-3-rounds"]  # not written yet
            proc = start_gate(case)

            def gated_row():
                return next((r for r in app.store.rows() if r.gate == "awaiting operator"), None)

            row = await wait_until(gated_row, TIMEOUT, pilot=pilot, what="the gated search listed, awaiting operator")
            assert row.in_triage and row.awaiting_operator
            assert row.key == "runs.eviscene-tui/demo/gated-standin/repairs/search-0001"  # named from beside the folder, no ../

            table = app.screen.query_one(RunsTable)
            assert table.select_key("feedback-converged-3-rounds")
            await pilot.press("G")
            await wait_until(lambda: any("has no operator gate" in n for n in notices), timeout=TIMEOUT, pilot=pilot,
                             what="the no-gate message")
            assert not isinstance(app.screen, GateScreen)

            await pilot.press("w")
            await wait_until(lambda: app.store.filter_name == "awaiting", timeout=TIMEOUT, pilot=pilot, what="the awaiting filter")
            assert [r.key for r in app.store.visible()] == [row.key]
            assert table.select_key(row.key)
            await pilot.press("G")
            await wait_until(lambda: isinstance(app.screen, GateScreen), timeout=TIMEOUT, pilot=pilot, what="the gate screen")
            assert app.screen.session.root == case.root
            await pilot.press("escape")

            await pilot.press("ctrl+r")  # a rescan lists it at once
            await wait_until(lambda: scanned(app) and gated_row() is not None, timeout=TIMEOUT, pilot=pilot,
                             what="the gated row after a rescan")
            assert [r.key for r in app.store.rows()].count(row.key) == 1
        # the scan itself lists the gated root once it exists (not only the runs screen's refresh)
        from eviscene_tui.state.scan import scan_rows

        assert [r.key for r in scan_rows(opened, extra=[case.root])] == ["feedback-converged-3-rounds", row.key]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
