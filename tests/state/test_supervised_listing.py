"""The pick-a-step listing of a supervised search: the same rows from an indexed trace
(read step by step without the token captures' lists) as from the whole document."""

from __future__ import annotations

from pathlib import Path

import orjson

from eviscene_tui.artifacts.trace import load_trace
from eviscene_tui.state.supervised_session import source_trace_listing, trace_listing


def _doc(top: bool = False) -> dict:
    steps = []
    for i in range(30):
        step = {"round": i, "stage": "unified_react" if i % 3 else "", "stage_name": "psd_teacher_react", "action_type": "tool_call",
                "tool_name": None if i % 4 == 0 else "web_search", "thought": "" if i % 5 == 0 else f"think {i} ]}}",
                "output": f"out {i}", "metadata": {}}
        if i % 2:
            step["metadata"] = {"policy_input": {"a": i}, "policy_action": {"type": "tool_call"},
                                "policy_token_capture": {"status": "complete", "prompt_token_ids": list(range(200)),
                                                         "completion_token_ids": [1, 2], "completion_logprobs": [-0.5, -0.25],
                                                         "completion_topk_by_position": [[{"token_id": 1, "probability": 0.5}], []],
                                                         "topk": 1, "missing": []}}
        steps.append(step)
    if top:
        return {"image_id": "ep", "all_steps": steps}
    return {"image_id": "ep", "state": {"image_id": "ep", "all_steps": steps}}


def test_indexed_and_whole_traces_list_the_same_rows(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    doc = _doc()
    path.write_bytes(orjson.dumps(doc))
    expected = trace_listing(doc)
    assert [policy for _, policy, _ in expected][:4] == [False, True, False, True]
    lazy, _ = load_trace(path, lazy=True)
    whole, _ = load_trace(path, lazy=False)
    assert lazy is not None and lazy.lazy and whole is not None and not whole.lazy
    assert source_trace_listing(lazy) == source_trace_listing(whole) == expected
    assert source_trace_listing(lazy, limit=5) == expected[:5]
    assert 29 not in lazy.raw_steps._cache  # listed without keeping the parsed steps


def test_steps_outside_state_are_not_listed_either_way(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    doc = _doc(top=True)
    path.write_bytes(orjson.dumps(doc))
    lazy, _ = load_trace(path, lazy=True)
    assert lazy is not None and lazy.step_count == 30
    assert source_trace_listing(lazy) == trace_listing(doc) == []
