"""Pilot: the gate card lists the running round's policy calls of the stand-in driver
(a real subprocess under ``eviscene-tui gate``, its calls through the wrapped
``StageRunner._call_llm``, served by the fake vLLM over loopback) as they start and
as they return, with the tool calls between them; Enter on a completed call opens
the token inspector on its capture, the hint marked in the first teacher call."""

from __future__ import annotations

from conftest import wait_until

from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui.screens.gate import GateScreen
from eviscene_tui.ui.screens.tokens import TokenScreen
from eviscene_tui.ui.widgets.gate_panel import CallList

from gate_fixtures import TIMEOUT, decide, fake_vllm, finish, make_case, start_gate  # noqa: F401 - fake_vllm: a fixture
from ui_helpers import GateApp


def _waiting(case, kind: str, round_index: int):
    def check() -> bool:
        st = read_status(case.root)
        return any(p.kind == kind and p.round == round_index and st.driver.waiting == p.name for p in st.pending)

    return check


def _lines(app) -> list[str]:
    if not isinstance(app.screen, GateScreen):
        return []
    view = app.screen.query_one(CallList)
    return [str(view.get_option_at_index(i).prompt) for i in range(view.option_count)]


async def test_the_card_lists_the_calls_as_they_start_and_return(tmp_path, fake_vllm):  # noqa: F811 - the fixture
    case = make_case(tmp_path, policy_url=fake_vllm.v1_url, policy_model=fake_vllm.profile_dict()["profile_id"])
    fake_vllm.hold(after=1)  # the second call stays in flight until released
    proc = start_gate(case, extra=["--repair-attempts", "1", "--proposal-rounds", "1"])
    app = GateApp(GateSession(case.root, operator="pilot"))
    try:
        async with app.run_test(size=(140, 60)) as pilot:
            await wait_until(_waiting(case, "round", 0), TIMEOUT, pilot=pilot, what="the round-0 gate")
            assert decide(case, "approve-round", 0).returncode == 0
            await wait_until(_waiting(case, "hint", 0), TIMEOUT, pilot=pilot, what="the hint gate")
            assert decide(case, "approve-hint", 0).returncode == 0

            def first_back_second_running():
                lines = _lines(app)
                return len(lines) == 3 and "finish tool_calls" in lines[0] and "tool call: reverse_image_search" in lines[1] \
                    and "running for" in lines[2]

            await wait_until(first_back_second_running, TIMEOUT, pilot=pilot, what="call 1 returned, its tool call, call 2 running")
            lines = _lines(app)
            assert lines[0].startswith("psd_teacher_repair (psd_teacher_action) · hint 0 · ") and "[req-000001]" in lines[0]
            assert "hint in its prompt" in lines[0] and "hint in its prompt" not in lines[2]
            assert proc.poll() is None
            fake_vllm.release()

            def all_back():
                lines = _lines(app)
                return len(lines) == 5 and "psd_teacher_judgment" in lines[4] and "finish stop" in lines[4] and lines

            lines = await wait_until(all_back, TIMEOUT, pilot=pilot, what="the three calls returned")
            assert ["tool call" in line for line in lines] == [False, True, False, True, False]
            assert not any("running for" in line for line in lines)

            # Enter on the first call: the token inspector on its capture, the hint in its prompt
            view = app.screen.query_one(CallList)
            view.focus()
            view.highlighted = 0
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, TokenScreen), TIMEOUT, pilot=pilot, what="the token inspector")
            data = app.screen._given_capture
            assert data is not None and data.hint_text and data.hinted_prompt and data.round_index == 0
            assert data.completion_start is not None and data.completion_start == data.hint_prompt_len
            await pilot.press("escape")
            await wait_until(lambda: isinstance(app.screen, GateScreen), TIMEOUT, pilot=pilot, what="back on the gate")
            # a later call's capture carries no hint span
            view = app.screen.query_one(CallList)
            view.focus()
            view.highlighted = 2
            await pilot.press("enter")
            await wait_until(lambda: isinstance(app.screen, TokenScreen), TIMEOUT, pilot=pilot, what="the token inspector, call 2")
            assert app.screen._given_capture.hint_text is None
        assert finish(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
