"""The step index gives exactly ``orjson.loads``'s steps, or declines (None), or - for a
range it took without parsing - the range fails to parse as one object when it is read
(and the trace says it is broken), never a different document.

Tiny block sizes force reads that split boundaries; nested objects start with the steps'
first key, strings look like boundaries or hold unbalanced brackets.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.artifacts.jsonio import canonical_sha256
from eviscene_tui.artifacts.problems import ProblemCode
from eviscene_tui.artifacts import step_index
from eviscene_tui.artifacts.step_index import index_steps
from eviscene_tui.artifacts.trace import LazySteps, load_trace
from trace_fixtures import STEP, TRICKY_TEXT, VALUE, dump, step

def _indexed(data: bytes, block: int):
    index = index_steps(io.BytesIO(data), block_bytes=block)
    if index is None:
        return None
    ranges = [orjson.loads(data[s:e]) if _parses(data[s:e]) else ValueError for s, e in zip(index.starts, index.ends)]
    return index, ranges


def _parses(data: bytes) -> bool:
    try:
        return isinstance(orjson.loads(data), dict)
    except orjson.JSONDecodeError:
        return False


def _check(data: bytes, block: int) -> object:
    """The steps the index finds, compared with orjson; returns the index (or None)."""
    got = _indexed(data, block)
    if got is None:
        return None
    index, ranges = got
    expected = orjson.loads(data)
    where = expected["state"] if index.steps_at == "state" else expected
    steps = where["all_steps"]
    if ValueError in ranges:
        # a range taken without parsing that is not one object: the reader reports it
        bad = ranges.index(ValueError)
        assert index.verified[bad] == 0
        assert ranges[:bad] == steps[:bad]
        return index
    assert ranges == steps
    skeleton = json.loads(json.dumps(expected))
    (skeleton["state"] if index.steps_at == "state" else skeleton)["all_steps"] = []
    assert index.skeleton == skeleton
    assert index.size == len(data)
    return index


#: the scan's fast paths, forced on the tiny documents of these tests (a real trace takes
#: them from its size and its bytes): the needle found by one of its bytes ("anchor"), and
#: a range's brackets found one by one ("sparse"; "sparse-fallback": it gives up at once)
SCAN_PATHS = {
    "plain": {},
    "anchor": {"ANCHOR_MIN_BYTES": 1, "ANCHOR_MAX_SHARE": 1},
    "sparse": {"_SPARSE_RATIO": 1 << 40},
    "sparse-fallback": {"_SPARSE_RATIO": 1 << 40, "_SPARSE_MAX": 1},
    "all": {"ANCHOR_MIN_BYTES": 1, "ANCHOR_MAX_SHARE": 1, "_SPARSE_RATIO": 1 << 40},
}


@contextmanager
def scan_path(name: str) -> Iterator[None]:
    saved = {key: getattr(step_index, key) for key in SCAN_PATHS[name]}
    for key, value in SCAN_PATHS[name].items():
        setattr(step_index, key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(step_index, key, value)


@settings(max_examples=examples(100), deadline=None)
@given(
    steps=st.lists(STEP, max_size=12),
    head=st.dictionaries(st.sampled_from(["image_id", "case_id", "verdict", "meta"]), VALUE, max_size=3),
    tail=st.dictionaries(st.sampled_from(["errors", "termination", "after"]), VALUE, max_size=3),
    style=st.integers(0, 3),
    block=st.integers(1, 97),
    path=st.sampled_from(sorted(SCAN_PATHS)),
)
def test_same_steps_as_orjson(steps: list, head: dict, tail: dict, style: int, block: int, path: str) -> None:
    doc = {**head, "state": {"runtime_case": {"x": 1}, "all_steps": steps, **tail}, **tail}
    data = dump(doc, style)
    with scan_path(path):
        if _check(data, block) is None and "all_steps" not in json.dumps(head) and steps:
            pytest.fail("declined a plain trace")


def test_the_fast_paths_are_taken_on_trace_shaped_bytes() -> None:
    # page text (brackets rare) and token ids (brackets dense) in one trace of a few MB: the
    # needle is found by its rarest byte, and the text steps' brackets one by one
    text = {"round": 0, "tool_result": "page " * 60_000, "metadata": {"ids": [1, 2, 3]}}
    tokens = {"round": 1, "tool_result": "x", "metadata": {"topk": [[{"token_id": k, "p": 0.5}] for k in range(20_000)]}}
    steps = [dict(text, round=i) if i % 3 else dict(tokens, round=i) for i in range(12)]
    data = orjson.dumps({"image_id": "e", "state": {"all_steps": steps}, "verdict": "real"})
    scan = step_index._Scan(step_index._Source(io.BytesIO(data), step_index.BLOCK_BYTES, None, None), b'"round"', 0)
    scan.src.more()
    scan._choose_anchor()
    assert scan.anchor_at >= 0  # "round" has a byte that is rare in these bytes
    index = _check(data, step_index.BLOCK_BYTES)
    assert index is not None and len(index) == 12
    ran = {"sparse": 0}
    real = step_index._Scan._marks

    def marks(self, lo, hi):
        ran["sparse"] += self.sparse
        return real(self, lo, hi)

    step_index._Scan._marks = marks
    try:
        assert _check(data, 1 << 16) is not None
    finally:
        step_index._Scan._marks = real
    assert ran["sparse"] > 0


@pytest.mark.parametrize("path", sorted(SCAN_PATHS))
def test_nested_objects_with_the_step_key_are_not_cut(path: str) -> None:
    steps = [
        {"round": i, "policy_input": {"tools": [{"round": 0, "t": "x"}, {"round": 1}]}, "thought": '},{"round": [[', "x": [[{"round": 2}, {"round": 3}]]}
        for i in range(60)
    ]
    doc = {"image_id": "e", "state": {"all_steps": steps, "errors": []}, "verdict": "real"}
    for style in range(4):
        data = dump(doc, style)
        for block in (1, 7, 64, 1 << 20):
            with scan_path(path):
                index = _check(data, block)
            assert index is not None and len(index) == 60


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 32), st.sampled_from(sorted(SCAN_PATHS)))
def test_random_bytes_never_raise_and_never_invent(data: bytes, block: int, path: str) -> None:
    try:
        expected = orjson.loads(data)
    except orjson.JSONDecodeError:
        expected = None
    with scan_path(path):
        got = _indexed(data, block)
    if got is not None and expected is not None and ValueError not in got[1]:
        index, ranges = got
        where = expected["state"] if index.steps_at == "state" else expected
        assert ranges == where["all_steps"]


@pytest.mark.parametrize(
    "data",
    [
        b'{"state": {"all_steps": [{"round": 1}, {"round": 2}',  # truncated
        b'{"state": {"all_steps": [{"round": 1}, {"round": 2}]}',  # truncated after the array
        b'{"state": {"all_steps": [{"round": 1}, ]}}',  # trailing comma
        b'{"state": {"all_steps": [1, 2]}}',  # not objects
        b'{"state": {"all_steps": "nope"}}',
        b'{"meta": {"all_steps": []}, "state": {"all_steps": [{"round": 1}]}}',  # first match elsewhere
        b'{"state": {"all_steps": [{"round": 1}], "all_steps": [{"round": 2}]}}',  # duplicate key, last wins
        b'[{"state": {"all_steps": []}}]',
    ],
)
def test_declines_what_it_cannot_index_exactly(data: bytes) -> None:
    for block in (1, 3, 1 << 20):
        assert index_steps(io.BytesIO(data), block_bytes=block) is None


@pytest.mark.parametrize(
    "data",
    [
        b'{"state": {"all_steps": [{"round": 1},, {"round": 2}]}}',  # invalid between steps
        b'{"state": {"all_steps": [{"round": 1}, 5, {"round": 2}]}}',  # a non-object in the middle
        b'{"state": {"all_steps": [{"round": 1}, {"round": "\xff"}]}}',  # invalid UTF-8 in a step
        b'{"state": {"all_steps": [{"round": 1 2}, {"round": 2}]}}',  # invalid inside a step
    ],
)
def test_bad_steps_are_declined_or_reported_when_read(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(data)
    trace, problems = load_trace(path, lazy=True)
    if trace is not None and trace.lazy:
        # taken without parsing: reading every step finds the bad range, and says so
        for i in range(trace.step_count):
            trace.brief(i)
        assert trace.broken is not None and trace.broken.code == ProblemCode.JSON_INVALID
        whole, whole_problems = load_trace(path, lazy=False)
        assert whole is None or whole_problems or any(not isinstance(s, dict) for s in whole.raw_steps)
    else:
        # declined: the whole-file path reads it as before (and reports invalid JSON)
        try:
            expected = orjson.loads(data)
        except orjson.JSONDecodeError:
            assert trace is None and problems and problems[0].code == ProblemCode.JSON_INVALID
        else:
            assert trace is not None and not trace.lazy and list(trace.raw_steps) == expected["state"]["all_steps"]


def _doc(n: int = 40) -> dict:
    steps = [
        {"round": i, "stage": "unified_react", "action_type": "tool_call", "tool_name": "web_search", "tool_args": {"q": f"find {i}"},
         "tool_result": f"page {i} " + "ü" * 50, "thought": f"thinking {i}",
         "metadata": {"policy_input": {"a": 1}, "policy_action": {"b": 2}, "interaction_id": f"ia-{i}",
                      "policy_token_capture": {"status": "complete", "prompt_token_ids": list(range(50)), "completion_token_ids": [1, 2],
                                               "completion_logprobs": [-0.5, -0.25], "completion_topk_by_position": [], "topk": 0, "missing": []}}}
        for i in range(n)
    ]
    return {"image_id": "ep-1", "case_id": "c-1", "verdict": "real", "state": {"image_id": "ep-1", "all_steps": steps, "errors": []}}


def test_lazy_trace_matches_the_whole_file_trace(tmp_path: Path) -> None:
    doc = _doc()
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(doc))
    lazy, problems = load_trace(path, lazy=True)
    whole, _ = load_trace(path, lazy=False)
    assert lazy is not None and lazy.lazy and not problems and whole is not None and not whole.lazy
    assert isinstance(lazy.raw_steps, LazySteps)
    assert lazy.step_count == whole.step_count == 40
    assert list(lazy.raw_steps) == whole.raw_steps == doc["state"]["all_steps"]
    for i in (0, 17, 39):
        assert lazy.brief(i).to_dict() == whole.brief(i).to_dict()
        assert lazy.step_detail(i) == whole.step_detail(i)
        assert lazy.step_bytes(i) is not None and orjson.loads(lazy.step_bytes(i)) == doc["state"]["all_steps"][i]
    assert lazy.policy_step_indices() == whole.policy_step_indices()
    assert lazy.index_for_step_id("ep-1:react:ia-12") == whole.index_for_step_id("ep-1:react:ia-12") == 12
    assert lazy.episode_id == "ep-1" and lazy.case_id == "c-1"
    assert lazy.canonical_sha256() == whole.canonical_sha256() == canonical_sha256(doc)
    assert lazy.broken is None


def test_gzip_trace_is_indexed_into_an_unnamed_spool_in_the_given_dir(tmp_path: Path) -> None:
    doc = _doc(30)
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    path = evidence / "trace.json.gz"
    path.write_bytes(gzip.compress(orjson.dumps(doc)))
    spool = tmp_path / "work" / "spool"
    before = sorted(os.listdir(evidence))
    trace, problems = load_trace(path, lazy=True, spool_dir=spool)
    assert trace is not None and trace.lazy and trace.gzip and not problems
    assert list(trace.raw_steps) == doc["state"]["all_steps"]
    assert trace.size_bytes == len(orjson.dumps(doc))
    assert sorted(os.listdir(evidence)) == before  # nothing written beside the evidence
    assert spool.is_dir()
    assert trace.canonical_sha256() == canonical_sha256(doc)


def test_truncated_gzip_goes_to_the_precise_path(tmp_path: Path) -> None:
    data = gzip.compress(orjson.dumps(_doc(30)))
    path = tmp_path / "trace.json.gz"
    path.write_bytes(data[: len(data) // 2])
    trace, problems = load_trace(path, lazy=True, spool_dir=tmp_path / "spool")
    assert trace is None and problems and problems[0].code == ProblemCode.JSON_INVALID


def test_truncated_plain_trace_goes_to_the_precise_path(tmp_path: Path) -> None:
    data = orjson.dumps(_doc(30))
    path = tmp_path / "trace.json"
    path.write_bytes(data[: len(data) - 5])
    trace, problems = load_trace(path, lazy=True)
    assert trace is None and problems and "truncated" in problems[0].message


def test_a_trace_changed_after_indexing_is_reported_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(_doc(10)))
    trace, _ = load_trace(path, lazy=True)
    assert trace is not None and trace.lazy
    path.write_bytes(orjson.dumps(_doc(12)))
    assert trace.raw_steps[3] is None
    assert trace.broken is not None and "changed" in trace.broken.message


TOPK_ENTRY = st.one_of(
    st.fixed_dictionaries({"token_id": st.integers(0, 9), "probability": st.floats(0, 1)}),
    st.fixed_dictionaries({"token_id": st.integers(0, 9), "token": TRICKY_TEXT}),
)
CAPTURE = st.fixed_dictionaries(
    {"status": st.sampled_from(["complete", "incomplete"])},
    optional={
        "prompt_token_ids": st.one_of(st.lists(st.integers(0, 10**6), max_size=20), TRICKY_TEXT),
        "completion_token_ids": st.lists(st.integers(0, 10**6), max_size=5),
        "completion_logprobs": st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=5),
        "completion_topk_by_position": st.lists(st.lists(TOPK_ENTRY, max_size=3), max_size=3),
    },
)


@settings(max_examples=150, deadline=None)
@given(
    heads=st.lists(st.fixed_dictionaries({"tool_args": VALUE, "tool_result": st.one_of(TRICKY_TEXT, st.text(max_size=8)), "thought": TRICKY_TEXT}),
                   min_size=1, max_size=5),
    captures=st.lists(st.one_of(st.none(), CAPTURE), min_size=5, max_size=5),
    style=st.integers(0, 3),
)
def test_quick_brief_from_the_cut_parse_equals_the_full_brief(tmp_path_factory, heads: list, captures: list, style: int) -> None:
    # the driver's key order: the step's text fields first, metadata (and its capture) last
    steps = []
    for i, head in enumerate(heads):
        metadata = {"policy_input": {"a": 1}, "policy_action": {"b": 2}, "interaction_id": f"ia-{i}"}
        if captures[i] is not None:
            metadata["policy_token_capture"] = captures[i]
        steps.append({"round": i, "stage": "unified_react", **head, "metadata": metadata})
    path = tmp_path_factory.mktemp("quick") / "trace.json"
    path.write_bytes(dump({"state": {"all_steps": steps}}, style))
    trace, _ = load_trace(path, lazy=True)
    assert trace is not None and trace.lazy
    for i in range(trace.step_count):
        assert trace.quick_brief(i).to_dict() == trace.brief(i).to_dict()


def test_the_cut_empties_the_capture_lists_and_keeps_everything_else() -> None:
    from eviscene_tui.artifacts.trace import without_capture_lists

    raw = {"round": 1, "tool_args": {"prompt_token_ids": [9, 9]}, "thought": "x]]y",
            "metadata": {"policy_token_capture": {"status": "complete", "prompt_token_ids": list(range(100)), "completion_token_ids": [5, 6],
                                                  "completion_logprobs": [-0.5, -1e-3], "completion_topk_by_position": [[{"token_id": 1, "probability": 0.5}], []],
                                                  "topk": 20, "missing": []}, "interaction_id": "ia"}}
    for style in range(4):
        cut = without_capture_lists(dump(raw, style))
        assert cut is not None
        got = orjson.loads(cut)
        capture = got["metadata"]["policy_token_capture"]
        assert capture == {"status": "complete", "prompt_token_ids": [], "completion_token_ids": [], "completion_logprobs": [],
                           "completion_topk_by_position": [], "topk": 20, "missing": []}
        assert got["tool_args"] == {"prompt_token_ids": [9, 9]} and got["thought"] == "x]]y" and got["metadata"]["interaction_id"] == "ia"
    assert without_capture_lists(orjson.dumps({"round": 1})) is None


@pytest.mark.parametrize("path", sorted(SCAN_PATHS))
def test_strings_that_fake_the_bracket_counts_do_not_cut_astep(path: str) -> None:
    # ']' and '}' in a string before a nested object that starts with the step key balance
    # the counts of a cut inside the step: the index must still find the steps, not decline
    faked = [
        [step({"stage": "]", "thought": [{}, {"round": None}]})],
        [step({"stage": "]}", "thought": [{}, {"round": None}]}), step({})],
        [step({"stage": ["]"], "thought": [{}, {"round": None}]}), step({"x": 1}), step({})],
    ]
    for steps in faked:
        data = dump({"state": {"runtime_case": {"x": 1}, "all_steps": steps}}, 0)
        for block in (1, 5, 97, 1 << 20):
            with scan_path(path):
                index = _check(data, block)
            assert index is not None and len(index) == len(steps)


def test_step_detail_of_an_indexed_trace_keeps_no_parsedstep(tmp_path: Path) -> None:
    doc = _doc()
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(doc))
    lazy, _ = load_trace(path, lazy=True)
    whole, _ = load_trace(path, lazy=False)
    assert lazy is not None and whole is not None
    far = 33
    detail = lazy.step_detail(far)
    assert detail == whole.step_detail(far)
    assert detail["token_capture"]["prompt_tokens"] == 50  # the capture's counts, never its lists
    # neither the parsed step (its token capture lists) nor its model is kept
    assert far not in lazy.raw_steps._cache
    assert far not in lazy._step_cache
    assert not any(isinstance(v, list) and len(v) >= 50 for v in detail.values())
    # a step the viewer holds already (token inspector) is used as it is
    lazy.step(far)
    assert lazy.step_detail(far) == detail and far in lazy._step_cache


class _Trickle(io.RawIOBase):
    """A reader that hands out at most ``most`` bytes a read (a pipe, a slow stream)."""

    def __init__(self, data: bytes, most: int) -> None:
        self._data, self._at, self._most = data, 0, most

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        n = min(len(b), self._most, len(self._data) - self._at)
        b[:n] = self._data[self._at : self._at + n]
        self._at += n
        return n


class _ReadOnly:
    """A reader with ``read`` and nothing else (no ``readinto``)."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)


@pytest.mark.parametrize("reader", ["short reads", "read only", "whole blocks"])
def test_every_kind_of_reader_gives_the_same_index_and_the_sink_gets_every_byte(reader: str) -> None:
    # the blocks are read into the buffer's own tail: a read that fills less than a block,
    # and a reader that has no readinto, index the same steps and copy the same bytes
    data = orjson.dumps(_doc(25))
    fh = {"short reads": lambda: _Trickle(data, 37), "read only": lambda: _ReadOnly(data), "whole blocks": lambda: io.BytesIO(data)}[reader]()
    sink = io.BytesIO()
    index = index_steps(fh, block_bytes=256, sink=sink)  # type: ignore[arg-type]
    expected = index_steps(io.BytesIO(data), block_bytes=1 << 20)
    assert index is not None and expected is not None
    assert list(index.starts) == list(expected.starts) and list(index.ends) == list(expected.ends) and len(index) == 25
    assert [orjson.loads(data[s:e]) for s, e in zip(index.starts, index.ends)] == _doc(25)["state"]["all_steps"]
    assert sink.getvalue() == data and index.size == len(data)


def test_a_trace_past_the_byte_limit_is_refused_while_read() -> None:
    data = orjson.dumps(_doc(25))
    with pytest.raises(ValueError, match="more than"):
        index_steps(_Trickle(data, 100), block_bytes=256, max_bytes=len(data) - 1)  # type: ignore[arg-type]
