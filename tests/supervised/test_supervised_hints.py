"""The hint-constructor call over real loopback HTTP (scripted Starlette endpoint)."""

import pytest

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.jsonio import read_bound
from eviscene_tui.supervised import HintFetchError, SearchError, SearchSettings, SupervisedSearch, inputs_from_case, parse_hints
from eviscene_tui.supervised.hints import build_prompt, fetch_hints

from supervised_fixtures import ScriptedHintServer, write_driver_case


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


async def test_fetch_errors_and_cache(tmp_path):
    with ScriptedHintServer(["not json at all", ["a"]]) as srv:
        out = tmp_path / "out"
        inputs = inputs_from_case(load_case(write_driver_case(out)), label="c")
        s = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op", hint_url=srv.url, hint_model="m"))
        s.begin_round()
        s.accept_site()
        with pytest.raises(SearchError) as err:
            await s.fetch_proposals()
        assert "did not answer JSON" in str(err.value)
        cached = read_bound(s.draft.dir / "proposer-response.json")
        assert cached.ok and cached.payload["text"] == "not json at all" and cached.payload["prompt_tokens"] == 100
        assert cached.identity["model"] == "m"
        with pytest.raises(SearchError):  # never re-sampled in the same round
            await s.fetch_proposals()
        s.close()
        reply = await fetch_hints(srv.url, "m", [{"role": "user", "content": "x"}], limit=2)
        assert reply.hints == ["a"] and reply.error is None
    with pytest.raises(HintFetchError) as err:
        await fetch_hints(srv.url, "m", [], limit=2, timeout=2)
    assert "cannot reach" in str(err.value)


async def test_no_hint_constructor_configured(tmp_path):
    inputs = inputs_from_case(load_case(write_driver_case(tmp_path / "out")), label="c")
    s = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op"))
    s.begin_round()
    s.accept_site()
    with pytest.raises(SearchError) as err:
        await s.fetch_proposals()
    assert "type a hint" in str(err.value)
    s.close()
