"""STAND-IN of ``eviscene.orchestrator.llm_backend`` (NOT EviScene).

:class:`APIBackend` makes one **non-streaming** ``POST {base_url}/chat/completions`` per
call (as the real one: ``model``, ``messages``, ``temperature``, ``max_tokens``, ``tools``,
``tool_choice``, ``parallel_tool_calls: false``, ``chat_template_kwargs.enable_thinking``,
and with capture on ``return_token_ids``, ``return_tokens_as_token_ids``, ``logprobs``,
``top_logprobs``); the stdlib client runs in a thread so the event loop goes on.
:class:`ScriptedBackend` answers offline with canned responses of the same shape.
:func:`extract_policy_token_capture` is the capture of psd-run-format §3.3.
"""

from __future__ import annotations

import asyncio
import json
import math
import urllib.request
from dataclasses import dataclass, field
from typing import Any

CAPTURE_SCHEMA = "ifv-policy-token-capture-v1"


@dataclass
class LLMResponse:
    text: str
    prompt_tokens: int
    completion_tokens: int
    raw: dict[str, Any] = field(default_factory=dict)


def _response(raw: dict[str, Any]) -> LLMResponse:
    choice = (raw.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage = raw.get("usage") or {}
    return LLMResponse(text=str(message.get("content") or ""), prompt_tokens=int(usage.get("prompt_tokens") or 0),
                       completion_tokens=int(usage.get("completion_tokens") or 0), raw=raw)


class APIBackend:
    """The policy service (vLLM's OpenAI-compatible API), one request per call, never streamed."""

    def __init__(self, *, base_url: str, model: str, capture_policy_tokens: bool = True, topk: int = 5,
                 temperature: float = 0.7, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.capture_policy_tokens = capture_policy_tokens
        self.topk = topk
        self.temperature = temperature
        self.timeout = timeout

    def request_body(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None, tool_choice: str | None,
                     max_tokens: int | None, generation_config: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature, "max_tokens": max_tokens,
                                "chat_template_kwargs": {"enable_thinking": True}}
        if tools:
            body.update(tools=tools, tool_choice=tool_choice or "auto", parallel_tool_calls=False)
        body.update(generation_config or {})
        if self.capture_policy_tokens:
            body.update(return_token_ids=True, return_tokens_as_token_ids=True, logprobs=True, top_logprobs=self.topk)
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode("utf-8"),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:
            return json.loads(answer.read().decode("utf-8"))

    async def get_response(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                           tool_choice: str | None = None, max_tokens: int | None = None,
                           generation_config: dict[str, Any] | None = None) -> LLMResponse:
        body = self.request_body(messages, tools=tools, tool_choice=tool_choice, max_tokens=max_tokens, generation_config=generation_config)
        return _response(await asyncio.to_thread(self._post, body))


class ScriptedBackend:
    """Offline answers of the API's shape (a tool call while tools are offered, then text),
    with synthetic ids and logprobs: the stand-in runs without a policy server."""

    def __init__(self, *, model: str = "standin-policy", topk: int = 5) -> None:
        self.model = model
        self.topk = topk
        self.calls = 0

    async def get_response(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                           tool_choice: str | None = None, max_tokens: int | None = None,
                           generation_config: dict[str, Any] | None = None) -> LLMResponse:
        self.calls += 1
        prompt = [1 + (len(json.dumps(m, sort_keys=True)) * 31 + i) % 150000 for i, m in enumerate(messages) for _ in range(8)]
        if tools:
            message: dict[str, Any] = {"role": "assistant", "content": None, "reasoning": "The hint says to find the oldest copy first.",
                                       "tool_calls": [{"id": f"call-{self.calls}", "type": "function", "function": {
                                           "name": "reverse_image_search", "arguments": json.dumps({"query": "earliest copy of the photo"})}}]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": "The photo predates the claimed event.", "reasoning": None}
            finish = "stop"
        completion = [100 + (self.calls * 17 + k) % 5000 for k in range(12)]
        logprobs = {"content": [{"token": f"token_id:{t}", "logprob": -0.1 - 0.01 * k,
                                 "top_logprobs": [{"token": f"token_id:{t + j}", "logprob": -0.1 - 0.01 * k - 0.5 * j} for j in range(self.topk)]}
                                for k, t in enumerate(completion)]}
        raw = {"id": f"chatcmpl-standin-{self.calls}", "object": "chat.completion", "model": self.model,
               "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs, "token_ids": completion}],
               "prompt_token_ids": prompt, "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(completion),
                                                     "total_tokens": len(prompt) + len(completion)}}
        return _response(raw)


def _token_id(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith("token_id:") and token[9:].lstrip("-").isdigit():
        return int(token[9:])
    return None


def extract_policy_token_capture(raw: dict[str, Any]) -> dict[str, Any]:
    """Prompt ids from the top-level ``prompt_token_ids``; completion ids from
    ``choices[0].token_ids``, ``message.token_ids`` or ``gen_tokens``; logprobs and the
    top-k (renormalised over the k returned) from ``choices[0].logprobs.content``."""
    choice = (raw.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    prompt = raw.get("prompt_token_ids")
    completion = choice.get("token_ids") or message.get("token_ids") or raw.get("gen_tokens")
    entries = ((choice.get("logprobs") or {}).get("content")) or []
    logprobs = [e.get("logprob") for e in entries if isinstance(e, dict)]
    topk_rows = []
    for e in entries:
        top = [t for t in e.get("top_logprobs") or [] if isinstance(t, dict)]
        total = sum(math.exp(t["logprob"]) for t in top) or 1.0
        topk_rows.append([{"token_id": _token_id(t.get("token")), "probability": math.exp(t["logprob"]) / total} for t in top])
    missing = []
    if not isinstance(prompt, list):
        missing.append("prompt_token_ids")
    if not isinstance(completion, list):
        missing.append("completion_token_ids")
    if not logprobs:
        missing.append("completion_logprobs")
    elif isinstance(completion, list) and len(logprobs) != len(completion):
        missing.append("completion_logprob_length_mismatch")
    topk = len(topk_rows[0]) if topk_rows and topk_rows[0] else 0
    return {"schema_version": CAPTURE_SCHEMA, "status": "incomplete" if missing else "complete",
            "prompt_token_ids": list(prompt) if isinstance(prompt, list) else [],
            "completion_token_ids": list(completion) if isinstance(completion, list) else [],
            "completion_logprobs": logprobs, "completion_topk_by_position": topk_rows if topk else [], "topk": topk, "missing": missing}
