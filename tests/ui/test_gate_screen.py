"""Pilot: the gate card drives the stand-in driver (a real subprocess under
``eviscene-tui gate``): approve round 0 and its hint, relocalize round 1 with a
step picked from the trace, reject its hint, stop round 2, resume (R) and
converge; the decision keys work only on the focused card."""

from __future__ import annotations

import json

from conftest import wait_until, wait_until_sync
from textual.app import App

from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui.screens.gate import GateCard, GateScreen, ReasonPrompt, StepPicker

from gate_fixtures import TIMEOUT, finish, make_case, manifest, start_gate
from ui_helpers import GateApp


async def _until(pilot, condition, what: str, timeout: float = TIMEOUT):
    return await wait_until(condition, timeout, pilot=pilot, what=what)


def _dialog(app, kind):
    """The dialog of ``kind`` once it is ready for keys: on top, laid out and its field
    focused (its on_mount focuses it). A pushed screen is the top screen at once, before
    it has composed, mounted or been laid out: a key or a look at its layout before then
    races it."""

    def ready():
        screen = app.screen
        if not isinstance(screen, kind) or not screen.query("#form") or screen.focused is None:
            return None
        return screen if screen.query_one("#form").region.area else None

    return ready


def _waiting(case, kind: str, round_index: int):
    def check() -> bool:
        st = read_status(case.root)
        return any(p.kind == kind and p.round == round_index and st.driver.waiting == p.name for p in st.pending)

    return check


def _card(app) -> GateCard:
    return app.screen.query_one(GateCard) if isinstance(app.screen, GateScreen) else None


def _card_shows(app, text: str):
    return lambda: isinstance(app.screen, GateScreen) and text in str(app.screen.query_one(GateCard).render())


async def test_gate_card_steps_the_driver(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    app = GateApp(GateSession(case.root, operator="pilot"))
    try:
        async with app.run_test(size=(120, 48)) as pilot:
            await _until(pilot, _waiting(case, "round", 0), "the driver at the round-0 gate")
            await _until(pilot, _card_shows(app, "ROUND GATE · round 0"), "the round-0 card")
            # keys are live only on the focused card: with focus elsewhere, "a" decides nothing
            app.screen.set_focus(None)
            await pilot.press("a")
            await pilot.pause()
            assert read_status(case.root).decisions == ()
            _card(app).focus()
            await pilot.press("a")
            await _until(pilot, _waiting(case, "hint", 0), "the round-0 hint gate")
            await _until(pilot, _card_shows(app, "HINT GATE · round 0"), "the hint card")
            assert "admits it" in str(_card(app).render())
            assert "at step 3 (unified_react) the agent did: reverse_image_search" in str(_card(app).render())
            await pilot.press("a")

            await _until(pilot, _waiting(case, "round", 1), "the round-1 gate")
            await _until(pilot, _card_shows(app, "ROUND GATE · round 1"), "the round-1 card")
            assert "newly excluded hint" in str(_card(app).render())
            await pilot.press("r")
            picker = await _until(pilot, _dialog(app, StepPicker), "the step picker")
            # the list opens on the current site; option 0 is "no step", the trace's step K is option K + 1
            assert isinstance(picker.current, int)
            assert picker.query_one("#form-trace").highlighted == picker.current + 1
            for _ in range(5 - picker.current):
                await pilot.press("down")
            await pilot.press("enter")
            await pilot.press(*"early stop")
            await pilot.press("ctrl+s")
            await _until(pilot, _waiting(case, "hint", 1), "the round-1 hint gate")
            public = json.loads((case.root / "round-inputs" / "round-01" / "public.json").read_text(encoding="utf-8"))
            assert public["repair_search"]["anchor_feedback"]["earliest_error_step"] == 5
            assert public["repair_search"]["needs_relocalization"] is True

            await _until(pilot, _card_shows(app, "HINT GATE · round 1"), "the round-1 hint card")
            await pilot.press("x")
            await _until(pilot, _dialog(app, ReasonPrompt), "the reject dialog")
            await pilot.press(*"vague")
            await pilot.press("ctrl+s")
            await _until(pilot, _waiting(case, "round", 2), "the round-2 gate")
            await _until(pilot, _card_shows(app, "ROUND GATE · round 2"), "the round-2 card")
            assert "rejected proposals: operator_rejected" in str(_card(app).render())
            await pilot.press("s")
            await _until(pilot, _dialog(app, ReasonPrompt), "the stop dialog")
            await pilot.press(*"later")
            await pilot.press("ctrl+s")
            await _until(pilot, lambda: proc.poll() is not None, "the driver to stop")
            await _until(pilot, _card_shows(app, "No gate pending"), "the empty card")
            assert finish(proc) == 0
            assert manifest(case)["execution_error"] == {"round": 2, "type": "OperatorStoppedSearch"}

            # R resumes the stopped driver under the gate; round 2 is asked again
            await _until(pilot, lambda: "R resumes" in str(_card(app).render()), "the resume hint")
            await pilot.press("R")
            await _until(pilot, _waiting(case, "round", 2), "the resumed driver at the round-2 gate")
            resumed = read_status(case.root).driver.pid
            await _until(pilot, _card_shows(app, "ROUND GATE · round 2"), "the round-2 card again")
            await pilot.press("a")
            await _until(pilot, _waiting(case, "hint", 2), "the round-2 hint gate")
            await _until(pilot, _card_shows(app, "HINT GATE · round 2"), "the round-2 hint card")
            await pilot.press("a")
            await _until(pilot, lambda: manifest(case)["status"] == "converged", "the search to converge")
            await _until(pilot, lambda: not read_status(case.root).driver.alive, "the resumed driver to exit")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        st = read_status(case.root)
        if st.driver.alive and st.driver.pid and st.driver.pid != proc.pid:  # the driver the app resumed
            import os
            import signal

            os.kill(st.driver.pid, signal.SIGKILL)
    decisions = read_status(case.root).decisions
    assert [(d.action, d.operator) for d in decisions[:5]] == [
        ("approve-round", "pilot"), ("approve-hint", "pilot"), ("relocalize", "pilot"), ("reject-hint", "pilot"), ("stop", "pilot"),
    ]
    assert decisions[2].step == 5 and decisions[2].reason == "early stop"
    assert [d.action for d in decisions[5:]] == ["approve-round", "approve-hint"]
    assert resumed != proc.pid


def _header(app) -> str:
    return str(app.screen.query_one("#gate-header").render())


def _history(app) -> str:
    return str(app.screen.query_one("#gate-history").render())


def _inside(widget, size: tuple[int, int]) -> bool:
    region = widget.region
    return region.x >= 0 and region.y >= 0 and region.right <= size[0] and region.bottom <= size[1]


async def test_gate_dialogs_and_the_paused_search_at_80x24(tmp_path):
    """Small terminal: the cards show no JSON null; the dialogs fit, keep the gate screen
    visible behind them and say what they act on; an empty reject reason is refused in
    the dialog; after a stop the history stays, the status reads "stopped by operator",
    the decision keys are hidden, and the stop message is gone once R resumed the driver."""
    from textual.widgets import Input

    size = (80, 24)
    case = make_case(tmp_path)
    proc = start_gate(case)
    app = GateApp(GateSession(case.root, operator="pilot"))
    try:
        async with app.run_test(size=size) as pilot:
            await _until(pilot, _card_shows(app, "ROUND GATE · round 0"), "the round-0 card")
            card_text = str(_card(app).render())
            assert "null" not in card_text
            assert "selected step \u2014, earliest error step \u2014" in card_text

            await pilot.press("r")
            picker = await _until(pilot, _dialog(app, StepPicker), "the step picker")
            assert picker.styles.background.a < 1  # the gate screen stays visible behind
            assert _inside(picker.query_one("#form"), size)
            assert "round 0 will get" in str(picker.query_one("#form-context").render())
            await pilot.press("escape")
            await _until(pilot, lambda: isinstance(app.screen, GateScreen), "the picker closed")

            await pilot.press("a")
            await _until(pilot, _card_shows(app, "HINT GATE · round 0"), "the hint card")
            hint_text = read_status(case.root).pending[0].hint["text"]
            await pilot.press("x")
            prompt = await _until(pilot, _dialog(app, ReasonPrompt), "the reject dialog")
            assert _inside(prompt.query_one("#form"), size)
            assert hint_text[:40] in str(prompt.query_one("#form-context").render()).replace("\n", " ")
            await pilot.press(*"vag")
            await pilot.press("backspace", "backspace", "backspace")  # typed, then erased: empty again
            await pilot.press("ctrl+s")
            await _until(pilot, lambda: app.screen is not prompt or "reason is required" in str(prompt.query_one("#form-error").render()),
                         "the empty reason refused")
            assert app.screen is prompt, "an empty reject reason closed the dialog"
            assert read_status(case.root).decisions[-1].action == "approve-round"  # nothing taken
            await pilot.press(*"vague")
            assert prompt.query_one(Input).value == "vague"
            await pilot.press("ctrl+s")
            await _until(pilot, _card_shows(app, "ROUND GATE · round 1"), "the round-1 card")

            await pilot.press("s")
            stop = await _until(pilot, _dialog(app, ReasonPrompt), "the stop dialog")
            assert "round 1 will get" in str(stop.query_one("#form-context").render())
            await pilot.press(*"later")
            await pilot.press("ctrl+s")
            await _until(pilot, lambda: proc.poll() is not None, "the driver to stop")
            await _until(pilot, lambda: "stopped by operator" in _header(app), "the stopped wording")
            await _until(pilot, _card_shows(app, "No gate pending"), "the empty card")
            assert "paused_execution_error" not in _header(app)
            assert "round 0:" in _history(app) and "(no earlier round)" not in _history(app)
            # the decision's outcome, until the driver runs again (a read of the gate that raced
            # the decision may be shown first: the next read has it)
            try:
                await _until(pilot, lambda: "decided stop for round 1" in _header(app), "the stop's outcome in the header")
            except AssertionError as exc:  # what was shown instead, and what the operator was told
                raise AssertionError(f"{exc}; header {_header(app)!r}; notices {app.notices!r}") from exc
            _card(app).focus()
            await _until(pilot, lambda: _card(app).has_focus, "the card focused")
            assert not {"a", "r", "s", "x"} & set(app.screen.active_bindings), "decision keys shown with no gate pending"

            await _until(pilot, lambda: "R resumes" in str(_card(app).render()), "the app seeing the driver gone (resume offered)")
            await _until(pilot, lambda: "R" in app.screen.active_bindings, "R shown once the driver is gone")
            await pilot.press("R")
            await _until(pilot, _card_shows(app, "ROUND GATE · round 1"), "the resumed round-1 card")
            await _until(pilot, lambda: read_status(case.root).driver.alive, "the resumed driver alive")
            await _until(pilot, lambda: "decided stop" not in _header(app), "the stop message gone once the driver runs again")
            assert "round 0:" in _history(app)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        st = read_status(case.root)
        if st.driver.alive and st.driver.pid and st.driver.pid != proc.pid:  # the driver the app resumed
            import os
            import signal

            os.kill(st.driver.pid, signal.SIGKILL)


async def test_gate_dialogs_validate_inside_keep_the_text_and_return_the_values():
    """The gate's dialogs are forms with one convention (ui/screens/dialogs.py): ctrl+s
    submits, Enter never does; a refused value keeps the dialog open with the message
    inside it and the typed text kept; Enter on a step moves to the note; "no step"
    relocalizes without one."""
    from rich.text import Text
    from textual.widgets import Input

    from eviscene_tui.state.gate import TraceStep
    from eviscene_tui.ui.screens.dialogs import ReasonPrompt

    results: list = []

    class Host(App[None]):
        pass

    steps = tuple(TraceStep(i, "search", f"tool: thought {i}") for i in range(4))
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ReasonPrompt("Reject hint 0 of round 1", Text("the hint: look closer"), required=True), callback=results.append)
        prompt = await _until(pilot, _dialog(app, ReasonPrompt), "the reason prompt")
        assert "the hint: look closer" in str(prompt.query_one("#form-context").render())
        await pilot.press("space", "enter", "ctrl+s")  # only blanks (Enter does not submit): refused
        await _until(pilot, lambda: results or "reason is required" in str(prompt.query_one("#form-error").render()), "the blank reason refused")
        assert app.screen is prompt and results == []
        assert prompt.query_one(Input).value == " "  # what was typed is kept
        await pilot.press(*"too vague", "ctrl+s")
        await _until(pilot, lambda: results, "the reason prompt's result")
        assert results.pop()["reason"].strip() == "too vague"

        app.push_screen(StepPicker(steps, 1, Text("round 1 will get: ...")), callback=results.append)
        await _until(pilot, lambda: isinstance(app.screen, StepPicker) and app.screen.query("#form-trace"), "the step picker")
        picker = app.screen
        trace = picker.query_one("#form-trace")
        await _until(pilot, lambda: trace.has_focus, "the trace list focused")
        assert trace.highlighted == 2  # option 0 is "no step": step K is option K + 1
        await pilot.press("down", "enter")
        await _until(pilot, lambda: picker.query_one(Input).has_focus, "the note focused after the pick")
        await pilot.press(*"stops early", "ctrl+s")
        await _until(pilot, lambda: results, "the step picker's result")
        got = results.pop()
        assert (got["step"], got["note"]) == (2, "stops early")

        app.push_screen(StepPicker(steps, None), callback=results.append)
        await _until(pilot, lambda: isinstance(app.screen, StepPicker) and app.screen.query("#form-trace"), "the second step picker")
        assert app.screen.query_one("#form-trace").highlighted == 0
        await pilot.press("enter", "ctrl+s")
        await _until(pilot, lambda: results, "the no-step result")
        assert results.pop()["step"] is None


async def test_resume_is_hidden_and_refused_while_the_driver_runs(tmp_path):
    """While the gated driver is alive (here: waiting at the round-0 gate) R is not
    among the screen's keys, and pressing it starts nothing and says why."""
    case = make_case(tmp_path)
    proc = start_gate(case)
    app = GateApp(GateSession(case.root, operator="pilot"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, _waiting(case, "round", 0), "the driver at the round-0 gate")
            await _until(pilot, _card_shows(app, "ROUND GATE · round 0"), "the round-0 card")
            await _until(pilot, lambda: app.session.snapshot() is not None and app.session.snapshot().status.driver.alive,
                         "the app seeing the driver alive")
            # the card's keys are there: the bindings were refreshed after the driver was seen
            await _until(pilot, lambda: "a" in app.screen.active_bindings, "the card's keys shown")
            assert "R" not in app.screen.active_bindings, "R (resume) shown while the driver runs"
            await pilot.press("R")
            await _until(pilot, lambda: any("cannot resume" in n and "still running" in n for n in app.notices), "the reason R does nothing")
            assert not list(case.gate_dir.glob("driver-resume-*.log")), "a driver was started while one runs"
            assert read_status(case.root).driver.pid == proc.pid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_the_next_card_follows_a_decision_without_waiting_for_the_slow_re_read(tmp_path, monkeypatch):
    """After a decision the panel re-reads the gate quickly for a while: with the steady
    re-read made hourly, the hint card that follows the approved round still appears (and
    once the quick window is over, the quick re-read stops)."""
    from eviscene_tui.ui.widgets import gate_panel

    monkeypatch.setattr(gate_panel, "POLL_SECONDS", 3600.0)
    monkeypatch.setattr(gate_panel, "QUICK_POLL_WINDOW_SECONDS", 120.0)  # long enough for a driver on a loaded machine
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until_sync(_waiting(case, "round", 0), TIMEOUT, what="the driver at the round-0 gate")
        app = GateApp(GateSession(case.root, operator="pilot"))
        async with app.run_test(size=(120, 48)) as pilot:
            await _until(pilot, _card_shows(app, "ROUND GATE · round 0"), "the round-0 card (the first read, at mount)")
            _card(app).focus()
            await pilot.press("a")
            await _until(pilot, _card_shows(app, "HINT GATE · round 0"), "the hint card, read quickly after the decision")
            panel = app.screen.query_one(gate_panel.GatePanel)
            assert panel._quick_timer is not None
            panel._quick_until = 0.0  # the window is over: the next quick tick stops the quick re-read
            await _until(pilot, lambda: panel._quick_timer is None, "the quick re-read stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
