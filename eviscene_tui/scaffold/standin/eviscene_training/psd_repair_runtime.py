"""STAND-IN of ``eviscene_training.psd_repair_runtime`` (NOT EviScene).

``QwenContinuationAdapter.propose_hints`` is a scripted hint constructor (one
canned procedural hint per round, about the current site); ``run_hinted_episode``
asks the policy server (the bundled fake vLLM, OpenAI chat completions, no
streaming) for ONE hinted teacher step and writes a runtime archive
(``runtime/<case>/<attempt>/events.jsonl``, fsynced line by line). Without a
policy URL it uses a canned step, so tests can run offline.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_training.io import _sha, save_bound, write_json

CANNED_HINTS = (
    "Before you search the event itself, find the oldest copy of the photo and note where it first appeared.",
    "Compare the first publication date of the photo with the date in the claim before you judge.",
    "Check whether the landmarks visible in the photo belong to the city named in the claim.",
    "Read the caption of the earliest copy and compare the place it names with the claim.",
    "Look for the same street in a second, independent source before you trust a single match.",
    "Ask what a repeated 'no match' means before searching again with the same query.",
)


@dataclass
class HintProposal:
    text: str
    level: int
    proposal_id: str
    provider: str = "standin"
    model: str = "standin-hint-constructor"
    audit: dict[str, Any] = field(default_factory=dict)


@dataclass
class Continuation:
    teacher_steps: list[dict[str, Any]]
    student_steps: list[dict[str, Any]]
    teacher_episode_trace: dict[str, Any]
    teacher_complete: bool = True
    student_complete: bool = False
    stop_reason: str = "teacher_episode_complete"


def audit_hint(text: str, level: int) -> dict[str, Any]:
    errors = []
    if not text.strip():
        errors.append("hint_empty")
    if len(text) > 1200:
        errors.append("hint_too_long")
    if any(word in text.lower() for word in ("fake", "real", "verdict")):
        errors.append("binary_verdict_leak")
    return {"schema_version": "ifv-psd-hint-audit-v1", "passed": not errors, "hint_level": level,
            "hint_chars": len(text), "hint_sha256": hashlib.sha256(text.strip().encode("utf-8")).hexdigest(),
            "errors": errors, "leak_paths": []}


class RuntimeStore:
    """``runtime/<case>/<attempt>/events.jsonl``: one canonical JSON line per event, fsynced."""

    def __init__(self, run_dir: Path, case_id: str, attempt_id: str) -> None:
        self.case_id, self.attempt_id = case_id, attempt_id
        self.root = run_dir / "runtime" / case_id / attempt_id
        self.root.mkdir(parents=True, exist_ok=True)
        self.events_path = self.root / "events.jsonl"
        self.sequence = 0

    def event(self, event_type: str, payload: dict[str, Any]) -> None:
        self.sequence += 1
        row = {"schema_version": "ifv-runtime-events-v1", "sequence": self.sequence, "event_id": f"evt-{self.sequence:08d}",
               "event_type": event_type, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "case_id": self.case_id, "attempt_id": self.attempt_id, "payload": payload}
        line = json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def descriptor(self) -> dict[str, Any]:
        return {"schema_version": "ifv-runtime-events-v1", "case_id": self.case_id, "attempt_id": self.attempt_id,
                "runtime_path": str(self.root), "events_path": str(self.events_path)}


class QwenContinuationAdapter:
    def __init__(self, *, policy_base_url: str | None, policy_model: str, run_dir: Path, case_id: str, step_seconds: float = 0.0) -> None:
        self.policy_base_url = (policy_base_url or "").rstrip("/")
        self.policy_model = policy_model
        self.run_dir = run_dir
        self.case_id = case_id
        self.step_seconds = step_seconds
        self.proposer_cache_path: Path | None = None

    async def propose_hints(self, *, failure_site: dict[str, Any], public_trace_context: dict[str, Any],
                            private_context: Any, hint_count: int, hint_level: int) -> list[HintProposal]:
        """One canned hint per round (the round index is the number of earlier rounds)."""
        feedback = public_trace_context.get("repair_search") or {}
        round_index = len(feedback.get("previous_rounds") or [])
        step = failure_site["source_step_index"]
        texts = [f"At step {step}: {CANNED_HINTS[(round_index + i) % len(CANNED_HINTS)]}" for i in range(hint_count)]
        if self.proposer_cache_path is not None:
            save_bound(self.proposer_cache_path, identity={"site": failure_site["step_id"], "round": round_index},
                       payload={"hints": texts, "prompt_tokens": 120 + 40 * round_index, "completion_tokens": 24 * len(texts)})
        proposals, audits = [], []
        for text in texts:
            audit = audit_hint(text, hint_level)
            audits.append({"passed": True, "audit": audit} if audit["passed"] else {"passed": False, "reason": audit["errors"][0]})
            if audit["passed"]:
                pid = "psd-repair-hint:" + _sha({"candidate_id": failure_site["step_id"], "hint": text, "level": hint_level})
                proposals.append(HintProposal(text=text, level=hint_level, proposal_id=pid, audit=audit))
        if self.proposer_cache_path is not None:
            write_json(self.proposer_cache_path.parent / "proposer-hint-audits.json", {"proposals": audits})
        return proposals

    def _policy_call(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        tools = [{"type": "function", "function": {"name": name, "description": desc, "parameters": {
            "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
            for name, desc in (("reverse_image_search", "find earlier copies of an image"), ("web_search", "search the web"))]
        body = json.dumps({"model": self.policy_model, "messages": messages, "tools": tools, "max_tokens": 1024, "stream": False,
                           "return_token_ids": True, "logprobs": True, "top_logprobs": 5}).encode("utf-8")
        request = urllib.request.Request(self.policy_base_url + "/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read().decode("utf-8"))

    async def run_hinted_episode(self, *, failure_site: dict[str, Any], hint: HintProposal, base_trace: dict[str, Any],
                                 index: int) -> Continuation:
        store = RuntimeStore(self.run_dir, self.case_id, f"hint-{index:02d}-{uuid.uuid4().hex[:12]}")
        store.event("case_attempt_started", {"hint_sha256": hint.audit.get("hint_sha256"), "source_step_index": failure_site["source_step_index"]})
        steps = base_trace["state"]["all_steps"]
        site = failure_site["source_step_index"]
        messages = [
            {"role": "system", "content": "You are a fact-checking agent. Continue the investigation with one action."},
            {"role": "user", "content": json.dumps({"claim": base_trace.get("claim"), "steps_so_far": [s.get("thought") for s in steps[:site]]})},
            {"role": "user", "content": "Hint: " + hint.text},
        ]
        store.event("context_request_started", {"request_id": "req-000001", "stage": "psd_teacher_repair"})
        if self.step_seconds:
            await asyncio.sleep(self.step_seconds)
        if self.policy_base_url:
            try:
                response = await asyncio.to_thread(self._policy_call, messages)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                store.event("context_request_completed", {"request_id": "req-000001", "status": "error", "error": type(exc).__name__})
                raise
            choice = (response.get("choices") or [{}])[0]
            message = choice.get("message") or {}
            calls = message.get("tool_calls") or []
            thought = message.get("reasoning") or message.get("reasoning_content") or ""
            output = message.get("content") or ""
            prompt_ids = response.get("prompt_token_ids") or list(range(1, 33))
            completion_ids = choice.get("token_ids") or list(range(100, 100 + max(1, len(output.split()))))
        else:
            calls = [{"function": {"name": "reverse_image_search", "arguments": json.dumps({"query": "earliest copy of the photo"})}}]
            thought, output = "The hint says to find the oldest copy first.", "I will look for the earliest copy."
            prompt_ids, completion_ids = list(range(1, 33)), list(range(100, 120))
        call = (calls[0].get("function") if calls else None) or {}
        try:
            tool_args = json.loads(call.get("arguments") or "{}") if isinstance(call.get("arguments"), str) else dict(call.get("arguments") or {})
        except ValueError:
            tool_args = {"raw": call.get("arguments")}
        capture = {"schema_version": "ifv-policy-token-capture-v1", "status": "complete", "prompt_token_ids": prompt_ids,
                   "completion_token_ids": completion_ids, "completion_logprobs": [-0.1] * len(completion_ids),
                   "completion_topk_by_position": [], "topk": 0, "missing": []}
        store.event("context_request_completed", {"request_id": "req-000001", "status": "completed",
                                                  "provider_input_tokens": len(prompt_ids), "provider_output_tokens": len(completion_ids)})
        teacher_step = {
            "round": steps[site].get("round", site), "stage_name": "psd_teacher_repair",
            "action_type": "tool_call" if call else "output", "tool_name": call.get("name"), "tool_args": tool_args,
            "tool_result": json.dumps({"results": [{"title": "Earliest copy, 2019 archive", "date": "2019-05-02"}]}),
            "thought": thought, "output": output, "tokens": {"prompt": len(prompt_ids), "completion": len(completion_ids), "thought": 0},
            "metadata": {"policy_token_capture": capture, "context_request_id": "req-000001",
                         "policy_input": {"messages": messages}, "policy_action": {"tool": call.get("name"), "arguments": tool_args}},
        }
        store.event("tool_result_archived", {"tool_name": call.get("name"), "action_index": 0})
        judgment = {"round": teacher_step["round"] + 1, "stage_name": "psd_teacher_judgment", "action_type": "output",
                    "output": "The photo predates the claimed event.", "thought": "", "tool_name": None, "tool_args": {},
                    "tool_result": "", "tokens": {"prompt": 0, "completion": 0, "thought": 0}, "metadata": {}}
        episode = json.loads(json.dumps(base_trace))
        suffix = []
        for step in (teacher_step, judgment):
            row = dict(step)
            row["stage"] = "unified_judgment" if step["stage_name"] == "psd_teacher_judgment" else "unified_react"
            row.pop("stage_name")
            row["metadata"] = {**step["metadata"], "psd_role": "teacher", "psd_suffix_step": True}
            suffix.append(row)
        episode["state"]["all_steps"] = steps[:site] + suffix
        episode["state"]["runtime_store"] = store.descriptor()
        episode["psd_repair"] = {"role": "teacher", "repair_step_id": failure_site["step_id"], "source_step_index": site,
                                 "terminal_state_replayed": True, "source_runtime_store_path": failure_site.get("runtime_store_path")}
        episode["termination"] = "success"
        store.event("snapshot_committed", {"steps": len(suffix)})
        return Continuation(teacher_steps=[teacher_step, judgment], student_steps=[], teacher_episode_trace=episode)
