"""Models: tolerant parsing, computed properties, schema set."""

from __future__ import annotations

from test_case_builders import HOSTILE, attempt, candidate, capture, judge_artifact

from eviscene_tui.artifacts.models import (
    CHECK_NAMES,
    KNOWN_SCHEMAS,
    AttemptRecord,
    Candidate,
    ContextItem,
    ContextRequest,
    FeedbackObject,
    LocalVerification,
    ProposerAuditRow,
    ProposerResponse,
    RunInputs,
    SearchState,
    SemanticLocalization,
    TokenCapture,
    TraceStep,
    parse_model,
)
from eviscene_tui.artifacts.problems import ProblemCode


def test_attempt_states() -> None:
    pending = AttemptRecord.model_validate(attempt("h", verified=None))
    assert pending.state == "pending" and pending.is_pending and pending.accepted is False
    rejected = AttemptRecord.model_validate(attempt("h", verified=False))
    assert rejected.state == "rejected"
    accepted = AttemptRecord.model_validate(attempt("h", verified=True, accepted=True))
    assert accepted.state == "accepted"
    assert AttemptRecord.model_validate({}).state == "pending"
    assert AttemptRecord.model_validate({"local_verification": None, "accepted": False}).state == "pending"


def test_attempt_full_fields() -> None:
    rec = AttemptRecord.model_validate(attempt("hint text", verified=False))
    assert rec.hint_text == "hint text" and rec.hint_record.audit.passed is True
    assert rec.repair_site.localization_kind == "semantic_task_verifier"
    assert rec.repair_site.localization_verifier.startswith("gemini")
    assert rec.verification.expected_verdict == "fake" and rec.verification.reasons
    assert rec.continuation.hinted_teacher_episode_trace == "episodes/hint-00-teacher.json"
    assert rec.repair_rollout_token_capture.is_complete
    assert rec.pass_flags["hinted_strict_trace_audit_pass"] is True
    assert rec.checker["anchor_matches"] is False and rec.checker["grounded_episode"] is True
    assert rec.model_roles.hint_constructor.supplies_training_distribution is False
    assert rec.student_prompt_ids == [1, 2, 3]


def test_wrong_types_are_dropped_not_fatal() -> None:
    raw = attempt("h", verified=None)
    raw.update({"accepted": "maybe", "student_prompt_ids": [1, "x", 3], "continuation": "oops", "unknown_key": {"a": 1}})
    raw["repair_site"]["source_step_index"] = "seven"
    rec, problems = parse_model(AttemptRecord, raw, "repair_attempts.jsonl")
    assert rec is not None and rec.accepted is None and rec.continuation is None
    assert rec.student_prompt_ids == [1, 3]
    assert rec.repair_site.source_step_index is None and rec.repair_site.stage == "unified_react"
    assert rec.extra("unknown_key") == {"a": 1}
    assert rec.invalid_fields["continuation"] == "oops"
    assert problems and problems[0].code == ProblemCode.JSON_INVALID
    assert "repair_site.source_step_index" in problems[0].message


def test_parse_model_non_objects() -> None:
    for bad in ([1], "x", 3, True):
        model, problems = parse_model(AttemptRecord, bad, "p")
        assert model is None and problems[0].code == ProblemCode.JSON_INVALID
    assert parse_model(AttemptRecord, None) == (None, [])


def test_trace_step_stage_alias_and_policy_step() -> None:
    s = TraceStep.model_validate({"stage_name": "psd_teacher_judgment", "metadata": {"policy_input": {}, "policy_action": {}}})
    assert s.stage == "psd_teacher_judgment" and s.is_policy_step
    s = TraceStep.model_validate({"stage": "unified_react", "stage_name": "other", "metadata": {"policy_input": "x", "policy_action": {}}})
    assert s.stage == "unified_react" and not s.is_policy_step
    assert TraceStep.model_validate({"metadata": None}).metadata is not None


def test_token_capture() -> None:
    assert TokenCapture.model_validate(capture()).is_complete
    inc = TokenCapture.model_validate(capture("incomplete"))
    assert not inc.is_complete and inc.missing == ["completion_logprobs"]
    assert not TokenCapture.model_validate({"status": "complete"}).is_complete
    s = TokenCapture.model_validate(capture(n=5)).summary()
    assert s["completion_tokens"] == 5 and s["prompt_tokens"] == 6 and s["topk"] == 1


def test_local_verification_checker() -> None:
    lv = LocalVerification.model_validate(judge_artifact("h", anchor=True, earliest=-1))
    assert set(lv.checker) == set(CHECK_NAMES) and all(lv.checker.values())
    assert lv.earliest_error_step == -1
    partial = LocalVerification.model_validate({"checks": [{"name": "anchor_matches", "passed": "yes"}],
                                                "review": {"grounded_episode": False}})
    assert partial.checker["anchor_matches"] is None and partial.checker["grounded_episode"] is False


def test_feedback_defaults_and_candidate_alias() -> None:
    fb = FeedbackObject.model_validate({})
    assert fb.locked_hint == "" and fb.excluded_hints == [] and fb.needs_relocalization is False
    assert fb.anchor_feedback.checker.values() == {n: None for n in CHECK_NAMES}
    c = Candidate.model_validate(candidate(3))
    assert c.class_ == "repair_seed" and c.repair_site.rollout_token_capture.is_complete
    assert c.failure_localization.repair_anchor_source_step_index == 3
    assert c.model_dump(by_alias=True)["class"] == "repair_seed"


def test_proposer_rows_and_response() -> None:
    assert ProposerAuditRow.model_validate({"passed": True, "audit": {}}).reason_code is None
    assert ProposerAuditRow.model_validate({"passed": False, "reason": "changed_verified_hint"}).reason_code == "changed_verified_hint"
    assert ProposerAuditRow.model_validate({"passed": False, "audit": {"errors": ["hint_empty"]}}).reason_code == "hint_empty"
    assert ProposerAuditRow.model_validate({}).reason_code == "hint_audit_failed"
    assert ProposerResponse.model_validate({"text": '{"hints": []}'}).hints() == []
    assert ProposerResponse.model_validate({"hints": ["a"]}).hints() == ["a"]
    assert ProposerResponse.model_validate({"text": "not json"}).hints() is None


def test_semantic_selection() -> None:
    loc = SemanticLocalization.model_validate({"candidates": [{"source_step_index": 1}, {"source_step_index": 2, "selected": True}]})
    assert loc.selected_candidate().source_step_index == 2
    assert SemanticLocalization.model_validate({"candidates": [{"source_step_index": 4}]}).selected_candidate().source_step_index == 4
    assert SemanticLocalization.model_validate({"candidates": [{}, {}]}).selected_candidate() is None


def test_run_inputs_bindings() -> None:
    ri = RunInputs.model_validate({"trace": {"path": "t.json", "sha256": "a"}, "gold": "legacy/gold.json", "image": None,
                                   "candidate": {"path": "c.jsonl", "offset": 10, "length": 5, "sha256": "b"}})
    assert ri.binding("trace").path == "t.json" and ri.binding("gold").path == "legacy/gold.json"
    assert ri.binding("image") is None and ri.binding("candidate").offset == 10
    assert set(ri.bindings()) == {"trace", "gold", "candidate"}


def test_search_state_rows() -> None:
    st = SearchState.model_validate({"status": "converged", "rounds": [{"directory": "/x", "records": [attempt("h", verified=True, accepted=True)],
                                                                        "feedback": {"attempts": [{"hint": "h", "checker": {"anchor_matches": True}}]},
                                                                        "no_further_hint": False}, "junk"]})
    assert len(st.rounds) == 1 and st.rounds[0].records[0].state == "accepted"
    assert st.rounds[0].feedback.attempts[0].checker.anchor_matches is True


def test_context_items_tolerant() -> None:
    item = ContextItem.model_validate({"kind": "input_payload", "artifact": "a" * 64, "media": {"sha": "b" * 64}})
    assert item.artifact.sha256 == "a" * 64 and item.media[0].sha256 == "b" * 64
    req = ContextRequest.model_validate({"context_items": [{"kind": "system_prompt", "artifact": "rel/path.txt"}, 5]})
    assert req.context_items[0].artifact.path == "rel/path.txt" and len(req.context_items) == 1


def test_known_schemas_and_hostile_raw() -> None:
    assert "ifv-psd-feedback-search-v1" in KNOWN_SCHEMAS and "ifv-psd-media-v1" in KNOWN_SCHEMAS
    assert "ifv-qwen-serving-profile-v1" in KNOWN_SCHEMAS and "ifv-context-ledger-v1" in KNOWN_SCHEMAS
    rec = AttemptRecord.model_validate({"hint_record": {"text": HOSTILE}})
    assert rec.hint_text == HOSTILE
