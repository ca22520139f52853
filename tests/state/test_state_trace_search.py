"""Searching a trace's steps (Textual-free)."""

from __future__ import annotations

from eviscene_tui.artifacts.trace import SourceTrace
from eviscene_tui.state.trace_search import TraceSearch, step_haystack

LONG = "x" * 5000 + " the Needle   in a\nlong result"
STEPS = [
    {"stage": "unified_react", "tool_name": "web_search", "tool_args": {"query": "flood Valencia"}, "tool_result": {"results": []}},
    {"stage": "unified_react", "tool_name": "fetch_page", "tool_args": {"url": "u"}, "tool_result": LONG,
     "metadata": {"policy_input": {"input_payload": "secret prompt words"}, "policy_token_capture": {"completion_token_ids": [1, 2]}}},
    "a step that is not an object (web_search)",
    {"stage": "unified_judgment", "output": "{\"verdict\": \"real\"}", "thought": "Compare the WEB_SEARCH results"},
]


def _search() -> TraceSearch:
    return TraceSearch(SourceTrace({"state": {"all_steps": STEPS}}, None, size_bytes=0))


def test_matches_what_the_views_show_case_insensitively() -> None:
    s = _search()
    assert s.matches("web_search") == [0, 2, 3]  # tool name, a non-object step, a thought
    assert s.matches("needle in a long") == [1]  # deep in a long tool result; whitespace runs match
    assert s.matches("valencia") == [0]  # tool arguments
    assert s.matches('"verdict"') == [3]
    # not the policy input or the token captures
    assert s.matches("secret prompt") == [] and s.matches("completion_token_ids") == []
    assert s.matches("   ") == []


def test_find_goes_forward_and_back_and_wraps() -> None:
    s = _search()
    hit = s.find("web_search", 0, include_start=True)
    assert (hit.index, hit.ordinal, hit.total) == (0, 1, 3)
    assert s.find("web_search", 0).index == 2
    assert s.find("web_search", 3).index == 0  # wraps forward
    assert s.find("web_search", 0, -1).index == 3  # wraps back
    hit = s.find("web_search", 3, -1)
    assert (hit.index, hit.ordinal) == (2, 2)
    miss = s.find("nowhere", 1)
    assert miss.index is None and miss.total == 0 and miss.query == "nowhere"


def test_haystacks_are_built_once() -> None:
    s = _search()
    assert not s.ready
    s.matches("x")
    assert s.ready
    hay = s._hay
    s.matches("y")
    assert s._hay is hay
    assert step_haystack({"tool_args": {"b": [1, {"c": None}]}}) == '{"b":[1,{"c":null}]}'
