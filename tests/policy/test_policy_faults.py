"""Every fault over real loopback HTTP: each yields a specific StreamError, a
recorded failed attempt, and never an exception."""

from __future__ import annotations

import socket

import orjson
import pytest

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import collect, simple_request, target_for, unattested_for
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import unattested_target
from eviscene_tui.policy.session import run_continuation
from eviscene_tui.storage import WorkDir
from policy_helpers import body_path  # noqa: F401 - autouse: every test runs on both body paths


@pytest.fixture
def srv():
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as s:
        yield s


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def test_connection_refused_recorded(tmp_path):
    tgt = unattested_target(f"http://127.0.0.1:{_closed_port()}/v1", "m")
    async with PolicyClient(tgt, PolicyConfig(connect_timeout=2)) as c:
        out = await run_continuation(c, simple_request(), work=WorkDir(tmp_path), case_ref={"case_id": "c"})
    assert out.status == "failed" and out.accumulator.error.kind == "connect"
    assert "cannot connect" in out.accumulator.error.message
    rec = orjson.loads(out.path.read_bytes())
    assert rec["status"] == "failed" and rec["error"]["kind"] == "connect"


async def test_attested_connection_refused_is_attestation_failure():
    from eviscene_tui.policy.profile import target_from_profile_dict

    tgt = target_from_profile_dict({"schema_version": "ifv-qwen-serving-profile-v1", "profile_id": "m", "model_path": "/x",
                                    "context_length": 10, "base_url": f"http://127.0.0.1:{_closed_port()}/v1"})
    acc = await collect(tgt)
    assert acc.error.kind == "attestation" and acc.attestation.field == "connection"


@pytest.mark.parametrize("status,needle", [(400, "maximum context length"), (404, "does not exist"), (500, "EngineCore"), (501, "EngineCore")])
async def test_http_errors(srv, status, needle):
    srv.set_scenario(http_error=status)
    acc = await collect(target_for(srv))
    assert acc.status == "failed"
    assert acc.error.kind == "http" and acc.error.status == status and needle in acc.error.message


async def test_real_context_too_long(srv):
    srv.config.profile["context_length"] = 60  # the prompt alone is longer
    acc = await collect(target_for(srv))
    assert acc.error.status == 400 and "maximum context length is 60" in acc.error.message


async def test_unknown_model_404(srv):
    acc = await collect(unattested_for(srv, model="no-such-model"))
    assert acc.error.status == 404 and "`no-such-model` does not exist" in acc.error.message


async def test_flat_error_shape(srv):
    srv.set_scenario(http_error=400, error_shape="flat")
    acc = await collect(target_for(srv))
    assert acc.error.status == 400 and "maximum context length" in acc.error.message


async def test_error_event_mid_stream(srv):
    srv.set_scenario(error_after_tokens=5, error_message="CUDA out of memory (fake)")
    acc = await collect(target_for(srv))
    assert acc.status == "failed" and acc.error.kind == "sse_error" and "out of memory" in acc.error.message
    assert acc.error.status == 500 and len(acc.completion_token_ids) == 5


async def test_disconnect_mid_stream(srv):
    srv.set_scenario(disconnect_after_tokens=10)
    acc = await collect(target_for(srv))
    assert acc.status == "failed" and acc.error.kind == "disconnect"
    assert len(acc.completion_token_ids) == 10


async def test_stall_times_out(srv):
    srv.set_scenario(stall_after_tokens=3, stall_seconds=30)
    acc = await collect(target_for(srv), config=PolicyConfig(stall_timeout=0.4))
    assert acc.status == "failed" and acc.error.kind == "timeout" and "stalled" in acc.error.message


async def test_read_timeout_before_first_token(srv):
    srv.set_scenario(delay_first_token=3)
    acc = await collect(target_for(srv), config=PolicyConfig(read_timeout=0.3))
    assert acc.error.kind == "timeout"


async def test_malformed_sse_line(srv):
    srv.set_scenario(malformed_after_tokens=4)
    acc = await collect(target_for(srv))
    assert acc.status == "failed" and acc.error.kind == "malformed" and "malformed SSE data" in acc.error.message


async def test_401_and_key_never_leaks(tmp_path, capsys):
    key = "sk-secret-abc123XYZ"
    with FakeVLLMServer(api_key=key, scenario={"tokens_per_second": None}) as s:
        # no key: attestation refused with the 401 message
        acc = await collect(target_for(s))
        assert acc.error.kind == "attestation" and "401" in acc.attestation.message
        acc = await collect(unattested_for(s))
        assert acc.error.status == 401 and "Unauthorized" in acc.error.message
        # with the key: complete, and the key is nowhere in the record
        async with PolicyClient(target_for(s), PolicyConfig(api_key=key)) as c:
            out = await run_continuation(c, simple_request(), work=WorkDir(tmp_path), case_ref={"case_id": "k"})
            assert repr(c.config).find(key) == -1
        assert out.status == "complete"
        # health/metrics are not authenticated
        import httpx

        assert httpx.get(s.base_url + "/health").status_code == 200
        # wrong key: error message must not contain the key we sent
        async with PolicyClient(unattested_for(s), PolicyConfig(api_key=key + "-wrong")) as c:
            bad = await run_continuation(c, simple_request(), work=WorkDir(tmp_path), case_ref={"case_id": "k"})
        assert bad.status == "failed" and key not in bad.accumulator.error.message
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert key.encode() not in f.read_bytes()
    captured = capsys.readouterr()
    assert key not in captured.out and key not in captured.err


async def test_v011_personality_faults():
    with FakeVLLMServer(personality="v0.11", scenario={"tokens_per_second": None}) as s:
        s.set_scenario(error_after_tokens=3, error_code=400, error_type="BadRequestError", error_message="bad grammar")
        acc = await collect(target_for(s))
        assert acc.error.kind == "sse_error" and acc.error.status == 400 and acc.error.error_type == "BadRequestError"
        s.set_scenario(error_after_tokens=None, http_error=400)
        acc = await collect(target_for(s))
        assert acc.error.kind == "http" and "maximum context length" in acc.error.message
        s.set_scenario(http_error=None, disconnect_after_tokens=2)
        acc = await collect(target_for(s))
        assert acc.error.kind == "disconnect"
