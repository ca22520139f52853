"""StreamScreen in a harness App, against the fake vLLM server over loopback."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import ScreenHarness, screen_text, wait_until
from textual.app import App

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import simple_request
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.recording import list_records
from eviscene_tui.ui.screens.stream import StreamScreen
from eviscene_tui.ui.widgets.stream_view import StreamView, TextPane
from eviscene_tui.ui.widgets.untrusted_edit import UntrustedTextArea


def _options(tmp_path: Path, srv: FakeVLLMServer | None, **profile) -> AppOptions:
    root = tmp_path / "runs"
    root.mkdir(exist_ok=True)
    prof = None
    if srv is not None:
        prof = tmp_path / "profile.json"
        prof.write_bytes(orjson.dumps(srv.profile_dict(**profile)))
    return AppOptions(root=root, workdir=tmp_path / "runs.eviscene-tui", policy_profile=prof)


async def test_cancel_key_mid_stream_at_5000_tps(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": 5000, "content_tokens": 20000, "reasoning": "", "tool_calls": []}) as srv:
        opts = _options(tmp_path, srv)
        screen = StreamScreen(None, opts, request=simple_request(tools=False), config=PolicyConfig(status_interval=0.5))
        app = ScreenHarness(screen)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("ctrl+s")
            view = screen.query_one(StreamView)
            await wait_until(lambda: view.acc.token_count >= 1000)
            await pilot.press("ctrl+x")
            await wait_until(lambda: screen.last_status is not None)
            assert screen.last_status == "cancelled"
            assert view.acc.token_count < 20000  # stopped well before the end (20,000 at 5,000 tok/s = 4 s)
            # coalesced: far fewer pane updates than tokens
            content = screen.query_one("#pane-content", TextPane)
            assert content.probes.appends < view.acc.token_count / 5
            assert view.probes.flushes < view.acc.token_count / 5  # flushed on a timer, not per token (bench_policy prints the flush count)
            await wait_until(lambda: srv.recorder.disconnects)
            assert "CANCELLED" not in content.text
            # the app keeps working: send again, complete this time
            srv.set_scenario(content_tokens=300, tokens_per_second=None)
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status == "complete")
    recs = [orjson.loads(p.read_bytes()) for p in list_records(opts.work())]
    assert sorted(r["status"] for r in recs) == ["cancelled", "complete"]


async def test_complete_stream_summary_and_panes(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        opts = _options(tmp_path, srv)
        screen = StreamScreen(None, opts, request=simple_request(), config=PolicyConfig(status_interval=0.2))
        async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            req_pane = screen.query_one("#request-pane", TextPane)
            assert "Repair hint" in req_pane.text and '"stream": true' in req_pane.text
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            assert screen.last_status == "complete"
            scen = srv.config.scenario
            assert screen.query_one("#pane-reasoning", TextPane).text == scen["reasoning"]
            assert screen.query_one("#pane-content", TextPane).text == scen["content"]
            assert "reverse_image_search" in screen.query_one("#pane-tools", TextPane).text
            msg = str(screen.query_one("#stream-message").render())
            assert "COMPLETE" in msg and "accounting: ok" in msg and "record:" in msg
            await wait_until(lambda: "healthy" in str(screen.query_one("#stream-policy").render()))
            assert "ATTESTED" in str(screen.query_one("#stream-policy").render())


FAULTS = [
    ({"wrong_root": "/other"}, "Attestation refused"),
    ({"http_error": 400}, "context length"),
    ({"http_error": 500}, "rejected the request"),
    ({"error_after_tokens": 4}, "error mid-stream"),
    ({"disconnect_after_tokens": 4}, "dropped mid-stream"),
    ({"malformed_after_tokens": 4}, "Malformed"),
    ({"stall_after_tokens": 4, "stall_seconds": 30}, "Timed out"),
]


async def test_faults_are_shown_and_recorded_and_the_screen_keeps_working(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        opts = _options(tmp_path, srv)
        screen = StreamScreen(None, opts, request=simple_request(), config=PolicyConfig(status_interval=5, stall_timeout=0.5))
        async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            base = dict(srv.config.scenario)
            for scenario, needle in FAULTS:
                srv.set_scenario(replace=True, **base, **scenario)
                screen.last_status = None
                await pilot.press("ctrl+s")
                await wait_until(lambda: screen.last_status is not None)
                await pilot.pause()
                assert screen.last_status == "failed", scenario
                assert needle in str(screen.query_one("#stream-message").render()), scenario
            srv.set_scenario(replace=True, **base)
            screen.last_status = None
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            assert screen.last_status == "complete"
    recs = [orjson.loads(p.read_bytes()) for p in list_records(opts.work())]
    assert sorted(r["status"] for r in recs) == ["complete"] + ["failed"] * len(FAULTS)


async def test_connection_refused_in_the_screen(tmp_path):
    import socket

    # bound and never listening: connections are refused, and no other test (another
    # pytest-xdist worker) can take the port meanwhile
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    root = tmp_path / "runs"
    root.mkdir()
    opts = AppOptions(root=root, workdir=tmp_path / "wd", policy_url=f"http://127.0.0.1:{port}/v1", policy_model="m")
    screen = StreamScreen(None, opts, request=simple_request(), config=PolicyConfig(status_interval=5, connect_timeout=2))
    async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "UNATTESTED" in str(screen.query_one("#stream-policy").render())
        await pilot.press("ctrl+s")
        await wait_until(lambda: screen.last_status is not None)
        await pilot.pause()
        assert "Cannot reach the policy server" in str(screen.query_one("#stream-message").render())
        assert "UNATTESTED" in str(screen.query_one("#stream-stats").render())
    sock.close()
    rec = orjson.loads(list_records(opts.work())[0].read_bytes())
    assert rec["status"] == "failed" and rec["attestation_mode"] == "unattested"


async def test_missing_request_and_no_policy(tmp_path):
    with FakeVLLMServer() as srv:
        opts = _options(tmp_path, srv)
        screen = StreamScreen(None, opts, hint_text="h")  # no case: the request cannot be rebuilt
        async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
            await wait_until(lambda: screen.request_error is not None)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert screen.last_status == "failed"
            assert "recorded as a failed attempt" in str(screen.query_one("#stream-message").render())
    assert len(list_records(opts.work())) == 1
    screen = StreamScreen(None, _options(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path, None), request=simple_request())
    async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "no policy server configured" in str(screen.query_one("#stream-message").render())


REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_runs" / "feedback-converged-3-rounds"


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="sample_runs not generated")
async def test_real_sample_case_request_hint_and_stream(tmp_path):

    from eviscene_tui.artifacts.case import load_case

    from eviscene_tui.scaffold.samples import copy_case

    case_dir = copy_case(SAMPLE.parent, SAMPLE.name, tmp_path / "runs")
    case = load_case(case_dir)
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        prof = tmp_path / "profile.json"
        prof.write_bytes(orjson.dumps(srv.profile_dict()))
        opts = AppOptions(root=tmp_path / "runs", workdir=tmp_path / "runs.eviscene-tui", policy_profile=prof)
        screen = StreamScreen(case, opts, round_index=None, hint_text=None, config=PolicyConfig(status_interval=5))
        async with ScreenHarness(screen).run_test(size=(120, 40)) as pilot:
            await wait_until(lambda: screen.base_request is not None or screen.request_error is not None)
            assert screen.request_error is None
            await wait_until(lambda: screen.query_one("#hint").text, pilot=pilot, what="the round's hint in the box")
            hint = screen.query_one("#hint").text
            assert hint  # prefilled with the round's hint
            pane = screen.query_one("#request-pane", TextPane).text
            assert "# source: archive req-" in pane and "<image sha256=" in pane
            assert "# hint placement: as in this run (round 2, hint 00" in pane and '"text": "Hint: ' + hint.strip().splitlines()[0] in pane
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            assert screen.last_status == "complete"
        body = srv.recorder.last_body()
    # placed as this run's driver placed its hints (a new user message "Hint: ...")
    assert body["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "Hint: " + hint.strip()}]}
    rec = orjson.loads(list_records(opts.work())[0].read_bytes())
    assert rec["status"] == "complete" and rec["case"]["case_key"] == SAMPLE.name and rec["request"]["origin"]["source"] == "archive"


async def test_text_pane_follows_bottom_only_when_at_bottom():
    from textual.app import ComposeResult

    class PaneApp(App):
        def compose(self) -> ComposeResult:
            yield TextPane("t", id="p")

    app = PaneApp()
    async with app.run_test(size=(60, 20)) as pilot:
        pane = app.query_one(TextPane)
        for i in range(50):
            pane.append(f"line {i} " + "x" * 70 + "\n")
        await pilot.pause()
        assert pane.max_scroll_y > 0 and pane.scroll_offset.y == pane.max_scroll_y
        assert pane.virtual_size.height == pane.row_count
        pane.scroll_to(y=0, animate=False)
        await pilot.pause()
        pane.append("more\n" * 10)
        await pilot.pause()
        assert pane.scroll_offset.y == 0  # the user scrolled up: no jump
        pane.scroll_end(animate=False)
        await pilot.pause()
        pane.append("tail\n" * 10)
        await pilot.pause()
        assert pane.scroll_offset.y == pane.max_scroll_y
        assert "\x1b" not in pane.text
        pane.append("evil \x1b]0;title\x07 [b]not markup[/b]")
        assert "\x1b" not in pane.text and "[b]not markup[/b]" in pane.text


def _stats(screen: StreamScreen) -> str:
    return str(screen.query_one("#stream-stats").render())


async def test_badge_shows_session_kind_from_the_start_then_latest_attestation(tmp_path):
    """Before the first send the stats badge says what the session is (attested profile vs
    --policy-url/--policy-model); after each call it shows that call's attestation result."""
    with FakeVLLMServer(scenario={"tokens_per_second": None, "content_tokens": 20}) as srv:
        opts = _options(tmp_path, srv)  # a serving profile: an attested session
        screen = StreamScreen(None, opts, request=simple_request(tools=False), config=PolicyConfig(status_interval=5))
        async with ScreenHarness(screen).run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            stats = _stats(screen)
            assert "ATTESTED" in stats and "UNATTESTED" not in stats and "idle" in stats, stats
            # the server no longer serves the frozen checkpoint: the call is refused, and the badge says so
            srv.set_scenario(wrong_root="/elsewhere")
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            await pilot.pause()
            assert screen.last_status == "failed"
            assert "REFUSED" in _stats(screen) and "ATTESTED" not in _stats(screen).replace("UNATTESTED", "")
            srv.set_scenario(wrong_root=None)
            screen.last_status = None
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            await pilot.pause()
            assert screen.last_status == "complete"
            stats = _stats(screen)
            assert "ATTESTED" in stats and "REFUSED" not in stats and "UNATTESTED" not in stats, stats

        root = tmp_path / "runs"
        opts = AppOptions(root=root, workdir=tmp_path / "wd2", policy_url=srv.v1_url, policy_model=srv.config.alias)
        screen = StreamScreen(None, opts, request=simple_request(tools=False), config=PolicyConfig(status_interval=5))
        async with ScreenHarness(screen).run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert "UNATTESTED" in _stats(screen) and "idle" in _stats(screen)
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            await pilot.pause()
            assert screen.last_status == "complete" and "UNATTESTED" in _stats(screen)


async def test_token_inspector_on_the_live_and_last_continuation(tmp_path):
    """`k` / ctrl+o open the token inspector on the continuation: teacher prompt ids, completion
    ids, logprobs + top-k, usage; with the student prompt from the source step capture, the
    diff shows exactly where the hint went (real loopback against the fake server)."""
    import dataclasses

    import httpx

    from eviscene_tui.artifacts.trace import SourceTrace
    from eviscene_tui.policy.request import chat_body
    from eviscene_tui.scaffold import tiny
    from eviscene_tui.scaffold.synthetic_capture import SyntheticCase
    from eviscene_tui.ui.screens.tokens import TokenScreen

    hint = "Check the photo's date first."
    config = PolicyConfig(status_interval=5, logprobs=True, top_logprobs=2)
    with FakeVLLMServer(scenario={"tokens_per_second": None, "content_tokens": 40, "reasoning": "", "tool_calls": []}) as srv:
        # the student prompt: what the server tokenises for the failure step's request without the hint
        body = chat_body(simple_request(hint=None, tools=False), config, model=srv.config.alias)
        body.update(stream=False)
        body.pop("stream_options", None)
        with httpx.Client(trust_env=False) as http:
            student = http.post(f"{srv.v1_url}/chat/completions", json=body).json()["prompt_token_ids"]
        assert student
        step = 2
        steps = [{"stage": "s"}, {"stage": "s"},
                 {"stage": "policy", "metadata": {"policy_token_capture": {"prompt_token_ids": student, "completion_token_ids": [1, 2], "status": "complete"}}}]
        case = SyntheticCase(SourceTrace({"state": {"all_steps": steps}}), case_id="c1")
        request = dataclasses.replace(simple_request(hint=hint, tools=False), step_index=step)
        opts = _options(tmp_path, srv)
        screen = StreamScreen(case, opts, request=request, hint_text=hint, config=config)
        async with ScreenHarness(screen).run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            await pilot.press("ctrl+o")  # nothing sent yet
            await pilot.pause()
            assert "no continuation yet" in str(screen.query_one("#stream-message").render())
            assert pilot.app.screen is screen
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            await pilot.pause()
            assert screen.last_status == "complete"
            acc = screen.query_one(StreamView).acc
            screen.query_one("#pane-content", TextPane).focus()  # `k` works off the hint input
            await pilot.press("k")
            await wait_until(lambda: isinstance(pilot.app.screen, TokenScreen))
            tokens = pilot.app.screen
            await wait_until(lambda: tokens.data is not None)
            data = tokens.data
            teacher = acc.prompt_token_ids
            assert data.ids == teacher + acc.completion_token_ids and data.completion_start == len(teacher)
            assert data.kind == "continuation" and data.status == "complete"
            n = len(acc.completion_token_ids)
            assert n >= 40 and len(data.logprobs) == n and all(len(r) == 2 for r in data.topk)
            assert data.usage["completion_tokens"] == n and data.usage["prompt_tokens"] == len(teacher)
            # where the hint went: the teacher prompt minus the student prompt is the hint block
            assert data.student_ids == student and data.teacher_ids == teacher
            # the hint's span is located from its text: the same span highlighted and reported
            await wait_until(lambda: tokens.hint is not None)
            a, b = data.highlight
            assert (a, b) == tokens.hint.range and tokens.hint.basis == "hint text"
            assert tiny.decode(teacher[a:b]).strip() == hint
            lo, hi = data.prompt_diff.inserted
            assert lo < a and b < hi  # the difference also holds the placement's framing
            assert tokens.hint.same_beyond_hint is True
            assert data.prompt_diff.pure_insertion
            await wait_until(lambda: "accounting:" in str(tokens.query_one("#panel-checks").render()), pilot=pilot)
            checks = str(tokens.query_one("#panel-checks").render())
            assert f"accounting: {n} completion ids = usage.completion_tokens" in checks
            assert "differ from the student prompt" in checks
            await pilot.press("s")  # side by side: the student prompt
            await wait_until(lambda: tokens.has_class("-paired"), pilot=pilot)
            pilot.app.pop_screen()  # (pilot.press waits for an idle CPU: slow while a stream runs in-process)
            await wait_until(lambda: pilot.app.screen is screen, pilot=pilot)

            # mid-stream: a snapshot of the ids so far, while the stream goes on
            srv.set_scenario(tokens_per_second=400, content_tokens=20000)
            screen.last_status = None
            screen.action_send()
            await wait_until(lambda: screen.query_one(StreamView).acc.token_count >= 20)
            hint_input = screen.query_one("#hint")
            hint_input.focus()
            typed = hint_input.text
            # the priority binding works while the hint input has focus (simulate_key: the same key
            # dispatch as pilot.press, without its wait for an idle CPU, slow while streaming in-process)
            pilot.app.simulate_key("ctrl+o")
            await wait_until(lambda: isinstance(pilot.app.screen, TokenScreen))
            snap = pilot.app.screen
            await wait_until(lambda: snap.data is not None)
            assert snap.data.status == "streaming" and 20 <= len(snap.data.ids) - snap.data.completion_start < 20000
            assert any("still streaming" in n for n in snap.data.notes)
            assert screen.streaming  # inspecting does not stop the stream
            assert hint_input.text == typed
            pilot.app.pop_screen()
            screen.action_cancel_stream()
            await wait_until(lambda: screen.last_status is not None)
            assert screen.last_status == "cancelled"


def test_text_pane_wraps_at_words_and_appending_keeps_earlier_rows() -> None:
    from eviscene_tui.ui.widgets.stream_view import TextPane

    pane = TextPane()
    pane._wrap_width = 12
    assert pane._wrap("the quick brown fox jumps") == ["the quick ", "brown fox ", "jumps"]
    assert pane._wrap("abcdefghijklmnopq rs") == ["abcdefghijkl", "mnopq rs"]  # a word longer than the row
    text = "The hint says to open the oldest copy first, so I will not search the event itself yet."
    whole = pane._wrap(text)
    assert "".join(whole) == text and all(len(r) <= 12 for r in whole)
    # greedy: wrapping a prefix and then re-wrapping only its last row plus the rest gives the same rows
    for cut in range(len(text)):
        head = pane._wrap(text[:cut])
        assert head[:-1] + pane._wrap(head[-1] + text[cut:]) == whole


async def test_the_hint_box_shows_and_edits_every_line_of_a_multi_line_hint(tmp_path):
    """A locked hint is followed by a newline and more advice: the box shows both lines,
    Enter types a newline, and the request sent holds every line."""
    locked = "Check the photo's date first."
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        opts = _options(tmp_path, srv)
        screen = StreamScreen(None, opts, request=simple_request(hint=None), hint_text=locked, config=PolicyConfig(status_interval=0.2))
        async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            box = screen.query_one("#hint")
            await pilot.press("e")  # into the editor, the cursor at the end
            assert screen.focused is box
            await pilot.press("enter", *"Then quote it.")
            assert box.text == locked + "\nThen quote it."
            assert screen.session.hint == box.text
            await wait_until(lambda: "Then quote it." in screen.query_one("#request-pane", TextPane).text)
            pane = screen.query_one("#request-pane", TextPane).text
            assert locked in pane
            # both lines are on screen in the box
            shown = screen_text(pilot.app)
            assert locked in shown and "Then quote it." in shown
            await pilot.press("ctrl+s")
            await wait_until(lambda: screen.last_status is not None)
            assert screen.last_status == "complete"
    sent = [orjson.loads(p.read_bytes()) for p in list_records(opts.work())][0]
    assert locked + "\nThen quote it." in orjson.dumps(sent).decode().replace("\\n", "\n")


async def test_title_and_policy_line_are_rendered_from_the_session_snapshot(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    opts = AppOptions(root=root, workdir=tmp_path / "wd", policy_url="http://127.0.0.1:9/v1", policy_model="m")
    screen = StreamScreen(None, opts, request=simple_request(), config=PolicyConfig(status_interval=60, connect_timeout=1))
    async with ScreenHarness(screen).run_test(size=(120, 30)) as pilot:
        policy, title = screen.query_one("#stream-policy"), screen.query_one("#stream-title")
        await wait_until(lambda: "UNATTESTED" in str(policy.render()), pilot=pilot)
        assert "case ?  round current" in str(title.render())
        # the first status poll answers (the next one is a minute away), and the line says so
        await wait_until(lambda: screen.session.server_status != "", pilot=pilot, what="the first status poll")
        await wait_until(lambda: screen.session.server_status in str(policy.render()), pilot=pilot)
        # the screen shows what the session holds, whoever changed it
        screen.session.set_server_status("replica 127.0.0.1:9 [healthy] <b>")
        screen.session.set_case("case [b]7[/b]", 3)
        await wait_until(lambda: "replica 127.0.0.1:9 [healthy] <b>" in str(policy.render()), pilot=pilot)
        await wait_until(lambda: "case case [b]7[/b]  round 3" in str(title.render()), pilot=pilot)
        assert screen.session.snapshot().policy.status == "replica 127.0.0.1:9 [healthy] <b>"


@pytest.mark.skipif(not (REPO / "sample_runs" / "hostile-strings").is_dir(), reason="sample_runs not generated")
async def test_a_hostile_run_hint_is_shown_sanitised_in_the_hint_box_and_sent_as_recorded(tmp_path):
    """The hostile-strings sample's hint holds an OSC title sequence, BEL and a bidi
    override: the editor shows visible placeholders, never the raw characters, and
    the request keeps the recorded hint until the operator edits it."""
    from textual.geometry import Region

    from eviscene_tui.artifacts.case import load_case
    from eviscene_tui.scaffold.samples import copy_case
    from eviscene_tui.ui.widgets.untrusted_edit import UntrustedTextArea

    case = load_case(copy_case(REPO / "sample_runs", "hostile-strings", tmp_path / "runs"))
    screen = StreamScreen(case, _options(tmp_path, None), config=PolicyConfig(status_interval=5))
    raw_chars = ("\x1b", "\x07", "\u202e")
    async with ScreenHarness(screen).run_test(size=(120, 40)) as pilot:
        box = screen.query_one("#hint", UntrustedTextArea)
        await wait_until(lambda: screen.session.hint, pilot=pilot, what="the run's hint in the session")
        raw = screen.session.hint
        assert any(c in raw for c in raw_chars), "the sample's hint should be hostile"
        await wait_until(lambda: box.text, pilot=pilot, what="the hint in the box")
        await pilot.pause()
        assert not any(c in box.text for c in raw_chars)
        assert "\u241b" in box.text  # ESC as a visible picture
        rendered = "".join(seg.text for strip in box.render_lines(Region(0, 0, box.size.width, box.size.height)) for seg in strip)
        assert not any(c in rendered for c in raw_chars)
        assert not any(c in screen_text(pilot.app) for c in raw_chars)
        # unedited: the recorded hint is what is sent
        assert box.value == raw and screen.session.hint == raw
        req = screen.current_request()
        assert req is not None and req.hint is not None and "\x1b" in req.hint
        # edited: the typed text is sent
        await pilot.press("e", *" ok")
        assert screen.session.hint == box.text and box.text.endswith(" ok") and "\x1b" not in screen.session.hint


# ---------------------------------------------------------------- typed text is never lost (#20 §3)
async def test_keys_pressed_on_open_go_to_the_screen_not_into_the_hint(tmp_path):
    """The screen opens with the continuation view focused: ``q`` (the app's quit key)
    or ``k`` typed right away never becomes part of the run's hint."""
    screen = StreamScreen(None, _options(tmp_path, None), request=simple_request(hint=None), hint_text="Check the date.",
                          config=PolicyConfig(status_interval=60))
    async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        box = screen.query_one("#hint", UntrustedTextArea)
        assert screen.focused is not box
        await pilot.press("x", "k", "q")
        assert box.text == "Check the date." and screen.session.hint == "Check the date."
        assert not screen.session.typed
        assert "as the run recorded" in str(box.border_title)


async def test_an_edited_hint_is_marked_and_survives_leaving_and_reopening(tmp_path):
    """``e`` enters the editor; the title says the hint is edited; Esc leaves the editor
    (first) and the screen (second); the same case and round opened again shows the
    edited text, still marked edited, and sends it."""
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        opts = _options(tmp_path, srv)

        def make() -> StreamScreen:
            return StreamScreen(None, opts, request=simple_request(hint=None), hint_text="Check the date.",
                                config=PolicyConfig(status_interval=60))

        first = make()
        app = ScreenHarness(first)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await pilot.press("e", *" Then quote it.")
            box = first.query_one("#hint", UntrustedTextArea)
            assert first.focused is box
            assert box.text == "Check the date. Then quote it."
            assert "edited" in str(box.border_title)
            await pilot.press("escape")
            assert first.focused is not box and app.screen is first  # out of the editor, still on the screen
            await pilot.press("escape")
            assert app.screen is not first
            draft_file = first._draft_file()
            await wait_until(lambda: Path(draft_file).is_file(), pilot=pilot, what="the draft saved")
            second = make()
            app.push_screen(second)
            await wait_until(lambda: app.screen is second and bool(second.query("#hint")), pilot=pilot, what="the screen again")
            box2 = second.query_one("#hint", UntrustedTextArea)
            await wait_until(lambda: box2.text == "Check the date. Then quote it.", pilot=pilot, what="the draft restored")
            await wait_until(lambda: "edited" in str(box2.border_title), pilot=pilot)
            await pilot.press("ctrl+s")
            await wait_until(lambda: second.last_status is not None, pilot=pilot)
    sent = [orjson.loads(p.read_bytes()) for p in list_records(opts.work())]
    assert "Check the date. Then quote it." in orjson.dumps(sent).decode()


async def test_a_paste_and_send_in_one_burst_sends_all_of_it(tmp_path):
    """Keys and a paste that reach the app in one burst with ctrl+s: what is sent is what
    the box holds once all of them are in (the send used to read the box before the
    queued paste was typed)."""
    from textual import events

    pasted = "Epsilon first line.\nSecond line, after the newline."
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        opts = _options(tmp_path, srv)
        screen = StreamScreen(None, opts, request=simple_request(hint=None), hint_text="", config=PolicyConfig(status_interval=60))
        async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
            await pilot.press("e")
            # one burst: nothing is processed between these
            for message in (events.Paste(pasted), events.Key("ctrl+s", None)):
                pilot.app.post_message(message)
            await wait_until(lambda: screen.last_status is not None, pilot=pilot)
            assert screen.sent_request is not None and screen.sent_request.hint == pasted
    sent = [orjson.loads(p.read_bytes()) for p in list_records(opts.work())][0]
    assert "Second line, after the newline." in orjson.dumps(sent).decode()


async def test_a_damaged_draft_is_said_and_the_run_hint_is_shown(tmp_path):
    opts = _options(tmp_path, None)
    screen = StreamScreen(None, opts, request=simple_request(hint=None), hint_text="Check the date.", config=PolicyConfig(status_interval=60))
    path = Path(screen._draft_file())
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{not json")
    async with ScreenHarness(screen).run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: "saved draft" in screen.session.message, pilot=pilot, what="the damaged draft said")
        assert screen.query_one("#hint", UntrustedTextArea).text == "Check the date."
