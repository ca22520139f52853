"""Opt-in: stream from a real vLLM server (EVISCENE_REAL_VLLM_URL, EVISCENE_REAL_VLLM_MODEL)."""

from __future__ import annotations

import os

import pytest

from eviscene_tui.scaffold.fake_vllm.testing import collect, simple_request
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import unattested_target

URL = os.environ.get("EVISCENE_REAL_VLLM_URL")

pytestmark = [pytest.mark.real_vllm, pytest.mark.skipif(not URL, reason="EVISCENE_REAL_VLLM_URL not set")]


async def test_real_vllm_stream_accounting():
    import httpx

    model = os.environ.get("EVISCENE_REAL_VLLM_MODEL")
    if not model:
        model = httpx.get(URL.rstrip("/") + "/models", timeout=10).json()["data"][0]["id"]
    acc = await collect(unattested_target(URL, model), simple_request(tools=False), PolicyConfig(max_tokens=32, read_timeout=300))
    assert acc.status == "complete", acc.error
    assert acc.prompt_token_ids and acc.completion_token_ids
    acct = acc.accounting()
    assert acct["prompt_match"] is True
    print("real vLLM accounting:", acct)
