"""The one operator scenario in Pilot, through the gate card: the bundled driver
(``eviscene-tui repair``, a real subprocess) against the fake vLLM and the demo hint
constructor; every decision is a key on the card and its dialog (ctrl+s submits).

approve round 0 -> add a hint (n) -> approve it -> the stream on screen -> reject the
attempt (anchor_matches false) -> relocalize round 1 at step 5 -> approve its hint ->
cancel the stream (c) -> stop (s) -> R resumes -> accept the attempt -> converged."""

from __future__ import annotations

import json
import os
import signal

from conftest import wait_until
from textual.widgets import Input, OptionList, TextArea

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.hints import POOL, DemoHintServer
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui.screens.dialogs import HintEditor, ReasonPrompt, StepPicker, VerdictForm
from eviscene_tui.ui.screens.gate import GateCard, GateScreen
from eviscene_tui.ui.widgets.stream_view import StreamView

from gate_fixtures import TIMEOUT, finish, run_cli
from repair_fixtures import Repair, start_repair, waiting, write_driver_case
from ui_helpers import GateApp

ADDED = "Search the caption in quotes on news sites before the event itself."


async def _until(pilot, condition, what: str, timeout: float = TIMEOUT):
    await wait_until(condition, timeout, pilot=pilot, what=what)


def _card_shows(app, text: str):
    return lambda: isinstance(app.screen, GateScreen) and text in str(app.screen.query_one(GateCard).render())


async def _dialog(pilot, app, kind, field):
    """The dialog, once mounted AND its main field focused (keys typed before that would go elsewhere)."""
    await _until(pilot, lambda: isinstance(app.screen, kind) and isinstance(app.screen.focused, field), f"the {kind.__name__} ready for keys")
    return app.screen


async def test_the_operator_scenario_through_the_card(tmp_path):
    case = write_driver_case(tmp_path / "exp")
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as vllm, DemoHintServer() as hints:
        repair = Repair(case, tmp_path / "work", vllm.v1_url, vllm.profile_dict()["profile_id"], hint_url=hints.v1_url)
        proc = start_repair(repair)
        root = repair.root
        app = GateApp(GateSession(root, operator="pilot"))
        try:
            async with app.run_test(size=(140, 60)) as pilot:
                await _until(pilot, _card_shows(app, "ROUND GATE · round 0"), "the round-0 card")
                app.screen.query_one(GateCard).focus()
                await pilot.press("a")
                await _until(pilot, _card_shows(app, POOL[0][:40]), "the constructor's hint on the card")
                assert "the agent did" in str(app.screen.query_one(GateCard).render())
                await pilot.press("n")  # edit the hint shown: the editor holds it
                editor = await _dialog(pilot, app, HintEditor, TextArea)
                assert editor.values()["editor"] == POOL[0]
                await pilot.press("ctrl+a", *ADDED, "ctrl+s")
                await _until(pilot, _card_shows(app, ADDED[:40]), "the added hint on the card")
                await pilot.press("a")
                await _until(pilot, _card_shows(app, "completion tokens"), "the attempt card (its verdict asked)")
                view = app.screen.query_one(StreamView)
                await _until(pilot, lambda: view.acc.token_count > 0 and view.state == "complete", "the stream on screen")
                await pilot.press("x")
                verdict = await _dialog(pilot, app, VerdictForm, Input)
                await pilot.press(*"the site is later", "tab", "tab", "tab", "tab", "tab", "f", "ctrl+s")
                await _until(pilot, _card_shows(app, "ROUND GATE · round 1"), "the round-1 card")
                assert app.screen is not verdict

                await pilot.press("r")
                picker = await _dialog(pilot, app, StepPicker, OptionList)
                assert picker.allowed == (1, 3, 5)
                await pilot.press("down", "enter", *"the verdict step", "ctrl+s")
                await _until(pilot, _card_shows(app, "HINT GATE · round 1"), "the round-1 hint card")
                vllm.set_scenario(tokens_per_second=3)
                await pilot.press("a")
                await _until(pilot, lambda: _card_shows(app, "streaming")() and view.acc.token_count > 0, "the slow stream on screen")
                await pilot.press("c")
                await _until(pilot, _card_shows(app, "approve to run it again"), "the cancelled hint offered again")
                await pilot.press("s")
                await _dialog(pilot, app, ReasonPrompt, Input)
                await pilot.press("ctrl+s")
                await _until(pilot, lambda: proc.poll() is not None, "the driver to stop")
                assert finish(proc) == 0
                vllm.set_scenario(tokens_per_second=None)
                await _until(pilot, lambda: "R resumes" in str(app.screen.query_one(GateCard).render()), "the resume offer")
                await pilot.press("R")
                await _until(pilot, waiting(root, "attempt", 1, phase="judge"), "the resumed driver at the attempt gate")
                await _until(pilot, lambda: _card_shows(app, "ATTEMPT GATE · round 1")() and _card_shows(app, "completion tokens")(),
                             "the round-1 attempt card")
                await pilot.press("a")
                await _dialog(pilot, app, VerdictForm, Input)
                await pilot.press("ctrl+s")
                await _until(pilot, lambda: json.loads((root / "manifest.json").read_text(encoding="utf-8"))["status"] == "converged",
                             "the search to converge")
                await _until(pilot, lambda: not read_status(root).driver.alive, "the resumed driver to exit")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            st = read_status(root)
            if st.driver.alive and st.driver.pid and st.driver.pid != proc.pid:  # the driver R started
                os.kill(st.driver.pid, signal.SIGKILL)
    assert run_cli("check", str(root)).returncode == 0
    doc = json.loads(run_cli("decisions", str(root), "--json").stdout)
    assert doc["journals"][0]["ok"] is True
    assert [r["action"] for r in doc["decisions"]] == [
        "approve_round", "add_hint", "approve_hint", "reject_attempt", "relocalize", "approve_hint", "cancel_continuation",
        "stop_search", "approve_attempt",
    ]
    assert {r["operator"] for r in doc["decisions"]} == {"pilot"}
    reject = next(r for r in doc["decisions"] if r["action"] == "reject_attempt")
    assert reject["data"]["checker"] == {"anchor_matches": False}
