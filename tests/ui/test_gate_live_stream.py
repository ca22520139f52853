"""Pilot: the gate screen tails a sidecar's live channel into its stream view. A fast
continuation (thousands of delta records written at once, as a 5,000 tokens/s stream
leaves them between two reads) is painted in a few coalesced flushes with its text, token
count, finish reason, timings and hint; tabbing through the call list leaves the layout
alone; the stream holds full garbage collections only while it streams."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import wait_until

from eviscene_tui.gate import protocol as P
from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui import gc_hold
from eviscene_tui.ui.screens.gate import GateScreen
from eviscene_tui.ui.widgets.gate_panel import CallList, GatePanel
from eviscene_tui.ui.widgets.stream_view import StatsLine, StreamView, TextPane

from ui_helpers import GateApp

TOKENS = 3000


def _root(tmp_path: Path) -> tuple[Path, P.LiveChannel]:
    root = tmp_path / "search"
    root.mkdir()
    gate_dir = P.sidecar_for(root)
    gate_dir.mkdir()
    (gate_dir / P.SESSION_FILE).write_text(json.dumps({"schema_version": P.GATE_SCHEMA}))
    return root, P.LiveChannel(gate_dir / P.LIVE_FILE)


def _text(i: int) -> str:
    return " " + "abcdefghij"[i % 10] * 3


async def test_a_fast_live_stream_is_painted_whole_in_few_flushes(tmp_path):
    root, channel = _root(tmp_path)
    holds = gc_hold.holds()
    app = GateApp(GateSession(root, operator="pilot"))
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_until(lambda: isinstance(app.screen, GateScreen), pilot=pilot, what="the gate screen")
        view = app.screen.query_one(GatePanel).query_one(StreamView)
        where = {"round": 0, "hint": 1}
        channel.write("call_started", "c1", **where, stage="psd_teacher_repair", streaming=True, messages=3,
                      hint_text="compare the two photos", hint_where="user message 2, after the task")
        for i in range(TOKENS):
            channel.write("delta", "c1", **where, event={"type": "delta", "kind": "content", "text": _text(i), "token_ids": [i + 1],
                                                         "logprobs": None})
        await wait_until(lambda: view.acc.token_count == TOKENS, pilot=pilot, what="every token in the view")
        assert view.state == "streaming" and gc_hold.holds() == holds + 1  # full collections wait while it streams
        channel.write("delta", "c1", **where, event={"type": "finish", "finish_reason": "stop", "stop_reason": None})
        channel.write("delta", "c1", **where, event={"type": "usage", "prompt_tokens": 40, "completion_tokens": TOKENS,
                                                     "total_tokens": 40 + TOKENS})
        channel.write("call_complete", "c1", **where, status="complete", finish_reason="stop", completion_token_ids=list(range(1, TOKENS + 1)),
                      timings={"ttft_s": 0.25, "tokens_per_s": 5000.0})
        channel.close()
        await wait_until(lambda: view.state == "complete", pilot=pilot, what="the call's end")
        assert gc_hold.holds() == holds
        content = view.query_one("#pane-content", TextPane)
        assert content.text == "".join(_text(i) for i in range(TOKENS))
        # a batch per read, not a flush or an append per record
        assert view.probes.flushes < TOKENS / 20 and content.probes.appends < TOKENS / 20
        await wait_until(lambda: "finish stop" in str(view.query_one(StatsLine).render()), pilot=pilot, what="the stats line")
        stats = str(view.query_one(StatsLine).render())
        assert f"tokens {TOKENS}" in stats and "ttft 0.25 s" in stats and "tok/s 5000" in stats and "complete" in stats
        title = str(app.screen.query_one("#gate-live-title").render())
        assert "round 0 · hint 1" in title and "complete" in title
        assert "hint span: user message 2, after the task" in title and "hint: compare the two photos" in title


async def test_tabbing_through_the_call_list_keeps_its_border_and_the_layout(tmp_path):
    root, _channel = _root(tmp_path)
    app = GateApp(GateSession(root, operator="pilot"))
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_until(lambda: isinstance(app.screen, GateScreen), pilot=pilot, what="the gate screen")
        calls = app.screen.query_one(CallList)
        await pilot.pause()
        region = calls.region
        calls.focus()
        await wait_until(lambda: calls.has_focus, pilot=pilot, what="the call list focused")
        await pilot.pause()
        # OptionList:focus would draw a border: the list would grow and the screen re-lay out on every tab
        assert all(edge == "" for edge, _color in (calls.styles.border_top, calls.styles.border_bottom))
        assert calls.region == region
