"""STAND-IN of ``eviscene_training.psd_repair_runtime`` (NOT EviScene).

``QwenContinuationAdapter.propose_hints`` is a scripted hint constructor (one
canned procedural hint per round, about the current site); ``run_hinted_episode``
runs the hinted teacher suffix through the orchestrator's ``StageRunner`` (the
stand-in ``eviscene.orchestrator``): up to ``max_suffix_actions`` teacher actions,
a policy call each (OpenAI chat completions, no streaming, the bundled fake vLLM),
a scripted tool answering each tool call, then one judgment call; it writes a
runtime archive (``runtime/<case>/<attempt>/events.jsonl``, fsynced line by line,
and ``context/req-NNNNNN.json``). Without a policy URL a scripted backend answers,
so tests can run offline.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene.orchestrator.llm_backend import APIBackend, ScriptedBackend
from eviscene.orchestrator.stage_runner import StageRunner
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
        self.requests = 0

    def next_request_id(self) -> str:
        """``req-NNNNNN``: the counter restarts in every store (psd-run-format §2.13)."""
        self.requests += 1
        return f"req-{self.requests:06d}"

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
    def __init__(self, *, policy_base_url: str | None, policy_model: str, run_dir: Path, case_id: str, step_seconds: float = 0.0,
                 max_suffix_actions: int = 2) -> None:
        self.policy_base_url = (policy_base_url or "").rstrip("/")
        self.max_suffix_actions = max_suffix_actions
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

    def _backend(self) -> Any:
        if self.policy_base_url:
            return APIBackend(base_url=self.policy_base_url, model=self.policy_model, capture_policy_tokens=True, topk=5)
        return ScriptedBackend(model=self.policy_model)

    async def run_hinted_episode(self, *, failure_site: dict[str, Any], hint: HintProposal, base_trace: dict[str, Any],
                                 index: int) -> Continuation:
        """The hinted teacher suffix from the failure site: up to ``max_suffix_actions``
        ReAct actions of ``psd_teacher_repair`` (a policy call each; a tool call's result
        goes back into the next call's history), then one ``psd_teacher_judgment`` call."""
        store = RuntimeStore(self.run_dir, self.case_id, f"hint-{index:02d}-{uuid.uuid4().hex[:12]}")
        store.event("case_attempt_started", {"hint_sha256": hint.audit.get("hint_sha256"), "source_step_index": failure_site["source_step_index"]})
        steps = base_trace["state"]["all_steps"]
        site = failure_site["source_step_index"]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a fact-checking agent. Continue the investigation with one action."},
            {"role": "user", "content": json.dumps({"claim": base_trace.get("claim"), "steps_so_far": [s.get("thought") for s in steps[:site]]})},
            {"role": "user", "content": "Hint: " + hint.text},
        ]
        backend = self._backend()
        repair = StageRunner(stage_name="psd_teacher_repair", llm=backend, store=store, tools=TOOLS, max_output_tokens=1024)
        teacher_steps: list[dict[str, Any]] = []
        parent = ""
        for action_index in range(self.max_suffix_actions):
            if self.step_seconds:
                await asyncio.sleep(self.step_seconds)
            response, metadata = await repair.call(messages, require_tool=True, lifecycle_kind="psd_teacher_action",
                                                   parent_context_request_id=parent, active_steps=len(teacher_steps))
            parent = metadata["context_request_id"]
            step, reply = _action_step(steps[site].get("round", site) + action_index, response, metadata, messages)
            teacher_steps.append(step)
            messages = messages + reply
            if step["action_type"] == "tool_call":
                store.event("tool_result_archived", {"tool_name": step["tool_name"], "action_index": action_index, "stage": "psd_teacher_repair"})
            else:
                break
        judge = StageRunner(stage_name="psd_teacher_judgment", llm=backend, store=store, max_output_tokens=512)
        verdict_messages = messages + [{"role": "user", "content": "Give your final judgment of the claim."}]
        response, metadata = await judge.call(verdict_messages, suppress_tools=True, lifecycle_kind="psd_teacher_judgment",
                                              parent_context_request_id=parent)
        teacher_steps.append({"round": teacher_steps[-1]["round"] + 1, "stage_name": "psd_teacher_judgment", "action_type": "output",
                              "output": response.text, "thought": "", "tool_name": None, "tool_args": {}, "tool_result": "",
                              "tokens": {"prompt": response.prompt_tokens, "completion": response.completion_tokens, "thought": 0},
                              "metadata": {**metadata, "policy_input": {"messages": verdict_messages}, "policy_action": {"output": response.text}}})
        episode = json.loads(json.dumps(base_trace))
        suffix = []
        for step in teacher_steps:
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
        return Continuation(teacher_steps=teacher_steps, student_steps=[], teacher_episode_trace=episode)


TOOLS = [{"type": "function", "function": {"name": name, "description": desc, "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
    for name, desc in (("reverse_image_search", "find earlier copies of an image"), ("web_search", "search the web"))]

TOOL_RESULTS = {
    "reverse_image_search": {"results": [{"title": "Earliest copy, 2019 archive", "date": "2019-05-02"}]},
    "web_search": {"results": [{"title": "Flood of May 2019 in the old town", "date": "2019-05-03"}]},
}


def _action_step(round_index: int, response: Any, metadata: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One teacher action from the policy's answer, and the turns it adds to the history
    (the answer's own message, rebuilt from ``raw``, and the tool's result)."""
    message = ((response.raw.get("choices") or [{}])[0].get("message")) or {}
    calls = message.get("tool_calls") or []
    call = (calls[0].get("function") if calls else None) or {}
    try:
        tool_args = json.loads(call.get("arguments") or "{}") if isinstance(call.get("arguments"), str) else dict(call.get("arguments") or {})
    except ValueError:
        tool_args = {"raw": call.get("arguments")}
    name = call.get("name")
    result = json.dumps(TOOL_RESULTS.get(str(name), {"results": []})) if name else ""
    thought = message.get("reasoning") or message.get("reasoning_content") or ""
    step = {
        "round": round_index, "stage_name": "psd_teacher_repair", "action_type": "tool_call" if name else "output",
        "tool_name": name, "tool_args": tool_args, "tool_result": result, "thought": thought, "output": response.text,
        "tokens": {"prompt": response.prompt_tokens, "completion": response.completion_tokens, "thought": 0},
        "metadata": {**metadata, "policy_input": {"messages": messages}, "policy_action": {"tool": name, "arguments": tool_args}},
    }
    reply: list[dict[str, Any]] = [{"role": "assistant", "content": message.get("content"), "tool_calls": calls or None}]
    if name:
        reply.append({"role": "tool", "tool_call_id": calls[0].get("id") or "call-0", "content": result})
    return step, reply
