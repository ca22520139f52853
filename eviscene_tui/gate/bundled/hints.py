"""The hint-constructor call: an OpenAI-compatible chat endpoint asked for JSON
``{"hints": [...]}`` (psd-run-format §2.6).

- :func:`build_prompt` returns the exact messages sent (the UI shows them);
- :func:`fetch_hints` POSTs ``{base_url}/chat/completions`` (non-streaming,
  ``response_format: {"type": "json_object"}``, temperature 0, at most 2048 output
  tokens, thinking disabled), with ``httpx`` and ``trust_env=False``. The API key
  comes from ``EVISCENE_HINT_API_KEY``; it is never shown or written.
- :func:`parse_hints` is strict like the newest ``parse_proposer_response``:
  exactly the key ``hints``, a list of non-empty strings, at most ``limit``.
  An empty list is an explicit "stop" vote.

Privacy: the prompt carries the public context (with the round's
``repair_search`` feedback) and the failure step as the policy saw it; never the
private context, gold, or judge explanations.

Deviation from the driver (documented): feedback mode asks the proposer for one
hint; the supervised search asks for up to ``count`` (default 3) so the operator
can choose; only the approved one reaches a continuation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import httpx
import orjson

from eviscene_tui.artifacts.jsonio import canonical_sha256, sha256_bytes

API_KEY_ENV = "EVISCENE_HINT_API_KEY"
PROMPT_VERSION = "eviscene-tui-supervised-proposer-v1"
MAX_OUTPUT_TOKENS = 2048

SYSTEM_PROMPT = (
    "You write repair hints for a multimodal fact-checking agent that failed a task. "
    "A hint is procedural advice for the failing step: what to check or how to search, "
    "never the answer. Never state or imply the final verdict (real/fake, authentic/fabricated). "
    "Never quote private reference material. If a hint was verified before (locked_hint), keep it "
    "verbatim and add new advice after a newline. Do not repeat hints listed in excluded_hints. "
    'Reply with a JSON object with exactly one key: {"hints": ["...", ...]}. '
    "An empty list means no further grounded hint exists."
)


class HintFetchError(RuntimeError):
    pass


@dataclass
class ProposerReply:
    hints: list[str]
    text: str
    usage: dict[str, Any] = field(default_factory=dict)
    raw_sha256: str = ""
    error: str | None = None


def _step_view(step: Mapping[str, Any]) -> dict[str, Any]:
    meta = _v if isinstance(_v := step.get("metadata"), dict) else {}
    return {
        "stage": step.get("stage") or step.get("stage_name"),
        "action_type": step.get("action_type"),
        "tool_name": step.get("tool_name"),
        "tool_args": step.get("tool_args"),
        "thought": step.get("thought"),
        "output": step.get("output"),
        "policy_action": meta.get("policy_action"),
    }


def build_prompt(
    *,
    feedback: Mapping[str, Any],
    site: Mapping[str, Any],
    public_context: Any,
    failure_step: Mapping[str, Any] | None,
    level: int = 1,
    count: int = 3,
) -> list[dict[str, Any]]:
    packet = {
        "prompt_version": PROMPT_VERSION,
        "hint_level": level,
        "max_hints": count,
        "failure_site": {
            "source_step_index": site.get("source_step_index"),
            "step_id": site.get("step_id"),
            "stage": site.get("stage"),
            "localization_kind": site.get("localization_kind"),
            "semantic_category": site.get("semantic_category"),
        },
        "failure_step": _step_view(failure_step or {}),
        "trace_context": {**(public_context if isinstance(public_context, dict) else {}), "repair_search": dict(feedback)},
    }
    user = (
        f"Propose up to {count} hint(s) of level {level} for the failing step below. "
        'Answer with JSON {"hints": [...]} only.\n\n'
        + orjson.dumps(packet, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def request_body(messages: list[dict[str, Any]], model: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": messages,
        "response_format": {"type": "json_object"},
        "temperature": 0.0,
        "max_tokens": MAX_OUTPUT_TOKENS,
        "stream": False,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def prompt_identity(messages: list[dict[str, Any]], model: str, base_url: str) -> dict[str, Any]:
    return {"version": PROMPT_VERSION, "model": model, "base_url": base_url, "prompt_sha256": canonical_sha256(messages)}


def parse_hints(text: str, *, limit: int) -> list[str]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise HintFetchError(f"the hint constructor did not answer JSON: {exc}") from None
    if not isinstance(value, dict) or set(value) != {"hints"}:
        raise HintFetchError('the hint constructor must answer an object with exactly the key "hints"')
    hints = value["hints"]
    if not isinstance(hints, list) or not all(isinstance(h, str) and h.strip() for h in hints):
        raise HintFetchError('"hints" must be a list of non-empty strings')
    if len(hints) > limit:
        raise HintFetchError(f"the hint constructor returned {len(hints)} hints; at most {limit} were asked for")
    return list(hints)


async def fetch_hints(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    *,
    limit: int,
    timeout: float = 120.0,
    api_key: str | None = None,
) -> ProposerReply:
    """POST the request; returns the reply (``error`` set when parsing failed, so the
    raw text can still be cached); raises :class:`HintFetchError` for transport/HTTP faults."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = base_url.rstrip("/") + "/chat/completions"
    body = orjson.dumps(request_body(messages, model))
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(timeout, connect=10.0)) as client:
            resp = await client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        msg = str(exc) or type(exc).__name__
        if key:
            msg = msg.replace(key, "***")
        raise HintFetchError(f"cannot reach the hint constructor at {url}: {type(exc).__name__}: {msg}") from None
    if resp.status_code != 200:
        snippet = resp.text[:300]
        if key:
            snippet = snippet.replace(key, "***")
        raise HintFetchError(f"the hint constructor answered HTTP {resp.status_code}: {snippet}")
    try:
        doc = orjson.loads(resp.content)
        text = doc["choices"][0]["message"]["content"] or ""
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        raise HintFetchError("the hint constructor's reply is not an OpenAI chat completion") from None
    usage = _v if isinstance(_v := doc.get("usage"), dict) else {}
    reply = ProposerReply(hints=[], text=str(text), usage=dict(usage), raw_sha256=sha256_bytes(resp.content))
    try:
        reply.hints = parse_hints(reply.text, limit=limit)
    except HintFetchError as exc:
        reply.error = str(exc)
    return reply
