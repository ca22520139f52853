"""Run directories (single mode, or one feedback round) and feedback search roots."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_sha256, hint_sha256
from eviscene_tui.scaffold.samples import convo
from eviscene_tui.artifacts.models import CHECK_NAMES
from eviscene_tui.scaffold.samples.builders import (
    CONTINUATION_POLICY_VERSION,
    ENGINE_MODEL_PATH,
    HINT_MODEL,
    JUDGE_MODEL,
    PROFILE_ID,
    BASE_URL,
    CONTEXT_LENGTH,
    VERIFIER,
    Case,
    PolicyRun,
    RuntimeStore,
    hexid,
    hint_message,
    safe_name,
    step_stage,
    totals,
)
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.bundled.records import attempt_record, model_roles, proposal_id_for
from eviscene_tui.gate.bundled.stages import attempt_continuation

PROPOSER_SYSTEM = (
    "You write one short procedural hint for a frozen fact-checking policy that failed at the "
    "selected step. Never state the verdict or private facts. Reply as JSON {\"hints\": [string]}."
)
PROPOSER_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "hints",
        "schema": {"type": "object", "properties": {"hints": {"type": "array", "items": {"type": "string"}}}, "required": ["hints"]},
    },
}


def driver_inputs(c: Case, *, public_rel: str, semantic_rel: str | None, search_media: Any, output_dir: str, hint_count: int,
                  search_mode: str, repair_attempts: int, proposal_rounds: int, search_seconds: int) -> dict[str, Any]:
    """The driver's run config (the ``run-inputs.json`` identity and a search's ``inputs``),
    in the driver's key order; the callers add their own trailing keys."""
    return {
        "trace": c.binding("source/trace.json"),
        "candidate": c.binding("inputs/candidate.json"),
        "audit": c.binding("inputs/audit.json"),
        "gold": c.binding("inputs/gold.json"),
        "public_context": c.binding(public_rel),
        "private_context": c.binding("inputs/private-context.json"),
        "image": c.binding("inputs/image.png"),
        "train_cases": None,
        "policy_serving_profile": c.binding("inputs/serving-profile.json"),
        "round_start_checkpoint_manifest": None,
        "semantic_verification": c.binding(semantic_rel),
        "verification_bundle": None,
        "source_access_policy": c.binding("inputs/source-access-policy.json"),
        "search_media": search_media,
        "output_dir": output_dir,
        "policy_provider": "qwen_local",
        "policy_model": PROFILE_ID,
        "policy_base_url": BASE_URL,
        "policy_wire_api": "chat_completions",
        "hint_constructor_provider": "gemini",
        "hint_constructor_model": HINT_MODEL,
        "hint_constructor_base_url": None,
        "hint_constructor_wire_api": "interactions",
        "hint_constructor_thinking_level": "high",
        "round_start_checkpoint": ENGINE_MODEL_PATH,
        "hint_count": hint_count,
        "hint_level": 1,
        "max_suffix_actions": 6,
        "run_student_diagnostic": False,
        "judge_model": JUDGE_MODEL,
        "search_mode": search_mode,
        "policy_temperature": 0.7,
        "repair_attempts": repair_attempts,
        "proposal_rounds": proposal_rounds,
        "search_seconds": search_seconds,
        "precomputed_slate_cache": None,
        "candidate_offset": None,
        "candidate_length": None,
    }


@dataclass
class Judgement:
    """What the local verifier (judge) says about one attempt."""

    checks: dict[str, bool]
    earliest_error_step: int
    explanation: str

    @property
    def passed(self) -> bool:
        return all(self.checks.get(n) is True for n in CHECK_NAMES)


def judgement(*, anchor_ok: bool = True, repaired: bool = True, grounded: bool = True, earliest: int, why: str) -> Judgement:
    return Judgement(
        {
            "source_error_confirmed": True,
            "repaired_at_selected_step": repaired,
            "grounded_episode": grounded,
            "procedural_hint": True,
            "anchor_matches": anchor_ok,
            "episode_complete": True,
        },
        earliest,
        why,
    )


@dataclass
class Attempt:
    index: int
    hint: str
    record: dict[str, Any]
    episode_rel: str
    episode: dict[str, Any]
    judge: Judgement | None = None
    repaired_steps: list[dict[str, Any]] = field(default_factory=list)


def rejected_hint_text(code: str, private_fact: str) -> str:
    """What a hint rejected with ``code`` looked like in the raw proposer response."""
    return {
        "binary_verdict_leak": "The image is fake, so answer fake.",
        "hint_too_long": "Check every source carefully. " * 45,
        "private_value_leak": f"Note: {private_fact}",
        "internal_term_leak": "Redo the psd_teacher_repair step at the repair anchor.",
        "structured_action_scaffold_leak": 'Call fetch_page with {"url": "https://archive.example.org/2023-march"}.',
        "changed_verified_hint": "Compare the dates of all matches before judging.",
        "repeated_completed_hint": "Open the oldest reverse-image match first.",
    }.get(code, "")


def audit_ok(hint: str, level: int = 1) -> dict[str, Any]:
    return {
        "schema_version": "ifv-psd-hint-audit-v1",
        "passed": True,
        "hint_level": level,
        "hint_chars": len(hint.strip()),
        "hint_sha256": hint_sha256(hint),
        "errors": [],
        "leak_paths": [],
    }


class RunBuilder:
    """Writes one run directory at ``run_rel`` inside ``case`` ('' = the case root)."""

    def __init__(
        self,
        case: Case,
        run_rel: str,
        *,
        hint_count: int,
        public_rel: str = "inputs/public-context.json",
        media_rel: str | None = None,
        semantic_input_rel: str | None = "inputs/semantic-verification.json",
        search_mode: str = "single",
        budgets: tuple[int, int, int] = (6, 12, 1800),
    ) -> None:
        self.case = case
        self.run_rel = run_rel
        # a search round's config carries the search's own budget arguments (the driver
        # copies every argument into the child run)
        self.budgets = budgets
        self.prefix = f"{run_rel}/" if run_rel else ""
        self.hint_count = hint_count
        self.public_rel = public_rel
        self.media_rel = media_rel
        self.semantic_input_rel = semantic_input_rel
        self.search_mode = search_mode
        self.attempts: list[Attempt] = []
        self.candidate: dict[str, Any] | None = None
        self.audit_rows: list[dict[str, Any]] = []
        self.proposals: list[dict[str, Any]] = []
        self.last_runtime: str | None = None
        self.localization_doc: dict[str, Any] | None = None
        self.finalization: dict[str, Any] = {}  # finalization.json, once finalize() wrote it
        # the proposer store is opened at the start of every invocation: the initial
        # manifest already names it as ``runtime_archive``
        self.proposer_attempt_id = f"psd-proposer-{hexid(case.case_id, run_rel, 'proposer')}"
        self.proposer_store_rel = f"{self.r('runtime')}/{safe_name(case.case_id)}/{safe_name(self.proposer_attempt_id)}"

    # helpers -------------------------------------------------------------------------
    def r(self, rel: str) -> str:
        return self.prefix + rel

    @property
    def config(self) -> dict[str, Any]:
        c = self.case
        return {
            **driver_inputs(
                c,
                public_rel=self.public_rel,
                semantic_rel=self.semantic_input_rel,
                search_media=c.binding(self.media_rel),
                output_dir=c.abs(self.run_rel),
                hint_count=self.hint_count,
                search_mode=self.search_mode,
                repair_attempts=self.budgets[0],
                proposal_rounds=self.budgets[1],
                search_seconds=self.budgets[2],
            ),
            "continuation_policy_version": CONTINUATION_POLICY_VERSION,
        }

    @property
    def config_sha(self) -> str:
        return canonical_sha256(self.config)

    # 1. run-inputs + localization + candidate -----------------------------------------
    def start(self) -> None:
        self.case.bound(self.r("run-inputs.json"), self.config, {"status": "initialized"})

    def begin(self, loc: dict[str, Any] | None = None, *, copy_from: str | None = None) -> None:
        """Steps 1-2 of every run that reaches a site: run-inputs, localization, site, generating manifest."""
        self.start()
        self.localize(loc, copy_from=copy_from)
        self.bind_site()
        self.manifest_start()

    def localize(self, loc: dict[str, Any] | None = None, *, copy_from: str | None = None) -> None:
        """Write semantic-localization.json: a fresh Gemini result ``loc`` (plus its judge-cache
        file) or a byte copy of an earlier file (``copy_from``: reuse / the input)."""
        if copy_from is not None:
            data = self.case.get(copy_from)
            self.case.put(self.r("semantic-localization.json"), data)
            self.localization_doc = json.loads(data)
            return
        assert loc is not None
        self.case.json(self.r("semantic-localization.json"), loc["doc"])
        self.case.json(self.r(f"judge-cache/{canonical_sha256(loc['cache']['identity'])}.json"), loc["cache"])
        self.localization_doc = loc["doc"]

    def bind_site(self) -> dict[str, Any]:
        c = self.case
        doc = self.localization_doc or {}
        chosen = next((x for x in doc.get("candidates", []) if x.get("selected")), None)
        assert chosen is not None
        index = chosen["source_step_index"]
        step = c.trace["state"]["all_steps"][index]
        md = step["metadata"]
        step_id = c.step_id(index)
        kind = "judgment" if step_stage(step) == "unified_judgment" else "react"
        self.site = {
            "step_index": index,
            "source_step_index": index,
            "step_id": step_id,
            "stage": step_stage(step),
            "example_type": kind,
            "policy_input_sha256": canonical_sha256(md["policy_input"]),
            "policy_action_sha256": canonical_sha256(md["policy_action"]),
            "context_request_id": md["context_request_id"],
            "localization_kind": "semantic_task_verifier",
            "semantic_category": chosen["category"],
            "localization_verifier": "gemini-psd-repair:psd-task-review-v1",
            "localization_basis_sha256": canonical_sha256(doc),
        }
        cid = "psd-candidate:" + canonical_sha256(
            {"kind": "repair", "case_id": c.case_id, "episode_id": c.episode_id, "step_id": step_id, "source_trace_sha256": c.trace_sha}
        )
        seed = c.seed_candidate()
        self.candidate = {
            "schema_version": "ifv-psd-candidate-v1",
            "candidate_id": cid,
            "parent_candidate_id": seed["candidate_id"],
            "class": "repair_seed",
            "candidate_status": "localized",
            "case_id": c.case_id,
            "episode_id": c.episode_id,
            "repair_signal": "terminal_outcome_mismatch",
            "failure_localization": {
                "status": "localized",
                "basis": "semantic_task_verifier",
                "requires_privileged_attribution": True,
                "observed_failure_step_indices": [index],
                "observed_failure_source_step_indices": [index],
                "repair_anchor_step_index": index,
                "repair_anchor_source_step_index": index,
                "repair_anchor_step_id": step_id,
                "repair_signal": "terminal_outcome_mismatch",
            },
            "strict_trace_audit_failure_codes": [],
            "repair_site": {
                "step_id": step_id,
                "source_step_index": index,
                "stage": step_stage(step),
                "example_type": kind,
                "interaction_id": md["interaction_id"],
                "context_request_id": md["context_request_id"],
                "runtime_store_path": c.source_store.recorded,
                "action_type": step["action_type"],
                "protocol_rejected": False,
                "model_visible": {"policy_input": md["policy_input"]},
                "observed_policy_action": md["policy_action"],
                "rollout_token_capture": md["policy_token_capture"],
            },
            "source": c.source_block(),
        }
        self.case.jsonl(self.r("repair_candidates.jsonl"), [self.candidate])
        return self.candidate

    def manifest_start(self) -> None:
        self.case.json(self.r("manifest.json"), {**self._manifest_head("generating"), "candidate_count": 0, "accepted_count": 0})

    def _manifest_head(self, status: str) -> dict[str, Any]:
        c = self.case
        return {
            "schema_version": "ifv-psd-repair-driver-result-v1",
            "status": status,
            "trace": c.abs("source/trace.json"),
            "runtime_archive": self.last_runtime or c.recorded_runtime(self.proposer_store_rel),
            "source_task_review": None,
            "source_audit": c.binding("inputs/audit.json"),
            "train_cases_sha256": None,
            "source_access_policy": c.binding("inputs/source-access-policy.json"),
        }

    # 2. proposer --------------------------------------------------------------------------
    def propose(self, hints: list[str], rejected: list[str] | None = None, *, response_text: str | None = None) -> list[dict[str, Any]]:
        """The hint constructor returns ``hints`` (admitted) and, before them, hints rejected
        with the codes in ``rejected`` (their text is not stored)."""
        c = self.case
        store = RuntimeStore(c, self.r("runtime"), self.proposer_attempt_id, clock=c.tick())
        assert store.runtime_rel == self.proposer_store_rel
        raw_hints = [rejected_hint_text(code, c.story.private_fact) for code in (rejected or [])] + hints
        text = response_text if response_text is not None else json.dumps({"hints": raw_hints}, ensure_ascii=False)
        public = json.loads(c.get(self.public_rel))
        payload_msgs = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": json.dumps({"trace_context": public, "site": self.site["step_id"]}, ensure_ascii=False)},
                    {"type": "image_ref", "sha256": c.image_sha, "media_type": "image/png"},
                ],
            }
        ]
        prompt_tokens = 3000 + len(json.dumps(public)) // 3
        completion_tokens = max(1, len(text) // 4)
        iid = f"int-{hexid(c.case_id, self.run_rel, 'proposer', n=16)}"
        store.add_request(
            stage="psd_proposer",
            lifecycle_kind="privileged_proposer",
            prompt_version="ifv-psd-repair-proposer-v3-multimodal",
            model=HINT_MODEL,
            system_prompt=PROPOSER_SYSTEM,
            input_payload=payload_msgs,
            tools=[],
            response_format=PROPOSER_FORMAT,
            generation_config={"max_output_tokens": 2048, "thinking_level": "high", "max_tokens": 2048},
            interaction_id=iid,
            input_tokens=prompt_tokens,
            output_tokens=completion_tokens,
            image_count=1,
        )
        store.finish()
        self.case.bound(
            self.r("proposer-response.json"),
            {"run": self.config_sha, "prompt_version": "ifv-psd-repair-proposer-v3-multimodal", "model": HINT_MODEL, "hint_count": self.hint_count},
            {"interaction_id": iid, "model": HINT_MODEL, "text": text, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "thought_tokens": 640},
        )
        rows: list[dict[str, Any]] = [{"passed": False, "reason": code} for code in (rejected or [])]
        proposals = []
        for h in hints:
            audit = audit_ok(h)
            rows.append({"passed": True, "audit": audit})
            proposals.append(
                {
                    "text": h,
                    "level": 1,
                    "proposal_id": proposal_id_for(self.site["step_id"], h, 1),
                    "provider": "gemini",
                    "model": HINT_MODEL,
                    "audit": audit,
                }
            )
        self.audit_rows = rows
        self.proposals = proposals
        self.case.json(self.r("proposer-hint-audits.json"), {"proposals": rows})
        self.case.bound(self.r("hint-proposals.json"), self.config, proposals)
        return proposals

    # 3. generation --------------------------------------------------------------------------
    def live_check(self) -> None:
        self.case.json(self.r("live-serving-check.json"), {"model_id": PROFILE_ID, "root": ENGINE_MODEL_PATH, "max_model_len": CONTEXT_LENGTH})

    def generate(
        self,
        index: int,
        *,
        try_count: int = 1,
        teacher_capture: str = "complete",
        force_gzip: bool | None = True,
        media_schema: str = "v3",
        write_record: bool = True,
    ) -> Attempt | None:
        """Run the hinted teacher for proposal ``index``. Failed tries (``try_count`` > 1)
        leave their runtime dirs and a generation-last-error.json that stays stale.

        Continuations default to the gzip pointer form: real ones (10k+ token prompts,
        full episode inside) are far above the 1 MiB threshold; the samples are smaller,
        so the form is forced. Pass ``force_gzip=False`` for a plain envelope."""
        c = self.case
        proposal = self.proposals[index]
        hint = proposal["text"]
        anchor = self.site["source_step_index"]
        actions, verdict = c.story.suffixes[anchor]
        for t in range(try_count - 1):
            failed = RuntimeStore(c, self.r("runtime"), f"hint-{index:02d}-{hexid(c.case_id, self.run_rel, index, t, 'try')}", clock=c.tick())
            failed._event("context_request_started", {"request_id": "req-000001", "stage": "psd_teacher_repair"})
            failed.finish()
            self.case.json(
                self.r("generation-last-error.json"),
                {"hint_index": index, "retry": t, "error_type": "ReadTimeout", "archive": failed.recorded},
            )
        self.live_check()
        store = RuntimeStore(c, self.r("runtime"), f"hint-{index:02d}-{hexid(c.case_id, self.run_rel, index, try_count - 1, 'try')}", clock=c.tick())
        before = c.source_messages_until(anchor)
        run = PolicyRun(c, store, before + [hint_message(hint)], stage_key="stage_name")
        teacher_steps = []
        for j, act in enumerate(actions):
            missing = ["completion_logprobs"] if (teacher_capture == "incomplete" and j == 0) else None
            teacher_steps.append(
                run.act(anchor + j, act, stage="psd_teacher_repair", seed=f"{c.case_id}:{self.run_rel}:{index}:t{j}",
                        capture_status=teacher_capture if j == 0 else "complete", missing=missing)
            )
        teacher_steps.append(run.judge(anchor + len(actions), verdict, stage="psd_teacher_judgment", seed=f"{c.case_id}:{self.run_rel}:{index}:tj"))
        store.finish()
        self.last_runtime = store.recorded
        episode = self._episode(teacher_steps, store, proposal)
        identity = {"run": self.config_sha, "hint": hint_sha256(hint)}
        payload = {
            "teacher_steps": teacher_steps,
            "student_steps": [],
            "hint": hint,
            "teacher_complete": True,
            "student_complete": False,
            "stop_reason": "teacher_episode_complete",
            "teacher_episode_trace": episode,
            "local_targets": None,
        }
        self.case.bound(self.r(f"continuations/hint-{index:02d}.json"), identity, payload, force_gzip=force_gzip)
        if teacher_capture != "complete":
            # the driver raises here (after the continuation is cached): no episode, no record
            return None
        episode_rel = f"episodes/hint-{index:02d}-teacher.json"
        self.case.json(self.r(episode_rel), episode)
        media = self._media(media_schema)
        first = teacher_steps[0]["metadata"]["policy_token_capture"]
        src_cap = c.trace["state"]["all_steps"][anchor]["metadata"]["policy_token_capture"]
        record = self._record(proposal, episode_rel, first, src_cap, media, len(teacher_steps))
        att = Attempt(index, hint, record, episode_rel, episode)
        att.repaired_steps = trace_steps(episode)
        self.attempts.append(att)
        if write_record:
            self.write_attempts()
        return att

    def generate_attempt(self, index: int) -> Attempt:
        """:meth:`generate` with a complete teacher capture: the attempt it always records."""
        att = self.generate(index)
        if att is None:
            raise RuntimeError(f"proposal {index} recorded no attempt")
        return att

    def _episode(self, teacher_steps: list[dict[str, Any]], store: RuntimeStore, proposal: dict[str, Any]) -> dict[str, Any]:
        c = self.case
        anchor = self.site["source_step_index"]
        ep = copy.deepcopy(c.trace)
        prefix = ep["state"]["all_steps"][:anchor]
        suffix = []
        for k, ts_ in enumerate(teacher_steps):
            s = copy.deepcopy(ts_)
            stage = "unified_judgment" if s.pop("stage_name") == "psd_teacher_judgment" else "unified_react"
            s = {"round": anchor + k + 1, "stage": stage, **{k2: v for k2, v in s.items() if k2 != "round"}}
            s["metadata"]["psd_role"] = "teacher"
            s["metadata"]["psd_suffix_step"] = True
            suffix.append(s)
        steps = prefix + suffix
        final = json.loads(steps[-1]["output"])
        ep["state"]["all_steps"] = steps
        ep["state"]["runtime_store"] = store.descriptor
        ep["state"]["judgment"] = final
        ep["state"]["investigation_state"] = {**ep["state"]["investigation_state"], "action_count": len(steps) - 1, "stop_reason": "judgment_emitted"}
        ep["state"]["termination"] = "success"
        ep["state"]["errors"] = []
        ep["state"].update(totals(steps))
        ep.update(
            {
                "judgment": final,
                "verdict": final["verdict"],
                "confidence": final["confidence"],
                "overall_assessment": final["overall_assessment"],
                "fact_check_report": {"claim": c.story.claim, "conclusion": final["overall_assessment"], "citations": []},
                "evidence_citations": [],
                "stop_reason": "judgment_emitted",
                "action_count": len(steps) - 1,
                "verdict_basis": "policy_judgment",
                "termination": "success",
                **totals(steps),
                "error": None,
                "psd_repair": {
                    "role": "teacher",
                    "repair_step_id": self.site["step_id"],
                    "source_step_index": anchor,
                    "terminal_state_replayed": True,
                    "source_runtime_store_path": c.source_store.recorded,
                },
            }
        )
        return ep

    def _media(self, schema: str) -> dict[str, Any]:
        c = self.case
        rel = self.r(f"media/{c.image_sha}.image")
        c.put(rel, c.png)
        if schema == "v1":
            return {"schema_version": "ifv-psd-media-v1", "path": c.abs(rel), "sha256": c.image_sha, "image_grid_thw": convo.GRID_THW}
        return {
            "schema_version": "ifv-psd-media-v3",
            "processor_id": ENGINE_MODEL_PATH,
            "processor_config": {
                "image_processor_type": "Qwen2VLImageProcessorFast",
                "patch_size": convo.PATCH_SIZE,
                "temporal_patch_size": 2,
                "merge_size": convo.MERGE_SIZE,
                "min_pixels": 3136,
                "max_pixels": 12845056,
            },
            "image_sha256": [c.image_sha],
            "image_paths": [c.abs(rel)],
            "merge_size": convo.MERGE_SIZE,
        }

    def _record(self, proposal: dict[str, Any], episode_rel: str, teacher_cap: dict[str, Any], src_cap: dict[str, Any],
                media: dict[str, Any], teacher_count: int) -> dict[str, Any]:
        """The attempt record as the driver writes it before its verifier ran (its local
        verifier answer is not in yet, so the reason reads as the driver's)."""
        c = self.case
        if self.candidate is None:
            raise RuntimeError("bind_site() binds the candidate before an attempt is recorded")
        roles = model_roles(hint_provider="gemini", hint_model=HINT_MODEL, policy_model=PROFILE_ID,
                            checkpoint=ENGINE_MODEL_PATH, manifest_sha=None)
        continuation = attempt_continuation("teacher_episode_complete", c.sha(self.r(episode_rel)),
                                            teacher_steps=teacher_count, verified=True, episode_trace=episode_rel)
        return attempt_record(
            candidate=self.candidate,
            site=self.site,
            proposal=proposal,
            roles=roles,
            student_prompt_ids=src_cap["prompt_token_ids"],
            teacher_capture=teacher_cap,
            source_trace_sha256=c.trace_sha,
            continuation=continuation,
            psd_media=media,
            expected_verdict=c.story.gold_verdict,
            pending_reasons=("local:local_verifier_schema_invalid",),
        )

    def write_attempts(self, rel: str = "repair_attempts.jsonl") -> None:
        self.case.jsonl(self.r(rel), [a.record for a in self.attempts])

    def manifest_progress(self) -> None:
        recs = [a.record for a in self.attempts]
        self.case.json(
            self.r("manifest.json"),
            {
                **self._manifest_head("generating"),
                "candidate_count": len(recs),
                "accepted_count": sum(1 for r in recs if r["accepted"]),
                "pending_hinted_episode_count": sum(1 for r in recs if not r["local_verification"]),
            },
        )

    # 4. judge + finalize --------------------------------------------------------------------
    def judge(self, att: Attempt, j: Judgement) -> dict[str, Any]:
        c = self.case
        rec = att.record
        checks = [{"name": n, "passed": j.checks[n]} for n in CHECK_NAMES]
        iid = f"int-{hexid(c.case_id, self.run_rel, att.index, 'judge', n=16)}"
        usage = {"input_tokens": 18000 + att.index, "output_tokens": 530, "thought_tokens": 1400}
        binding = {
            "version": "psd-task-review-v1",
            "model": JUDGE_MODEL,
            "prompt_sha256": canonical_sha256({"prompt": "psd-review-v1"}),
            "schema_sha256": canonical_sha256({"schema": "psd-review"}),
            "packet_sha256": canonical_sha256({"attempt": rec["attempt_id"], "episode": rec["continuation"]["hinted_teacher_episode_trace_sha256"]}),
            "images_sha256": canonical_sha256([c.image_sha]),
        }
        quote = att.episode["state"]["all_steps"][self.site["source_step_index"]]["thought"]
        evidence = [{"trace": "teacher", "step_index": self.site["source_step_index"], "quote": quote}] if j.passed else [{"reason": j.explanation}]
        review_core = {n: j.checks[n] for n in ("source_error_confirmed", "repaired_at_selected_step", "grounded_episode", "procedural_hint")}
        response = {"id": iid, "status": "completed", "model": JUDGE_MODEL, "usage": usage,
                    "outputs": [{"type": "text", "text": json.dumps({**review_core, "earliest_error_step": j.earliest_error_step, "explanation": j.explanation}, ensure_ascii=False)}]}
        artifact = {
            "schema_version": "ifv-psd-local-verification-v1",
            "verifier": VERIFIER,
            "repair_step_id": rec["repair_step_id"],
            "source_trace_sha256": c.trace_sha,
            "hint_sha256": hint_sha256(att.hint),
            "teacher_prompt_sha256": canonical_sha256(rec["teacher_prompt_ids"]),
            "teacher_completion_sha256": canonical_sha256(rec["completion_ids"]),
            "teacher_episode_canonical_sha256": canonical_sha256(att.episode),
            "private_reference_sha256": canonical_sha256(json.loads(c.get("inputs/private-context.json"))),
            "passed": j.passed,
            "checks": checks,
            "evidence": evidence,
            "review": {
                **review_core,
                "earliest_error_step": j.earliest_error_step,
                "explanation": j.explanation,
                "evidence": evidence,
                "passed": j.passed,
                "anchor_matches": j.checks["anchor_matches"],
                "episode_complete": j.checks["episode_complete"],
                "interaction_id": iid,
                "usage": usage,
                "request_binding": binding,
                "response_sha256": canonical_sha256(response),
            },
        }
        c.json(self.r(f"judge/hint-{att.index:02d}.json"), artifact)
        c.json(self.r(f"judge-cache/{canonical_sha256(binding)}.json"), {"identity": binding, "response": response, "response_sha256": canonical_sha256(response)})
        att.judge = j
        # finalize rewrites the verdict fields in place
        recorded = att.episode["verdict"]
        episode_pass = recorded.lower() == c.story.gold_verdict.lower()
        local_pass = j.passed
        tier = "causal_episode_pass" if (local_pass and episode_pass) else ("local_pass_downstream" if local_pass else "unrepairable")
        reasons = []
        if not local_pass:
            reasons.append("hinted_local_verifier_failed")
        if not episode_pass:
            reasons.append("private_gold_verdict_mismatch")
        accepted = tier == "causal_episode_pass" and local_pass and episode_pass
        rec.update(
            {
                "repair_tier": tier,
                "hinted_local_pass": local_pass,
                "hinted_episode_pass": episode_pass,
                "verification": {
                    **rec["verification"],
                    "hinted_local_pass": local_pass,
                    "hinted_episode_pass": episode_pass,
                    "repair_tier": tier,
                    "hinted_recorded_verdict": recorded,
                    "reasons": reasons,
                },
                "local_verification": {**artifact, "artifact": f"judge/hint-{att.index:02d}.json"},
                "accepted": accepted,
            }
        )
        return artifact

    def finalize(self, *, errors: list[dict[str, Any]] | None = None) -> None:
        """gemini-verification-bundle, the pre-finalize backup, finalization and judge-summary."""
        c = self.case
        judged = [a for a in self.attempts if a.judge is not None]
        c.json(
            self.r("gemini-verification-bundle.json"),
            {
                "schema_version": "ifv-psd-repair-verification-bundle-v1",
                "attempts": [
                    {"hint_index": a.index, "hint_sha256": hint_sha256(a.hint), "local_verification": f"judge/hint-{a.index:02d}.json"}
                    for a in judged
                ],
            },
        )
        unresolved = [{"hint_index": a.index, "reason": "local_verification_missing"} for a in self.attempts if a.judge is None]
        accepted = sum(1 for a in self.attempts if a.record["accepted"])
        status = "ready_for_assembly" if not unresolved else ("partially_finalized" if judged else "blocked_unresolved_verifiers")
        fin = {
            "schema_version": "ifv-psd-repair-finalization-v1",
            "status": status,
            "attempts": len(self.attempts),
            "accepted": accepted,
            "rejected": len(judged) - accepted,
            "unresolved": unresolved,
            "provider_calls": 0,
            "run_dir": c.abs(self.run_rel),
        }
        c.json(self.r("finalization.json"), fin)
        c.json(self.r("judge-summary.json"), {**fin, "judge_model": JUDGE_MODEL, "errors": errors or [], "train_cases_sha256": None})
        self.finalization = fin

    def manifest_final(self, *, finalized: bool = True) -> None:
        c = self.case
        recs = [a.record for a in self.attempts]
        status = "generated" if recs else "no_admissible_hints"
        manifest = {
            **self._manifest_head(status),
            "candidate_count": len(recs),
            "accepted_count": sum(1 for r in recs if r["accepted"]),
            "pending_hinted_episode_count": sum(1 for r in recs if not r["local_verification"]),
            "policy_serving_attestation": {
                "profile": c.abs("inputs/serving-profile.json"),
                "profile_sha256": c.sha("inputs/serving-profile.json"),
                "profile_id": PROFILE_ID,
                "model_path": ENGINE_MODEL_PATH,
                "checkpoint_manifest": None,
                "checkpoint_manifest_sha256": None,
            },
            "hint_constructor": {"provider": "gemini", "model": HINT_MODEL, "wire_api": "interactions", "thinking_level": "high", "supplies_training_distribution": False},
            "artifacts": {"repair_attempts": "repair_attempts.jsonl"},
        }
        if finalized and recs:
            manifest["artifacts"]["pre_finalize_backup"] = "repair_attempts.pre-finalize.jsonl"
            fin = self.finalization
            manifest["finalization"] = {
                "mode": "offline_no_provider_replay",
                "source_trace_sha256": c.trace_sha,
                "verification_bundle_sha256": c.sha(self.r("gemini-verification-bundle.json")),
                "finalized_attempts": len([a for a in self.attempts if a.judge is not None]),
                "unresolved_attempts": len(fin.get("unresolved", [])),
                "require_all": False,
            }
        c.json(self.r("manifest.json"), manifest)

    def backup_pre_finalize(self) -> None:
        """repair_attempts.pre-finalize.jsonl: the rows as generated (pending), before finalize."""
        pending = []
        for a in self.attempts:
            r = copy.deepcopy(a.record)
            r.update(
                {
                    "repair_tier": "unrepairable",
                    "hinted_local_pass": False,
                    "hinted_episode_pass": False,
                    "local_verification": {},
                    "accepted": False,
                }
            )
            r["verification"] = {**r["verification"], "hinted_local_pass": False, "hinted_episode_pass": False, "repair_tier": "unrepairable",
                                 "hinted_recorded_verdict": None, "reasons": ["local:local_verifier_schema_invalid"]}
            pending.append(r)
        self.case.jsonl(self.r("repair_attempts.pre-finalize.jsonl"), pending)

    def no_recoverable_site(self) -> None:
        self.case.jsonl(self.r("repair_candidates.jsonl"), [])
        self.case.json(self.r("manifest.json"), {"status": "no_recoverable_site", "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0})


def trace_steps(episode: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``trace_steps`` projection used in feedback (no token captures), over every step.

    ``index`` is put first: the committed sample runs were written in that key order.
    """
    return [{"index": p["index"], **p} for p in P.trace_steps(episode, suffix_only=False)]


# --------------------------------------------------------------------------- feedback search
class SearchBuilder:
    """A feedback search root: requests, round-inputs, rounds, search-state, manifest, aggregates."""

    def __init__(self, case: Case, *, max_attempts: int = 6, max_proposals: int = 12, max_seconds: int = 1800) -> None:
        self.case = case
        self.max_attempts = max_attempts
        self.max_proposals = max_proposals
        self.max_seconds = max_seconds
        self.rows: list[dict[str, Any]] = []
        self.round_dirs: list[str] = []
        self.elapsed = 0.0

    @property
    def identity(self) -> dict[str, Any]:
        c = self.case
        inputs = {
            **driver_inputs(
                c,
                public_rel="inputs/public-context.json",
                semantic_rel="inputs/semantic-verification.json",
                search_media=None,
                output_dir=c.abs(""),
                hint_count=1,
                search_mode="feedback",
                repair_attempts=self.max_attempts,
                proposal_rounds=self.max_proposals,
                search_seconds=self.max_seconds,
            ),
            "skip_auto_judge": False,
            "generation_retries": 1,
        }
        return {
            "version": "ifv-psd-feedback-search-v1",
            "inputs": inputs,
            "max_attempts": self.max_attempts,
            "max_proposals": self.max_proposals,
            "max_seconds": self.max_seconds,
        }

    # feedback (revision_context) -------------------------------------------------------
    def feedback(self) -> dict[str, Any]:
        previous = [row["feedback"] for row in self.rows]
        attempts = [a for fb in previous for a in fb["attempts"]]
        lock = ""
        for a in attempts:
            ck = a["checker"]
            if all(ck.get(k) is True for k in ("source_error_confirmed", "repaired_at_selected_step", "procedural_hint", "anchor_matches")):
                h = a["hint"]
                if not lock or h == lock or h.startswith(lock + "\n"):
                    lock = h
        last = attempts[-1] if attempts else None
        return {
            "previous_rounds": previous,
            "locked_hint": lock,
            "excluded_hints": [a["hint"] for a in attempts],
            "needs_relocalization": last is not None and not lock and last["checker"].get("anchor_matches") is False,
            "anchor_feedback": (
                {"selected_source_step": last["selected_source_step"], "earliest_error_step": last["earliest_error_step"], "checker": last["checker"]}
                if last
                else {}
            ),
        }

    def open_round(self, n: int) -> tuple[dict[str, Any], str, str]:
        """Write requests/round-NN.json and round-inputs/round-NN/{public,media}.json."""
        c = self.case
        fb = self.feedback()
        c.bound(f"requests/round-{n:02d}.json", {"search": canonical_sha256(self.identity), "round": n}, fb)
        public = {**json.loads(c.get("inputs/public-context.json")), "repair_search": fb}
        public_rel = f"round-inputs/round-{n:02d}/public.json"
        media_rel = f"round-inputs/round-{n:02d}/media.json"
        c.json(public_rel, public)
        episodes = []
        for row in self.rows:
            for rec in row["records"]:
                path = rec["continuation"]["hinted_teacher_episode_trace"]
                rel = path[len(c.fake_root) + 1 :]
                episodes.append({"path": path, "sha256": c.sha(rel)})
        c.json(media_rel, {"episodes": episodes})
        self.round_dirs.append(c.abs(f"rounds/round-{n:02d}"))
        return fb, public_rel, media_rel

    def close_round(self, rb: RunBuilder, *, status: str) -> dict[str, Any]:
        """``inspect_round``: the history row of a completed round."""
        c = self.case
        names = [
            "manifest.json",
            "repair_attempts.jsonl",
            "repair_candidates.jsonl",
            *[rb.r(a.episode_rel)[len(rb.prefix):] for a in rb.attempts],
            "proposer-hint-audits.json",
            "hint-proposals.json",
            "proposer-response.json",
            "live-serving-check.json",
            "semantic-localization.json",
        ]
        files = {}
        for name in names:
            rel = rb.r(name)
            if c.tp(rel) in c.tree.files:
                files[c.abs(rel)] = c.sha(rel)
        records = []
        for a in rb.attempts:
            r = copy.deepcopy(a.record)
            r["continuation"]["hinted_teacher_episode_trace"] = c.abs(rb.r(a.episode_rel))
            records.append(r)
        fb_attempts = []
        for a in rb.attempts:
            j = a.judge
            assert j is not None
            fb_attempts.append(
                {
                    "hint": a.hint,
                    "selected_source_step": rb.site["source_step_index"],
                    "checker": {k: v for k, v in j.checks.items() if isinstance(v, bool)},
                    "earliest_error_step": j.earliest_error_step,
                    "task_passed": j.passed,
                    "strict_trace_passed": True,
                    "accepted": a.record["accepted"],
                    "repaired_steps": a.repaired_steps,
                }
            )
        row = {
            "directory": c.abs(rb.run_rel),
            "files": files,
            "records": records,
            "candidates": [rb.candidate] if rb.candidate else [],
            "feedback": {
                "attempts": fb_attempts,
                "rejected_proposal_reasons": [r["reason"] for r in rb.audit_rows if not r.get("passed")],
                "status": status,
            },
            "no_further_hint": not records and not rb.audit_rows,
        }
        self.rows.append(row)
        self.elapsed += 412.5
        return row

    def finish(self, status: str, *, execution_error: dict[str, Any] | None = None, extra_elapsed: float = 0.0,
               gzip_state: bool | None = None) -> None:
        c = self.case
        self.elapsed += extra_elapsed
        records = [r for row in self.rows for r in row["records"]]
        merged: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            for cand in row["candidates"]:
                merged.setdefault(cand["candidate_id"], cand)
        payload: dict[str, Any] = {"status": status, "elapsed_seconds": round(self.elapsed, 1), "rounds": self.rows}
        if execution_error is not None:
            payload["execution_error"] = execution_error
        c.bound("search-state.json", self.identity, payload, force_gzip=gzip_state)
        c.jsonl("repair_attempts.jsonl", records)
        c.jsonl("repair_candidates.jsonl", list(merged.values()))
        c.put("search.lock", b"")
        c.json(
            "manifest.json",
            {
                "schema_version": "ifv-psd-feedback-search-v1",
                "status": status,
                "converged": status == "converged",
                "candidate_count": len(records),
                "accepted_count": sum(1 for r in records if r.get("accepted")),
                "proposal_rounds": len(self.round_dirs),
                "attempt_budget": self.max_attempts,
                "proposal_budget": self.max_proposals,
                "elapsed_seconds": round(self.elapsed, 1),
                "stop_reason": status,
                "rounds": list(self.round_dirs),
                "execution_error": execution_error,
                "training_distribution_provider": "frozen_self_teacher_only",
            },
        )
