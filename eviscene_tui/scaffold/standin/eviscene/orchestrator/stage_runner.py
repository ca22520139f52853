"""STAND-IN of ``eviscene.orchestrator.stage_runner`` (NOT EviScene).

A :class:`StageRunner` runs one stage of an episode (``psd_teacher_repair``,
``psd_teacher_judgment``, ``psd_student_continuation``, …): every policy call of the
stage goes through :meth:`StageRunner._call_llm`, with the real signature
(psd-run-format §3.3a), awaited under ``asyncio.wait_for`` by :meth:`call`. A call is
bracketed by ``context_request_started`` / ``context_request_completed`` in the runtime
archive's ``events.jsonl`` (counts only, never ids) and leaves its request manifest in
``context/req-NNNNNN.json``; its token capture, finish reason, request id and duration
are returned as the step's ``metadata``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from eviscene.orchestrator.llm_backend import LLMResponse, extract_policy_token_capture


class StageRunner:
    def __init__(self, *, stage_name: str, llm: Any, store: Any, tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int = 8192, request_timeout_seconds: float = 600.0) -> None:
        self.stage_name = stage_name
        self.llm = llm
        self.store = store
        self.tools = list(tools or [])
        self.max_output_tokens = max_output_tokens
        self.request_timeout_seconds = request_timeout_seconds

    async def call(self, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[LLMResponse, dict[str, Any]]:
        """One policy call of the stage, bounded by the stage's request timeout."""
        return await asyncio.wait_for(self._call_llm(messages, **kwargs), timeout=self.request_timeout_seconds)

    async def _call_llm(self, messages, *, require_tool=False, max_tokens=None, generation_config=None, lifecycle_kind="",
                        parent_context_request_id="", suppress_tools=False, active_steps=None):
        request_id = self.store.next_request_id()
        started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.store.event("context_request_started", {"request_id": request_id, "stage": self.stage_name, "lifecycle_kind": lifecycle_kind,
                                                     "parent_request_id": parent_context_request_id})
        tools = None if suppress_tools else self.tools
        t0 = time.monotonic()
        try:
            response = await self.llm.get_response(messages, tools=tools, tool_choice="required" if require_tool and tools else None,
                                                    max_tokens=max_tokens or self.max_output_tokens, generation_config=generation_config)
        except Exception as exc:
            self.store.event("context_request_completed", {"request_id": request_id, "stage": self.stage_name, "status": "error",
                                                           "error": type(exc).__name__})
            self._manifest(request_id, lifecycle_kind, "error", started_at, error=type(exc).__name__)
            raise
        duration_ms = int((time.monotonic() - t0) * 1000)
        capture = extract_policy_token_capture(response.raw)
        choice = (response.raw.get("choices") or [{}])[0]
        metadata = {"policy_token_capture": capture, "finish_reason": choice.get("finish_reason"), "context_request_id": request_id,
                    "llm_duration_ms": duration_ms}
        self.store.event("context_request_completed", {"request_id": request_id, "stage": self.stage_name, "status": "completed",
                                                       "provider_input_tokens": response.prompt_tokens,
                                                       "provider_output_tokens": response.completion_tokens})
        self._manifest(request_id, lifecycle_kind, "completed", started_at, response=response)
        return response, metadata

    def _manifest(self, request_id: str, lifecycle_kind: str, status: str, started_at: str, *, response: LLMResponse | None = None,
                  error: str | None = None) -> None:
        """``context/req-NNNNNN.json`` (``ifv-context-ledger-v1``), written once the request ends."""
        doc = {"schema_version": "ifv-context-ledger-v1", "request_id": request_id, "stage": self.stage_name, "lifecycle_kind": lifecycle_kind,
               "model": getattr(self.llm, "model", None), "status": status, "error": error,
               "provider_input_tokens": response.prompt_tokens if response else None,
               "provider_output_tokens": response.completion_tokens if response else None,
               "max_output_tokens": self.max_output_tokens, "started_at": started_at,
               "completed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        path = os.path.join(self.store.root, "context", f"{request_id}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n")
        os.replace(tmp, path)
