"""Cancel closes the stream (the server sees the disconnect); records are new files,
never overwritten, outside the evidence root; failed/cancelled never marked complete."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from conftest import wait_until

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import simple_request, target_for
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.events import Delta
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.recording import list_records
from eviscene_tui.policy.session import run_continuation
from eviscene_tui.storage import EvidenceWriteRefused, WorkDir


async def test_cancel_closes_stream_and_server_sees_disconnect(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": 5000, "content_tokens": 20000, "reasoning": "", "tool_calls": []}) as srv:
        acc = StreamAccumulator()
        got = asyncio.Event()

        def on_event(ev):
            if isinstance(ev, Delta) and len(acc.completion_token_ids) >= 200:
                got.set()

        async with PolicyClient(target_for(srv), PolicyConfig()) as c:
            task = asyncio.create_task(run_continuation(c, simple_request(tools=False), work=WorkDir(tmp_path), case_ref={"case_id": "cx"}, on_event=on_event, accumulator=acc))
            await wait_until(got.is_set, what="200 streamed tokens")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task  # how fast is not asserted: a loaded machine decides that
        await wait_until(lambda: srv.recorder.disconnects, what="the server seeing the client go away")
        assert len(srv.recorder.disconnects) == 1 and not srv.recorder.completed
    recs = list_records(WorkDir(tmp_path))
    assert len(recs) == 1
    rec = orjson.loads(recs[0].read_bytes())
    assert rec["status"] == "cancelled" and rec["error"]["kind"] == "cancelled"
    assert 200 <= len(rec["completion_token_ids"]) < 20000


async def test_two_streams_two_files_never_overwritten(tmp_path):
    evidence = tmp_path / "runs"
    evidence.mkdir()
    work = WorkDir(tmp_path / "runs.eviscene-tui", evidence_roots=[evidence])
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        async with PolicyClient(target_for(srv), PolicyConfig()) as c:
            a = await run_continuation(c, simple_request(), work=work, case_ref={"case_id": "same"})
            b = await run_continuation(c, simple_request(), work=work, case_ref={"case_id": "same"})
    assert a.path != b.path and a.path.exists() and b.path.exists()
    assert a.path.parent == work.path / "continuations"
    assert not any(evidence.iterdir())
    with pytest.raises(FileExistsError):
        work.write_new(a.path, b"overwrite attempt")
    assert orjson.loads(a.path.read_bytes())["status"] == "complete"
    with pytest.raises(EvidenceWriteRefused):
        work.write_new(evidence / "x.json", b"{}")


async def test_record_contents_and_images_by_hash(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        async with PolicyClient(target_for(srv), PolicyConfig(logprobs=True, top_logprobs=2)) as c:
            out = await run_continuation(c, simple_request(image=True), work=WorkDir(tmp_path), case_ref={"case_id": "img"})
    raw = out.path.read_bytes()
    assert b"base64" not in raw  # images by hash only
    rec = orjson.loads(raw)
    assert rec["status"] == "complete" and rec["attestation"]["status"] == "attested" and rec["attestation_mode"] == "attested"
    assert rec["request"]["hint"] == "Check the photo's date first."
    assert rec["request"]["hint_location"]["placement"] == "user_suffix"
    assert "<image sha256=" in orjson.dumps(rec["request"]["body"]).decode()
    assert rec["accounting"]["match"] is True and rec["usage"]["completion_tokens"] == len(rec["completion_token_ids"])
    assert rec["prompt_token_ids"] and rec["reasoning"] and rec["content"] and rec["tool_calls"]
    assert len(rec["logprobs"]) == len(rec["completion_token_ids"])
    assert set(rec["timings"]) == {"ttft_s", "wall_s", "tokens_per_s"}


async def test_failed_stream_not_marked_complete(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": None, "disconnect_after_tokens": 3}) as srv:
        async with PolicyClient(target_for(srv), PolicyConfig()) as c:
            out = await run_continuation(c, simple_request(), work=WorkDir(tmp_path), case_ref={"case_id": "f"})
    rec = orjson.loads(out.path.read_bytes())
    assert rec["status"] == "failed" and rec["error"]["kind"] == "disconnect" and rec["finish_reason"] is None
