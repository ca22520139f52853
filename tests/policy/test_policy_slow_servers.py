"""A stream cannot be held open forever, nor grow memory without bound, by a server that
trickles bytes, streams tokens forever or sends one endless line: each ends with a saved
record marked failed that says why (real loopback HTTP, both body paths)."""

from __future__ import annotations

import orjson
import pytest

from slow_servers import answering_as, endless_line, serving, slow_events, trickle

from eviscene_tui.scaffold.fake_vllm.testing import simple_request
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import unattested_target
from eviscene_tui.policy.session import run_continuation
from eviscene_tui.storage import WorkDir
from policy_helpers import body_path  # noqa: F401 - autouse: every test runs on both body paths


async def _continue(base_url: str, config: PolicyConfig, tmp_path):
    async with PolicyClient(unattested_target(base_url, "m"), config) as client:
        out = await run_continuation(client, simple_request(), work=WorkDir(tmp_path / "wd"), case_ref={"case_id": "c"})
    assert out.path is not None, out.save_error
    return out, orjson.loads(out.path.read_bytes())


@pytest.mark.timeout(60)
async def test_a_server_that_trickles_one_byte_at_a_time_is_stalled(tmp_path) -> None:
    """Bytes keep coming, but no event completes: that is a stall, not progress."""
    async with serving(trickle) as url:
        out, rec = await _continue(url, PolicyConfig(stall_timeout=0.5, read_timeout=5), tmp_path)
    assert out.status == "failed" and rec["status"] == "failed"
    assert rec["error"]["kind"] == "timeout" and "no complete event for 0.5 s" in rec["error"]["message"]
    assert out.accumulator.completion_token_ids == [1000, 1001, 1002]  # what did arrive is kept


@pytest.mark.timeout(60)
async def test_a_stream_that_never_ends_stops_at_its_deadline(tmp_path) -> None:
    """Complete token events forever (past max_tokens): the stream's deadline from its
    token budget (read_timeout for the first token + max_tokens at the floor rate) ends it."""
    config = PolicyConfig(read_timeout=0.5, stall_timeout=5, max_tokens=10, min_token_rate=20)
    async with serving(slow_events) as url:
        out, rec = await _continue(url, config, tmp_path)
    assert rec["status"] == "failed" and rec["error"]["kind"] == "timeout"
    msg = rec["error"]["message"]
    assert "ran past its deadline of 1 s" in msg and "0.5 s for the first token + 10 tokens at 20 tokens/s" in msg
    assert len(out.accumulator.completion_token_ids) > 0


@pytest.mark.timeout(60)
async def test_an_explicit_stream_deadline_is_kept(tmp_path) -> None:
    async with serving(slow_events) as url:
        _out, rec = await _continue(url, PolicyConfig(stream_deadline=0.6, stall_timeout=5), tmp_path)
    assert rec["status"] == "failed" and "stream_deadline = 0.6 s" in rec["error"]["message"]


@pytest.mark.timeout(60)
async def test_an_endless_sse_line_is_capped(tmp_path) -> None:
    """One ``data:`` line without an end: the stream stops once it passes the cap, with
    a failed record, instead of holding the line in memory as it grows."""
    cap = 1 << 20
    async with serving(endless_line) as url:
        out, rec = await _continue(url, PolicyConfig(max_event_bytes=cap, stall_timeout=30, read_timeout=30), tmp_path)
    assert rec["status"] == "failed" and rec["error"]["kind"] == "malformed"
    assert "grew past 1 MiB" in rec["error"]["message"] and "endless line" in rec["error"]["message"]
    size = int(rec["error"]["message"].split("(")[1].split(" bytes")[0])
    assert cap < size <= cap + (64 << 10) + 16  # stopped within one network read of the cap


def test_the_deadline_rule_and_its_settings() -> None:
    from eviscene_tui.policy.client import DEFAULT_TOKEN_BUDGET, StreamProgress
    from eviscene_tui.policy.config import policy_config
    from eviscene_tui.settings import PolicySettings

    now = [100.0]
    progress = StreamProgress(PolicyConfig(read_timeout=60, stall_timeout=10, min_token_rate=4), {"max_tokens": 400}, 131072, clock=lambda: now[0])
    assert progress.deadline == 100 + 60 + 100 and progress.due() == 160  # first event: the read timeout
    now[0] = 150.0
    progress.event()
    assert progress.due() == 160 and progress.remaining() == 10  # then the stall timeout from the last event
    now[0] = 255.0
    progress.event()
    assert progress.due() == 260  # the overall deadline caps the stall timeout
    no_budget = StreamProgress(PolicyConfig(), {}, None)
    assert no_budget.budget == DEFAULT_TOKEN_BUDGET
    assert StreamProgress(PolicyConfig(), {}, 8192).budget == 8192  # the profile's context length
    cfg = policy_config(PolicySettings(min_token_rate=1.5, stream_deadline=900, max_event_bytes=4 << 20))
    assert (cfg.min_token_rate, cfg.stream_deadline, cfg.max_event_bytes) == (1.5, 900, 4 << 20)


async def test_the_served_model_name_is_recorded_and_a_mismatch_flagged(tmp_path) -> None:
    async with serving(answering_as("m")) as url:
        _out, rec = await _continue(url, PolicyConfig(), tmp_path / "same")
    assert rec["status"] == "complete" and rec["served_model"]["match"] is True and rec["served_model"]["served"] == "m"
    async with serving(answering_as("somebody-else-7b")) as url:
        out, rec = await _continue(url, PolicyConfig(), tmp_path / "other")
    assert rec["served_model"] == {"asked": "m", "served": "somebody-else-7b", "all_served": ["somebody-else-7b"], "match": False,
                                   "note": "MISMATCH: asked for 'm', the server answered as 'somebody-else-7b'"}
    assert out.accumulator.content_text() == "t0 t1 t2 "  # the text is kept, in order, around the name


async def test_token_ids_that_are_not_integers_are_counted_and_reported(tmp_path) -> None:
    async with serving(answering_as("m", bad_ids=True)) as url:
        out, rec = await _continue(url, PolicyConfig(), tmp_path)
    assert out.accumulator.completion_token_ids == [1000, 1001, 1002]
    faults = rec["non_integer_token_ids"]
    assert faults["count"] == 4 and faults["sample"] == ['"1002"', "3.5", "null", "true"]
    assert "4 token id value(s) were not integers" in faults["note"]
