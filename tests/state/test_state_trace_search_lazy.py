"""Search of an indexed trace (byte prefilter, then a parse) and through the corpus the
viewer builds gives exactly the matches of a search of the parsed trace."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eviscene_tui.artifacts.trace import load_trace
from eviscene_tui.state.trace_search import LOWERS_TO_ASCII, SearchCorpus, TraceSearch, bytes_may_hold, literal_parts

PIECES = ["K", "k", "İ", "i", "I", "\u0130x", "a\nb", "a b", "A\tB", '"q"', "back\\slash", "sl/ash", "ü", "Ü", "😀", "\u00a0", "x y", "ab"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=5).map("".join)
STEP = st.fixed_dictionaries(
    {"round": st.integers(0, 3)},
    optional={"tool_result": TEXT, "thought": TEXT, "output": TEXT, "tool_args": st.dictionaries(st.sampled_from(["q", "K"]), TEXT, max_size=2),
              "metadata": st.fixed_dictionaries({"policy_input": st.fixed_dictionaries({"text": TEXT})})},
).map(lambda step: {"round": step["round"], **step})  # one serializer: every step starts with the same key


def test_lowers_to_ascii_lists_every_such_character() -> None:
    found = tuple(c for c in map(chr, range(128, 0x110000)) if any(ord(x) < 128 for x in c.lower()))
    assert found == LOWERS_TO_ASCII


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=8), query=st.sampled_from(PIECES + ["k", "ab", "i", "a b", "q", "x", "İ", "\\"]),
       ascii_only=st.booleans())
def test_indexed_and_corpus_search_match_the_parsed_trace(tmp_path: Path, steps: list, query: str, ascii_only: bool) -> None:
    doc = {"image_id": "e", "state": {"all_steps": steps}}
    data = json.dumps(doc, ensure_ascii=ascii_only).encode("utf-8")
    path = tmp_path / f"trace-{ascii_only}.json"
    path.write_bytes(data)
    lazy, _ = load_trace(path, lazy=True)
    whole, _ = load_trace(path, lazy=False)
    assert lazy is not None and lazy.lazy and whole is not None
    expected = TraceSearch(whole).matches(query)
    assert TraceSearch(lazy).matches(query) == expected
    corpus = SearchCorpus()
    for i in range(lazy.step_count):
        corpus.add(i, lazy.raw_steps[i])
    assert TraceSearch(lazy, corpus).matches(query) == expected


def test_the_prefilter_only_skips_steps_that_cannot_match() -> None:
    parts = literal_parts("hello world")
    assert parts == [b"hello", b"world"]
    assert not bytes_may_hold(orjson.dumps({"tool_result": "goodbye"}), parts)
    assert bytes_may_hold(orjson.dumps({"tool_result": "HELLO big WORLD"}), parts)
    # an escape that decodes to ASCII, or a character whose lowercase is ASCII: not skipped
    assert bytes_may_hold(b'{"tool_result": "\\u0068ello world"}', parts)
    assert bytes_may_hold(json.dumps({"tool_result": "\u212aelvin"}, ensure_ascii=False).encode(), literal_parts("kelvin"))
    assert literal_parts('a"b/c\\d') == [b"a", b"b", b"c", b"d"]
