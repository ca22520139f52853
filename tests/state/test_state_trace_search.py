"""Searching a trace's steps (Textual-free)."""

from __future__ import annotations

from eviscene_tui.artifacts.trace import SourceTrace
from eviscene_tui.state.trace_search import TraceSearch, step_matches

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


def test_longer_queries_rescan_only_earlier_matches_and_cancel_stops_a_scan() -> None:
    s = _search()
    assert s.matches("web") == [0, 2, 3]
    seen: list[int] = []
    real = s.trace.raw_steps

    class Spy(list):
        def __getitem__(self, i):
            seen.append(i)
            return list.__getitem__(self, i)

    s.trace = SourceTrace({"state": {"all_steps": Spy(real)}})  # the same steps, each read seen
    assert s.matches("web_search") == [0, 2, 3]
    assert sorted(seen) == [0, 2, 3]  # step 1 was not looked at again
    assert s.matches("valencia", cancelled=lambda: True) is None
    assert s.find("valencia", 0, cancelled=lambda: True) is None
    assert step_matches({"tool_args": {"b": [1, {"c": None}]}}, '"C":NULL')
    assert not step_matches({"tool_args": {"b": 1}}, "")



def test_a_scan_in_background_work_gives_way_to_the_operator(monkeypatch) -> None:
    """The claims' searches run as background work: a scan of the steps waits while the
    operator's foreground work (a capture opened with k) is held (here released by the
    scan's first wait), and outside background work it never waits."""
    from eviscene_tui import pace

    steps = STEPS * 40  # more than one stretch of 32 steps between two looks at the clock
    s = TraceSearch(SourceTrace({"state": {"all_steps": steps}}, None, size_bytes=0))
    hold = pace.ForegroundHold()
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        hold.release()

    monkeypatch.setattr(pace.time, "sleep", sleep)
    try:
        with pace.background():
            found = s.matches("valencia")
    finally:
        hold.release()
    assert waits == [pace.FOREGROUND_POLL]
    assert found == [i for i in range(len(steps)) if i % len(STEPS) == 0]
    hold = pace.ForegroundHold()
    try:
        assert s.matches("flood") == found and waits == [pace.FOREGROUND_POLL]  # not background work: no wait
    finally:
        hold.release()
