"""The fake vLLM server's endpoints, both personalities, over loopback HTTP."""

from __future__ import annotations

import gc
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from conftest import wait_until_sync

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.testing import TOOLS, png_data_url
from eviscene_tui.scaffold.tiny import decode, encode, special_id

MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Is it real?"}]


@pytest.fixture(params=["v0.11", "nightly"])
def srv(request):
    with FakeVLLMServer(personality=request.param, scenario={"tokens_per_second": None}) as s:
        yield s


def _sse(text: str) -> list:
    out = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


def test_models_version_health_metrics(srv):
    m = httpx.get(srv.v1_url + "/models").json()
    row = m["data"][0]
    assert m["object"] == "list" and row["id"] == "ifv-qwen3.5-9b" and row["root"] == "/models/fake/Qwen3.5-9B"
    assert row["max_model_len"] == 131072 and row["owned_by"] == "vllm" and row["parent"] is None
    v = httpx.get(srv.base_url + "/version").json()["version"]
    assert v.startswith("0.11.2" if srv.config.personality == "v0.11" else "0.17")
    h = httpx.get(srv.base_url + "/health")
    assert h.status_code == 200 and h.content == b""
    text = httpx.get(srv.base_url + "/metrics").text
    assert "vllm:num_requests_running{" in text and "vllm:num_requests_waiting{" in text and "vllm:kv_cache_usage_perc{" in text
    assert ("vllm:gpu_cache_usage_perc" in text) == (srv.config.personality == "v0.11")
    srv.set_scenario(health_status=503)
    assert httpx.get(srv.base_url + "/health").status_code == 503
    assert httpx.get(srv.base_url + "/nope").json() == {"detail": "Not Found"}


def test_chat_stream_shape_and_token_consistency(srv):
    nightly = srv.config.personality == "nightly"
    fam = srv.config.token_family
    r = httpx.post(srv.v1_url + "/chat/completions", json={"model": srv.config.alias, "messages": MSGS, "stream": True, "tools": TOOLS,
                                                          "return_token_ids": True, "stream_options": {"include_usage": True}})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _sse(r.text)
    assert events[-1] == "[DONE]"
    role, usage = events[0], events[-2]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""} and role["prompt_token_ids"]
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == len(role["prompt_token_ids"])
    chunks = events[1:-2]
    assert len({c["id"] for c in events[:-1]}) == 1 and events[0]["id"].startswith("chatcmpl-")
    key = "reasoning" if nightly else "reasoning_content"
    other = "reasoning_content" if nightly else "reasoning"
    reasoning = "".join(c["choices"][0]["delta"].get(key, "") for c in chunks)
    assert not any(other in c["choices"][0]["delta"] for c in chunks)
    assert reasoning == srv.config.scenario["reasoning"]
    assert encode(reasoning, fam) == [i for c in chunks for i in c["choices"][0]["token_ids"]][(0 if nightly else 1): len(encode(reasoning, fam)) + (0 if nightly else 1)]
    last = chunks[-1]["choices"][0]
    assert last["finish_reason"] == "tool_calls" and "stop_reason" in last and last["token_ids"][-1] == special_id("<|im_end|>", fam)
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    streamed = sum(len(c["choices"][0]["token_ids"]) for c in chunks)
    if nightly:
        assert streamed == usage["usage"]["completion_tokens"]
    else:
        assert streamed < usage["usage"]["completion_tokens"]  # bug #27482 imitation


def test_prompt_ids_include_image_pads_and_template(srv):
    fam = srv.config.token_family
    url, _ = png_data_url(100, 70)
    msgs = [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": url}}]}]
    r = httpx.post(srv.v1_url + "/chat/completions", json={"model": srv.config.alias, "messages": msgs, "stream": True, "return_token_ids": True})
    ids = _sse(r.text)[0]["prompt_token_ids"]
    side = 32 if fam == "qwen3_5" else 28
    import math

    assert ids.count(special_id("<|image_pad|>", fam)) == math.ceil(100 / side) * math.ceil(70 / side)
    assert ids[0] == special_id("<|im_start|>", fam)
    assert "<|im_start|>assistant\n" in decode(ids, fam)


def test_non_stream_and_completions(srv):
    nightly = srv.config.personality == "nightly"
    r = httpx.post(srv.v1_url + "/chat/completions", json={"model": srv.config.alias, "messages": MSGS, "return_token_ids": True}).json()
    msg = r["choices"][0]["message"]
    assert r["object"] == "chat.completion" and msg["content"] == srv.config.scenario["content"]
    assert msg["reasoning" if nightly else "reasoning_content"] == srv.config.scenario["reasoning"]
    assert r["prompt_token_ids"] and r["choices"][0]["token_ids"]
    bad = httpx.post(srv.v1_url + "/chat/completions", json={"model": srv.config.alias, "messages": MSGS, "stream_options": {"include_usage": True}})
    assert bad.status_code == 400 and "Stream options" in bad.json()["error"]["message"]
    c = httpx.post(srv.v1_url + "/completions", json={"model": srv.config.alias, "prompt": [1, 2, 3], "max_tokens": 5, "return_token_ids": True}).json()
    assert c["choices"][0]["prompt_token_ids"] == [1, 2, 3] and len(c["choices"][0]["token_ids"]) == 5 and c["choices"][0]["finish_reason"] == "length"
    s = httpx.post(srv.v1_url + "/completions", json={"model": srv.config.alias, "prompt": "hi", "max_tokens": 4, "stream": True, "return_token_ids": True})
    ev = _sse(s.text)
    assert ev[0]["object"] == "text_completion" and ev[0]["usage"] is None and ev[0]["choices"][0]["prompt_token_ids"] == encode("hi", srv.config.token_family)
    assert ev[1]["choices"][0]["prompt_token_ids"] is None and ev[-1] == "[DONE]"


def test_tokenize_detokenize_tokenizer_info(srv):
    fam = srv.config.token_family
    t = httpx.post(srv.base_url + "/tokenize", json={"prompt": "the image", "return_token_strs": True}).json()
    assert t["tokens"] == encode("the image", fam) and t["count"] == len(t["tokens"]) and t["max_model_len"] == 131072
    assert "".join(t["token_strs"]) == "the image"
    d = httpx.post(srv.base_url + "/detokenize", json={"tokens": t["tokens"]}).json()
    assert d == {"prompt": "the image"}
    url, _ = png_data_url(64, 64)
    chat = httpx.post(srv.base_url + "/tokenize", json={"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]}).json()
    assert chat["tokens"].count(special_id("<|image_pad|>", fam)) == 1  # /tokenize did not expand images (< 0.16)
    info = httpx.get(srv.base_url + "/tokenizer_info").json()
    assert info["eos_token"] == "<|im_end|>" and "<|image_pad|>" in info["additional_special_tokens"]
    assert str(special_id("<|image_pad|>", fam)) in info["added_tokens_decoder"]


def test_api_key_guards_only_v1():
    with FakeVLLMServer(api_key="k1") as s:
        assert httpx.get(s.v1_url + "/models").status_code == 401
        assert httpx.get(s.v1_url + "/models").json() == {"error": "Unauthorized"}
        assert httpx.get(s.v1_url + "/models", headers={"Authorization": "Bearer k1"}).status_code == 200
        assert httpx.get(s.base_url + "/health").status_code == 200
        assert httpx.get(s.base_url + "/metrics").status_code == 200
        assert httpx.post(s.base_url + "/tokenize", json={"prompt": "a"}).status_code == 200


def test_unknown_model_and_flat_error():
    with FakeVLLMServer(scenario={"error_shape": "flat"}) as s:
        r = httpx.post(s.v1_url + "/chat/completions", json={"model": "zzz", "messages": MSGS})
        assert r.status_code == 404 and r.json()["object"] == "error" and r.json()["param"] == "model"


def test_fast_stream_5000_tokens_per_second():
    with FakeVLLMServer(scenario={"tokens_per_second": 5000, "content_tokens": 5000, "reasoning": "", "tool_calls": []}) as s:
        r = httpx.post(s.v1_url + "/chat/completions", json={"model": s.config.alias, "messages": MSGS, "stream": True, "return_token_ids": True}, timeout=60)
        n = sum(len(e["choices"][0].get("token_ids") or []) for e in _sse(r.text)[1:-1])
    assert n == 5001  # 5000 content ids + <|im_end|> (the pacing is not asserted: a loaded machine decides that)


def test_fake_vllm_cli_subprocess(tmp_path):
    scen = tmp_path / "s.json"
    scen.write_text('{"content": "hello", "reasoning": "", "tool_calls": [], "tokens_per_second": null}')
    prof = tmp_path / "p.json"
    prof.write_text('{"profile_id": "alias-x", "engine_model_path": "/w", "context_length": 4096}')
    proc = subprocess.Popen([sys.executable, "-m", "eviscene_tui", "fake-vllm", "--scenario", str(scen), "--profile", str(prof),
                             "--personality", "v0.11", "--api-key", "cli-key"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])
    try:
        line = proc.stdout.readline()
        assert "cli-key" not in line
        url = line.split(" on ")[1].split()[0]
        rows = httpx.get(url + "/models", headers={"Authorization": "Bearer cli-key"}).json()["data"]
        assert rows[0]["id"] == "alias-x" and rows[0]["root"] == "/w" and rows[0]["max_model_len"] == 4096
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run([sys.executable, "-m", "eviscene_tui", "fake-vllm", "--scenario", str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert bad.returncode == 2



def test_a_client_that_stops_reading_then_goes_away_is_recorded_without_a_garbage_collection() -> None:
    """A client that stops reading (the server's writes back up) and then goes away: the
    recorder learns of the disconnect with the garbage collector off, so it never depends
    on a collection finalising the stream's generator (the response closes it). 60,000
    ids are ~9 MB of events, more than the loopback's buffers hold (and quick to script:
    400,000 took longer than the read's timeout on a busy machine)."""
    with FakeVLLMServer(scenario={"tokens_per_second": None, "content_tokens": 60_000, "reasoning": "", "tool_calls": []}) as s:
        body = orjson.dumps({"model": s.config.alias, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        host, port = s.base_url.removeprefix("http://").split(":")
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the server's writes back up at once
            conn.settimeout(30)
            conn.connect((host, int(port)))
            conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            got = b""
            while b"delta" not in got:  # the stream is running
                got += conn.recv(1024)
            wait_until_sync(lambda: s.recorder.running == 1, what="the stream running")
            conn.close()  # without reading the rest
            wait_until_sync(lambda: s.recorder.disconnects, 30, what="the server recording the client gone")
        finally:
            if was_enabled:
                gc.enable()
        assert not s.recorder.completed
