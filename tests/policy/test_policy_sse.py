"""SSE framing and chunk decoding (pure functions; the loopback tests are elsewhere)."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.policy.events import Delta, Finished, PromptTokens, StreamError, ToolCallDelta, Usage
from eviscene_tui.policy.sse import DONE, SSEDecoder, chunk_events, decode_data


def _feed_all(parts: list[bytes]) -> list:
    dec = SSEDecoder()
    out = []
    for p in parts:
        out.extend(dec.feed(p))
    out.extend(dec.close())
    return out


def test_lf_crlf_cr_and_nospace_and_comments():
    for eol in (b"\n", b"\r\n", b"\r"):
        raw = (b": ping" + eol + b"data:{\"a\":1}" + eol + eol + b"event: x" + eol + b"id: 3" + eol
               + b"data: {\"b\":2}" + eol + eol + b"data: [DONE]" + eol + eol)
        assert _feed_all([raw]) == [b'{"a":1}', b'{"b":2}', DONE]


def test_multiline_data_joined():
    assert _feed_all([b"data: {\"a\":\ndata: 1}\n\n"]) == [b'{"a":\n1}']


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30), st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_arbitrary_transport_splits(cuts, eol):
    events = [orjson.dumps({"i": i, "t": "x" * (i % 7)}) for i in range(12)]
    raw = b"".join(b"data: " + e + eol + eol for e in events) + b"data: [DONE]" + eol + eol
    parts, pos = [], 0
    for c in cuts:
        parts.append(raw[pos:pos + c])
        pos += c
    parts.append(raw[pos:])
    assert _feed_all(parts) == events + [DONE]


def test_reasoning_falls_back_to_reasoning_content_and_multi_token_chunk():
    ev = chunk_events({"choices": [{"index": 0, "delta": {"reasoning_content": "ab", "content": "c"}, "token_ids": [1, 2, 3]}]})
    assert ev == [Delta("reasoning", "ab", (1, 2, 3), ()), Delta("content", "c")]
    ev = chunk_events({"choices": [{"index": 0, "delta": {"reasoning": "new", "reasoning_content": "old"}}]})
    assert ev[0].text == "new"


def test_prompt_ids_tool_calls_finish_usage():
    ev = chunk_events({"prompt_token_ids": [5, 6], "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "token_ids": None}]})
    assert ev == [PromptTokens((5, 6))]
    ev = chunk_events({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": {"name": "f", "arguments": ""}}]}, "token_ids": [9]}]})
    assert ev == [ToolCallDelta(0, "t1", "f", ""), Delta("tokens", "", (9,), ())]
    ev = chunk_events({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": 7, "token_ids": [4]}]})
    assert ev == [Delta("tokens", "", (4,), ()), Finished("stop", 7)]
    ev = chunk_events({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}})
    assert isinstance(ev[0], Usage) and ev[0].completion_tokens == 3


def test_logprobs_token_id_form():
    lp = {"content": [{"token": "token_id:123", "logprob": -0.5, "bytes": [], "top_logprobs": [{"token": "token_id:7", "logprob": -1.0}]}]}
    ev = chunk_events({"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": lp, "token_ids": [123]}]})
    assert ev[0].logprobs[0].token_id == 123 and ev[0].logprobs[0].top[0].token_id == 7


def test_error_objects_nested_flat_and_string():
    nested = chunk_events({"error": {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}})
    assert nested == [StreamError("sse_error", "boom", status=500, error_type="InternalServerError")]
    flat = chunk_events({"object": "error", "message": "old", "type": "BadRequestError", "code": 400, "error": None} | {"error": {"message": "old", "code": 400}})
    assert flat[0].kind == "sse_error"
    assert chunk_events({"error": "Unauthorized"})[0].message == "Unauthorized"


def test_malformed_json_is_an_error():
    ev = decode_data(b'{"choices":[{"delta":{"content":"tru')
    assert ev[0].kind == "malformed"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.sampled_from(
        ["choices", "delta", "content", "reasoning", "reasoning_content", "tool_calls", "function", "arguments", "name",
         "index", "token_ids", "prompt_token_ids", "usage", "finish_reason", "stop_reason", "logprobs", "error", "message", "id"]), kids, max_size=5),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_chunk_events_never_raises_on_any_json(obj):
    events = chunk_events(obj)
    assert isinstance(events, list)
    for ev in events:
        from eviscene_tui.policy.events import event_to_json

        orjson.dumps(event_to_json(ev))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_decoder_and_decode_never_raise_on_garbage(data):
    for item in _feed_all([data]):
        if item is not DONE:
            decode_data(item)


_delta_values = st.one_of(st.none(), st.text(max_size=5), st.integers(-5, 5), st.lists(st.integers(0, 5), max_size=2))
_fast_shaped = st.fixed_dictionaries(
    {
        "choices": st.lists(
            st.fixed_dictionaries(
                {
                    "index": st.sampled_from([0, 0, 0, 1]),
                    "delta": st.dictionaries(st.sampled_from(["content", "reasoning", "reasoning_content", "role", "tool_calls"]),
                                             _delta_values, max_size=2),
                    "finish_reason": st.sampled_from([None, None, "stop"]),
                    "logprobs": st.sampled_from([None, None, {"content": []}]),
                    "token_ids": st.one_of(st.none(), st.lists(st.one_of(st.integers(0, 300000), st.booleans(), st.text(max_size=2)), max_size=3)),
                },
                optional={"stop_reason": st.sampled_from([None, 1, "x"])},
            ),
            min_size=0, max_size=2,
        ),
    },
    optional={"prompt_token_ids": st.one_of(st.none(), st.lists(st.integers(0, 10), max_size=2)),
              "usage": st.none(), "error": st.just({"message": "boom"})},
)


@settings(max_examples=400, deadline=None)
@given(_fast_shaped)
def test_fast_path_decodes_exactly_like_the_general_path(obj):
    """The per-token fast path (decode_data) is an optimisation only: same events as chunk_events' general path."""
    assert decode_data(orjson.dumps(obj)) == chunk_events(obj, fast=False)


def _flatten(events: list) -> tuple[list, dict[str, str], list[int]]:
    """(non-text events in order, text per kind, all token ids in order): what folding must keep."""
    others, texts, ids = [], {"content": "", "reasoning": "", "tokens": ""}, []
    for ev in events:
        if isinstance(ev, Delta):
            texts[ev.kind] += ev.text
            ids.extend(ev.token_ids)
            if ev.logprobs:
                others.append(("logprobs", ev.logprobs))
        else:
            others.append(ev)
    return others, texts, ids


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_fast_shaped.map(orjson.dumps), st.just(b'{"choices":[{"delta":{"content":"tru'), st.just(DONE)), max_size=8))
def test_decode_batch_folds_text_but_keeps_every_id_and_event(datas):
    """decode_batch (one network read at a time) == decode_data per event, up to folding
    consecutive plain text deltas: same other events, same text per kind, same ids in order."""
    from eviscene_tui.policy.events import Done
    from eviscene_tui.policy.sse import decode_batch

    expected, ended = [], False
    for data in datas:
        if data is DONE:
            expected.append(Done())
            ended = True
            break
        evs = decode_data(data)
        stop = next((i for i, ev in enumerate(evs) if isinstance(ev, StreamError)), None)
        expected.extend(evs if stop is None else evs[: stop + 1])
        if stop is not None:
            ended = True
            break
    got, got_ended = decode_batch(datas)
    assert got_ended == ended
    assert _flatten(got) == _flatten(expected)
    assert len(got) <= len(expected)


def test_bulk_feed_matches_line_by_line_framing():
    events = [orjson.dumps({"i": i}) for i in range(5)]
    raw = (b"data: " + events[0] + b"\n\n: keep-alive\n\n" + b"data:" + events[1] + b"\n\n\n\n"
           + b"data: " + events[2] + b"\nid: 7\n\n" + b"data: " + events[3] + b"\n\ndata: " + events[4] + b"\n")
    # everything in one read, and the same bytes one byte at a time
    assert _feed_all([raw]) == events
    assert _feed_all([raw[i:i + 1] for i in range(len(raw))]) == events
    assert _feed_all([raw + b"\ndata:  [DONE] \n\n"]) == events + [DONE]
