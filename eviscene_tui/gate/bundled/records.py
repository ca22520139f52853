"""Builders for the driver-format objects a bundled-driver round writes (pure, no I/O).

Field sets follow psd-run-format §2.3–§2.11 and §2.14. Where the bundled
driver differs from the driver, the difference is visible in the data:

- an operator-chosen site has ``localization_kind: "operator"`` and
  ``localization_verifier: "operator:<name>"``; its semantic-localization
  document has a candidate whose ``verifier.kind`` is ``"operator"``;
- the verdict is the operator's: ``judge/hint-00.json`` has
  ``verifier {kind: "operator", name: "eviscene-tui", version: "operator-review-v1", model: <operator>}``
  and ``review.interaction_id`` = the id of the operator's gate decision;
- the teacher continuation is the single hinted policy action at the failure
  step (the app does not execute tools); its ``stop_reason`` is
  ``teacher_episode_complete`` for a judgment step and ``bounded_suffix_exhausted``
  otherwise.

A big source trace is read lazily (``source.py``): its ``state.all_steps`` is then a
:class:`~eviscene_tui.artifacts.trace.LazySteps`, each step parsed from its byte range
when it is read. The lookups over every step (policy steps, step ids, the site's
projected index) go through :func:`step_facts` (a light projection made once per trace,
from the steps parsed without their token captures), never through the steps themselves.
"""

from __future__ import annotations

import copy
import math
import weakref
from typing import Any, Mapping, NamedTuple, Sequence

import orjson

from eviscene_tui.artifacts.jsonio import canonical_sha256
from eviscene_tui.artifacts.trace import LazySteps, SourceTrace
from eviscene_tui.policy.events import TokenLogprob
from eviscene_tui.gate.protocol import CHECK_NAMES

SEARCH_SCHEMA = "ifv-psd-feedback-search-v1"
RUN_SCHEMA = "ifv-psd-repair-driver-result-v1"
CANDIDATE_SCHEMA = "ifv-psd-candidate-v1"
ATTEMPT_SCHEMA = "ifv-psd-repair-attempt-v1"
SEMLOC_SCHEMA = "ifv-psd-semantic-localization-v1"
LOCAL_VERIFICATION_SCHEMA = "ifv-psd-local-verification-v1"
CAPTURE_SCHEMA = "ifv-policy-token-capture-v1"
BUNDLE_SCHEMA = "ifv-psd-repair-verification-bundle-v1"
CONTINUATION_POLICY_VERSION = "native-contract-and-observed-slate-positions-v6"
OPERATOR_VERIFIER = {"kind": "operator", "name": "eviscene-tui", "version": "operator-review-v1"}
SEMANTIC_CATEGORIES = (
    "wrong_search_direction",
    "incomplete_event_verification",
    "unsupported_similarity_extrapolation",
    "ignored_repeated_no_match",
    "evidence_interpretation_error",
)
IMAGE_PAD_IDS = (248056, 151655)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def round_name(index: int) -> str:
    return f"round-{index:02d}"


# ------------------------------------------------------------------ trace helpers
def trace_steps_of(trace: Mapping[str, Any]) -> Sequence[Any]:
    """``state.all_steps``: a list, or for a lazily read trace its :class:`LazySteps`."""
    steps = _map(trace.get("state")).get("all_steps")
    return steps if isinstance(steps, (list, LazySteps)) else []


def is_policy_step(step: Any) -> bool:
    meta = _map(_map(step).get("metadata"))
    return isinstance(meta.get("policy_input"), dict) and isinstance(meta.get("policy_action"), dict)


class StepFacts(NamedTuple):
    """What the lookups over every step need of one step."""

    policy: bool  # is_policy_step
    stage: str  # step_stage
    interaction_id: Any  # metadata.interaction_id


def facts_of(step: Any) -> StepFacts:
    return StepFacts(is_policy_step(step), step_stage(step), _map(_map(step).get("metadata")).get("interaction_id"))


_FACTS: weakref.WeakKeyDictionary[LazySteps, list[StepFacts]] = weakref.WeakKeyDictionary()


def step_facts(trace: Mapping[str, Any]) -> list[StepFacts]:
    """The facts of every step. A lazily read trace makes them once, a step at a time,
    from the step parsed without its token capture's lists (``SourceTrace.light_step``:
    the facts never read those lists); that parse also checks each step's byte range
    (a range that is not one object is recorded in ``LazySteps.bad``)."""
    steps = trace_steps_of(trace)
    if not isinstance(steps, LazySteps):
        return [facts_of(step) for step in steps]
    known = _FACTS.get(steps)
    if known is None:
        source = SourceTrace(dict(trace), steps=steps)
        known = _FACTS[steps] = [facts_of(source.light_step(i)) for i in range(len(steps))]
    return known


def trace_canonical_sha256(trace: Mapping[str, Any]) -> str:
    """The canonical sha of the whole trace (§6); a lazily read one hashed step by step."""
    steps = trace_steps_of(trace)
    if isinstance(steps, LazySteps):
        return SourceTrace(dict(trace), steps=steps).canonical_sha256()
    return canonical_sha256(dict(trace))


def policy_step_indices(trace: Mapping[str, Any]) -> list[int]:
    """The steps where the policy acted (a site can only be one of them)."""
    return [i for i, facts in enumerate(step_facts(trace)) if facts.policy]


def step_stage(step: Any) -> str:
    s = _map(step)
    return str(s.get("stage") or s.get("stage_name") or "")


def example_type_of(stage: str) -> str:
    return "judgment" if "judgment" in stage else "react"


def episode_id_of(trace: Mapping[str, Any]) -> str:
    value = trace.get("image_id") or _map(trace.get("state")).get("image_id")
    return str(value) if value is not None else ""


def case_id_of(trace: Mapping[str, Any]) -> str:
    value = trace.get("case_id") or _map(_map(trace.get("state")).get("runtime_case")).get("case_id")
    return str(value) if value is not None else episode_id_of(trace)


def step_id_for(trace: Mapping[str, Any], index: int) -> str:
    facts = step_facts(trace)[index] if isinstance(trace_steps_of(trace), LazySteps) else facts_of(trace_steps_of(trace)[index])
    ex = example_type_of(facts.stage)
    iid = facts.interaction_id
    return f"{episode_id_of(trace)}:{ex}:{iid}" if iid else f"{episode_id_of(trace)}:{ex}:{index + 1}"


def projected_step_index(trace: Mapping[str, Any], source_index: int) -> int:
    return sum(1 for facts in step_facts(trace)[:source_index] if facts.policy)


# ------------------------------------------------------------------ site
def site_from_trace(
    trace: Mapping[str, Any],
    source_index: int,
    *,
    localization_kind: str,
    semantic_category: str | None = None,
    localization_verifier: str | None = None,
    basis: Any = None,
) -> dict[str, Any]:
    """A public site record (the attempt's ``repair_site``) for a step of the trace."""
    steps = trace_steps_of(trace)
    if not 0 <= source_index < len(steps):
        raise ValueError(f"the trace has {len(steps)} steps; there is no step {source_index}")
    step = _map(steps[source_index])
    if not is_policy_step(step):
        raise ValueError(
            f"step {source_index} is not a policy step (it lacks metadata.policy_input / policy_action); "
            "pick a step where the policy acted"
        )
    meta = _map(step.get("metadata"))
    stage = step_stage(step)
    return {
        "step_index": projected_step_index(trace, source_index),
        "source_step_index": source_index,
        "step_id": step_id_for(trace, source_index),
        "stage": stage,
        "example_type": example_type_of(stage),
        "policy_input_sha256": canonical_sha256(meta.get("policy_input")),
        "policy_action_sha256": canonical_sha256(meta.get("policy_action")),
        "context_request_id": meta.get("context_request_id"),
        "localization_kind": localization_kind,
        "semantic_category": semantic_category,
        "localization_verifier": localization_verifier,
        "localization_basis_sha256": canonical_sha256(basis) if basis is not None else None,
    }


def site_from_candidate(candidate: Mapping[str, Any], trace: Mapping[str, Any]) -> dict[str, Any] | None:
    rs = _map(candidate.get("repair_site"))
    fl = _map(candidate.get("failure_localization"))
    index = rs.get("source_step_index")
    if type(index) is not int:
        index = fl.get("repair_anchor_source_step_index")
    if type(index) is not int:
        return None
    kind = rs.get("localization_kind") or {
        "protocol_rejection": "runtime_action_failure",
        "strict_trace_audit_failure": "strict_trace_audit",
    }.get(str(candidate.get("repair_signal") or fl.get("repair_signal") or ""), "observed_runtime_failure")
    try:
        site = site_from_trace(
            trace,
            index,
            localization_kind=kind,
            semantic_category=rs.get("semantic_category"),
            localization_verifier=rs.get("localization_verifier"),
        )
    except ValueError:
        return None
    if rs.get("step_id"):
        site["step_id"] = rs["step_id"]
    if rs.get("localization_basis_sha256"):
        site["localization_basis_sha256"] = rs["localization_basis_sha256"]
    return site


def bind_candidate(
    seed: Mapping[str, Any] | None,
    trace: Mapping[str, Any],
    site: Mapping[str, Any],
    *,
    source_trace_sha256: str,
) -> dict[str, Any]:
    """The round's ``repair_candidates.jsonl`` row for ``site`` (as ``bind_localized_candidate``)."""
    seed = _map(copy.deepcopy(dict(seed or {})))
    index = int(site["source_step_index"])
    step = _map(trace_steps_of(trace)[index])
    meta = _map(step.get("metadata"))
    case_id = str(seed.get("case_id") or case_id_of(trace))
    episode_id = str(seed.get("episode_id") or episode_id_of(trace))
    candidate_id = "psd-candidate:" + canonical_sha256(
        {
            "kind": "repair",
            "case_id": case_id,
            "episode_id": episode_id,
            "step_id": site["step_id"],
            "source_trace_sha256": source_trace_sha256,
        }
    )
    fl = dict(_map(seed.get("failure_localization")))
    fl.update(
        {
            "status": fl.get("status") or "localized",
            "repair_anchor_step_index": site["step_index"],
            "repair_anchor_source_step_index": index,
            "repair_anchor_step_id": site["step_id"],
        }
    )
    if site.get("localization_kind") == "operator":
        fl["basis"] = "operator"
    row = dict(seed)
    row.update(
        {
            "schema_version": CANDIDATE_SCHEMA,
            "candidate_id": candidate_id,
            "parent_candidate_id": seed.get("parent_candidate_id") or seed.get("candidate_id") or candidate_id,
            "class": "repair_seed",
            "candidate_status": "localized",
            "case_id": case_id,
            "episode_id": episode_id,
            "failure_localization": fl,
            "repair_site": {
                "step_id": site["step_id"],
                "source_step_index": index,
                "stage": site["stage"],
                "example_type": site["example_type"],
                "interaction_id": meta.get("interaction_id"),
                "context_request_id": meta.get("context_request_id"),
                "runtime_store_path": _map(_map(trace.get("state")).get("runtime_store")).get("runtime_path"),
                "action_type": step.get("action_type"),
                "protocol_rejected": step.get("action_type") in ("format_error", "output_rejected", "policy_replan"),
                "model_visible": {"policy_input": meta.get("policy_input")},
                "observed_policy_action": meta.get("policy_action"),
                "rollout_token_capture": meta.get("policy_token_capture"),
                "localization_kind": site.get("localization_kind"),
                "semantic_category": site.get("semantic_category"),
                "localization_verifier": site.get("localization_verifier"),
            },
        }
    )
    src = dict(_map(seed.get("source")))
    src.setdefault("source_trace_sha256", source_trace_sha256)
    row["source"] = src
    return row


def operator_localization(
    trace: Mapping[str, Any], source_index: int, *, note: str, operator: str, category: str | None
) -> dict[str, Any]:
    """A semantic-localization document for an operator-chosen step."""
    step = _map(trace_steps_of(trace)[source_index])
    quote = str(step.get("thought") or step.get("output") or step.get("tool_name") or "")[:400]
    return {
        "schema_version": SEMLOC_SCHEMA,
        "passed": True,
        "source_trace_canonical_sha256": trace_canonical_sha256(trace),
        "candidates": [
            {
                "source_step_index": source_index,
                "recoverable": True,
                "selected": True,
                "category": category,
                "verifier": dict(OPERATOR_VERIFIER, model=operator),
                "observed_basis": [{"trace": "source", "step_index": source_index, "quote": quote}],
                "explanation": note,
            }
        ],
        "explanation": note,
        "provenance": {"operator": operator, "tool": "eviscene-tui"},
    }


# ------------------------------------------------------------------ teacher step / episode
def token_capture(
    prompt_ids: Sequence[int] | None,
    completion_ids: Sequence[int] | None,
    logprobs: Sequence[TokenLogprob] = (),
    topk: int = 0,
) -> dict[str, Any]:
    """An ``ifv-policy-token-capture-v1`` from a streamed continuation (the policy
    client's logprobs); top-k probabilities are renormalised over the returned k.
    """
    missing = []
    if not prompt_ids:
        missing.append("prompt_token_ids")
    if not completion_ids:
        missing.append("completion_token_ids")
    lps = [float(lp.logprob) for lp in logprobs]
    if not lps:
        missing.append("completion_logprobs")
    elif completion_ids and len(lps) != len(completion_ids):
        missing.append("completion_logprob_length_mismatch")
    topk_rows = []
    for lp in logprobs:
        tops = list(lp.top)
        probs = [math.exp(float(t.logprob)) for t in tops]
        total = sum(probs) or 1.0
        topk_rows.append(
            [{"token_id": t.token_id, "probability": p / total} for t, p in zip(tops, probs)]
        )
    return {
        "schema_version": CAPTURE_SCHEMA,
        "status": "incomplete" if missing else "complete",
        "prompt_token_ids": list(prompt_ids or []),
        "completion_token_ids": list(completion_ids or []),
        "completion_logprobs": lps,
        "completion_topk_by_position": topk_rows if any(topk_rows) else [],
        "topk": topk if any(topk_rows) else 0,
        "missing": missing,
    }


def teacher_step(
    *,
    site: Mapping[str, Any],
    source_step: Mapping[str, Any],
    content: str,
    reasoning: str,
    tool_calls: Sequence[Mapping[str, Any]],
    capture: Mapping[str, Any],
    usage: Mapping[str, Any],
    finish_reason: str | None,
    hint_sha: str,
) -> dict[str, Any]:
    """One continuation StageStep (``stage_name`` form, §2.8)."""
    judgment = site.get("example_type") == "judgment"
    call = dict(tool_calls[0]) if tool_calls else None
    args: Any = None
    if call is not None:
        raw_args = call.get("arguments")
        try:
            args = orjson.loads(raw_args) if isinstance(raw_args, str) and raw_args else raw_args
        except orjson.JSONDecodeError:
            args = raw_args
    action_type = "tool_call" if call is not None and not judgment else "output"
    policy_action: dict[str, Any] = {"content": content or None, "tool_calls": [dict(c) for c in tool_calls] or None}
    return {
        "round": source_step.get("round"),
        "stage_name": "psd_teacher_judgment" if judgment else "psd_teacher_repair",
        "thought": reasoning or None,
        "action_type": action_type,
        "tool_name": call.get("name") if call else None,
        "tool_args": args,
        "tool_result": None,
        "output": content or None,
        "tokens": {
            "prompt": usage.get("prompt_tokens"),
            "completion": usage.get("completion_tokens"),
            "thought": 0,
        },
        "metadata": {
            "policy_token_capture": dict(capture),
            "policy_action": policy_action,
            "function_call_id": call.get("id") if call else None,
            "finish_reason": finish_reason,
            "hint_sha256": hint_sha,
            "psd_role": "teacher",
            "recorded_by": "eviscene-tui",
        },
    }


def parse_judgment(content: str) -> dict[str, Any]:
    try:
        value = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def build_episode(
    trace: Mapping[str, Any],
    site: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
    *,
    source_runtime_store_path: Any,
    attempt_store: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The hinted teacher episode (§2.9): source prefix byte-equal + the teacher suffix."""
    # everything but the steps is copied; the prefix steps are the source's own objects,
    # written as they are (byte-equal) and never changed here: a deep copy of a 200 MB
    # trace's steps (millions of token ids) cost seconds and doubled the memory every round
    episode = {key: copy.deepcopy(value) for key, value in trace.items() if key != "state"}
    state = {key: copy.deepcopy(value) for key, value in _map(trace.get("state")).items() if key != "all_steps"}
    index = int(site["source_step_index"])
    prefix = list(trace_steps_of(trace)[:index])
    suffix = []
    for st in steps:
        s = copy.deepcopy(dict(st))
        name = s.pop("stage_name", None) or s.get("stage")
        s["stage"] = "unified_judgment" if name == "psd_teacher_judgment" else "unified_react"
        meta = dict(_map(s.get("metadata")))
        meta["psd_role"] = "teacher"
        meta["psd_suffix_step"] = True
        s["metadata"] = meta
        suffix.append(s)
    state["all_steps"] = prefix + suffix
    judgment_steps = [s for s in suffix if s["stage"] == "unified_judgment"]
    complete = bool(judgment_steps)
    verdict_doc = parse_judgment(str(judgment_steps[-1].get("output") or "")) if judgment_steps else {}
    state["termination"] = "success" if complete else "incomplete"
    state["errors"] = []
    if attempt_store is not None:
        state["runtime_store"] = dict(attempt_store)
    else:
        state.pop("runtime_store", None)
    episode["state"] = state
    episode.update(
        {
            "judgment": verdict_doc or None,
            "verdict": verdict_doc.get("verdict") if complete else None,
            "confidence": verdict_doc.get("confidence") if complete else None,
            "overall_assessment": verdict_doc.get("overall_assessment") if complete else None,
            "fact_check_report": verdict_doc.get("fact_check_report") if complete else None,
            "evidence_citations": [],
            "stop_reason": "teacher_episode_complete" if complete else "bounded_suffix_exhausted",
            "action_count": sum(1 for s in state["all_steps"] if _map(s).get("action_type") == "tool_call"),
            "verdict_basis": verdict_doc.get("verdict_basis") if complete else None,
            "termination": "success" if complete else "incomplete",
            "error": None,
            "psd_repair": {
                "role": "teacher",
                "repair_step_id": site["step_id"],
                "source_step_index": index,
                "terminal_state_replayed": True,
                "source_runtime_store_path": source_runtime_store_path,
            },
        }
    )
    return episode


# ------------------------------------------------------------------ attempt record
def proposal_id_for(site_step_id: str, hint: str, level: int) -> str:
    return "psd-repair-hint:" + canonical_sha256({"candidate_id": site_step_id, "hint": hint, "level": level})


def model_roles(*, hint_provider: str, hint_model: str, policy_model: str, checkpoint: str | None, manifest_sha: str | None) -> dict[str, Any]:
    return {
        "hint_constructor": {"provider": hint_provider, "model": hint_model, "supplies_training_distribution": False},
        "frozen_self_teacher": {
            "provider": "qwen_local",
            "model": policy_model,
            "round_start_checkpoint": checkpoint,
            "checkpoint_manifest_sha256": manifest_sha,
            "sees_hint": True,
            "supplies_training_distribution": True,
        },
        "trainable_student": {
            "provider": "qwen_local",
            "model": policy_model,
            "initial_checkpoint": checkpoint,
            "checkpoint_manifest_sha256": manifest_sha,
            "sees_hint": False,
        },
    }


def attempt_record(
    *,
    candidate: Mapping[str, Any],
    site: Mapping[str, Any],
    proposal: Mapping[str, Any],
    roles: Mapping[str, Any],
    student_prompt_ids: Sequence[int],
    teacher_capture: Mapping[str, Any],
    source_trace_sha256: str,
    continuation: Mapping[str, Any],
    psd_media: Mapping[str, Any] | None,
    expected_verdict: str | None = None,
    pending_reasons: Sequence[str] = ("local:operator_verdict_pending",),
) -> dict[str, Any]:
    """A pending attempt record (``local_verification: {}``, not accepted) as at write time.

    The one builder of the record's shape (psd-run-format §2.11), for the bundled driver
    and the sample trees alike. ``expected_verdict`` is the private gold verdict when the
    writer knows it (the driver does; the bundled driver does not); ``pending_reasons``
    say why the attempt is not verified yet.
    """
    verification = {
        "source_rollout_failed": True,
        "hinted_local_pass": False,
        "hinted_episode_pass": False,
        "hinted_strict_trace_audit_pass": True,
        "repair_tier": "unrepairable",
        "hinted_recorded_verdict": None,
        "expected_verdict": expected_verdict,
        "reasons": list(pending_reasons),
    }
    record: dict[str, Any] = {
        "schema_version": ATTEMPT_SCHEMA,
        "candidate_id": candidate["candidate_id"],
        "attempt_id": proposal["proposal_id"],
        "case_id": candidate.get("case_id"),
        "episode_id": candidate.get("episode_id"),
        "repair_step_id": site["step_id"],
        "model_roles": dict(roles),
        "repair_site": dict(site),
        "repair_tier": "unrepairable",
        "source_rollout_failed": True,
        "hinted_local_pass": False,
        "hinted_episode_pass": False,
        "hinted_strict_trace_audit_pass": True,
        "hint_record": {
            "text": proposal["text"],
            "level": proposal["level"],
            "provider": proposal["provider"],
            "model": proposal["model"],
            "proposal_id": proposal["proposal_id"],
            "audit": dict(proposal["audit"]),
        },
        "verification": verification,
        "local_verification": {},
        "accepted": False,
        "scaffold_only": False,
        "student_prompt_ids": list(student_prompt_ids),
        "teacher_prompt_ids": list(teacher_capture.get("prompt_token_ids") or []),
        "completion_ids": list(teacher_capture.get("completion_token_ids") or []),
        "repair_rollout_token_capture": dict(teacher_capture),
        "source_trace_sha256": source_trace_sha256,
        "continuation": dict(continuation),
    }
    if psd_media is not None:
        record["psd_media"] = dict(psd_media)
    return record


def local_verification(
    record: Mapping[str, Any],
    episode: Mapping[str, Any],
    *,
    operator: str,
    passed: bool,
    checker: Mapping[str, Any],
    earliest_error_step: int,
    reason: str,
    event_id: str,
) -> dict[str, Any]:
    """The operator's ``judge/hint-NN.json`` (``ifv-psd-local-verification-v1``).

    ``checks`` has six rows; a check the operator did not give has ``passed: null``
    (dropped from the feedback's ``checker``, which keeps only real booleans).
    """
    values = {name: (checker.get(name) if type(checker.get(name)) is bool else None) for name in CHECK_NAMES}
    review = {name: values[name] for name in CHECK_NAMES if name not in ("anchor_matches", "episode_complete")}
    review.update(
        {
            "earliest_error_step": earliest_error_step,
            "explanation": reason,
            "evidence": [{"reason": reason}] if reason else [],
            "passed": passed,
            "anchor_matches": values["anchor_matches"],
            "episode_complete": values["episode_complete"],
            "interaction_id": event_id,
            "usage": {},
            "request_binding": None,
            "response_sha256": None,
        }
    )
    return {
        "schema_version": LOCAL_VERIFICATION_SCHEMA,
        "verifier": dict(OPERATOR_VERIFIER, model=operator),
        "repair_step_id": record.get("repair_step_id"),
        "source_trace_sha256": record.get("source_trace_sha256"),
        "hint_sha256": _map(_map(record.get("hint_record")).get("audit")).get("hint_sha256"),
        "teacher_prompt_sha256": canonical_sha256(list(record.get("teacher_prompt_ids") or [])),
        "teacher_completion_sha256": canonical_sha256(list(record.get("completion_ids") or [])),
        "teacher_episode_canonical_sha256": canonical_sha256(dict(episode)),
        "private_reference_sha256": None,
        "passed": passed,
        "checks": [{"name": name, "passed": values[name]} for name in CHECK_NAMES],
        "evidence": [{"reason": reason}] if reason else [],
        "review": review,
    }


def apply_verdict(record: Mapping[str, Any], lv: Mapping[str, Any], *, accepted: bool, reason: str) -> dict[str, Any]:
    """The record after the operator's verdict (what ``judge_run`` → finalize rewrites)."""
    rec = copy.deepcopy(dict(record))
    tier = "causal_episode_pass" if accepted else "unrepairable"
    flags = {
        "source_rollout_failed": True,
        "hinted_local_pass": accepted,
        "hinted_episode_pass": accepted,
        "hinted_strict_trace_audit_pass": True,
    }
    rec.update(flags)
    rec["repair_tier"] = tier
    verification = dict(_map(rec.get("verification")))
    verification.update(flags)
    verification["repair_tier"] = tier
    verification["reasons"] = [] if accepted else ["hinted_local_verifier_failed", "local:operator_rejected"]
    verification["operator_reason"] = reason
    rec["verification"] = verification
    rec["local_verification"] = dict(lv)
    rec["accepted"] = accepted
    return rec


def has_image_pads(ids: Sequence[int]) -> bool:
    return any(i in IMAGE_PAD_IDS for i in ids)
