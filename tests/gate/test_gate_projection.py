"""The driver's ``trace_steps`` projection (psd-run-format §4.1), as the gate protocol spells it once."""

from eviscene_tui.gate.protocol import TRACE_STEP_KEYS, trace_step, trace_steps


def _episode():
    return {
        "state": {
            "all_steps": [
                {"stage": "unified_react", "action_type": "tool_call", "tool_name": "search", "tool_args": {"q": "x"},
                 "tool_result": "r", "thought": "t", "output": None, "tokens": {"prompt": 9},
                 "metadata": {"policy_action": {"type": "tool_call"}, "function_call_id": "call_1",
                              "policy_token_capture": {"prompt_token_ids": [1, 2]}}},
                {"stage_name": "psd_teacher_repair", "action_type": "output", "output": "{}",
                 "metadata": {"psd_suffix_step": True, "function_call_id": None}},
                "not a step",
            ]
        }
    }


def test_projection_has_the_ten_keys_in_order_and_no_token_capture():
    rows = trace_steps(_episode(), suffix_only=False)
    assert [list(r) for r in rows] == [list(TRACE_STEP_KEYS)] * 3
    first = rows[0]
    assert first["index"] == 0 and first["stage"] == "unified_react"
    assert first["policy_action"] == {"type": "tool_call"} and first["function_call_id"] == "call_1"
    assert "tokens" not in first and "metadata" not in first
    assert rows[1]["stage"] == "psd_teacher_repair"  # teacher steps spell it stage_name
    assert rows[2] == trace_step(None, 2) == dict.fromkeys(TRACE_STEP_KEYS) | {"index": 2}


def test_suffix_only_keeps_teacher_steps_with_their_episode_index():
    rows = trace_steps(_episode(), suffix_only=True)
    assert [r["index"] for r in rows] == [1]


def test_malformed_episodes_give_no_rows():
    for bad in (None, [], {"state": None}, {"state": {"all_steps": {"0": {}}}}):
        assert trace_steps(bad, suffix_only=False) == []
