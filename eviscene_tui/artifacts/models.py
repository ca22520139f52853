"""Pydantic v2 models for every file the EviScene PSD repair driver writes.

Contract: ``shared/reference/psd-run-format.md``. Design rules:

- **Tolerant.** Every model allows unknown keys (kept in ``model_extra``), every field is
  optional with a sane default, and a value of the wrong type never makes the whole
  object fail: the base class drops the offending field (or list item), keeps the raw
  value in :attr:`Tolerant.invalid_fields`, and validates the rest. Use
  :func:`parse_model` to validate a raw JSON value and get ``(model, problems)`` without
  any exception escaping.
- **Raw values stay raw.** No sanitising and no coercion (strict types: ``"true"`` is not a
  boolean, ``true`` is not an index); display goes through ``safe_text``.
- Schema strings the driver is known to write are collected in :data:`KNOWN_SCHEMAS`
  (the integrity checker flags any other ``schema_version`` as ``schema_unknown``).

No Textual import here (architecture rule).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeVar

import orjson
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from eviscene_tui.artifacts.problems import Problem, ProblemCode
from eviscene_tui.artifacts.schemas import (  # re-exported: the models' callers import them from here
    SCHEMA_RUN_RESULT as SCHEMA_RUN_RESULT,
    SCHEMA_FEEDBACK_SEARCH as SCHEMA_FEEDBACK_SEARCH,
    SCHEMA_CANDIDATE as SCHEMA_CANDIDATE,
    SCHEMA_ATTEMPT as SCHEMA_ATTEMPT,
    SCHEMA_HINT_AUDIT as SCHEMA_HINT_AUDIT,
    SCHEMA_SEMANTIC_LOCALIZATION as SCHEMA_SEMANTIC_LOCALIZATION,
    SCHEMA_LOCAL_VERIFICATION as SCHEMA_LOCAL_VERIFICATION,
    SCHEMA_VERIFICATION_BUNDLE as SCHEMA_VERIFICATION_BUNDLE,
    SCHEMA_FINALIZATION as SCHEMA_FINALIZATION,
    SCHEMA_TOKEN_CAPTURE as SCHEMA_TOKEN_CAPTURE,
    SCHEMA_RUNTIME_EVENTS as SCHEMA_RUNTIME_EVENTS,
    SCHEMA_CONTEXT_LEDGER as SCHEMA_CONTEXT_LEDGER,
    SCHEMA_SERVING_PROFILE as SCHEMA_SERVING_PROFILE,
    SCHEMA_CHECKPOINT_MANIFEST as SCHEMA_CHECKPOINT_MANIFEST,
    SCHEMA_BOUND_GZIP as SCHEMA_BOUND_GZIP,
    SCHEMA_MEDIA_V1 as SCHEMA_MEDIA_V1,
    SCHEMA_MEDIA_V2 as SCHEMA_MEDIA_V2,
    SCHEMA_MEDIA_V3 as SCHEMA_MEDIA_V3,
    KNOWN_SCHEMAS as KNOWN_SCHEMAS,
    RUN_FILE_ARGUMENTS as RUN_FILE_ARGUMENTS,
)

M = TypeVar("M", bound=BaseModel)

#: The six checks of a local verification (``judge/hint-NN.json``) and of ``checker``.
CHECK_NAMES: tuple[str, ...] = (
    "source_error_confirmed",
    "repaired_at_selected_step",
    "grounded_episode",
    "procedural_hint",
    "anchor_matches",
    "episode_complete",
)

REPAIR_TIERS: tuple[str, ...] = (
    "causal_episode_pass",
    "local_pass_downstream",
    "unrepairable",
    "scaffold_only",
    "engineering_error",
)

LOCALIZATION_KINDS: tuple[str, ...] = (
    "strict_trace_audit",
    "runtime_action_failure",
    "semantic_task_verifier",
    "observed_runtime_failure",
)

SEMANTIC_CATEGORIES: tuple[str, ...] = (
    "wrong_search_direction",
    "incomplete_event_verification",
    "unsupported_similarity_extrapolation",
    "ignored_repeated_no_match",
    "evidence_interpretation_error",
)

SEARCH_RUNNING_STATUSES = frozenset({"searching"})
SEARCH_TERMINAL_STATUSES = frozenset(
    {
        "converged",
        "attempt_budget_exhausted",
        "proposal_budget_exhausted",
        "time_budget_exhausted",
        "no_further_grounded_hint",
    }
)
SEARCH_PAUSED_STATUSES = frozenset({"paused_pending_verifier", "paused_execution_error", "paused_storage_budget"})
RUN_STATUSES = frozenset({"generating", "generated", "no_admissible_hints", "no_recoverable_site"})

PROTOCOL_REJECTION_ACTIONS = frozenset({"format_error", "output_rejected", "policy_replan"})

AttemptState = Literal["accepted", "pending", "rejected"]


# --------------------------------------------------------------------------- base class
class Tolerant(BaseModel):
    """Base for every artifact model: unknown keys kept, wrong-typed fields dropped.

    When a field (or an item of a list field) does not validate, it is removed, its raw
    value is kept in :attr:`invalid_fields`, and the rest of the object validates. Only a
    non-object input makes the model itself fail (callers use :func:`parse_model`).
    """

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        protected_namespaces=(),
        arbitrary_types_allowed=True,
        validate_default=False,
        # strict: no coercion ("true" is not a boolean, True is not an index); a value of
        # the wrong type is dropped into ``invalid_fields`` and reported, never reinterpreted
        strict=True,
        # each model's validator is built at its first use, not at import: a command that
        # validates a few models (decide, gate-status) starts ~0.13 s sooner (pydantic 2.14
        # builds a deferred model under a lock, so threads validating at once are safe)
        defer_build=True,
    )

    _invalid: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _tolerate(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        try:
            return handler(data)
        except ValidationError as exc:
            current = dict(data)
            invalid: dict[str, Any] = {}
            err = exc
            for _ in range(4):
                _prune(current, err, invalid)
                try:
                    model = handler(current)
                except ValidationError as again:
                    err = again
                    continue
                if isinstance(model, Tolerant):
                    model._invalid = invalid
                return model
            # last resort: keep only keys that are not declared fields
            fields = cls.model_fields
            names = set(fields) | {f.alias for f in fields.values() if f.alias}
            bare = {k: v for k, v in data.items() if k not in names}
            for k in data:
                if k in names:
                    invalid.setdefault(k, data[k])
            model = handler(bare)
            if isinstance(model, Tolerant):
                model._invalid = invalid
            return model

    @property
    def invalid_fields(self) -> dict[str, Any]:
        """Raw values of fields that did not fit their declared type (dropped from the model)."""
        return self._invalid

    def extra(self, key: str, default: Any = None) -> Any:
        """An unknown key kept from the file (``model_extra``)."""
        return (self.model_extra or {}).get(key, default)


def _prune(current: dict[str, Any], exc: ValidationError, invalid: dict[str, Any]) -> None:
    """Remove the fields / list items named by ``exc`` from ``current``."""
    drop_items: dict[str, set[int]] = {}
    for error in exc.errors():
        loc = error.get("loc") or ()
        if not loc:
            continue
        key = loc[0]
        if not isinstance(key, str) or key not in current:
            continue
        value = current[key]
        if len(loc) >= 2 and isinstance(loc[1], int) and isinstance(value, list):
            drop_items.setdefault(key, set()).add(loc[1])
        else:
            invalid.setdefault(key, value)
            current.pop(key, None)
    for key, indices in drop_items.items():
        value = current.get(key)
        if not isinstance(value, list):
            continue
        invalid.setdefault(key, value)
        current[key] = [item for i, item in enumerate(value) if i not in indices]


def parse_model(cls: type[M], data: Any, path: str = "", *, what: str | None = None) -> tuple[M | None, list[Problem]]:
    """Validate ``data`` as ``cls``; never raises.

    A non-object where an object is expected -> ``(None, [json_invalid])``. Fields that
    do not fit are dropped by the tolerant base and reported as one ``json_invalid``
    problem naming them (the model is still returned).
    """
    label = what or cls.__name__
    if data is None:
        return None, []
    if not isinstance(data, dict):
        return None, [
            Problem(code=ProblemCode.JSON_INVALID, path=path, message=f"{label}: expected a JSON object, found {_kind(data)}")
        ]
    try:
        model = cls.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - loaders never raise
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=path, message=f"{label}: does not fit ({type(exc).__name__})")]
    problems: list[Problem] = []
    bad = _collect_invalid(model)
    if bad:
        shown = ", ".join(sorted(bad)[:8])
        problems.append(
            Problem(code=ProblemCode.JSON_INVALID, path=path, message=f"{label}: field(s) of the wrong type ignored: {shown}")
        )
    return model, problems


def _collect_invalid(model: Any, prefix: str = "", depth: int = 0) -> list[str]:
    if depth > 6 or not isinstance(model, Tolerant):
        return []
    out = [prefix + k for k in model._invalid]
    for name in type(model).model_fields:
        value = getattr(model, name, None)
        if isinstance(value, Tolerant):
            out.extend(_collect_invalid(value, f"{prefix}{name}.", depth + 1))
        elif isinstance(value, list) and value and isinstance(value[0], Tolerant):
            for i, item in enumerate(value[:50]):
                out.extend(_collect_invalid(item, f"{prefix}{name}[{i}].", depth + 1))
    return out


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


# --------------------------------------------------------------------------- shared pieces
class FileBinding(Tolerant):
    """``{path, sha256}`` input binding (indexed candidate adds ``offset``/``length``)."""

    path: str | None = None
    sha256: str | None = None
    offset: int | None = None
    length: int | None = None


class ExecutionError(Tolerant):
    round: int | None = None
    type: str | None = None


class VerifierInfo(Tolerant):
    kind: str | None = None
    name: str | None = None
    version: str | None = None
    model: str | None = None

    def label(self) -> str:
        parts = [p for p in (self.name, self.version) if p]
        return ":".join(parts) if parts else (self.kind or "")


# --------------------------------------------------------------------------- token capture
class TokenCapture(Tolerant):
    """``metadata.policy_token_capture`` / ``repair_site.rollout_token_capture`` (§3.3)."""

    schema_version: str | None = None
    status: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[Any] | None = None
    completion_topk_by_position: list[Any] | None = None
    topk: int | None = None
    missing: list[str] = Field(default_factory=list)
    teacher_logprob_semantics: str | None = None

    @property
    def is_complete(self) -> bool:
        return (
            self.status == "complete"
            and not self.missing
            and self.prompt_token_ids is not None
            and self.completion_token_ids is not None
        )

    def summary(self) -> dict[str, Any]:
        """Counts for display; never the id lists themselves."""
        return {
            "status": self.status,
            "schema_version": self.schema_version,
            "prompt_tokens": len(self.prompt_token_ids) if self.prompt_token_ids is not None else None,
            "completion_tokens": len(self.completion_token_ids) if self.completion_token_ids is not None else None,
            "logprobs": len(self.completion_logprobs) if self.completion_logprobs is not None else None,
            "topk_positions": len(self.completion_topk_by_position) if self.completion_topk_by_position is not None else None,
            "topk": self.topk,
            "missing": list(self.missing),
            "teacher_logprob_semantics": self.teacher_logprob_semantics,
            "is_complete": self.is_complete,
        }


# --------------------------------------------------------------------------- trace steps
class StepMetadata(Tolerant):
    """``state.all_steps[i].metadata`` (§3.2)."""

    policy_input: Any = None
    policy_action: Any = None
    policy_token_capture: TokenCapture | None = None
    context_request_id: str | None = None
    interaction_id: str | None = None
    function_call_id: str | None = None
    llm_duration_ms: float | None = None
    tool_tokens: Any = None
    tool_subcalls: Any = None
    tool_llm_api_calls: Any = None
    error_class: str | None = None
    rejection_reason: Any = None
    deterministic_segment_boundary: bool | None = None
    psd_role: str | None = None
    psd_suffix_step: bool | None = None


class TraceStep(Tolerant):
    """One step of ``state.all_steps`` or a continuation StageStep.

    Persisted traces say ``stage``; StageStep dicts say ``stage_name``. Both are kept;
    :attr:`stage` is filled from ``stage_name`` when only that is present.
    """

    round: Any = None
    stage: str | None = None
    stage_name: str | None = None
    thought: Any = None
    action_type: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    tool_result: Any = None
    output: Any = None
    tokens: Any = None
    metadata: StepMetadata = Field(default_factory=StepMetadata)

    @model_validator(mode="after")
    def _stage_alias(self) -> "TraceStep":
        if self.stage is None and self.stage_name is not None:
            self.stage = self.stage_name
        return self

    @property
    def is_policy_step(self) -> bool:
        md = self.metadata
        return isinstance(md.policy_input, dict) and isinstance(md.policy_action, dict)

    @property
    def token_capture(self) -> TokenCapture | None:
        return self.metadata.policy_token_capture

    @property
    def context_request_id(self) -> str | None:
        return self.metadata.context_request_id

    @property
    def is_protocol_rejection(self) -> bool:
        return self.action_type in PROTOCOL_REJECTION_ACTIONS


#: continuations use the same dict shape
StageStep = TraceStep


class StoreDescriptor(Tolerant):
    """Runtime store descriptor (§2.13): paths are not resolved, may be relative."""

    schema_version: str | None = None
    case_id: str | None = None
    attempt_id: str | None = None
    runtime_path: str | None = None
    events_path: str | None = None


# --------------------------------------------------------------------------- run level
class RunInputs(Tolerant):
    """``run-inputs.json`` identity: the run config (§2.2).

    File arguments are ``{path, sha256}`` bindings (or null); a legacy plain string path
    is kept as a string.
    """

    FILE_ARGUMENTS: ClassVar[tuple[str, ...]] = RUN_FILE_ARGUMENTS

    output_dir: str | None = None
    trace: FileBinding | str | None = None
    candidate: FileBinding | str | None = None
    audit: FileBinding | str | None = None
    gold: FileBinding | str | None = None
    public_context: FileBinding | str | None = None
    private_context: FileBinding | str | None = None
    image: FileBinding | str | None = None
    train_cases: FileBinding | str | None = None
    policy_serving_profile: FileBinding | str | None = None
    round_start_checkpoint_manifest: FileBinding | str | None = None
    semantic_verification: FileBinding | str | None = None
    verification_bundle: FileBinding | str | None = None
    source_access_policy: FileBinding | str | None = None
    search_media: FileBinding | str | None = None
    continuation_policy_version: str | None = None
    slate_review_policy: Any = None
    policy_provider: str | None = None
    policy_model: str | None = None
    policy_base_url: str | None = None
    policy_wire_api: str | None = None
    hint_constructor_provider: str | None = None
    hint_constructor_model: str | None = None
    hint_constructor_base_url: str | None = None
    hint_constructor_wire_api: str | None = None
    hint_constructor_thinking_level: Any = None
    round_start_checkpoint: str | None = None
    hint_count: int | None = None
    hint_level: int | None = None
    max_suffix_actions: int | None = None
    run_student_diagnostic: bool | None = None
    judge_model: str | None = None
    search_mode: str | None = None
    policy_temperature: float | None = None
    repair_attempts: int | None = None
    proposal_rounds: int | None = None
    search_seconds: float | None = None
    precomputed_slate_cache: Any = None
    candidate_offset: int | None = None
    candidate_length: int | None = None

    def binding(self, name: str) -> FileBinding | None:
        """The ``{path, sha256}`` binding of a file argument (a plain string becomes a path-only binding)."""
        value = getattr(self, name, None) if name in type(self).model_fields else self.extra(name)
        if isinstance(value, FileBinding):
            return value
        if isinstance(value, str):
            return FileBinding(path=value)
        if isinstance(value, dict):
            return FileBinding.model_validate(value)
        return None

    def bindings(self) -> dict[str, FileBinding]:
        out: dict[str, FileBinding] = {}
        for name in self.FILE_ARGUMENTS:
            b = self.binding(name)
            if b is not None:
                out[name] = b
        return out


class PolicyServingAttestation(Tolerant):
    profile: str | None = None
    profile_sha256: str | None = None
    profile_id: str | None = None
    model_path: str | None = None
    checkpoint_manifest: str | None = None
    checkpoint_manifest_sha256: str | None = None


class ManifestFinalization(Tolerant):
    mode: str | None = None
    source_trace_sha256: str | None = None
    verification_bundle_sha256: str | None = None
    finalized_attempts: Any = None
    unresolved_attempts: Any = None
    require_all: bool | None = None


class RunManifest(Tolerant):
    """Run ``manifest.json`` (§2.3). ``no_recoverable_site`` has only status + counts."""

    schema_version: str | None = None
    status: str | None = None
    trace: str | FileBinding | None = None
    runtime_archive: str | None = None
    source_task_review: FileBinding | None = None
    source_audit: FileBinding | None = None
    train_cases_sha256: str | None = None
    source_access_policy: FileBinding | None = None
    candidate_count: int | None = None
    accepted_count: int | None = None
    pending_hinted_episode_count: int | None = None
    policy_serving_attestation: PolicyServingAttestation | None = None
    hint_constructor: dict[str, Any] | None = None
    artifacts: dict[str, Any] | None = None
    finalization: ManifestFinalization | None = None

    @property
    def trace_path(self) -> str | None:
        """The ``trace`` argument as a path string (a ``{path, sha256}`` binding is unwrapped)."""
        if isinstance(self.trace, FileBinding):
            return self.trace.path
        return self.trace


class SearchManifest(Tolerant):
    """Search-root ``manifest.json`` (§2.14)."""

    schema_version: str | None = None
    status: str | None = None
    converged: bool | None = None
    candidate_count: int | None = None
    accepted_count: int | None = None
    proposal_rounds: int | None = None
    attempt_budget: int | None = None
    proposal_budget: int | None = None
    elapsed_seconds: float | None = None
    stop_reason: str | None = None
    rounds: list[str] = Field(default_factory=list)
    execution_error: ExecutionError | None = None
    training_distribution_provider: str | None = None


# --------------------------------------------------------------------------- feedback
class Checker(Tolerant):
    """The six check values; only real booleans are kept by the driver (§4.1)."""

    source_error_confirmed: bool | None = None
    repaired_at_selected_step: bool | None = None
    grounded_episode: bool | None = None
    procedural_hint: bool | None = None
    anchor_matches: bool | None = None
    episode_complete: bool | None = None

    def values(self) -> dict[str, bool | None]:
        return {name: getattr(self, name) for name in CHECK_NAMES}


class PublicAttemptFeedback(Tolerant):
    hint: str | None = None
    selected_source_step: int | None = None
    checker: Checker = Field(default_factory=Checker)
    earliest_error_step: int | None = None
    task_passed: bool | None = None
    strict_trace_passed: bool | None = None
    accepted: bool | None = None
    repaired_steps: list[Any] = Field(default_factory=list)


class PreviousRound(Tolerant):
    attempts: list[PublicAttemptFeedback] = Field(default_factory=list)
    rejected_proposal_reasons: list[str] = Field(default_factory=list)
    status: str | None = None


#: search-state ``rounds[].feedback`` has the same shape as a previous round
RoundFeedback = PreviousRound


class AnchorFeedback(Tolerant):
    selected_source_step: int | None = None
    earliest_error_step: int | None = None
    checker: Checker = Field(default_factory=Checker)


class FeedbackObject(Tolerant):
    """The feedback a round is given (§4.1): ``requests/round-NN.json`` payload."""

    previous_rounds: list[PreviousRound] = Field(default_factory=list)
    locked_hint: str = ""
    excluded_hints: list[str] = Field(default_factory=list)
    needs_relocalization: bool = False
    anchor_feedback: AnchorFeedback = Field(default_factory=AnchorFeedback)


class RoundPublicInputs(Tolerant):
    """``round-inputs/round-NN/public.json``: the public context plus ``repair_search``."""

    repair_search: FeedbackObject | None = None


class MediaEpisode(Tolerant):
    path: str | None = None
    sha256: str | None = None


class RoundMediaInputs(Tolerant):
    """``round-inputs/round-NN/media.json``."""

    episodes: list[MediaEpisode] = Field(default_factory=list)


# --------------------------------------------------------------------------- candidates / sites
class FailureLocalization(Tolerant):
    status: str | None = None
    basis: Any = None
    requires_privileged_attribution: bool | None = None
    repair_anchor_step_index: int | None = None
    repair_anchor_source_step_index: int | None = None
    repair_anchor_step_id: str | None = None
    repair_signal: str | None = None


class RepairSite(Tolerant):
    """A failure site: the candidate's projected policy step (§2.4) and the attempt's
    ``FailureSite.public_record()`` (§2.5, §3.4) share this shape."""

    step_index: int | None = None
    source_step_index: int | None = None
    step_id: str | None = None
    stage: str | None = None
    example_type: str | None = None
    interaction_id: str | None = None
    context_request_id: str | None = None
    runtime_store_path: str | None = None
    action_type: str | None = None
    protocol_rejected: bool | None = None
    model_visible: dict[str, Any] | None = None
    observed_policy_action: Any = None
    rollout_token_capture: TokenCapture | None = None
    policy_input_sha256: str | None = None
    policy_action_sha256: str | None = None
    localization_kind: str | None = None
    semantic_category: str | None = None
    localization_verifier: str | None = None
    localization_basis_sha256: str | None = None


class CandidateSource(Tolerant):
    source_run_id: str | None = None
    runtime_commit: str | None = None
    psd_round_index: int | None = None
    psd_rollout_gate_sha256: str | None = None
    source_access_policy_sha256: str | None = None
    source_trace_path: str | None = None
    source_trace_sha256: str | None = None
    source_runtime_store_path: str | None = None
    source_task_review: Any = None


class Candidate(Tolerant):
    """A ``repair_candidates.jsonl`` row (§2.4). ``class`` is exposed as ``class_``."""

    schema_version: str | None = None
    candidate_id: str | None = None
    parent_candidate_id: str | None = None
    class_: str | None = Field(default=None, alias="class")
    candidate_status: str | None = None
    case_id: str | None = None
    episode_id: str | None = None
    repair_signal: str | None = None
    failure_localization: FailureLocalization | None = None
    strict_trace_audit_failure_codes: list[str] = Field(default_factory=list)
    repair_site: RepairSite | None = None
    source: CandidateSource | None = None


# --------------------------------------------------------------------------- attempts
class ModelRole(Tolerant):
    provider: str | None = None
    model: str | None = None
    supplies_training_distribution: bool | None = None
    round_start_checkpoint: str | None = None
    initial_checkpoint: str | None = None
    checkpoint_manifest_sha256: str | None = None
    sees_hint: bool | None = None


class ModelRoles(Tolerant):
    hint_constructor: ModelRole | None = None
    frozen_self_teacher: ModelRole | None = None
    trainable_student: ModelRole | None = None


class HintAudit(Tolerant):
    """``audit_hint`` result (§2.6); an untrainable level has only ``{passed, errors}``."""

    schema_version: str | None = None
    passed: bool | None = None
    hint_level: int | None = None
    hint_chars: int | None = None
    hint_sha256: str | None = None
    errors: list[Any] = Field(default_factory=list)
    leak_paths: list[Any] = Field(default_factory=list)


class HintRecord(Tolerant):
    text: str | None = None
    level: int | None = None
    provider: str | None = None
    model: str | None = None
    proposal_id: str | None = None
    audit: HintAudit | None = None


class Verification(Tolerant):
    source_rollout_failed: bool | None = None
    hinted_local_pass: bool | None = None
    hinted_episode_pass: bool | None = None
    hinted_strict_trace_audit_pass: bool | None = None
    repair_tier: str | None = None
    hinted_recorded_verdict: str | None = None
    expected_verdict: str | None = None  # privileged (gold label)
    reasons: list[str] = Field(default_factory=list)


class ContinuationInfo(Tolerant):
    teacher_complete: bool | None = None
    student_complete: bool | None = None
    stop_reason: str | None = None
    teacher_step_count: int | None = None
    student_step_count: int | None = None
    hinted_teacher_episode_verified: bool | None = None
    unhinted_student_diagnostic: Any = None
    unhinted_student_affects_acceptance: bool | None = None
    hinted_teacher_episode_trace: str | None = None
    hinted_teacher_episode_trace_sha256: str | None = None


class CheckRow(Tolerant):
    name: str | None = None
    passed: Any = None


class JudgeReview(Tolerant):
    source_error_confirmed: Any = None
    repaired_at_selected_step: Any = None
    grounded_episode: Any = None
    procedural_hint: Any = None
    earliest_error_step: int | None = None
    explanation: Any = None  # privileged
    evidence: Any = None
    passed: Any = None
    anchor_matches: Any = None
    episode_complete: Any = None
    interaction_id: str | None = None
    usage: Any = None
    request_binding: Any = None
    response_sha256: str | None = None
    model_route: Any = None


class LocalVerification(Tolerant):
    """``judge/hint-NN.json`` (§2.11), also the record's ``local_verification`` once finalized."""

    schema_version: str | None = None
    verifier: VerifierInfo | None = None
    repair_step_id: str | None = None
    source_trace_sha256: str | None = None
    hint_sha256: str | None = None
    teacher_prompt_sha256: str | None = None
    teacher_completion_sha256: str | None = None
    teacher_episode_canonical_sha256: str | None = None
    private_reference_sha256: str | None = None
    passed: Any = None
    checks: list[CheckRow] = Field(default_factory=list)
    evidence: Any = None
    review: JudgeReview | None = None

    @property
    def checker(self) -> dict[str, bool | None]:
        """The six check values by name (None when absent or not a boolean).

        From ``checks`` rows; a check missing there falls back to ``review``.
        """
        out: dict[str, bool | None] = {name: None for name in CHECK_NAMES}
        for row in self.checks:
            if row.name in out and isinstance(row.passed, bool):
                out[row.name] = row.passed
        if self.review is not None:
            for name in CHECK_NAMES:
                if out[name] is None:
                    value = getattr(self.review, name, None)
                    if isinstance(value, bool):
                        out[name] = value
        return out

    @property
    def earliest_error_step(self) -> int | None:
        return self.review.earliest_error_step if self.review is not None else None


class AttemptRecord(Tolerant):
    """A ``repair_attempts.jsonl`` row (§2.5). See :attr:`state`."""

    schema_version: str | None = None
    candidate_id: str | None = None
    attempt_id: str | None = None
    case_id: str | None = None
    episode_id: str | None = None
    repair_step_id: str | None = None
    proposal_id: str | None = None
    model_roles: ModelRoles | None = None
    repair_site: RepairSite | None = None
    repair_tier: str | None = None
    source_rollout_failed: bool | None = None
    hinted_local_pass: bool | None = None
    hinted_episode_pass: bool | None = None
    hinted_strict_trace_audit_pass: bool | None = None
    hint_record: HintRecord | None = None
    verification: Verification | None = None
    local_verification: dict[str, Any] | None = None
    accepted: bool | None = None
    scaffold_only: bool | None = None
    student_prompt_ids: list[int] | None = None
    teacher_prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    repair_rollout_token_capture: TokenCapture | None = None
    source_trace_sha256: str | None = None
    continuation: ContinuationInfo | None = None
    psd_media: dict[str, Any] | None = None

    @property
    def state(self) -> AttemptState:
        """``accepted`` when ``accepted`` is true; otherwise ``pending`` while
        ``local_verification`` is missing or empty (pending is NOT rejected, §7.3);
        otherwise ``rejected``."""
        if self.accepted is True:
            return "accepted"
        if not self.local_verification:
            return "pending"
        return "rejected"

    @property
    def is_pending(self) -> bool:
        return not self.local_verification

    @property
    def hint_text(self) -> str | None:
        """The hint text (raw), or None."""
        text = self.hint_record.text if self.hint_record is not None else None
        return text if isinstance(text, str) else None

    @property
    def pass_flags(self) -> dict[str, bool | None]:
        return {
            "source_rollout_failed": self.source_rollout_failed,
            "hinted_local_pass": self.hinted_local_pass,
            "hinted_episode_pass": self.hinted_episode_pass,
            "hinted_strict_trace_audit_pass": self.hinted_strict_trace_audit_pass,
        }

    def local_verification_model(self) -> LocalVerification | None:
        if not self.local_verification:
            return None
        model, _ = parse_model(LocalVerification, self.local_verification)
        return model

    @property
    def checker(self) -> dict[str, bool | None]:
        lv = self.local_verification_model()
        return lv.checker if lv is not None else {name: None for name in CHECK_NAMES}


class SearchRoundRow(Tolerant):
    """One ``search-state.json`` ``payload.rounds[]`` row (§2.14)."""

    directory: str | None = None
    files: dict[str, Any] = Field(default_factory=dict)
    records: list[AttemptRecord] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    feedback: PreviousRound | None = None
    no_further_hint: bool | None = None


class SearchIdentity(Tolerant):
    version: str | None = None
    inputs: dict[str, Any] | None = None
    max_attempts: int | None = None
    max_proposals: int | None = None
    max_seconds: float | None = None


class SearchState(Tolerant):
    """``search-state.json`` payload (§2.14)."""

    status: str | None = None
    elapsed_seconds: float | None = None
    rounds: list[SearchRoundRow] = Field(default_factory=list)
    execution_error: ExecutionError | None = None


# --------------------------------------------------------------------------- proposer
class HintProposal(Tolerant):
    """One ``hint-proposals.json`` payload item (§2.6)."""

    text: str | None = None
    level: int | None = None
    proposal_id: str | None = None
    provider: str | None = None
    model: str | None = None
    audit: HintAudit | None = None


class ProposerAuditRow(Tolerant):
    """A ``proposer-hint-audits.json`` row: ``{passed:true, audit}`` or ``{passed:false, reason}``."""

    passed: bool | None = None
    reason: str | None = None
    audit: HintAudit | None = None

    @property
    def reason_code(self) -> str | None:
        """None for a passed row; otherwise the code, ``hint_audit_failed`` when none is given."""
        if self.passed is True:
            return None
        if isinstance(self.reason, str) and self.reason:
            return self.reason
        if self.audit is not None:
            for err in self.audit.errors:
                if isinstance(err, str) and err:
                    return err
        return "hint_audit_failed"


class ProposerAudits(Tolerant):
    proposals: list[ProposerAuditRow] = Field(default_factory=list)


class ProposerResponse(Tolerant):
    """``proposer-response.json`` payload (inferred: token counts + the response text)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    text: Any = None
    response: Any = None

    def hints(self) -> list[str] | None:
        """The ``hints`` list if the cached response parses as ``{"hints": [...]}``."""
        for candidate in (self.extra("hints"), self.text, self.response, self.extra("content")):
            if isinstance(candidate, list) and all(isinstance(h, str) for h in candidate):
                return list(candidate)
            if isinstance(candidate, dict) and isinstance(candidate.get("hints"), list):
                return [h for h in candidate["hints"] if isinstance(h, str)]
            if isinstance(candidate, str):
                try:
                    parsed = orjson.loads(candidate)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(parsed, dict) and isinstance(parsed.get("hints"), list):
                    return [h for h in parsed["hints"] if isinstance(h, str)]
        return None


# --------------------------------------------------------------------------- localization
class ObservedBasis(Tolerant):
    trace: str | None = None
    step_index: int | None = None
    quote: str | None = None


class LocalizationCandidate(Tolerant):
    source_step_index: int | None = None
    recoverable: bool | None = None
    selected: bool | None = None
    category: str | None = None
    verifier: VerifierInfo | None = None
    observed_basis: list[ObservedBasis] = Field(default_factory=list)
    explanation: Any = None  # privileged


class SemanticLocalization(Tolerant):
    """``semantic-localization.json`` (§2.7)."""

    schema_version: str | None = None
    passed: bool | None = None
    source_trace_canonical_sha256: str | None = None
    candidates: list[LocalizationCandidate] = Field(default_factory=list)
    explanation: Any = None  # privileged
    provenance: dict[str, Any] | None = None

    def selected_candidate(self) -> LocalizationCandidate | None:
        """The one selected candidate, or the only candidate (§3.4)."""
        selected = [c for c in self.candidates if c.selected is True]
        if len(selected) == 1:
            return selected[0]
        if not selected and len(self.candidates) == 1:
            return self.candidates[0]
        return None


# --------------------------------------------------------------------------- continuation / status
class ContinuationPayload(Tolerant):
    """``continuations/hint-NN.json`` payload (§2.8)."""

    teacher_steps: list[TraceStep] = Field(default_factory=list)
    student_steps: list[TraceStep] = Field(default_factory=list)
    hint: str | None = None
    teacher_complete: bool | None = None
    student_complete: bool | None = None
    stop_reason: str | None = None
    teacher_episode_trace: dict[str, Any] | None = None
    local_targets: Any = None


class LiveServingCheck(Tolerant):
    model_id: str | None = None
    root: str | None = None
    max_model_len: int | None = None


class GenerationLastError(Tolerant):
    hint_index: int | None = None
    retry: int | None = None
    error_type: str | None = None
    archive: str | None = None


class VerificationBundleAttempt(Tolerant):
    hint_index: int | None = None
    hint_sha256: str | None = None
    local_verification: str | None = None


class VerificationBundle(Tolerant):
    schema_version: str | None = None
    attempts: list[VerificationBundleAttempt] = Field(default_factory=list)


class UnresolvedAttempt(Tolerant):
    hint_index: int | None = None
    reason: str | None = None


class Finalization(Tolerant):
    """``finalization.json`` (§2.11)."""

    schema_version: str | None = None
    status: str | None = None
    attempts: Any = None
    accepted: Any = None
    rejected: Any = None
    unresolved: list[UnresolvedAttempt] = Field(default_factory=list)
    provider_calls: int | None = None
    run_dir: str | None = None


class JudgeError(Tolerant):
    hint_index: int | None = None
    error_type: str | None = None


class JudgeSummary(Finalization):
    """``judge-summary.json``: the finalization object plus judge details."""

    judge_model: str | None = None
    errors: list[JudgeError] = Field(default_factory=list)
    train_cases_sha256: str | None = None


# --------------------------------------------------------------------------- runtime archive
class RuntimeEvent(Tolerant):
    """One ``events.jsonl`` line (§2.13)."""

    schema_version: str | None = None
    sequence: int | None = None
    event_id: str | None = None
    event_type: str | None = None
    recorded_at: Any = None
    case_id: str | None = None
    attempt_id: str | None = None
    payload: Any = None


class ArtifactRef(Tolerant):
    """Reference from a context item to a content-addressed blob.

    Convention (see ``runtime_archive`` docstring): ``path`` is relative to the store root.
    """

    sha256: str | None = Field(default=None, validation_alias=AliasChoices("sha256", "sha", "content_hash"))
    path: str | None = None
    media_type: str | None = Field(default=None, validation_alias=AliasChoices("media_type", "mime", "mime_type"))
    size_bytes: int | None = Field(default=None, validation_alias=AliasChoices("size_bytes", "size", "bytes"))
    width: int | None = None
    height: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        if isinstance(data, str):
            if len(data) == 64 and all(c in "0123456789abcdefABCDEF" for c in data):
                return {"sha256": data}
            return {"path": data}
        return data


class ContextItem(Tolerant):
    kind: str | None = None
    artifact: ArtifactRef | None = None
    media: list[ArtifactRef] = Field(default_factory=list)
    content_hash: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _media_single(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("media"), (dict, str)):
            data = dict(data)
            data["media"] = [data["media"]]
        return data


class ContextRequest(Tolerant):
    """``context/req-NNNNNN.json`` (schema ``ifv-context-ledger-v1``)."""

    schema_version: str | None = None
    request_id: str | None = None
    stage: str | None = None
    lifecycle_kind: str | None = None
    prompt_version: str | None = None
    model: str | None = None
    status: str | None = None
    error: Any = None
    provider_input_tokens: int | None = None
    provider_output_tokens: int | None = None
    provider_thought_tokens: int | None = None
    max_output_tokens: int | None = None
    image_count: int | None = None
    request_snapshot_sha256: str | None = None
    context_items: list[ContextItem] = Field(default_factory=list)
    started_at: Any = None
    completed_at: Any = None
    interaction_id: str | None = None

    def items_of(self, kind: str) -> list[ContextItem]:
        return [item for item in self.context_items if item.kind == kind]


# --------------------------------------------------------------------------- serving profile
class HealthProbe(Tolerant):
    method: str | None = None
    path: str | None = None


class ServingProfile(Tolerant):
    """``ifv-qwen-serving-profile-v1`` (§5). ``base_urls`` (optional list) is an
    extension for several replicas; read it with :meth:`base_urls`."""

    schema_version: str | None = None
    profile_id: str | None = None
    model_path: str | None = None
    engine_model_path: str | None = None
    adapter_path: str | None = None
    deployment_mode: str | None = None
    engine: str | None = None
    base_url: str | None = None
    base_urls_raw: list[str] | None = Field(default=None, alias="base_urls")
    wire_api: str | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    thinking_enabled: bool | None = None
    multimodal: bool | None = None
    context_length: int | None = None
    tensor_parallel_size: int | None = None
    dtype: str | None = None
    quantization: Any = None
    health_probe: HealthProbe | None = None
    checkpoint_manifest_sha256: str | None = None

    def base_urls(self) -> list[str]:
        """Every replica base URL (trailing ``/`` stripped, deduplicated, order kept)."""
        urls: list[str] = []
        for value in list(self.base_urls_raw or []) + ([self.base_url] if self.base_url else []):
            if isinstance(value, str) and value.strip():
                url = value.strip().rstrip("/")
                if url not in urls:
                    urls.append(url)
        return urls

    def expected_root(self) -> str | None:
        """The ``root`` the live ``/v1/models`` row must resolve to (§5)."""
        return self.engine_model_path or self.model_path


# --------------------------------------------------------------------------- failure site
class FailureSite(Tolerant):
    """The current failure site of a case, as shown by the UI (derived, not a file)."""

    step_id: str | None = None
    stage: str | None = None
    source_step_index: int | None = None
    localization_kind: str | None = None
    semantic_category: str | None = None
    localization_verifier: str | None = None
    context_request_id: str | None = None
    runtime_store_path: str | None = None
    origin: str | None = None  # attempt | candidate | semantic_localization


__all__ = [name for name in list(globals()) if not name.startswith("_")]
