"""Attestation per field, unattested sessions, replica choice, status polling."""

from __future__ import annotations

import pytest

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import collect, target_for
from eviscene_tui.policy.client import PolicyClient, parse_metrics, validate_live_model
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import ProfileError, load_target_from_profile, target_from_profile_dict


@pytest.fixture
def srv():
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as s:
        yield s


@pytest.mark.parametrize(
    "scenario,field",
    [({"wrong_root": "/models/other"}, "root"), ({"served_max_model_len": 32768}, "max_model_len"), ({"duplicate_alias": True}, "id")],
)
async def test_mismatch_names_the_field(srv, scenario, field):
    srv.set_scenario(**scenario)
    acc = await collect(target_for(srv))
    assert acc.status == "failed" and acc.error.kind == "attestation"
    assert acc.attestation.status == "refused" and acc.attestation.field == field
    assert field.replace("id", "alias") in acc.error.message or field in acc.error.message
    assert not any(r["path"] == "/v1/chat/completions" for r in srv.recorder.requests)  # refused: nothing sent


async def test_missing_alias(srv):
    acc = await collect(target_for(srv, profile_id="ifv-other"))
    assert acc.attestation.field == "id" and "missing" in acc.attestation.message


def test_root_compared_resolved(tmp_path):
    real = tmp_path / "weights"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    tgt = target_from_profile_dict({"schema_version": "ifv-qwen-serving-profile-v1", "profile_id": "a", "model_path": "/m",
                                    "engine_model_path": str(link), "context_length": 8, "base_url": "http://x/v1"})
    ok = validate_live_model(tgt, {"data": [{"id": "a", "root": str(real) + "/", "max_model_len": 8}]}, "http://x/v1")
    assert ok.status == "attested"
    # engine_model_path wins over model_path
    bad = validate_live_model(tgt, {"data": [{"id": "a", "root": "/m", "max_model_len": 8}]}, "http://x/v1")
    assert bad.field == "root"


def test_profile_loading_errors(tmp_path):
    with pytest.raises(ProfileError):
        load_target_from_profile(tmp_path / "missing.json")
    p = tmp_path / "p.json"
    p.write_text('{"schema_version":"nope"}')
    with pytest.raises(ProfileError):
        load_target_from_profile(p)
    p.write_text('{"schema_version":"ifv-qwen-serving-profile-v1","profile_id":"a","model_path":"/m","context_length":8,"base_url":"http://h:1/v1/"}')
    t = load_target_from_profile(p)
    assert t.base_urls == ("http://h:1/v1",) and t.attested and t.expected_root == "/m"


async def test_replica_with_fewest_waiting_is_chosen():
    with FakeVLLMServer(scenario={"tokens_per_second": None, "metrics_waiting": 5}) as busy, \
         FakeVLLMServer(scenario={"tokens_per_second": None, "metrics_waiting": 1}) as idle, \
         FakeVLLMServer(scenario={"tokens_per_second": None, "metrics_waiting": 0, "wrong_root": "/elsewhere"}) as wrong:
        prof = busy.profile_dict(base_url=None, base_urls=[busy.v1_url, idle.v1_url, wrong.v1_url])
        tgt = target_from_profile_dict(prof)
        acc = await collect(tgt)
        assert acc.status == "complete" and acc.base_url == idle.v1_url
        assert idle.recorder.last_body() is not None and busy.recorder.last_body() is None and wrong.recorder.last_body() is None
        busy.set_scenario(metrics_waiting=0)
        acc = await collect(tgt)
        assert acc.base_url == busy.v1_url


async def test_status_poll(srv):
    async with PolicyClient(target_for(srv), PolicyConfig()) as c:
        st = await c.status(srv.v1_url)
    assert st.reachable and st.healthy and st.version == "0.17.1rc1.dev42+g0123abcd"
    assert st.alias == "ifv-qwen3.5-9b" and st.max_model_len == 131072 and st.root == "/models/fake/Qwen3.5-9B"
    assert st.running == 0 and st.waiting == 0 and st.kv_cache is not None


def test_parse_metrics_old_gauge_name():
    m = parse_metrics('# x\nvllm:gpu_cache_usage_perc{model_name="a"} 0.25\nvllm:num_requests_waiting{engine="0"} 2.0\nvllm:num_requests_waiting{engine="1"} 1.0\n')
    assert m["kv_cache"] == 0.25 and m["waiting"] == 3.0


def test_config_file_and_env(tmp_path, monkeypatch):
    from eviscene_tui.policy.config import policy_config
    from eviscene_tui.settings import load_settings

    cfg = tmp_path / "c.toml"
    cfg.write_text('[policy]\ntemperature = 0.3\nread_timeout = 900\nhint_placement = "system_suffix"\napi_key = "file-key"\nlogprobs = true\ntop_logprobs = 4\n')
    monkeypatch.delenv("EVISCENE_POLICY_API_KEY", raising=False)
    c = policy_config(load_settings(cfg).policy)
    assert (c.temperature, c.read_timeout, c.hint_placement, c.api_key, c.logprobs, c.top_logprobs) == (0.3, 900.0, "system_suffix", "file-key", True, 4)
    assert "file-key" not in repr(c)
    monkeypatch.setenv("EVISCENE_POLICY_API_KEY", "env-key")
    assert policy_config(load_settings(cfg).policy).api_key == "env-key"
    cfg.write_text('[policy]\nhint_placement = "nowhere"\n')
    bad = load_settings(cfg)
    assert policy_config(bad.policy).hint_placement == "as_run" and "hint_placement" in bad.problems[0]


async def test_thinking_default_follows_profile():
    from eviscene_tui.scaffold.fake_vllm.server import DEFAULT_PROFILE

    with FakeVLLMServer(scenario={"tokens_per_second": None}, profile={**DEFAULT_PROFILE, "thinking_enabled": False}) as s:
        acc = await collect(target_for(s))
        assert acc.reasoning_text() == "" and acc.content_text() and acc.accounting()["match"] is True


async def test_tokenizer_endpoints_through_the_client(srv):
    from eviscene_tui.policy.client import PolicyHTTPError
    from eviscene_tui.scaffold.tiny import encode

    async with PolicyClient(target_for(srv), PolicyConfig()) as c:
        ids = await c.tokenize(prompt="the image")
        assert ids == encode("the image")
        assert await c.detokenize(ids) == "the image"
        info = await c.tokenizer_info()
        assert info["eos_token"] == "<|im_end|>"
        chat = await c.tokenize(messages=[{"role": "user", "content": "hi"}])
        assert chat[0] == 248045
    async with PolicyClient(target_for(srv), PolicyConfig()) as c:
        srv.stop()
        with pytest.raises(PolicyHTTPError, match="cannot connect"):
            await c.detokenize([1, 2])
