"""Builders that write driver-faithful files into a :class:`Tree`.

Path convention of the samples (as the driver leaves them on a cluster, then copied):

- each case folder ``<case>`` under ``sample_runs/`` has a *fake absolute root*
  ``/data/eviscene/sample_runs/<case>`` (never a path of this machine). Wherever the
  driver writes an absolute path (run-inputs ``{path, sha256}`` bindings, search-state
  ``directory``/``files`` keys, root ``repair_attempts.jsonl`` episode paths,
  ``psd_media.image_paths``, manifests' ``rounds``/``trace``), it lies under
  ``/data/eviscene/``. None of these exist on this machine: every view reads the tree
  through the moved-tree rules of ``artifacts.paths`` (``/data/eviscene`` -> the folder
  holding ``sample_runs/``);
- the driver's INPUTS live outside the case root, beside it, in
  ``sample_runs/inputs/<slug>/`` (recorded as ``/data/eviscene/sample_runs/inputs/<slug>/…``):
  the source rollout (``trace.json`` with its runtime archive ``runtime/`` next to it),
  candidate, gold, public/private context, audit, semantic verification, serving
  profile, image, source access policy. Builder code names them ``inputs/<name>`` and
  ``source/<name>``; :meth:`Case.tp` / :meth:`Case.abs` map them there;
- runtime store paths (trace ``state.runtime_store.runtime_path``, manifests'
  ``runtime_archive``, ``generation-last-error.archive``, ``source_runtime_store_path``)
  are absolute, except in the cases built with ``relative_runtime`` (older runtimes):
  there the source rollout's store is relative to the rollout's working directory
  (``/data/eviscene/sample_runs``) and the run's stores to the driver's
  (``/data/eviscene``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Any

from eviscene_tui.artifacts.jsonio import (
    canonical_json_bytes,
    canonical_sha256,
    pretty_json_bytes,
    sha256_bytes,
)
from eviscene_tui.scaffold.samples import convo
from eviscene_tui.scaffold.samples.stories import GENERATION_CONFIG, JUDGMENT_FORMAT, SYSTEM_PROMPT, TOOLS, Act, Story, Verdict
from eviscene_tui.scaffold.samples.tree import FAKE_BASE as FAKE_BASE  # re-exported beside FAKE_CWD
from eviscene_tui.scaffold.samples.tree import Tree, make_png

FAKE_CWD = "/data/eviscene"  # the driver's working directory (relative runtime paths)
INPUTS_DIR = "inputs"  # sample_runs/inputs/<slug>/: the driver inputs, beside the case roots
PROFILE_ID = "ifv-qwen3.5-9b"
ENGINE_MODEL_PATH = "/models/Qwen3.5-9B"
BASE_URL = "http://127.0.0.1:8901/v1"
CONTEXT_LENGTH = 131072
HINT_MODEL = "gemini-3-pro-preview"
JUDGE_MODEL = "gemini-3-pro-preview"
CONTINUATION_POLICY_VERSION = "native-contract-and-observed-slate-positions-v6"
VERIFIER = {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": JUDGE_MODEL}
T0 = datetime(2026, 11, 20, 9, 0, 0, tzinfo=timezone.utc)


def inputs_rel(case_rel: str) -> str:
    """Where (relative to ``sample_runs/``) the driver inputs of case folder ``case_rel`` are."""
    return f"{INPUTS_DIR}/{case_rel.replace('/repairs/', '-')}"


def compact_json_bytes(value: Any) -> bytes:
    """``json.dumps(x, ensure_ascii=False, separators=(",", ":"))`` + newline (key order kept)."""
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def hexid(*parts: Any, n: int = 12) -> str:
    return hashlib.sha256(canonical_json_bytes([str(p) for p in parts])).hexdigest()[:n]


def safe_name(name: str) -> str:
    """The runtime archive's ``safe()``: keep [A-Za-z0-9-_.], map the rest to ``_``;
    names longer than 36 become ``first24-<10 hex>``."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c in "-_.")) else "_" for c in name)
    if len(out) > 36:
        out = out[:24] + "-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:10]
    return out


def serving_profile() -> dict[str, Any]:
    return {
        "schema_version": "ifv-qwen-serving-profile-v1",
        "profile_id": PROFILE_ID,
        "model_path": ENGINE_MODEL_PATH,
        "engine_model_path": ENGINE_MODEL_PATH,
        "adapter_path": None,
        "deployment_mode": "full_model",
        "engine": "vllm",
        "base_url": BASE_URL,
        "wire_api": "chat_completions",
        "tool_call_parser": "qwen3_coder",
        "reasoning_parser": "qwen3",
        "thinking_enabled": False,
        "multimodal": True,
        "context_length": CONTEXT_LENGTH,
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "quantization": None,
        "health_probe": {"method": "GET", "path": "/v1/models"},
        "checkpoint_manifest_sha256": None,
    }


# --------------------------------------------------------------------------- runtime archive
class RuntimeStore:
    """``runtime/<safe(case)>/<safe(attempt)>/`` per /tmp/runtime-archive-convention.md."""

    def __init__(self, case: "Case", runtime_rel: str, attempt_id: str, *, clock: float) -> None:
        self.case = case
        self.case_id = case.case_id
        self.attempt_id = attempt_id
        self.runtime_rel = f"{runtime_rel}/{safe_name(case.case_id)}/{safe_name(attempt_id)}"
        self.events: list[dict[str, Any]] = []
        self.clock = clock
        self.requests = 0
        self._event("case_attempt_started", {"stage_count": None})

    @property
    def recorded(self) -> str:
        """The store path as the runtime records it (``runtime_path``)."""
        return self.case.recorded_runtime(self.runtime_rel)

    @property
    def descriptor(self) -> dict[str, Any]:
        return {
            "schema_version": "ifv-runtime-events-v1",
            "case_id": self.case_id,
            "attempt_id": self.attempt_id,
            "runtime_path": self.recorded,
            "events_path": f"{self.recorded}/events.jsonl",
        }

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        self.clock += 0.35
        seq = len(self.events) + 1
        self.events.append(
            {
                "schema_version": "ifv-runtime-events-v1",
                "sequence": seq,
                "event_id": f"evt-{seq:08d}",
                "event_type": kind,
                "recorded_at": ts(self.clock),
                "case_id": self.case_id,
                "attempt_id": self.attempt_id,
                "payload": payload,
            }
        )

    def blob(self, data: bytes, ext: str, media_type: str, kind: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        sha = sha256_bytes(data)
        rel = f"artifacts/sha256/{sha[:2]}/{sha}.{ext}"
        self.case.put(f"{self.runtime_rel}/{rel}", data)
        meta = {"sha256": sha, "media_type": media_type, "size_bytes": len(data), "ext": ext, "kind": kind, **(extra or {})}
        self.case.put(f"{self.runtime_rel}/artifacts/sha256/{sha[:2]}/{sha}.meta.json", pretty_json_bytes(meta))
        return {"sha256": sha, "path": rel, "media_type": media_type, "size_bytes": len(data), **(extra or {})}

    def _item(self, kind: str, artifact: dict[str, Any], media: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"kind": kind, "artifact": artifact, "media": media or [], "content_hash": artifact["sha256"]}

    def add_request(
        self,
        *,
        stage: str,
        lifecycle_kind: str,
        prompt_version: str,
        model: str,
        system_prompt: str,
        input_payload: Any,
        tools: list[dict[str, Any]],
        response_format: Any,
        generation_config: dict[str, Any],
        interaction_id: str,
        input_tokens: int,
        output_tokens: int,
        image_count: int,
        status: str = "completed",
        error: Any = None,
        tool_result: str | None = None,
        tool_name: str | None = None,
    ) -> str:
        self.requests += 1
        request_id = f"req-{self.requests:06d}"
        self._event("context_request_started", {"request_id": request_id, "stage": stage})
        started = self.clock
        items = self._context_items(system_prompt, input_payload, tools, response_format, generation_config, image_count)
        snapshot = {
            "system_prompt": system_prompt,
            "input_payload": input_payload,
            "tool_schema": tools,
            "response_format": response_format,
            "generation_config": generation_config,
        }
        self.clock += 2.5
        manifest = {
            "schema_version": "ifv-context-ledger-v1",
            "request_id": request_id,
            "stage": stage,
            "lifecycle_kind": lifecycle_kind,
            "prompt_version": prompt_version,
            "model": model,
            "status": status,
            "error": error,
            "provider_input_tokens": input_tokens,
            "provider_output_tokens": output_tokens,
            "provider_thought_tokens": 0,
            "max_output_tokens": generation_config.get("max_tokens", 2048),
            "image_count": image_count,
            "request_snapshot_sha256": canonical_sha256(snapshot),
            "context_items": items,
            "started_at": ts(started),
            "completed_at": ts(self.clock),
            "interaction_id": interaction_id,
        }
        self.case.put(f"{self.runtime_rel}/context/{request_id}.json", pretty_json_bytes(manifest))
        self._event(
            "context_request_completed",
            {"request_id": request_id, "status": status, "manifest": f"context/{request_id}.json"},
        )
        if tool_result is not None:
            # tool results are archived in the real store too; here only their hash is
            # recorded (keeps sample_runs small): no artifact path to resolve
            self._event("tool_result_archived", {"request_id": request_id, "tool_name": tool_name,
                                                 "sha256": sha256_bytes(tool_result.encode("utf-8")), "size_bytes": len(tool_result.encode("utf-8"))})
        return request_id

    def _context_items(self, system_prompt: str, input_payload: Any, tools: list[dict[str, Any]], response_format: Any,
                       generation_config: dict[str, Any], image_count: int) -> list[dict[str, Any]]:
        """The request's context items, each archived as a blob (in the driver's order:
        system prompt, input payload with its image, tool schemas, response format,
        generation config)."""
        items = [self._item("system_prompt", self.blob(system_prompt.encode("utf-8"), "txt", "text/plain", "system_prompt"))]
        media = []
        if image_count:
            png = self.case.png
            media.append(
                self.blob(png, "png", "image/png", "image", {"width": convo.IMAGE_WIDTH, "height": convo.IMAGE_HEIGHT})
            )
        items.append(
            self._item("input_payload", self.blob(canonical_json_bytes(input_payload), "json", "application/json", "input_payload"), media)
        )
        for tool in tools:
            items.append(self._item("tool_schema", self.blob(canonical_json_bytes(tool), "json", "application/json", "tool_schema")))
        if response_format is not None:
            items.append(
                self._item("response_format", self.blob(canonical_json_bytes(response_format), "json", "application/json", "response_format"))
            )
        items.append(
            self._item("generation_config", self.blob(canonical_json_bytes(generation_config), "json", "application/json", "generation_config"))
        )
        return items

    def finish(self, *, torn_tail: bytes = b"") -> None:
        data = b"".join(canonical_json_bytes(e) + b"\n" for e in self.events) + torn_tail
        self.case.put(f"{self.runtime_rel}/events.jsonl", data)


# --------------------------------------------------------------------------- policy steps
def user_message(story: Story, image_id: str, image_sha: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f"Claim: {story.claim}\nImage {image_id}:"},
            {"type": "image_ref", "sha256": image_sha, "media_type": "image/png"},
        ],
    }


JUDGE_REQUEST = {"role": "user", "content": "Tools are closed. Give the final judgment as JSON."}


def hint_message(hint: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"Hint: {hint}"}]}


class PolicyRun:
    """Renders a sequence of policy steps (source rollout or teacher suffix) into
    trace steps with captures, archiving every request in a runtime store."""

    def __init__(self, case: "Case", store: RuntimeStore, messages: list[dict[str, Any]], *, stage_key: str = "stage") -> None:
        self.case = case
        self.store = store
        self.messages = list(messages)
        self.stage_key = stage_key

    def _policy_input(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], response_format: Any) -> dict[str, Any]:
        return {"system_instruction": SYSTEM_PROMPT, "input_payload": messages, "tools": tools, "response_format": response_format}

    def act(self, index: int, act: Act, *, stage: str, seed: str, capture_status: str = "complete", missing: list[str] | None = None) -> dict[str, Any]:
        msgs = list(self.messages)
        prompt = convo.prompt_ids(SYSTEM_PROMPT, TOOLS, msgs)
        completion_text = act.thought + "\n" + convo.tool_call_text(act.tool, act.args)
        completion = convo.completion_ids(completion_text)
        result_str = act.result if isinstance(act.result, str) else json.dumps(act.result, ensure_ascii=False, separators=(",", ":"))
        interaction = f"ia-{hexid(seed, 'interaction', n=16)}"
        call_id = f"call_{hexid(seed, 'call', n=10)}"
        req = self.store.add_request(
            stage=stage,
            lifecycle_kind="policy",
            prompt_version="ifv-unified-react-v3",
            model=PROFILE_ID,
            system_prompt=SYSTEM_PROMPT,
            input_payload=msgs,
            tools=TOOLS,
            response_format=None,
            generation_config=GENERATION_CONFIG,
            interaction_id=interaction,
            input_tokens=len(prompt),
            output_tokens=len(completion),
            image_count=1,
            tool_result=result_str,
            tool_name=act.tool,
        )
        step = {
            "round": index + 1,
            self.stage_key: stage,
            "action_type": "tool_call",
            "tool_name": act.tool,
            "tool_args": act.args,
            "tool_result": result_str,
            "thought": act.thought,
            "output": None,
            "tokens": {"prompt": len(prompt), "completion": len(completion), "thought": 0},
            "metadata": {
                "policy_input": self._policy_input(msgs, TOOLS, None),
                "policy_action": {"type": "tool_call", "tool_name": act.tool, "arguments": act.args},
                "policy_token_capture": convo.token_capture(prompt, completion, seed, status=capture_status, missing=missing,
                                                             pre_grammar=stage.startswith("psd_")),
                "context_request_id": req,
                "interaction_id": interaction,
                "function_call_id": call_id,
                "llm_duration_ms": 800 + (int(hexid(seed, "ms", n=4), 16) % 2400),
                "tool_tokens": len(result_str) // 4,
                "tool_subcalls": [{"kind": act.tool, "request_count": 1}],
                "tool_llm_api_calls": 0,
            },
        }
        self.messages.append(
            {
                "role": "assistant",
                "content": act.thought,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": act.tool, "arguments": json.dumps(act.args, ensure_ascii=False)}}
                ],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result_str})
        return step

    def judge(self, index: int, verdict: Verdict, *, stage: str, seed: str) -> dict[str, Any]:
        msgs = list(self.messages) + [JUDGE_REQUEST]
        prompt = convo.prompt_ids(SYSTEM_PROMPT, [], msgs)
        output_obj = {"verdict": verdict.verdict, "confidence": verdict.confidence, "overall_assessment": verdict.assessment}
        output = json.dumps(output_obj, ensure_ascii=False)
        completion = convo.completion_ids(output)
        interaction = f"ia-{hexid(seed, 'interaction', n=16)}"
        req = self.store.add_request(
            stage=stage,
            lifecycle_kind="policy",
            prompt_version="ifv-unified-judgment-v3",
            model=PROFILE_ID,
            system_prompt=SYSTEM_PROMPT,
            input_payload=msgs,
            tools=[],
            response_format=JUDGMENT_FORMAT,
            generation_config=GENERATION_CONFIG,
            interaction_id=interaction,
            input_tokens=len(prompt),
            output_tokens=len(completion),
            image_count=1,
        )
        return {
            "round": index + 1,
            self.stage_key: stage,
            "action_type": "output",
            "tool_name": None,
            "tool_args": None,
            "tool_result": None,
            "thought": verdict.thought,
            "output": output,
            "tokens": {"prompt": len(prompt), "completion": len(completion), "thought": 0},
            "metadata": {
                "policy_input": self._policy_input(msgs, [], JUDGMENT_FORMAT),
                "policy_action": {"type": "output", "output": output_obj},
                "policy_token_capture": convo.token_capture(prompt, completion, seed, pre_grammar=stage.startswith("psd_")),
                "context_request_id": req,
                "interaction_id": interaction,
                "llm_duration_ms": 600 + (int(hexid(seed, "ms", n=4), 16) % 1800),
            },
        }


def step_stage(step: dict[str, Any]) -> str:
    return step.get("stage") or step.get("stage_name") or ""


def totals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = sum(s["tokens"]["prompt"] for s in steps)
    completion = sum(s["tokens"]["completion"] for s in steps)
    calls = sum(1 for s in steps if s["action_type"] == "tool_call")
    kinds: dict[str, int] = {}
    for s in steps:
        if s["action_type"] == "tool_call":
            kinds[s["tool_name"]] = kinds.get(s["tool_name"], 0) + 1
    return {
        "token_usage": {"prompt": prompt, "completion": completion, "thought": 0},
        "total_tool_calls": calls,
        "total_tool_subcalls": calls,
        "tool_subcalls_by_kind": dict(sorted(kinds.items())),
        "llm_api_calls": len(steps),
    }


# --------------------------------------------------------------------------- a case
class Case:
    """One case folder: its inputs, source rollout and the writers scoped to it."""

    def __init__(self, tree: Tree, rel: str, story: Story, case_id: str, *, legacy_stage_name: bool = False,
                 relative_runtime: bool = False) -> None:
        self.tree = tree
        self.rel = rel
        self.base = tree.base  # where sample_runs/ was written (recorded absolute paths)
        self.fake_root = f"{self.base}/{rel}"
        # the driver inputs of this case: sample_runs/inputs/<slug>/, beside the case roots
        self.inputs_rel = inputs_rel(rel)
        self.relative_runtime = relative_runtime
        self.story = story
        self.case_id = case_id
        self.episode_id = f"{story.key}-{hexid(case_id, n=8)}"
        self.image_id = f"img-{hexid(case_id, 'image', n=10)}"
        self.legacy_stage_name = legacy_stage_name
        self.png = make_png(convo.IMAGE_WIDTH, convo.IMAGE_HEIGHT, list(story.palette))
        self.image_sha = sha256_bytes(self.png)
        self.clock = float(int(hexid(case_id, "clock", n=4), 16) % 5000)

    # paths and writers ---------------------------------------------------------
    def _input_rel(self, rel: str) -> str | None:
        """``inputs/<name>`` and ``source/<name>`` (the driver inputs and the source
        rollout) live in ``sample_runs/inputs/<slug>/<name>``: outside the case root."""
        for prefix in ("inputs/", "source/"):
            if rel.startswith(prefix):
                return f"{self.inputs_rel}/{rel[len(prefix):]}"
        return None

    def tp(self, rel: str) -> str:
        """Tree path (relative to ``sample_runs/``) of a case-relative name."""
        inp = self._input_rel(rel)
        if inp is not None:
            return inp
        return f"{self.rel}/{rel}" if rel else self.rel

    def abs(self, rel: str) -> str:
        """The absolute path the driver recorded for a case-relative name."""
        inp = self._input_rel(rel)
        if inp is not None:
            return f"{self.base}/{inp}"
        return f"{self.fake_root}/{rel}" if rel else self.fake_root

    def recorded_runtime(self, rel: str) -> str:
        """A runtime store path as recorded: absolute, or (``relative_runtime``) relative
        to the working directory of the process that wrote it."""
        full = self.abs(rel)
        if not self.relative_runtime:
            return full
        cwd = self.base if self._input_rel(rel) is not None else self.base.rsplit("/", 1)[0]
        return full[len(cwd) + 1 :]

    def put(self, rel: str, data: bytes) -> bytes:
        return self.tree.put(self.tp(rel), data)

    def json(self, rel: str, value: Any) -> bytes:
        return self.tree.json(self.tp(rel), value)

    def jsonl(self, rel: str, rows: list[Any]) -> bytes:
        return self.tree.jsonl(self.tp(rel), rows)

    def bound(self, rel: str, identity: Any, payload: Any, *, force_gzip: bool | None = None) -> bytes:
        return self.tree.bound(self.tp(rel), identity, payload, force_gzip=force_gzip)

    def get(self, rel: str) -> bytes:
        return self.tree.get(self.tp(rel))

    def sha(self, rel: str) -> str:
        return sha256_bytes(self.get(rel))

    def binding(self, rel: str | None) -> dict[str, str] | None:
        if rel is None:
            return None
        return {"path": self.abs(rel), "sha256": self.sha(rel)}

    def tick(self, seconds: float = 7.0) -> float:
        self.clock += seconds
        return self.clock

    # inputs ----------------------------------------------------------------------
    def write_inputs(self) -> None:
        s = self.story
        self.put("inputs/image.png", self.png)
        self.json("inputs/serving-profile.json", serving_profile())
        self.json(
            "inputs/public-context.json",
            {"case_id": self.case_id, "image_id": self.image_id, "claim": s.claim, "source": "community-note-queue"},
        )
        self.json(
            "inputs/private-context.json",
            {"case_id": self.case_id, "privileged": True, "reference_facts": [s.private_fact], "reference_urls": []},
        )
        self.json(
            "inputs/gold.json",
            {"case_id": self.case_id, "verdict": s.gold_verdict, "rationale": s.private_fact, "privileged": True},
        )
        self.json(
            "inputs/source-access-policy.json",
            {"schema_version": "ifv-source-access-policy-v1", "allow_private_reference_for": ["judge", "hint_constructor"], "deny_for": ["policy", "student"]},
        )

    # the source rollout -----------------------------------------------------------
    def build_source(self, *, hostile: dict[int, dict[str, str]] | None = None) -> None:
        """Write ``source/trace.json`` and its runtime store ``source/runtime/...``."""
        s = self.story
        stage_key = "stage_name" if self.legacy_stage_name else "stage"
        store = RuntimeStore(self, "source/runtime", f"rollout-{hexid(self.case_id, 'rollout')}", clock=self.tick(0))
        run = PolicyRun(self, store, [user_message(s, self.image_id, self.image_sha)], stage_key=stage_key)
        steps = []
        for i, act in enumerate(s.acts):
            if hostile and i in hostile:
                act = Act(hostile[i].get("thought", act.thought), act.tool, act.args, hostile[i].get("result", act.result))
            steps.append(run.act(i, act, stage="unified_react", seed=f"{self.case_id}:src:{i}"))
        steps.append(run.judge(len(s.acts), s.verdict, stage="unified_judgment", seed=f"{self.case_id}:src:judge"))
        store.finish()
        self.source_store = store
        v = s.verdict
        judgment = {"verdict": v.verdict, "confidence": v.confidence, "overall_assessment": v.assessment}
        trace = {
            "image_id": self.episode_id,
            "case_id": self.case_id,
            "verdict": v.verdict,
            "confidence": v.confidence,
            "judgment": judgment,
            "fact_check_report": {"claim": s.claim, "conclusion": v.assessment, "citations": []},
            "overall_assessment": v.assessment,
            "verdict_basis": "policy_judgment",
            "stop_reason": "judgment_emitted",
            "action_count": len(s.acts),
            "termination": "success",
            **totals(steps),
            "error": None,
            "state": {
                "image_path": self.abs("inputs/image.png"),
                "image_id": self.episode_id,
                "runtime_case": {"case_id": self.case_id, "image_path": self.abs("inputs/image.png"), "image_sha256": self.image_sha},
                "input_mode": "image_claim",
                "decision_policy_version": "unified-v3",
                "investigation_state": {
                    "case_id": self.case_id,
                    "image_sha256": self.image_sha,
                    "objective": s.claim,
                    "stop_reason": "judgment_emitted",
                    "action_count": len(s.acts),
                },
                "investigation_brief": s.claim,
                "visual_entities": [],
                "visual_facts": [],
                "research_tasks": [],
                "findings": [],
                "retrieval_anchors": [],
                "perception": {},
                "final_visual_audit": {},
                "judgment": judgment,
                "all_steps": steps,
                "stage_timings": {"unified_react": round(2.5 * len(s.acts), 1), "unified_judgment": 2.5},
                **totals(steps),
                "termination": "success",
                "errors": [],
                "tool_health": {},
                "runtime_store": store.descriptor,
            },
        }
        self.trace = trace
        # the runtime writes its traces compact (one line); driver files are indented
        self.put("source/trace.json", compact_json_bytes(trace))
        self.trace_sha = self.sha("source/trace.json")
        self.trace_canonical_sha = canonical_sha256(trace)

    def source_messages_until(self, anchor: int) -> list[dict[str, Any]]:
        """The messages the source step ``anchor`` saw (its archived input payload)."""
        return copy.deepcopy(self.trace["state"]["all_steps"][anchor]["metadata"]["policy_input"]["input_payload"])

    def step_id(self, index: int) -> str:
        step = self.trace["state"]["all_steps"][index]
        kind = "judgment" if step_stage(step) == "unified_judgment" else "react"
        iid = step["metadata"].get("interaction_id")
        return f"{self.episode_id}:{kind}:{iid}" if iid else f"{self.episode_id}:{kind}:{index + 1}"

    def seed_candidate(self) -> dict[str, Any]:
        cid = self.seed_candidate_id
        return {
            "schema_version": "ifv-psd-candidate-v1",
            "candidate_id": cid,
            "class": "repair_seed",
            "candidate_status": "seed",
            "case_id": self.case_id,
            "episode_id": self.episode_id,
            "repair_signal": "terminal_outcome_mismatch",
            "source": self.source_block(),
        }

    @property
    def seed_candidate_id(self) -> str:
        return "psd-candidate:" + canonical_sha256({"kind": "seed", "case_id": self.case_id, "episode_id": self.episode_id})

    def source_block(self) -> dict[str, Any]:
        return {
            "source_run_id": f"rollout-{hexid(self.case_id, 'rollout')}",
            "runtime_commit": hexid("runtime-commit", n=40),
            "psd_round_index": 0,
            "psd_rollout_gate_sha256": canonical_sha256({"gate": "psd-rollout", "case": self.case_id}),
            "source_access_policy_sha256": self.sha("inputs/source-access-policy.json"),
            "source_trace_path": self.abs("source/trace.json"),
            "source_trace_sha256": self.trace_sha,
            "source_runtime_store_path": self.source_store.recorded,
        }

    def write_case_inputs(self) -> None:
        """Inputs that depend on the source trace (candidate, audit)."""
        self.json("inputs/candidate.json", self.seed_candidate())
        self.json(
            "inputs/audit.json",
            {
                "schema_version": "ifv-strict-trace-audit-v1",
                "passed": True,
                "source_trace_canonical_sha256": self.trace_canonical_sha,
                "failures": [],
            },
        )

    # semantic localization -----------------------------------------------------------
    def localization(self, anchor: int | None, category: str | None, *, seed: str, previous: dict[str, Any] | None = None,
                     closest: int | None = None, explanation: str = "") -> dict[str, Any]:
        steps = self.trace["state"]["all_steps"]
        candidates = []
        if anchor is not None:
            step = steps[anchor]
            quote = step.get("thought") or ""
            candidates.append(
                {
                    "source_step_index": anchor,
                    "recoverable": True,
                    "selected": True,
                    "category": category,
                    "verifier": VERIFIER,
                    "observed_basis": [
                        {"trace": "source", "step_index": anchor, "quote": quote},
                        {"trace": "source", "step_index": 0, "quote": steps[0]["tool_result"][:60]},
                    ],
                    "explanation": explanation or f"Step {anchor} leaves the provenance lead unexplored.",
                }
            )
        elif closest is not None:
            step = steps[closest]
            candidates.append(
                {
                    "source_step_index": closest,
                    "recoverable": False,
                    "selected": False,
                    "category": "evidence_interpretation_error",
                    "verifier": VERIFIER,
                    "observed_basis": [{"trace": "source", "step_index": closest, "quote": step.get("thought") or ""}],
                    "explanation": "The judgment overstates the evidence, but no policy step could have found the original source with these tools.",
                }
            )
        packet = {"trace": self.trace_canonical_sha, "previous_anchor_disagreement": previous or None, "seed": seed}
        usage = {"input_tokens": 5120 + len(seed), "output_tokens": 412, "thought_tokens": 980}
        binding = {
            "version": "psd-task-review-v1",
            "model": JUDGE_MODEL,
            "prompt_sha256": canonical_sha256({"prompt": "psd-localize-v1"}),
            "schema_sha256": canonical_sha256({"schema": "psd-localization"}),
            "packet_sha256": canonical_sha256(packet),
            "images_sha256": canonical_sha256([self.image_sha]),
        }
        passed = anchor is not None
        body = {
            "schema_version": "ifv-psd-semantic-localization-v1",
            "passed": passed,
            "source_trace_canonical_sha256": self.trace_canonical_sha,
            "candidates": candidates,
            "explanation": explanation
            or ("One recoverable failure site found." if passed else "No recoverable policy step: the tools could not reach the original source."),
        }
        response = {"id": f"int-{hexid(seed, 'loc', n=16)}", "status": "completed", "model": JUDGE_MODEL, "usage": usage,
                    "outputs": [{"type": "text", "text": json.dumps({k: body[k] for k in ("passed", "candidates", "explanation")}, ensure_ascii=False)}]}
        provenance: dict[str, Any] = {
            "interaction_id": response["id"],
            "usage": usage,
            "request_binding": binding,
            "response_sha256": canonical_sha256(response),
        }
        if previous:
            provenance["previous_anchor_disagreement"] = previous
        body["provenance"] = provenance
        return {"doc": body, "cache": {"identity": binding, "response": response, "response_sha256": canonical_sha256(response)}}
