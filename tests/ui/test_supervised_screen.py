"""Pilot test of the supervised screen: a whole gated round by keyboard."""

import asyncio

import orjson
from conftest import ScreenHarness, screen_text, wait_until

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.jsonio import read_bound, read_json
from eviscene_tui.journal import supervised_journal_for_root, verify_chain
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.events import Delta, ToolCallDelta
from eviscene_tui.supervised import ContinuationOutcome, SearchSettings
from eviscene_tui.tokens.tiny import encode
from eviscene_tui.supervised.feedback import CHECK_NAMES
from eviscene_tui.ui.screens.dialogs import FormScreen, TriState
from eviscene_tui.ui.screens.supervised import SupervisedScreen

from supervised_fixtures import tree_hash, write_driver_case

HOSTILE = "Check [b]the[/b] caption [@click=app.quit]x[/] \x1b[2J again."


async def fake_runner(job):
    return ContinuationOutcome(
        status="complete", reasoning="r", content="", tool_calls=[{"id": "1", "name": "web_search", "arguments": "{}"}],
        prompt_token_ids=encode("p"), completion_token_ids=encode("cc"),
        logprobs=[type("LP", (), {"logprob": -0.1, "top": ()})() for _ in encode("cc")],
        finish_reason="tool_calls", usage={"prompt_tokens": 1, "completion_tokens": 2}, policy_model="m",
    )


def _supervised(tmp_path):
    """A supervised screen (fake continuation runner) over a fresh driver case, in a harness app."""
    out = tmp_path / "out"
    droot = write_driver_case(out)
    options = AppOptions(root=out, workdir=tmp_path / "out.eviscene-tui", operator="tester")
    screen = SupervisedScreen(load_case(droot), options, runner=fake_runner, settings=SearchSettings(operator="tester"))
    return screen, ScreenHarness(screen), out


async def test_supervised_screen_round_by_keyboard(tmp_path):
    screen, app, out = _supervised(tmp_path)
    before = tree_hash(out)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_until(lambda: screen.search is not None, pilot=pilot, what=screen.last_message)
        s = screen.search
        # the next-round card starts the round
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        await wait_until(lambda: s.draft is not None and s.draft.stage == "site", pilot=pilot, what=screen.last_message)
        # the keyboard stays on the card that decided; the message says where the next decision is
        await wait_until(lambda: "next: the Site card" in screen.last_message, pilot=pilot, what=screen.last_message)
        assert screen.focused is screen.query_one("#card-next")
        # decision keys are scoped: "a" on the next-round card does nothing
        screen.query_one("#card-next").focus()
        await pilot.press("a")
        await pilot.pause()
        assert s.draft.stage == "site"
        screen.query_one("#card-site").focus()
        await pilot.press("a")
        await wait_until(lambda: s.draft.stage == "hints", pilot=pilot)
        assert "saved" in screen.last_message
        # type a hint in the editor
        screen.query_one("#card-hints").focus()
        await pilot.press("n")
        await wait_until(lambda: app.screen.query("#f-editor"), pilot=pilot)
        app.screen.query_one("#f-editor").text = HOSTILE
        await pilot.press("ctrl+s")
        await wait_until(lambda: len(s.draft.proposals) == 1, pilot=pilot)
        assert s.draft.proposals[0].passed
        screen.query_one("#proposals").focus()
        await pilot.press("a")
        await wait_until(lambda: s.draft.stage == "continuation", pilot=pilot, what=screen.last_message)
        screen.query_one("#card-cont").focus()
        await pilot.press("c")
        await wait_until(lambda: s.draft.stage == "verdict", pilot=pilot, what=screen.last_message)
        # reject with a reason and a checker value
        screen.query_one("#card-verdict").focus()
        await pilot.press("x")
        await wait_until(lambda: app.screen.query("#f-reason"), pilot=pilot)
        app.screen.query_one("#f-reason").value = "wrong step"
        app.screen.query_one("#c-anchor_matches").value = "false"
        await pilot.press("ctrl+s")
        await wait_until(lambda: s.draft.stage == "closed", pilot=pilot, what=screen.last_message)
        assert s.preview_feedback()["needs_relocalization"] is True
        assert "saved" in screen.last_message
        assert app.is_running  # the hostile hint text did not trigger any action
        text = screen_text(app)
        assert "needs_relocalization" in text and "\x1b" not in text
        root = s.root
        # the journal view: chain verified; a changed evidence file shows STALE
        screen.query_one("#card-next").focus()
        await pilot.press("j")
        await wait_until(lambda: "chain: verified" in screen.query_one("#sup-detail").text, pilot=pilot)
        assert "STALE" not in screen.query_one("#sup-detail").text
        cont = root / "rounds" / "round-00" / "continuations" / "hint-00.json"
        cont.write_bytes(cont.read_bytes() + b" ")
        await pilot.press("j")
        await wait_until(lambda: "STALE" in screen.query_one("#sup-detail").text, pilot=pilot)
        await pilot.press("escape")
    assert verify_chain(supervised_journal_for_root(root)).ok
    assert tree_hash(out) == before


async def test_supervised_screen_second_instance_read_only(tmp_path):
    out = tmp_path / "out"
    droot = write_driver_case(out)
    options = AppOptions(root=out, workdir=tmp_path / "w", operator="tester")
    from eviscene_tui.supervised import SupervisedSearch, inputs_from_case

    case = load_case(droot)
    first = SupervisedSearch.start(inputs_from_case(case, label="repairs/0123456789abcdef"), options.workdir, settings=SearchSettings(operator="tester"))
    screen = SupervisedScreen(case, options, runner=fake_runner, settings=SearchSettings(operator="tester"))
    app = ScreenHarness(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(lambda: screen.search is not None, pilot=pilot, what=screen.last_message)
        assert screen.search.read_only
        assert "read-only" in screen.last_message
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        await pilot.pause()
        assert screen.search.draft is None and "read-only" in screen.last_message
    first.close()


async def test_supervised_screen_no_recoverable_site_asks_for_a_step(tmp_path):
    out = tmp_path / "out"
    droot = write_driver_case(out, with_site=False)
    case = load_case(droot)
    options = AppOptions(root=out, workdir=tmp_path / "w", operator="tester")
    screen = SupervisedScreen(case, options, runner=fake_runner, settings=SearchSettings(operator="tester"))
    app = ScreenHarness(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(lambda: app.screen.query("#f-step"), pilot=pilot, what=screen.last_message)
        form = app.screen
        # the trace is there to pick from; a tool step is refused inside the dialog, keeping the note
        assert form.query_one("#form-trace").option_count == 6
        form.query_one("#f-step").value = "2"
        form.query_one("#f-note").value = "the repeated search"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is form and "not a policy step" in form.error
        assert form.query_one("#f-note").value == "the repeated search"
        form.query_one("#f-step").value = "3"
        await pilot.press("ctrl+s")
        await wait_until(lambda: screen.search is not None, pilot=pilot, what=screen.last_message)
        s = screen.search
        assert s.inputs.site["source_step_index"] == 3 and s.inputs.site["localization_kind"] == "operator"
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        await wait_until(lambda: s.draft is not None and s.draft.stage == "site", pilot=pilot, what=screen.last_message)
        import orjson

        events = [orjson.loads(x) for x in supervised_journal_for_root(s.root).read_bytes().splitlines()]
        assert events[0]["action"] == "relocalize" and events[0]["reason"] == "the repeated search"
        assert (s.draft.dir / "semantic-localization.json").is_file()
        await pilot.press("escape")


async def test_supervised_screen_streams_and_cancels_over_http(tmp_path):
    """Real loopback HTTP to the fake vLLM server: cancel mid-stream, then run again."""
    import json

    from eviscene_tui.fake_vllm.harness import FakeVLLMServer
    from eviscene_tui.fake_vllm.server import DEFAULT_PROFILE
    from eviscene_tui.policy.config import PolicyConfig
    from eviscene_tui.policy.profile import target_from_profile_dict
    from eviscene_tui.supervised import PolicyContinuationRunner

    out = tmp_path / "out"
    droot = write_driver_case(out)
    case = load_case(droot)
    options = AppOptions(root=out, workdir=tmp_path / "w", operator="tester")
    with FakeVLLMServer(scenario={"tokens_per_second": 40, "reasoning_tokens": 400}) as srv:
        profile = dict(DEFAULT_PROFILE, base_url=srv.v1_url)
        runner = PolicyContinuationRunner(target_from_profile_dict(profile), PolicyConfig())
        screen = SupervisedScreen(case, options, runner=runner, settings=SearchSettings(operator="tester", policy_model=profile["profile_id"]))
        app = ScreenHarness(screen)
        async with app.run_test(size=(140, 45)) as pilot:
            await wait_until(lambda: screen.search is not None, pilot=pilot, what=screen.last_message)
            s = screen.search
            s.begin_round()
            s.accept_site()
            s.approve_hint(s.add_operator_hint("Search the caption text in quotes.").index)
            screen.refresh_view()
            screen.query_one("#card-cont").focus()
            await pilot.press("c")
            view = screen.query_one("#sup-stream")
            await wait_until(lambda: view.acc.token_count >= 5, pilot=pilot, what=screen.last_message)
            await pilot.press("ctrl+x")
            await wait_until(lambda: view.state == "cancelled", pilot=pilot)
            assert s.draft.stage == "continuation"
            assert not (s.draft.dir / "continuations" / "hint-00.json").exists()
            srv.set_scenario(tokens_per_second=None, reasoning_tokens=20)
            await pilot.press("c")
            await wait_until(lambda: s.draft.stage == "verdict", pilot=pilot, what=screen.last_message)
            assert view.state == "complete"
            rec = json.loads((s.draft.dir / "repair_attempts.jsonl").read_text())
            assert rec["local_verification"] == {} and rec["completion_ids"]
            await pilot.press("escape")


async def test_supervised_screen_torn_journal_tail(tmp_path):
    from eviscene_tui.journal import supervised_journal_for_root as sj
    from eviscene_tui.supervised import SupervisedSearch, inputs_from_case

    out = tmp_path / "out"
    droot = write_driver_case(out)
    case = load_case(droot)
    options = AppOptions(root=out, workdir=tmp_path / "w", operator="tester")
    first = SupervisedSearch.start(inputs_from_case(case, label="repairs/0123456789abcdef"), options.workdir, settings=SearchSettings(operator="tester"))
    first.begin_round()
    root = first.root
    first.close()
    with open(sj(root), "ab") as fh:
        fh.write(b'{"seq": 1, "torn')
    screen = SupervisedScreen(case, options, runner=fake_runner, settings=SearchSettings(operator="tester"))
    app = ScreenHarness(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(lambda: screen.search is not None, pilot=pilot)
        assert "torn bytes" in screen.last_message
        screen.query_one("#card-site").focus()
        await pilot.press("a")
        await wait_until(lambda: "failed" in screen.last_message, pilot=pilot)
        assert screen.search.draft.stage == "site"
        await pilot.press("ctrl+k")
        await wait_until(lambda: "acknowledge torn tail: saved" in screen.last_message, pilot=pilot)
        await pilot.press("a")
        await wait_until(lambda: screen.search.draft.stage == "hints", pilot=pilot, what=screen.last_message)
        await pilot.press("escape")
    assert verify_chain(sj(root)).ok
    assert b'{"seq": 1, "torn\n' in sj(root).read_bytes()


async def test_embedded_stream_badge_shows_the_session_kind(tmp_path):
    out = tmp_path / "out"
    droot = write_driver_case(out)
    case = load_case(droot)
    options = AppOptions(root=out, workdir=tmp_path / "w", operator="t", policy_url="http://127.0.0.1:9/v1", policy_model="m")
    screen = SupervisedScreen(case, options, runner=fake_runner, settings=SearchSettings(operator="t"))
    app = ScreenHarness(screen)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        assert screen.query_one("#sup-stream").badge == "unattested"
    screen = SupervisedScreen(case, AppOptions(root=out, workdir=tmp_path / "w2", operator="t"), runner=fake_runner, settings=SearchSettings(operator="t"))
    app = ScreenHarness(screen)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        assert screen.query_one("#sup-stream").badge == "no policy"


async def test_embedded_stream_badge_attested_with_a_profile(tmp_path):
    import orjson

    from eviscene_tui.fake_vllm.harness import FakeVLLMServer

    out = tmp_path / "out"
    case = load_case(write_driver_case(out))
    with FakeVLLMServer() as server:
        profile = tmp_path / "profile.json"
        profile.write_bytes(orjson.dumps(server.profile_dict()))
        options = AppOptions(root=out, workdir=tmp_path / "w", operator="t", policy_profile=profile)
        screen = SupervisedScreen(case, options, runner=fake_runner, settings=SearchSettings(operator="t"))
        app = ScreenHarness(screen)
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.pause()
            assert screen.query_one("#sup-stream").badge == "attested"


async def test_hints_card_gives_arrows_to_the_list_so_any_proposal_can_be_approved(tmp_path):
    screen, app, _ = _supervised(tmp_path)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_until(lambda: screen.search is not None, pilot=pilot, what=screen.last_message)
        s = screen.search
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        await wait_until(lambda: s.draft is not None and s.draft.stage == "site", pilot=pilot)
        screen.query_one("#card-site").focus()
        await pilot.press("a")
        await wait_until(lambda: s.draft.stage == "hints", pilot=pilot)
        for n, text in enumerate(["Compare the dates of the first copies.", "Quote the caption before judging."], start=1):
            screen.query_one("#card-hints").focus()
            await pilot.press("n")
            await wait_until(lambda: app.screen.query("#f-editor"), pilot=pilot)
            app.screen.query_one("#f-editor").text = text
            await pilot.press("ctrl+s")
            await wait_until(lambda n=n: len(s.draft.proposals) == n, pilot=pilot)
        screen.query_one("#card-hints").focus()
        await pilot.pause()
        assert screen.focused is screen.query_one("#proposals")  # arrows move the highlight
        await pilot.press("down", "a")
        await wait_until(lambda: s.draft.stage == "continuation", pilot=pilot, what=screen.last_message)
        assert s.draft.approved is not None and "caption" in str(s.draft.proposals[1].text)
        assert s.draft.proposals[1].status == "approved" and s.draft.proposals[0].status != "approved"


# ============================================================================ reopen, stop, focus, dialogs
LOCK = {"source_error_confirmed": True, "repaired_at_selected_step": True, "procedural_hint": True, "anchor_matches": True}


class Runner:
    """A continuation runner that completes (as ``fake_runner``) or, with ``hang``, streams
    a few tokens and then waits until it is cancelled."""

    PARTIAL = (
        Delta("reasoning", "Looking at the caption ", token_ids=(11, 12, 13)),
        Delta("reasoning", "once more.", token_ids=(14,)),
        Delta("content", "Searching", token_ids=(15, 16)),
        ToolCallDelta(0, id="call-1", name="web_search", arguments='{"q": "flooded'),
    )

    def __init__(self) -> None:
        self.hang = False

    async def __call__(self, job):
        if self.hang:
            for ev in self.PARTIAL:
                job.on_event(ev)
            await asyncio.Event().wait()
        return await fake_runner(job)


class QuitHarness(ScreenHarness):
    BINDINGS = [("q", "quit", "Quit")]


def _screen(tmp_path, runner=None):
    out = tmp_path / "out"
    if not out.exists():
        write_driver_case(out)
    options = AppOptions(root=out, workdir=tmp_path / "out.eviscene-tui", operator="tester")
    screen = SupervisedScreen(load_case(out / "repairs" / "0123456789abcdef"), options, runner=runner or fake_runner,
                              settings=SearchSettings(operator="tester"))
    return screen, QuitHarness(screen)


def _plain(visual) -> str:
    return str(visual)


def rendered_panels(screen) -> dict[str, str]:
    """What each panel shows, as text."""
    out = {"title": _plain(screen.query_one("#sup-title").render()), "detail": screen.query_one("#sup-detail").text}
    for card in ("#card-site", "#card-hints", "#card-cont", "#card-verdict", "#card-next"):
        out[card] = _plain(screen.query_one(card).query_one(".card-body").render())
    ol = screen.query_one("#proposals")
    out["proposals"] = "\n".join(_plain(ol.get_option_at_index(i).prompt) for i in range(ol.option_count))
    for pane in ("#pane-reasoning", "#pane-content", "#pane-tools"):
        out[pane] = screen.query_one(pane).text
    return out


async def _opened(pilot, screen):
    await wait_until(lambda: screen.search is not None and screen._shown is not None and screen._shown.opened, pilot=pilot,
                     what=f"the search opened ({screen.last_message})")
    await pilot.pause()


async def _reopen_and_compare(tmp_path, pilot, screen, runner=None):
    """Quit (q), reopen the same case in a new app, and check every panel equals what it showed."""
    before_snap = screen.session.snapshot().panels()
    before_text = rendered_panels(screen)
    await pilot.press("q")
    return before_snap, before_text


async def _check_reopened(tmp_path, before, runner=None):
    before_snap, before_text = before
    screen, app = _screen(tmp_path, runner)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        assert not screen.search.read_only, screen.last_message
        assert screen.session.snapshot().panels() == before_snap
        assert rendered_panels(screen) == before_text
        await pilot.press("q")


async def _press_on(pilot, screen, card, *keys):
    screen.query_one(card).focus()
    await pilot.pause()
    await pilot.press(*keys)


async def _form(pilot, app):
    await wait_until(lambda: isinstance(app.screen, FormScreen), pilot=pilot, what="a dialog")
    await pilot.pause()
    return app.screen


async def test_every_panel_after_a_reopen_equals_what_it_showed_at_every_gate(tmp_path):
    runner = Runner()

    async def step(action, until):
        """Run one step of the round in a fresh app, then quit and compare after a reopen."""
        screen, app = _screen(tmp_path, runner)
        async with app.run_test(size=(140, 50)) as pilot:
            await _opened(pilot, screen)
            await action(pilot, screen, app)
            await wait_until(lambda: until(screen.search), pilot=pilot, what=f"the step's gate ({screen.last_message})")
            await wait_until(lambda: screen.session.busy is None, pilot=pilot)
            await pilot.pause()
            before = await _reopen_and_compare(tmp_path, pilot, screen)
        await _check_reopened(tmp_path, before, runner)
        return before

    async def nothing(pilot, screen, app):
        pass

    # between rounds, nothing started yet
    await step(nothing, lambda s: s.draft is None)

    async def start(pilot, screen, app):
        await _press_on(pilot, screen, "#card-next", "s")

    await step(start, lambda s: s.draft is not None and s.draft.stage == "site")

    async def accept_and_propose(pilot, screen, app):
        await _press_on(pilot, screen, "#card-site", "a")
        await wait_until(lambda: screen.search.draft.stage == "hints", pilot=pilot)
        for n, text in enumerate(["Compare the dates of the first copies.", "Quote the caption.\nThen search it verbatim."], 1):
            await _press_on(pilot, screen, "#card-hints", "n")
            form = await _form(pilot, app)
            form.query_one("#f-editor").text = text
            await pilot.press("ctrl+s")
            await wait_until(lambda n=n: len(screen.search.draft.proposals) == n and screen.session.busy is None, pilot=pilot)
        await _press_on(pilot, screen, "#proposals", "x")
        form = await _form(pilot, app)
        form.query_one("#f-reason").value = "too vague"
        await pilot.press("ctrl+s")

    before = await step(accept_and_propose, lambda s: s.draft.proposals and s.draft.proposals[0].status == "rejected")
    assert "2 proposal(s)" in before[1]["#card-hints"] and "Then search it verbatim." in before[1]["proposals"]
    assert "round-00 feedback" in before[1]["detail"]

    async def approve_run_cancel(pilot, screen, app):
        ol = screen.query_one("#proposals")
        ol.focus()
        ol.highlighted = 1
        await pilot.press("a")
        await wait_until(lambda: screen.search.draft.stage == "continuation", pilot=pilot, what=screen.last_message)
        runner.hang = True
        await _press_on(pilot, screen, "#card-cont", "c")
        view = screen.query_one("#sup-stream")
        await wait_until(lambda: view.acc.token_count == 6 and "once more." in screen.query_one("#pane-reasoning").text,
                         pilot=pilot, what="the streamed tokens on screen")
        await pilot.press("ctrl+x")

    before = await step(approve_run_cancel, lambda s: s.draft.outcome is not None and s.draft.outcome.status == "cancelled")
    assert "last run: cancelled" in before[1]["#card-cont"] and "Then search it verbatim." in before[1]["#card-cont"]
    # what the cancelled run streamed is still shown (and the same after the reopen)
    assert before[1]["#pane-reasoning"] == "Looking at the caption once more." and before[1]["#pane-content"] == "Searching"
    assert "web_search" in before[1]["#pane-tools"] and "6 token(s) streamed" in before[1]["#card-cont"]
    assert "APPROVED" in before[1]["proposals"] and "rejected" in before[1]["proposals"]
    runner.hang = False

    async def run(pilot, screen, app):
        await _press_on(pilot, screen, "#card-cont", "c")

    before = await step(run, lambda s: s.draft.stage == "verdict")
    assert "attempt " in before[1]["#card-verdict"] and "teacher: web_search" in before[1]["#card-verdict"]
    assert before[1]["#pane-reasoning"] == "r" and "web_search" in before[1]["#pane-tools"]  # the recorded continuation

    async def reject(pilot, screen, app):
        await _press_on(pilot, screen, "#card-verdict", "x")
        form = await _form(pilot, app)
        form.query_one("#f-reason").value = "wrong step"
        form.query_one("#c-anchor_matches").value = "false"
        await pilot.press("ctrl+s")

    before = await step(reject, lambda s: s.draft is not None and s.draft.stage == "closed")
    assert "needs_relocalization" in before[1]["#card-next"] and "next round feedback" in before[1]["detail"]

    async def stop(pilot, screen, app):
        await _press_on(pilot, screen, "#card-next", "t")
        await _form(pilot, app)
        await pilot.press("ctrl+s")

    before = await step(stop, lambda s: s.stopped_by_operator)
    assert "stopped by operator" in before[1]["title"] and "stopped by operator" in before[1]["#card-next"]

    async def resume_and_start(pilot, screen, app):
        await _press_on(pilot, screen, "#card-next", "u")
        await wait_until(lambda: screen.search.status == "searching" and screen.session.busy is None, pilot=pilot)
        await pilot.press("s")

    before = await step(resume_and_start, lambda s: s.draft is not None and s.draft.index == 1 and s.draft.stage == "site")
    assert "relocalization requested by the feedback" in before[1]["#card-site"]
    assert "round-01 feedback" in before[1]["detail"]


async def test_stop_ends_the_search_in_its_files_and_s_does_not_start_a_round_until_resumed(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        s = screen.search
        await _press_on(pilot, screen, "#card-next", "t")
        form = await _form(pilot, app)
        assert "before round 0" in str(form.query_one("#form-context").render())
        form.query_one("#f-note").value = "enough for today"
        await pilot.press("ctrl+s")
        await wait_until(lambda: s.stopped_by_operator and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        state = read_bound(s.root / "search-state.json").payload
        manifest, _ = read_json(s.root / "manifest.json")
        assert state["status"] == manifest["status"] == "paused_execution_error"
        assert state["execution_error"]["type"] == manifest["execution_error"]["type"] == "OperatorStoppedSearch"
        events = [orjson.loads(x) for x in supervised_journal_for_root(s.root).read_bytes().splitlines()]
        assert events[-1]["data"]["event"] == "stop" and events[-1]["data"]["status"] == "paused_execution_error"
        assert events[-1]["reason"] == "enough for today"
        assert "stopped by operator" in rendered_panels(screen)["title"]
        next_card = screen.query_one("#card-next")
        assert "u resume" in next_card.border_subtitle and "s start" not in next_card.border_subtitle
        await pilot.press("s")
        await wait_until(lambda: "u resumes it" in screen.last_message, pilot=pilot, what=screen.last_message)
        assert "stopped by the operator" in screen.last_message and s.draft is None
        assert not (s.root / "rounds" / "round-00").exists()
        await pilot.press("u")
        await wait_until(lambda: s.status == "searching" and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        await pilot.press("s")
        await wait_until(lambda: s.draft is not None and s.draft.stage == "site", pilot=pilot, what=screen.last_message)


async def test_after_a_relocalize_the_site_panel_shows_the_new_step_at_once(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        await _press_on(pilot, screen, "#card-next", "s")
        await wait_until(lambda: screen.search.draft is not None, pilot=pilot)
        assert "step 3 " in rendered_panels(screen)["#card-site"]
        await _press_on(pilot, screen, "#card-site", "r")
        form = await _form(pilot, app)
        form.query_one("#f-step").value = "1"
        form.query_one("#f-note").value = "the first search went wrong"
        await pilot.press("ctrl+s")
        await wait_until(lambda: screen.search.draft.stage == "closed" and screen.session.busy is None, pilot=pilot)
        await pilot.pause()
        site = rendered_panels(screen)["#card-site"]
        assert "next round starts at step 1 " in site and "operator" in site, site


async def test_dialogs_keep_what_was_typed_and_show_what_they_act_on(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        await _press_on(pilot, screen, "#card-next", "s")
        await wait_until(lambda: screen.search.draft is not None, pilot=pilot)
        # a dialog the gate would refuse does not open (nothing typed is lost to the refusal)
        await _press_on(pilot, screen, "#card-hints", "n")
        await pilot.pause()
        assert app.screen is screen and "not possible now, the round is at site" in screen.last_message
        await _press_on(pilot, screen, "#card-site", "r")
        form = await _form(pilot, app)
        # the trace to pick from: every step, the policy steps selectable
        trace = form.query_one("#form-trace")
        assert trace.option_count == len(screen.search.inputs.trace["state"]["all_steps"])
        assert [trace.get_option_at_index(i).disabled for i in (1, 2, 3)] == [False, True, False]
        form.query_one("#f-step").focus()
        await pilot.press("3", "ctrl+s")
        await pilot.pause()
        assert app.screen is form, "the dialog closed on a validation error"
        assert "needs a note" in form.error
        assert "needs a note" in str(form.query_one("#form-error").render())
        assert form.query_one("#f-step").value == "3"
        # picking a step from the trace fills the field
        trace.focus()
        trace.highlighted = 1
        await pilot.press("enter")
        assert form.query_one("#f-step").value == "1"
        await pilot.press("escape")
        await wait_until(lambda: app.screen is screen, pilot=pilot)
        # the reject-hint dialog names the hint
        await _press_on(pilot, screen, "#card-site", "a")
        await wait_until(lambda: screen.search.draft.stage == "hints", pilot=pilot)
        screen.search.add_operator_hint("Compare the dates of the first copies.")
        screen.refresh_view()
        await _press_on(pilot, screen, "#proposals", "x")
        form = await _form(pilot, app)
        assert "Compare the dates of the first copies." in str(form.query_one("#form-context").render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is form and "needs a reason" in form.error


async def test_checker_values_read_true_false_unset_in_words(tmp_path):
    for width in (80, 120):
        screen, app = _screen(tmp_path / str(width))
        async with app.run_test(size=(width, 60)) as pilot:
            await _opened(pilot, screen)
            s = screen.search
            s.begin_round()
            s.accept_site()
            s.approve_hint(s.add_operator_hint("Search the caption text in quotes.").index)
            assert (await s.run_continuation(fake_runner)).ok
            screen.refresh_view()
            await _press_on(pilot, screen, "#card-verdict", "x")
            form = await _form(pilot, app)
            assert all(isinstance(form.query_one(f"#c-{name}"), TriState) for name in CHECK_NAMES)
            rows = {name: str(form.query_one(f"#c-{name}").render()) for name in CHECK_NAMES}
            assert all("unset" in text for text in rows.values()), rows
            assert all(form.query_one(f"#c-{name}").content_region.width >= len("◀ unset ▶") for name in CHECK_NAMES)
            form.query_one("#c-anchor_matches").focus()
            await pilot.press("f")
            assert "false" in str(form.query_one("#c-anchor_matches").render())
            await pilot.press("space")
            assert "unset" in str(form.query_one("#c-anchor_matches").render())
            await pilot.press("t")
            form.query_one("#f-reason").value = "wrong"
            await pilot.press("ctrl+s")
            await wait_until(lambda s=s: s.draft.stage == "closed", pilot=pilot, what=screen.last_message)
            events = [orjson.loads(x) for x in supervised_journal_for_root(s.root).read_bytes().splitlines()]
            assert events[-1]["action"] == "reject_attempt" and events[-1]["data"]["checker"] == {"anchor_matches": True}


async def test_decision_keys_act_only_on_the_card_that_visibly_holds_the_focus(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        s = screen.search
        site, hints = screen.query_one("#card-site"), screen.query_one("#card-hints")
        await _press_on(pilot, screen, "#card-next", "s")
        await wait_until(lambda: s.draft is not None and screen.session.busy is None, pilot=pilot)
        # the round is at the site gate, but the keys stay on the Next card until the operator moves them
        assert screen.query_one("#card-next").has_class("-has-keys")
        await _press_on(pilot, screen, "#card-site", "a")
        await wait_until(lambda: s.draft.stage == "hints" and screen.session.busy is None, pilot=pilot)
        await pilot.pause()
        # the marked card is the one with the keys
        assert site.has_class("-has-keys") and site.border_title.startswith("▶") and "a accept site" in site.border_subtitle
        app.set_keymap({"supervised.site.relocalize": "R"})  # the keys shown follow the user's keymap
        site.show_keys(True)
        assert "R relocalize" in site.border_subtitle
        assert not hints.has_class("-has-keys") and not hints.border_title.startswith("▶")
        s.add_operator_hint("Compare the dates of the first copies.")
        screen.refresh_view()
        await pilot.press("a")  # still on the Site card: it must not approve the first hint
        await wait_until(lambda: "failed" in screen.last_message, pilot=pilot)
        assert s.draft.stage == "hints" and s.draft.proposals[0].status == "pending"
        events = [orjson.loads(x) for x in supervised_journal_for_root(s.root).read_bytes().splitlines()]
        assert not any(e["action"] == "approve_hint" for e in events)
        # g moves the keys to the open gate's card (the Hints list), visibly
        await pilot.press("g")
        await pilot.pause()
        assert hints.has_class("-has-keys") and not site.has_class("-has-keys")
        assert screen.focused is screen.query_one("#proposals")


async def test_hints_keep_every_line_and_the_editor_starts_with_the_locked_hint(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        s = screen.search
        s.begin_round()
        s.accept_site()
        s.approve_hint(s.add_operator_hint("Check the caption.").index)
        assert (await s.run_continuation(fake_runner)).ok
        s.reject_attempt("not yet", checker=dict(LOCK))
        s.begin_round()
        s.accept_site()
        screen.refresh_view()
        await _press_on(pilot, screen, "#card-hints", "n")
        form = await _form(pilot, app)
        editor = form.query_one("#f-editor")
        assert editor.text == "Check the caption.\n"
        await pilot.press(*"Then quote it.", "enter", *"And date it.")
        assert editor.text == "Check the caption.\nThen quote it.\nAnd date it."
        await pilot.press("ctrl+s")
        await wait_until(lambda: s.draft.proposals and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        assert s.draft.proposals[0].passed, s.draft.proposals[0].audit
        await pilot.pause()
        shown = rendered_panels(screen)["proposals"]
        assert "Then quote it.\nAnd date it." in shown


async def test_in_the_app_g_after_quit_shows_the_same_hints_and_feedback(tmp_path_factory, tmp_path):
    """The operator's path: open a case, g, start, accept, type a hint, approve it, q;
    start the app again, open the case, g: the same panels."""
    from ui_helpers import copy_case, make_app, open_case

    root = tmp_path / "runs"
    copy_case(tmp_path_factory, "feedback-converged-3-rounds", root)

    async def supervise(app, pilot):
        await open_case(pilot, app, "feedback-converged-3-rounds")
        await pilot.press("g")
        await wait_until(lambda: isinstance(app.screen, SupervisedScreen), pilot=pilot)
        screen = app.screen
        await _opened(pilot, screen)
        return screen

    app = make_app(root)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await supervise(app, pilot)
        s = screen.search
        await pilot.press("s")
        await wait_until(lambda: s.draft is not None and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        await pilot.press("g", "a")
        await wait_until(lambda: s.draft.stage == "hints" and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        await pilot.press("g", "n")
        await _form(pilot, app)
        await pilot.press(*"Open the oldest copy first.", "enter", *"Then compare the dates.", "ctrl+s")
        await wait_until(lambda: s.draft.proposals and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        await pilot.press("g", "a")
        await wait_until(lambda: s.draft.stage == "continuation" and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        before = (screen.session.snapshot().panels(), rendered_panels(screen))
        assert "Then compare the dates." in before[1]["proposals"] and "feedback (driver rules)" in before[1]["detail"]
        await pilot.press("q")
    app = make_app(root)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await supervise(app, pilot)
        assert "resumed" in screen.last_message and "continuation gate" in screen.last_message
        assert (screen.session.snapshot().panels(), rendered_panels(screen)) == before
        await pilot.press("q")


async def test_an_unexpected_failure_in_an_operation_is_shown_and_frees_the_screen(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)

        def broken() -> None:
            raise KeyError("a field nobody expected")

        screen.search.begin_round = broken
        await _press_on(pilot, screen, "#card-next", "s")
        await wait_until(lambda: "failed" in screen.last_message, pilot=pilot)
        assert "internal error: KeyError" in screen.last_message and screen.session.busy is None


async def test_relocalize_by_keys_from_the_current_site_then_the_keys_follow_the_open_gate(tmp_path):
    """The relocalize dialog opens on the trace list at the current site (↑/↓ and Enter
    pick a step, the note is next); once the round closes, the keys are on the Next
    round card, not on the Site card whose gate is gone."""
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        await _press_on(pilot, screen, "#card-next", "s")
        await wait_until(lambda: screen.search.draft is not None, pilot=pilot)
        await _press_on(pilot, screen, "#card-site", "r")
        form = await _form(pilot, app)
        trace = form.query_one("#form-trace")
        assert form.focused is trace
        assert trace.get_option_at_index(trace.highlighted).id == "step-3"  # the current site
        await pilot.press("up", "enter")  # step 2 is not a policy step: up lands on step 1
        assert form.query_one("#f-step").value == "1"
        assert form.focused is form.query_one("#f-note")
        await pilot.press(*"the first search went wrong", "ctrl+s")
        await wait_until(lambda: app.screen is screen and screen.search.draft is None or screen.search.draft.stage == "closed", pilot=pilot)
        await wait_until(lambda: screen.focused is screen.query_one("#card-next"), pilot=pilot, what="the keys on the Next round card")
        assert "a accept site" not in screen.query_one("#card-site").border_subtitle



async def test_the_stream_stats_of_a_recorded_continuation_are_the_measured_ones(tmp_path):
    """At the verdict gate the stream view replays the round's recorded continuation: its
    stats are the timings measured while it streamed, never the replay's own (which made
    a tok/s in the hundreds of thousands); after a reopen, the ones the round recorded."""

    async def timed_runner(job):
        out = await fake_runner(job)
        out.timings = {"ttft_s": 0.25, "wall_s": 1.5, "tokens_per_s": 301.0}
        return out

    screen, app = _screen(tmp_path, timed_runner)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        s = screen.search
        await _press_on(pilot, screen, "#card-next", "s")
        await wait_until(lambda: s.draft is not None and s.draft.stage == "site", pilot=pilot)
        await _press_on(pilot, screen, "#card-site", "a")
        await wait_until(lambda: s.draft.stage == "hints", pilot=pilot)
        await _press_on(pilot, screen, "#card-hints", "n")
        form = await _form(pilot, app)
        form.query_one("#f-editor").text = "Check the photo's date first."
        await pilot.press("ctrl+s")
        await wait_until(lambda: len(s.draft.proposals) == 1, pilot=pilot)
        await _press_on(pilot, screen, "#proposals", "a")
        await wait_until(lambda: s.draft.stage == "continuation", pilot=pilot, what=screen.last_message)
        await _press_on(pilot, screen, "#card-cont", "c")
        await wait_until(lambda: s.draft.stage == "verdict", pilot=pilot, what=screen.last_message)
        stats = screen.query_one("#sup-stream").query_one("#stream-stats")
        await wait_until(lambda: "ttft 0.25 s" in str(stats.render()), pilot=pilot, what=f"the measured ttft ({stats.render()})")
        assert "tok/s 301 " in str(stats.render())
        await pilot.press("q")

    # reopened from its files: the figures recorded in the round, marked as recorded
    screen, app = _screen(tmp_path, timed_runner)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        assert screen.search.draft is not None and screen.search.draft.stage == "verdict"
        stats = screen.query_one("#sup-stream").query_one("#stream-stats")
        await wait_until(lambda: "(recorded)" in str(stats.render()), pilot=pilot, what=f"the recorded stats ({stats.render()})")
        line = str(stats.render())
        assert "ttft 0.25 s" in line and "tok/s 301 " in line and "finish tool_calls" in line, line
        assert f"tokens {len(encode('cc'))} " in line, line


async def test_at_80x24_the_header_shows_the_status_and_the_gate(tmp_path):
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await _opened(pilot, screen)
        await wait_until(lambda: "gate between rounds" in " ".join(screen_text(app).split()), pilot=pilot,
                         what="the whole header on screen")


async def test_an_ended_search_offers_no_round_keys_and_says_it_ended(tmp_path):
    """Once the search ended (here its time budget, found when s asks for a round), the
    Next card says so with the final status and lists no key; s / t / u do nothing but
    say why."""
    screen, app = _screen(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await _opened(pilot, screen)
        s = screen.search
        card = screen.query_one("#card-next")
        card.focus()
        await pilot.pause()
        assert "s start round" in card.border_subtitle and "u resume" not in card.border_subtitle
        s.state["elapsed_seconds"] = 10**6  # the time budget is spent: the next s ends the search
        await pilot.press("s")
        await wait_until(lambda: s.status == "time_budget_exhausted" and screen.session.busy is None, pilot=pilot, what=screen.last_message)
        await wait_until(lambda: "has ended: time_budget_exhausted" in rendered_panels(screen)["#card-next"], pilot=pilot,
                         what=rendered_panels(screen)["#card-next"])
        assert card.border_subtitle == "keys: none"
        assert not {"s", "t", "u"} & set(screen.active_bindings)
        for key in ("s", "t", "u"):
            await pilot.press(key)
            await wait_until(lambda: "has ended (time_budget_exhausted)" in screen.last_message, pilot=pilot, what=screen.last_message)
            assert s.draft is None and not isinstance(app.screen, FormScreen)
        assert not (s.root / "rounds" / "round-00").exists()
