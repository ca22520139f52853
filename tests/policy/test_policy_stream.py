"""Streaming over real loopback HTTP against the fake vLLM server: both personalities,
token accounting, SSE styles, multi-token chunks, logprobs, image prompts."""

from __future__ import annotations

import pytest

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import collect, simple_request, target_for, unattested_for
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.scaffold.tiny import encode, special_id
from policy_helpers import body_path  # noqa: F401 - autouse: every test runs on both body paths


@pytest.fixture
def nightly():
    with FakeVLLMServer(personality="nightly", scenario={"tokens_per_second": None}) as srv:
        yield srv


@pytest.fixture
def v011():
    with FakeVLLMServer(personality="v0.11", scenario={"tokens_per_second": None}) as srv:
        yield srv


async def test_nightly_complete_with_reasoning_content_tool_call(nightly):
    acc = await collect(target_for(nightly))
    assert acc.status == "complete", acc.error
    assert acc.attestation.status == "attested"
    scen = nightly.config.scenario
    assert acc.reasoning_text() == scen["reasoning"]
    assert acc.content_text() == scen["content"]
    assert acc.tool_calls_json()[0]["name"] == "reverse_image_search"
    assert acc.tool_calls_json()[0]["arguments"] == '{"query":"flooded street photo source"}'
    assert acc.finish_reason == "tool_calls"
    # ids: the same text encodes to them; </think> present, prompt-side <think> (Qwen3.5 style)
    ids = acc.completion_token_ids
    assert ids[: len(encode(scen["reasoning"]))] == encode(scen["reasoning"])
    assert special_id("</think>") in ids and special_id("<think>") not in ids
    assert ids[-1] == special_id("<|im_end|>")
    acct = acc.accounting()
    assert acct["match"] is True and acct["prompt_match"] is True
    assert acc.prompt_token_ids[-2] == special_id("<think>")


async def test_v011_reasoning_content_and_dropped_ids_flagged(v011):
    acc = await collect(target_for(v011))
    assert acc.status == "complete"
    fam = "qwen2_5_vl"
    assert acc.reasoning_text() == v011.config.scenario["reasoning"]
    assert acc.completion_token_ids[0] == special_id("<think>", fam)  # the model emits <think> itself
    acct = acc.accounting()
    assert acct["match"] is False  # bug #27482: held-back tool-call chunks lost their ids
    assert acct["usage_completion_tokens"] > acct["completion_token_ids"]
    assert "MISMATCH" in acct["note"]
    body = v011.recorder.last_body()
    assert body["stream"] is True and body["return_token_ids"] is True
    assert body["stream_options"] == {"include_usage": True} and body["temperature"] == 0.7


async def test_v011_without_tools_accounting_matches(v011):
    acc = await collect(target_for(v011), simple_request(tools=False))
    assert acc.status == "complete" and acc.finish_reason == "stop"
    assert acc.accounting()["match"] is True


@pytest.mark.parametrize("style", [["crlf"], ["cr"], ["nospace"], ["comments"], ["crlf", "comments", "nospace"]])
async def test_sse_styles(nightly, style):
    nightly.set_scenario(sse_style=style)
    acc = await collect(target_for(nightly))
    assert acc.status == "complete", acc.error
    assert acc.content_text() == nightly.config.scenario["content"]
    assert acc.accounting()["match"] is True


async def test_multi_token_chunks(nightly):
    nightly.set_scenario(tokens_per_chunk=7, content="Unicode ✓ — héllo wörld " * 5)
    acc = await collect(target_for(nightly))
    assert acc.content_text() == "Unicode ✓ — héllo wörld " * 5
    assert acc.accounting()["match"] is True


async def test_logprobs_token_id_form(nightly):
    cfg = PolicyConfig(logprobs=True, top_logprobs=3, return_tokens_as_token_ids=True)
    acc = await collect(target_for(nightly), simple_request(tools=False), cfg)
    assert acc.status == "complete"
    assert len(acc.logprobs) == len(acc.completion_token_ids)
    assert [lp.token_id for lp in acc.logprobs] == acc.completion_token_ids
    assert len(acc.logprobs[0].top) == 3


async def test_image_prompt_has_pad_run(nightly):
    acc = await collect(target_for(nightly), simple_request(image=True))
    pad = special_id("<|image_pad|>")
    ids = acc.prompt_token_ids
    assert ids.count(pad) == 2 * 2  # 64x48 px -> ceil(64/32) * ceil(48/32)
    start = ids.index(special_id("<|vision_start|>"))
    assert ids[start + 1:start + 5] == [pad] * 4 and ids[start + 5] == special_id("<|vision_end|>")


async def test_unattested_session_is_marked(nightly):
    acc = await collect(unattested_for(nightly))
    assert acc.status == "complete"
    assert acc.attestation.status == "unattested"
    assert [r["path"] for r in nightly.recorder.requests] == ["/v1/chat/completions"]


async def test_attested_session_checks_models_before_every_call(nightly):
    tgt = target_for(nightly)
    await collect(tgt)
    await collect(tgt)
    paths = [r["path"] for r in nightly.recorder.requests]
    assert paths == ["/v1/models", "/v1/chat/completions", "/v1/models", "/v1/chat/completions"]


async def test_the_fixture_really_switches_the_body_path(nightly, body_path):  # noqa: F811 - the imported fixture, by name
    from eviscene_tui.policy.client import PolicyClient
    from eviscene_tui.policy.request import chat_body

    target = target_for(nightly)
    async with PolicyClient(target, PolicyConfig()) as client:
        async for _ in client.continuation(chat_body(simple_request(), client.config, model=target.model)):
            pass
        assert client.probes.direct_streams == (1 if body_path == "direct-body" else 0)
