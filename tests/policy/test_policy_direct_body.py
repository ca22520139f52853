"""Reading stream bodies straight from the connection (policy/direct_body.py).

- the chunked decoder against random chunkings and random read splits (hypothesis);
- the tap: head cut at the right byte, interim 1xx heads, unclaimed bodies reach httpcore;
- over real loopback HTTP: the fast path is taken, and gives exactly the events of the
  ordinary httpx path, for complete streams and for faults.
"""

from __future__ import annotations

import dataclasses

import pytest
from conftest import wait_until
from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import chat_body, simple_request, target_for
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.direct_body import BodyTap, ChunkedDecoder, ChunkedError
from eviscene_tui.policy.config import PolicyConfig


def _encode(chunks: list[bytes], exts: list[bytes], trailers: list[bytes], upper: bool) -> bytes:
    out = []
    for chunk, ext in zip(chunks, exts):
        size = f"{len(chunk):x}"
        out.append((size.upper() if upper else size).encode() + ext + b"\r\n" + chunk + b"\r\n")
    out.append(b"0\r\n" + b"".join(t + b"\r\n" for t in trailers) + b"\r\n")
    return b"".join(out)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    parts, last = [], 0
    for p in points:
        parts.append(data[last:p])
        last = p
    parts.append(data[last:])
    return parts


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=300), max_size=12),
    ext=st.sampled_from([b"", b";x=1", b" ;name", b'\t;a="b c"']),
    trailers=st.lists(st.sampled_from([b"X-Trailer: 1", b"Foo: bar baz"]), max_size=2),
    upper=st.booleans(),
    cuts=st.lists(st.integers(0, 10_000), max_size=20),
)
def test_chunked_decoder_any_split(chunks, ext, trailers, upper, cuts) -> None:
    data = _encode(chunks, [ext] * len(chunks), trailers, upper)
    dec = ChunkedDecoder()
    out = b""
    for part in _split(data, cuts):
        out += dec.feed(part)
    assert out == b"".join(chunks)
    assert dec.done
    assert dec.feed(b"more after the end") == b""


@pytest.mark.parametrize(
    "data",
    [
        b"zz\r\nabc\r\n",  # not hex
        b"0x3\r\nabc\r\n",  # int() would take it; HTTP does not
        b"3\r\nabcXY",  # no CRLF after the data
        b"3\r\nabc\r",  # fine so far ...
        b"-3\r\nabc\r\n",
        b"1" * 5000,  # an endless size line
    ],
)
def test_chunked_decoder_rejects_malformed(data: bytes) -> None:
    dec = ChunkedDecoder()
    if data == b"3\r\nabc\r":
        assert dec.feed(data) == b"abc" and not dec.done
        with pytest.raises(ChunkedError):
            dec.feed(b"X")  # ... until the LF is something else
        return
    with pytest.raises(ChunkedError):
        for i in range(0, len(data), 7):
            dec.feed(data[i : i + 7])


def test_chunked_decoder_incomplete_is_not_done() -> None:
    dec = ChunkedDecoder()
    assert dec.feed(b"5\r\nhel") == b"hel"
    assert dec.feed(b"lo\r\n") == b"lo"
    assert not dec.done
    assert dec.feed(b"0\r\n") == b"" and not dec.done  # the trailer section's empty line is missing
    dec.feed(b"\r\n")
    assert dec.done


class ScriptedStream:
    """A network stream whose reads return scripted pieces (then b'')."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.reads = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.reads += 1
        return self.pieces.pop(0) if self.pieces else b""


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
BODY = b"5\r\nhello\r\n0\r\n\r\n"


@pytest.mark.parametrize("split", [len(HEAD), 3, len(HEAD) - 2, len(HEAD) - 1, len(HEAD) + 4, len(HEAD) + len(BODY)])
async def test_tap_cuts_at_the_end_of_the_head(split: int) -> None:
    wire = HEAD + BODY
    stream = ScriptedStream([wire[:split], wire[split:]])
    tap = BodyTap(stream)
    tap.arm()
    seen = b""
    while not tap.holding:
        seen += await stream.read(65536)  # what httpcore does: stream.read is the tap now
    assert seen == HEAD
    body = tap.claim()
    while True:
        more = await tap.read_body(65536, None)
        if not more:
            break
        body += more
    assert body == BODY


async def test_tap_passes_interim_heads_and_holds_after_the_final_one() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    stream = ScriptedStream([interim + HEAD + BODY])
    tap = BodyTap(stream)
    tap.arm()
    assert await stream.read(65536) == interim
    assert not tap.holding
    assert await stream.read(65536) == HEAD
    assert tap.holding and tap.claim() == BODY


async def test_unclaimed_body_goes_to_httpcore_unchanged() -> None:
    stream = ScriptedStream([HEAD + BODY[:4], BODY[4:]])
    tap = BodyTap(stream)
    tap.arm()
    assert await stream.read(65536) == HEAD
    assert tap.holding
    assert await stream.read(65536) == BODY[:4]  # the held bytes first
    assert not tap.holding
    assert await stream.read(65536) == BODY[4:]


async def test_disarmed_tap_is_a_pass_through() -> None:
    stream = ScriptedStream([HEAD + BODY])
    BodyTap(stream)
    assert await stream.read(65536) == HEAD + BODY


# ---------------------------------------------------------------------------- over loopback
async def _run(srv: FakeVLLMServer, direct: bool, config: PolicyConfig | None = None, request=None) -> tuple[StreamAccumulator, int]:
    cfg = dataclasses.replace(config or PolicyConfig(), direct_body=direct)
    acc = StreamAccumulator()
    target = target_for(srv)
    async with PolicyClient(target, cfg) as client:
        async for ev in client.continuation(chat_body(request or simple_request(), cfg, model=target.model)):
            acc.add(ev)
        return acc, client.probes.direct_streams


def _summary(acc: StreamAccumulator) -> dict:
    return {
        "status": acc.status,
        "error": (acc.error.kind, acc.error.status) if acc.error else None,
        "reasoning": acc.reasoning_text(),
        "content": acc.content_text(),
        "tools": [{k: v for k, v in tc.items() if k != "id"} for tc in acc.tool_calls_json()],  # ids are random per request
        "prompt": acc.prompt_token_ids,
        "ids": acc.completion_token_ids,
        "finish": (acc.finish_reason, acc.stop_reason),
        "usage": acc.usage,
        "accounting": acc.accounting(),
    }


@pytest.mark.parametrize("personality", ["nightly", "v0.11"])
@pytest.mark.parametrize(
    "scenario",
    [
        {},
        {"tokens_per_chunk": 3},
        {"content_tokens": 3000, "reasoning": ""},
        {"error_after_tokens": 7, "error_message": "boom"},
        {"disconnect_after_tokens": 9},
        {"malformed_after_tokens": 4},
    ],
)
async def test_direct_path_is_taken_and_gives_the_same_events(personality: str, scenario: dict) -> None:
    with FakeVLLMServer(personality=personality, scenario={"tokens_per_second": None, **scenario}) as srv:
        direct, taken = await _run(srv, True)
        plain, not_taken = await _run(srv, False)
    assert taken == 1 and not_taken == 0
    assert _summary(direct) == _summary(plain)
    assert direct.status == ("complete" if not scenario or "tokens_per_chunk" in scenario or "content_tokens" in scenario else "failed")


async def test_direct_stall_and_read_timeouts() -> None:
    with FakeVLLMServer(scenario={"tokens_per_second": None, "stall_after_tokens": 3, "stall_seconds": 30}) as srv:
        acc, taken = await _run(srv, True, PolicyConfig(stall_timeout=0.4))
    assert taken == 1 and acc.error.kind == "timeout" and "stalled" in acc.error.message
    assert len(acc.completion_token_ids) == 3


async def test_http_errors_use_the_ordinary_path() -> None:
    with FakeVLLMServer(scenario={"tokens_per_second": None, "http_error": 500}) as srv:
        acc, taken = await _run(srv, True)
    assert taken == 0 and acc.error is not None and acc.error.kind == "http" and acc.error.status == 500


async def test_cancel_mid_stream_closes_the_connection_on_the_direct_path() -> None:
    with FakeVLLMServer(scenario={"tokens_per_second": 2000, "content_tokens": 20_000, "reasoning": ""}) as srv:
        target = target_for(srv)
        cfg = PolicyConfig()
        async with PolicyClient(target, cfg) as client:
            got = 0
            stream = client.continuation(chat_body(simple_request(), cfg, model=target.model))
            async for ev in stream:
                got += len(getattr(ev, "token_ids", None) or ())
                if got >= 50:
                    break
            await stream.aclose()
            assert client.probes.direct_streams == 1
        await wait_until(lambda: srv.recorder.disconnects, what="the server seeing the client go away")


async def test_a_stream_that_cannot_be_tapped_leaves_the_ordinary_path() -> None:
    from eviscene_tui.policy.direct_body import DirectBodyTrace

    class Slotted:
        __slots__ = ()

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return b""

    trace = DirectBodyTrace()
    await trace("connection.connect_tcp.complete", {"return_value": Slotted()})
    assert trace.tap is None  # read cannot be wrapped: no fast path, and no exception
    await trace("http11.receive_response_headers.started", {})
    assert trace.tap is None


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_chunked_decoder_on_random_bytes_only_raises_chunked_error(data: bytes, cuts: list[int]) -> None:
    # malformed input is refused with ChunkedError only (any other exception fails this test)
    dec = ChunkedDecoder()
    try:
        for part in _split(data, cuts):
            dec.feed(part)
    except ChunkedError:
        pass
