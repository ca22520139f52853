"""The bundled driver's hint-constructor call over real loopback HTTP (scripted Starlette endpoint)."""

import pytest

from eviscene_tui.gate.bundled.hints import HintFetchError, build_prompt, fetch_hints, parse_hints

from repair_fixtures import ScriptedHintServer


def test_parse_hints_strict():
    assert parse_hints('{"hints": ["a", "b"]}', limit=3) == ["a", "b"]
    assert parse_hints('{"hints": []}', limit=3) == []
    for bad in ['{"hints": ["a"], "x": 1}', '{"hints": [""]}', '{"hints": "a"}', "[]", "nope", '{"hints": [1]}']:
        with pytest.raises(HintFetchError):
            parse_hints(bad, limit=3)
    with pytest.raises(HintFetchError):
        parse_hints('{"hints": ["a", "b"]}', limit=1)


def test_prompt_has_feedback_and_no_private_context():
    msgs = build_prompt(
        feedback={"locked_hint": "L", "excluded_hints": ["x"]},
        site={"source_step_index": 3, "step_id": "s"},
        public_context={"claim": "c"},
        failure_step={"stage": "unified_react", "thought": "t", "metadata": {"policy_action": {"a": 1}, "policy_token_capture": {"prompt_token_ids": [1]}}},
    )
    assert msgs[0]["role"] == "system" and '"hints"' in msgs[0]["content"]
    user = msgs[1]["content"]
    assert '"locked_hint": "L"' in user and '"claim": "c"' in user and "prompt_token_ids" not in user


async def test_fetch_answers_and_errors():
    with ScriptedHintServer(["not json at all", ["a"]]) as srv:
        bad = await fetch_hints(srv.url, "m", [{"role": "user", "content": "x"}], limit=2)
        assert bad.hints == [] and "did not answer JSON" in (bad.error or "") and bad.text == "not json at all"  # kept for the cache
        reply = await fetch_hints(srv.url, "m", [{"role": "user", "content": "x"}], limit=2)
        assert reply.hints == ["a"] and reply.error is None and reply.usage["prompt_tokens"] == 100
    with pytest.raises(HintFetchError) as err:
        await fetch_hints(srv.url, "m", [], limit=2, timeout=2)
    assert "cannot reach" in str(err.value)
