"""Pilot test of the supervised screen: a whole gated round by keyboard."""

import sys
from pathlib import Path

from textual.app import App

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.journal import supervised_journal_for_root, verify_chain
from eviscene_tui.options import AppOptions
from eviscene_tui.supervised import ContinuationOutcome, SearchSettings
from eviscene_tui.tokens.tiny import encode
from eviscene_tui.ui.screens.supervised import SupervisedScreen

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "supervised"))
from supervised_fixtures import tree_hash, write_driver_case  # noqa: E402

HOSTILE = "Check [b]the[/b] caption [@click=app.quit]x[/] \x1b[2J again."


async def fake_runner(job):
    return ContinuationOutcome(
        status="complete", reasoning="r", content="", tool_calls=[{"id": "1", "name": "web_search", "arguments": "{}"}],
        prompt_token_ids=encode("p"), completion_token_ids=encode("cc"),
        logprobs=[type("LP", (), {"logprob": -0.1, "top": ()})() for _ in encode("cc")],
        finish_reason="tool_calls", usage={"prompt_tokens": 1, "completion_tokens": 2}, policy_model="m",
    )


class Harness(App):
    def __init__(self, screen):
        super().__init__()
        self._s = screen

    def on_mount(self):
        self.push_screen(self._s)


async def _until(pilot, pred, timeout=10.0):
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        await pilot.pause(0.05)
    return pred()


def _supervised(tmp_path):
    """A supervised screen (fake continuation runner) over a fresh driver case, in a harness app."""
    out = tmp_path / "out"
    droot = write_driver_case(out)
    options = AppOptions(root=out, workdir=tmp_path / "out.eviscene-tui", operator="tester")
    screen = SupervisedScreen(load_case(droot), options, runner=fake_runner, settings=SearchSettings(operator="tester"))
    return screen, Harness(screen), out


async def test_supervised_screen_round_by_keyboard(tmp_path):
    screen, app, out = _supervised(tmp_path)
    before = tree_hash(out)
    async with app.run_test(size=(140, 45)) as pilot:
        assert await _until(pilot, lambda: screen.search is not None), screen.last_message
        s = screen.search
        # the next-round card starts the round
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        assert await _until(pilot, lambda: s.draft is not None and s.draft.stage == "site"), screen.last_message
        # the keyboard stays on the card that decided; the message says where the next decision is
        assert await _until(pilot, lambda: "next: the Site card" in screen.last_message), screen.last_message
        assert screen.focused is screen.query_one("#card-next")
        # decision keys are scoped: "a" on the next-round card does nothing
        screen.query_one("#card-next").focus()
        await pilot.press("a")
        await pilot.pause()
        assert s.draft.stage == "site"
        screen.query_one("#card-site").focus()
        await pilot.press("a")
        assert await _until(pilot, lambda: s.draft.stage == "hints")
        assert "saved" in screen.last_message
        # type a hint in the editor
        screen.query_one("#card-hints").focus()
        await pilot.press("n")
        assert await _until(pilot, lambda: app.screen.query("#f-editor"))
        app.screen.query_one("#f-editor").text = HOSTILE
        await pilot.press("ctrl+s")
        assert await _until(pilot, lambda: len(s.draft.proposals) == 1)
        assert s.draft.proposals[0].passed
        screen.query_one("#proposals").focus()
        await pilot.press("a")
        assert await _until(pilot, lambda: s.draft.stage == "continuation"), screen.last_message
        screen.query_one("#card-cont").focus()
        await pilot.press("c")
        assert await _until(pilot, lambda: s.draft.stage == "verdict"), screen.last_message
        # reject with a reason and a checker value
        screen.query_one("#card-verdict").focus()
        await pilot.press("x")
        assert await _until(pilot, lambda: app.screen.query("#f-reason"))
        app.screen.query_one("#f-reason").value = "wrong step"
        app.screen.query_one("#c-anchor_matches").value = "false"
        await pilot.press("ctrl+s")
        assert await _until(pilot, lambda: s.draft.stage == "closed"), screen.last_message
        assert s.preview_feedback()["needs_relocalization"] is True
        assert "saved" in screen.last_message
        assert app.is_running  # the hostile hint text did not trigger any action
        text = "\n".join("".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips())
        assert "needs_relocalization" in text and "\x1b" not in text
        root = s.root
        # the journal view: chain verified; a changed evidence file shows STALE
        screen.query_one("#card-next").focus()
        await pilot.press("j")
        assert await _until(pilot, lambda: "chain: verified" in screen.query_one("#sup-detail").text)
        assert "STALE" not in screen.query_one("#sup-detail").text
        cont = root / "rounds" / "round-00" / "continuations" / "hint-00.json"
        cont.write_bytes(cont.read_bytes() + b" ")
        await pilot.press("j")
        assert await _until(pilot, lambda: "STALE" in screen.query_one("#sup-detail").text)
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
    app = Harness(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await _until(pilot, lambda: screen.search is not None), screen.last_message
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
    app = Harness(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await _until(pilot, lambda: app.screen.query("#f-step")), screen.last_message
        app.screen.query_one("#f-step").value = "3"
        app.screen.query_one("#f-note").value = "the repeated search"
        await pilot.press("ctrl+s")
        assert await _until(pilot, lambda: screen.search is not None), screen.last_message
        s = screen.search
        assert s.inputs.site["source_step_index"] == 3 and s.inputs.site["localization_kind"] == "operator"
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        assert await _until(pilot, lambda: s.draft is not None and s.draft.stage == "site"), screen.last_message
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
        app = Harness(screen)
        async with app.run_test(size=(140, 45)) as pilot:
            assert await _until(pilot, lambda: screen.search is not None), screen.last_message
            s = screen.search
            s.begin_round()
            s.accept_site()
            s.approve_hint(s.add_operator_hint("Search the caption text in quotes.").index)
            screen.refresh_view()
            screen.query_one("#card-cont").focus()
            await pilot.press("c")
            view = screen.query_one("#sup-stream")
            assert await _until(pilot, lambda: view.acc.token_count >= 5, 15), screen.last_message
            await pilot.press("ctrl+x")
            assert await _until(pilot, lambda: view.state == "cancelled", 5)
            assert s.draft.stage == "continuation"
            assert not (s.draft.dir / "continuations" / "hint-00.json").exists()
            srv.set_scenario(tokens_per_second=None, reasoning_tokens=20)
            await pilot.press("c")
            assert await _until(pilot, lambda: s.draft.stage == "verdict", 15), screen.last_message
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
    app = Harness(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await _until(pilot, lambda: screen.search is not None)
        assert "torn bytes" in screen.last_message
        screen.query_one("#card-site").focus()
        await pilot.press("a")
        assert await _until(pilot, lambda: "failed" in screen.last_message)
        assert screen.search.draft.stage == "site"
        await pilot.press("ctrl+t")
        assert await _until(pilot, lambda: "acknowledge torn tail: saved" in screen.last_message)
        await pilot.press("a")
        assert await _until(pilot, lambda: screen.search.draft.stage == "hints"), screen.last_message
        await pilot.press("escape")
    assert verify_chain(sj(root)).ok
    assert b'{"seq": 1, "torn\n' in sj(root).read_bytes()


async def test_embedded_stream_badge_shows_the_session_kind(tmp_path):
    out = tmp_path / "out"
    droot = write_driver_case(out)
    case = load_case(droot)
    options = AppOptions(root=out, workdir=tmp_path / "w", operator="t", policy_url="http://127.0.0.1:9/v1", policy_model="m")
    screen = SupervisedScreen(case, options, runner=fake_runner, settings=SearchSettings(operator="t"))
    app = Harness(screen)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        assert screen.query_one("#sup-stream").badge == "unattested"
    screen = SupervisedScreen(case, AppOptions(root=out, workdir=tmp_path / "w2", operator="t"), runner=fake_runner, settings=SearchSettings(operator="t"))
    app = Harness(screen)
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
        app = Harness(screen)
        async with app.run_test(size=(140, 45)) as pilot:
            await pilot.pause()
            assert screen.query_one("#sup-stream").badge == "attested"


async def test_hints_card_gives_arrows_to_the_list_so_any_proposal_can_be_approved(tmp_path):
    screen, app, _ = _supervised(tmp_path)
    async with app.run_test(size=(140, 45)) as pilot:
        assert await _until(pilot, lambda: screen.search is not None), screen.last_message
        s = screen.search
        screen.query_one("#card-next").focus()
        await pilot.press("s")
        assert await _until(pilot, lambda: s.draft is not None and s.draft.stage == "site")
        screen.query_one("#card-site").focus()
        await pilot.press("a")
        assert await _until(pilot, lambda: s.draft.stage == "hints")
        for n, text in enumerate(["Compare the dates of the first copies.", "Quote the caption before judging."], start=1):
            screen.query_one("#card-hints").focus()
            await pilot.press("n")
            assert await _until(pilot, lambda: app.screen.query("#f-editor"))
            app.screen.query_one("#f-editor").text = text
            await pilot.press("ctrl+s")
            assert await _until(pilot, lambda n=n: len(s.draft.proposals) == n)
        screen.query_one("#card-hints").focus()
        await pilot.pause()
        assert screen.focused is screen.query_one("#proposals")  # arrows move the highlight
        await pilot.press("down", "a")
        assert await _until(pilot, lambda: s.draft.stage == "continuation"), screen.last_message
        assert s.draft.approved is not None and "caption" in str(s.draft.proposals[1].text)
        assert s.draft.proposals[1].status == "approved" and s.draft.proposals[0].status != "approved"
