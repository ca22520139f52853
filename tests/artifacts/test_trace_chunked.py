"""The chunked trace parse gives exactly ``orjson.loads``'s document, or declines (None).

Tiny chunk and block sizes force many cuts, reads that split boundaries, nested objects
that start with the steps' first key, and strings that look like boundaries.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import orjson
import pytest
from conftest import examples, generate_samples
from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.chunked_trace import parse_trace_chunked
from eviscene_tui.artifacts.trace import load_trace, load_trace_bytes
from trace_fixtures import STEP, VALUE, dump

def _parse(data: bytes, chunk: int, block: int) -> object:
    return parse_trace_chunked(io.BytesIO(data), chunk_bytes=chunk, block_bytes=block)


@settings(max_examples=examples(100), deadline=None)
@given(
    steps=st.lists(STEP, max_size=12),
    head=st.dictionaries(st.sampled_from(["image_id", "case_id", "verdict", "meta"]), VALUE, max_size=3),
    tail=st.dictionaries(st.sampled_from(["errors", "termination", "after"]), VALUE, max_size=3),
    style=st.integers(0, 3),
    chunk=st.integers(1, 300),
    block=st.integers(1, 97),
)
def test_same_document_as_orjson(steps: list, head: dict, tail: dict, style: int, chunk: int, block: int) -> None:
    doc = {**head, "state": {"runtime_case": {"x": 1}, "all_steps": steps, **tail}, **tail}
    data = dump(doc, style)
    got = _parse(data, chunk, block)
    if got is not None:
        assert got == orjson.loads(data)
    elif "all_steps" not in json.dumps(head):
        # the parser may only decline when something before state.all_steps looks like it
        pytest.fail("declined a plain trace")


def test_plain_trace_is_parsed_in_many_chunks_without_declining() -> None:
    steps = [{"round": i, "policy_input": {"tools": [{"round": 0, "t": "x"}, {"round": 1}]}, "thought": '},{"round":'} for i in range(200)]
    doc = {"image_id": "e", "state": {"all_steps": steps, "errors": []}, "verdict": "real"}
    for style in range(4):
        data = dump(doc, style)
        for chunk, block in [(1, 1), (50, 7), (400, 64), (1 << 20, 1 << 20)]:
            assert _parse(data, chunk, block) == doc


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 64), st.integers(1, 32))
def test_random_bytes_never_raise_and_never_invent(data: bytes, chunk: int, block: int) -> None:
    got = _parse(data, chunk, block)
    if got is not None:
        assert got == orjson.loads(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"state": {"all_steps": [{"round": 1}, {"round": 2}',  # truncated
        b'{"state": {"all_steps": [{"round": 1},, {"round": 2}]}}',  # invalid
        b'{"state": {"all_steps": [{"round": 1}, ]}}',  # trailing comma
        b'{"state": {"all_steps": [1, 2]}}',  # not objects
        b'{"state": {"all_steps": "nope"}}',
        b'{"meta": {"all_steps": []}, "state": {"all_steps": [{"round": 1}]}}',  # first match elsewhere
        b'{"state": {"all_steps": [{"round": 1}], "all_steps": [{"round": 2}]}}',  # duplicate key, last wins
        b'[{"state": {"all_steps": []}}]',
        b'{"state": {"all_steps": [{"round": 1}, {"round": "\xff"}]}}',  # invalid UTF-8
    ],
)
def test_declines_what_it_cannot_parse_exactly(data: bytes) -> None:
    for chunk, block in [(1, 1), (8, 3), (1 << 20, 1 << 20)]:
        got = _parse(data, chunk, block)
        try:
            expected = orjson.loads(data)
        except orjson.JSONDecodeError:
            assert got is None
        else:
            assert got is None or got == expected


def test_empty_and_top_level_arrays() -> None:
    assert _parse(b'{"state": {"all_steps": [ ]}, "x": 1}', 4, 2) == {"state": {"all_steps": []}, "x": 1}
    assert _parse(b'{"all_steps": [{"a": 1}, {"a": 2}]}', 1, 1) == {"all_steps": [{"a": 1}, {"a": 2}]}


def test_load_trace_uses_it_for_big_files_with_the_same_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "runs"
    generate_samples(root)
    paths = sorted(p for p in root.rglob("*.json") if p.parent.name == "source" or p.name == "trace.json")
    assert paths
    calls: list[object] = []
    real = trace_module.parse_trace_chunked

    def spy(fh, **kw):
        doc = real(fh, chunk_bytes=64, block_bytes=32, max_bytes=kw.get("max_bytes"))
        calls.append(doc)
        return doc

    monkeypatch.setattr(trace_module, "CHUNKED_MIN_BYTES", 0)
    monkeypatch.setattr(trace_module, "CHUNKED_MIN_GZ_BYTES", 0)
    monkeypatch.setattr(trace_module, "parse_trace_chunked", spy)
    for path in paths:
        trace, problems = load_trace(path)
        reference, ref_problems = load_trace_bytes(path.read_bytes(), path)
        assert (trace is None) == (reference is None)
        assert [p.message for p in problems] == [p.message for p in ref_problems]
        if trace is not None:
            assert trace.raw == reference.raw
            assert [trace.brief(i).to_dict() for i in range(trace.step_count)] == [
                reference.brief(i).to_dict() for i in range(reference.step_count)
            ]
    assert any(doc is not None for doc in calls)


def test_load_trace_falls_back_with_precise_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "CHUNKED_MIN_BYTES", 0)
    monkeypatch.setattr(trace_module, "CHUNKED_MIN_GZ_BYTES", 0)
    path = tmp_path / "trace.json"
    path.write_bytes(b'{"state": {"all_steps": [{"round": 1}, {"round"')
    trace, problems = load_trace(path)
    assert trace is None and "truncated JSON" in problems[0].message
    path.write_bytes(orjson.dumps({"state": {"all_steps": "nope"}}))
    trace, problems = load_trace(path)
    assert trace is not None and "not a list" in problems[0].message
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(orjson.dumps({"state": {"all_steps": [{"round": 1}]}})))
    trace, problems = load_trace(gz)
    assert trace is not None and trace.step_count == 1 and problems == []


def test_gzip_traces_are_parsed_in_chunks_with_their_size_and_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "CHUNKED_MIN_GZ_BYTES", 0)
    doc = {"image_id": "e", "state": {"all_steps": [{"round": i, "thought": "x" * 50} for i in range(300)]}}
    plain = orjson.dumps(doc)
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(plain))
    used: list[object] = []
    real = trace_module.parse_trace_chunked
    monkeypatch.setattr(trace_module, "parse_trace_chunked", lambda fh, **kw: used.append(kw) or real(fh, **kw))
    trace, problems = load_trace(gz)
    assert problems == [] and trace.raw == doc and trace.size_bytes == len(plain)
    assert used and used[0]["max_bytes"] == trace_module.MAX_GZIP_TRACE_BYTES
    # over the limit: the chunked parse gives up and the whole-file path says why
    monkeypatch.setattr(trace_module, "MAX_GZIP_TRACE_BYTES", 1000)
    trace, problems = load_trace(gz)
    assert trace is None and "over 2 GiB" in problems[0].message
    # a damaged gzip stream: reported by the whole-file path
    gz.write_bytes(gzip.compress(plain)[:-30])
    monkeypatch.setattr(trace_module, "MAX_GZIP_TRACE_BYTES", 1 << 31)
    trace, problems = load_trace(gz)
    assert trace is None and "gzip" in problems[0].message


def test_the_chunked_parse_has_a_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``chunked_trace`` off (the bench's on/off pair): a big trace the index declines is
    parsed with one orjson.loads, to the same trace."""
    from eviscene_tui import switches

    calls: list[object] = []
    real = trace_module.parse_trace_chunked
    monkeypatch.setattr(trace_module, "parse_trace_chunked", lambda fh, **kw: calls.append(1) or real(fh, **kw))
    monkeypatch.setattr(trace_module, "CHUNKED_MIN_BYTES", 0)
    monkeypatch.setattr(trace_module, "LAZY_MIN_BYTES", 1 << 62)
    path = tmp_path / "trace.json"
    path.write_bytes(b'{"state": {"all_steps": [{"round": 1, "stage": "unified_react"}, {"round": 2}]}}')
    chunked, _ = load_trace(path)
    switches.set_off("chunked_trace")
    try:
        plain, _ = load_trace(path)
    finally:
        switches.set_off("chunked_trace", False)
    assert calls == [1] and chunked is not None and plain is not None and chunked.raw == plain.raw
