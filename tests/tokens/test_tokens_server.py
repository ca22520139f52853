"""/detokenize + /tokenizer_info decoding against the fake vLLM server over real loopback HTTP."""

from __future__ import annotations

import pytest

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.decode import DecodeSource, ServerDecoder, resolve_decoder


@pytest.fixture(scope="module")
def server():
    with FakeVLLMServer(personality="nightly") as srv:
        yield srv


@pytest.fixture(scope="module")
def server_v011():
    with FakeVLLMServer(personality="v0.11") as srv:
        yield srv


async def test_server_decoder_pieces_and_specials(server):
    dec = ServerDecoder(server.v1_url)
    try:
        assert await dec.load_info()
        assert dec.source == DecodeSource.SERVER and server.base_url in dec.label
        assert dec.vision is not None and dec.vision.family == "qwen3_5"
        text = "The photo was not a match"
        ids = tiny.encode(text) + [tiny.special_id("<|im_end|>")]
        assert dec.piece(ids[0]) is None  # not fetched yet
        assert set(dec.pending(ids)) == set(ids[:-1])  # specials come from /tokenizer_info
        added = await dec.fetch(ids)
        assert added == len(set(ids[:-1]))
        assert "".join(dec.piece(i) for i in ids[:-1]) == text
        assert dec.piece(ids[-1]) == "<|im_end|>"
        before = dec.requests
        await dec.fetch(ids)  # cached: no new requests
        assert dec.requests == before
        assert await dec.decode_span_async(tiny.encode(" Hint: search the caption")) == " Hint: search the caption"
    finally:
        await dec.aclose()


async def test_server_partial_utf8(server):
    dec = ServerDecoder(server.base_url)
    try:
        ids = tiny.encode("🙂")
        await dec.fetch(ids)
        assert all("\ufffd" in dec.piece(i) for i in ids)
    finally:
        await dec.aclose()


async def test_resolve_uses_server_when_no_tokenizer(server_v011):
    dec = await resolve_decoder(policy_url=server_v011.v1_url, profile={"engine_model_path": "/nowhere"})
    try:
        assert dec.source == DecodeSource.SERVER
        assert dec.vision.family == "qwen2_5_vl"  # from /tokenizer_info, not a model name
        assert any("no tokenizer.json" in n for n in dec.notes)
        pad = tiny.special_id("<|image_pad|>", "qwen2_5_vl")
        assert dec.piece(pad) == "<|image_pad|>"
    finally:
        await dec.aclose()


async def test_server_down_falls_back_to_raw_ids():
    dec = ServerDecoder("http://127.0.0.1:9/v1")
    try:
        assert not await dec.load_info()
        await dec.fetch([65])
        assert dec.piece(65) == "#65"  # shown as the raw id, not an exception
        assert any("ConnectError" in e for e in dec.errors)
    finally:
        await dec.aclose()
