"""The live channel folded off the UI thread (state/live.py): runs of one call's deltas
become a few events that the accumulator takes exactly as it takes the records one by
one, the calls' own records keep their place, and the batcher hands a growing file over
at a bounded rate (times given, never slept)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eviscene_tui.gate import protocol as P
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.events import Delta, Finished, ToolCallDelta, Usage
from eviscene_tui.state.live import CallEvents, LiveBatcher, LiveCalls, LiveTail, fold_records


def _delta(call: str, seq: int, text: str, *, kind: str = "content", ids: list[Any] | None = None,
           logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    event = {"type": "delta", "kind": kind, "text": text, "token_ids": [seq + 1] if ids is None else ids, "logprobs": logprobs}
    return {"schema_version": P.LIVE_SCHEMA, "type": "delta", "call": call, "t": 1000.0 + seq, "round": 0, "hint": 1, "seq": seq,
            "event": event}


def _record(kind: str, call: str, **fields: Any) -> dict[str, Any]:
    return {"schema_version": P.LIVE_SCHEMA, "type": kind, "call": call, "t": 999.0, "round": 0, "hint": 1, **fields}


def _event(call: str, seq: int, event: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": P.LIVE_SCHEMA, "type": "delta", "call": call, "t": 1000.0 + seq, "round": 0, "hint": 1, "event": event}


def _stream(call: str = "c1") -> list[dict[str, Any]]:
    """A continuation as the bundled driver writes it: reasoning, content with logprobs,
    a tool call, the finish and the usage, between its start and its end."""
    lp = [{"token": "x", "logprob": -0.5, "token_id": 7, "top": [{"token": "y", "logprob": -1.0, "token_id": 8}]}]
    out = [_record("call_started", call, stage="psd_teacher_repair", streaming=True, hint_text="look closer")]
    out += [_delta(call, i, f"r{i} ", kind="reasoning") for i in range(3)]
    out += [_delta(call, 3 + i, f"c{i} ", logprobs=lp if i % 2 else None) for i in range(5)]
    out.append(_event(call, 8, {"type": "tool_call", "index": 0, "id": "t1", "name": "search", "arguments": '{"q":'}))
    out.append(_event(call, 9, {"type": "tool_call", "index": 0, "id": None, "name": None, "arguments": '"cat"}'}))
    out += [_delta(call, 10 + i, f"d{i}") for i in range(2)]
    out.append(_event(call, 12, {"type": "finish", "finish_reason": "stop", "stop_reason": None}))
    out.append(_event(call, 13, {"type": "usage", "prompt_tokens": 5, "completion_tokens": 10, "total_tokens": 15}))
    out.append(_record("call_complete", call, status="complete", finish_reason="stop"))
    return out


def _accumulated(calls: LiveCalls, name: str) -> StreamAccumulator:
    acc = StreamAccumulator()
    for ev in calls.calls[name].events:
        acc.add(ev)
    return acc


def test_a_folded_stream_accumulates_exactly_as_its_records_one_by_one() -> None:
    records = _stream()
    one_by_one, folded = LiveCalls(), LiveCalls()
    one_by_one.add(records)
    folded.add(fold_records(records))
    a, b = _accumulated(one_by_one, "c1"), _accumulated(folded, "c1")
    assert b.reasoning_text() == a.reasoning_text() == "r0 r1 r2 "
    assert "".join(b.content) == "".join(a.content) == "c0 c1 c2 c3 c4 d0d1"
    assert b.completion_token_ids == a.completion_token_ids == list(range(1, 9)) + [11, 12]
    assert b.logprobs == a.logprobs and len(b.logprobs) == 2
    assert b.tool_calls_json() == a.tool_calls_json() == [{"index": 0, "id": "t1", "name": "search", "arguments": '{"q":"cat"}'}]
    assert (b.finish_reason, b.usage) == (a.finish_reason, a.usage) == ("stop", Usage(5, 10, 15))
    assert b.token_count == a.token_count == 10
    for calls in (one_by_one, folded):  # the call itself is the same either way
        call = calls.calls["c1"]
        assert (call.status, call.streaming, call.stage, call.hint_text, call.finish_reason) == \
            ("complete", True, "psd_teacher_repair", "look closer", "stop")
    # far fewer events: a run of text deltas of one kind is one Delta
    assert len(folded.calls["c1"].events) == 7 < len(one_by_one.calls["c1"].events) == 14


def test_folding_keeps_the_order_and_the_calls_own_records() -> None:
    records = _stream("a")[:4] + _stream("b")[:3] + [_delta("a", 20, "more")] + _stream("b")[-1:]
    out = fold_records(records)
    shape = [(e.call, e.records, [type(ev).__name__ for ev in e.events]) if isinstance(e, CallEvents) else (e["call"], e["type"])
             for e in out]
    assert shape == [("a", "call_started"), ("a", 3, ["Delta"]), ("b", "call_started"), ("b", 2, ["Delta"]),
                     ("a", 1, ["Delta"]), ("b", "call_complete")]
    # an event that is not text ends a run; the text after it is a new Delta
    (run,) = [e for e in fold_records(_stream()) if isinstance(e, CallEvents)]
    assert [type(ev) for ev in run.events] == [Delta, Delta, ToolCallDelta, ToolCallDelta, Delta, Finished, Usage]
    assert [ev.kind for ev in run.events if isinstance(ev, Delta)] == ["reasoning", "content", "content"]
    assert run.records == 14


def test_folded_deltas_of_a_call_never_started_make_the_call_as_before() -> None:
    records = [_delta("lost", i, "x") for i in range(3)]
    one_by_one, folded = LiveCalls(), LiveCalls()
    touched_a, touched_b = one_by_one.add(records), folded.add(fold_records(records))
    assert [(c.call, len(evs), fresh) for c, evs, fresh in touched_a] == [("lost", 3, True)]
    assert [(c.call, len(evs), fresh) for c, evs, fresh in touched_b] == [("lost", 1, True)]
    a, b = one_by_one.calls["lost"], folded.calls["lost"]
    assert (a.round, a.hint, a.stage, a.streaming, a.started_at) == (b.round, b.hint, b.stage, b.streaming, b.started_at) == \
        (0, 1, "", False, 1000.0)


def test_odd_values_in_records_are_taken_as_the_record_by_record_fold_takes_them() -> None:
    records = [_record("call_started", "c", streaming=True),
               {**_delta("c", 0, "a", kind=["not", "a", "kind"], ids=[1, "2", 3.0, True, 4]), "t": "not a time"},
               _delta("c", 1, "b", kind="tokens", ids=None),
               _event("c", 2, {"type": "nonsense"}), _event("c", 3, ["not", "a", "dict"])]
    one_by_one, folded = LiveCalls(), LiveCalls()
    one_by_one.add(records)
    folded.add(fold_records(records))
    a, b = _accumulated(one_by_one, "c"), _accumulated(folded, "c")
    assert b.completion_token_ids == a.completion_token_ids == [1, 4, 2]
    assert "".join(b.content) == "".join(a.content) == "a"


def _append(path: Path, *records: dict[str, Any]) -> None:
    channel = P.LiveChannel(path)
    for rec in records:
        fields = {k: v for k, v in rec.items() if k not in ("schema_version", "type", "call")}
        assert channel.write(rec["type"], rec["call"], **fields)
    channel.close()


def test_the_batcher_hands_a_growing_channel_over_at_most_once_a_gap(tmp_path: Path) -> None:
    path = tmp_path / P.LIVE_FILE
    batcher = LiveBatcher(path, min_gap=0.05)
    assert batcher.poll(10.0) is None  # no channel yet
    stream = _stream()
    _append(path, *stream[:5])
    first = batcher.poll(10.0)  # the first read is handed over at once
    assert first is not None and not first[1]
    assert [e["type"] if isinstance(e, dict) else e.records for e in first[0]] == ["call_started", 4]
    _append(path, *stream[5:8])
    assert batcher.poll(10.02) is None  # read, held: the last batch is younger than the gap
    line = P.LIVE_RECORD_PREFIX + b'delta","call":"c1","t":1.0,"event":{"type":"delta","kind":"content","text":"c4 ","token_ids":[8]}}\n'
    with open(path, "ab") as fh:
        fh.write(line[:30])  # a record being written
    assert batcher.poll(10.04) is None
    second = batcher.poll(10.06)  # everything read since, as one run; the torn record waits for its end
    assert second is not None and [e.records for e in second[0] if isinstance(e, CallEvents)] == [3]
    with open(path, "ab") as fh:
        fh.write(line[30:])
    third = batcher.poll(10.2)
    assert third is not None and [e.records for e in third[0] if isinstance(e, CallEvents)] == [1]
    assert batcher.poll(10.4) is None  # nothing new: nothing to hand over


def test_the_batcher_starts_over_with_a_replaced_channel(tmp_path: Path) -> None:
    path = tmp_path / P.LIVE_FILE
    batcher = LiveBatcher(path, min_gap=0.05)
    _append(path, *_stream("old")[:3])
    assert batcher.poll(1.0) is not None
    _append(path, _delta("old", 5, "held"))
    assert batcher.poll(1.01) is None  # held for the gap ...
    os.replace(_new_file(tmp_path, _stream("new")[:2]), path)
    assert batcher.poll(1.02) is None
    batch = batcher.poll(1.06)  # ... then the replaced file is said, the old file's records dropped
    assert batch is not None and batch[1]
    assert [(e["call"], e["type"]) if isinstance(e, dict) else (e.call, e.records) for e in batch[0]] == \
        [("new", "call_started"), ("new", 1)]


def _new_file(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "replacement.jsonl"
    _append(path, *records)
    return path


def test_the_tail_reads_what_the_standard_library_writes_and_skips_broken_lines(tmp_path: Path) -> None:
    path = tmp_path / P.LIVE_FILE
    # json.dumps writes NaN / Infinity and integers past 64 bits: the fast parser refuses them, the tail still reads them
    _append(path, _record("call_started", "c", streaming=True, big=2**70),
            _event("c", 0, {"type": "delta", "kind": "content", "text": "x", "token_ids": [1],
                            "logprobs": [{"token": "x", "logprob": float("-inf"), "token_id": 1}]}))
    with open(path, "ab") as fh:
        fh.write(b'{"schema_version": broken}\n')
    _append(path, _delta("c", 1, "y"))
    records, reset = LiveTail(path).read()
    assert not reset
    assert [r["type"] for r in records] == ["call_started", "delta", "delta"]
    assert records[0]["big"] == 2**70 and records[1]["event"]["logprobs"][0]["logprob"] == float("-inf")
