"""The supervised search's stage logic: the driver's rules as plain data and pure functions.

Nothing here reads or writes a file or talks to a server. :class:`SupervisedSearch`
(``search.py``) coordinates: it asks these functions what the next round's site
is, what a file's content must be, whether an operator action is possible now,
and then hands the bytes to the layout writer (``layout.py``) or the question to
the hint constructor (``proposer.py``).

- the round in progress (:class:`RoundDraft`) and its proposals (:class:`Proposal`);
- gates: :func:`require_stage`, :func:`begin_refusal`, :func:`stop_refusal`;
- sites: :func:`next_site`, :func:`next_localization`, :func:`relocalize_problem`;
- the documents the driver writes: :func:`search_identity`, :func:`run_config`,
  :func:`run_manifest_initial` / :func:`run_manifest_final`, :func:`search_manifest`,
  :func:`round_row`, :func:`continuation_payload`, :func:`media_block`, …;
- verdicts: :func:`verdict_checker`, :func:`earliest_error_step`;
- resume: :func:`proposals_from_events`, :func:`outcome_from_last_error`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_sha256, hint_sha256
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.supervised import records as R
from eviscene_tui.supervised.audit import driver_audit
from eviscene_tui.supervised.continuation import ContinuationOutcome
from eviscene_tui.supervised.feedback import CHECK_NAMES, TERMINAL_STATUSES, Budgets, next_feedback, no_further_hint, round_feedback
from eviscene_tui.supervised.source import SupervisedInputs

SEARCH_VERSION = R.SEARCH_SCHEMA
OPERATOR_RELOCALIZATION_REASON = "operator_relocalization"
OPERATOR_REJECTED_REASON = "operator_rejected"
# A stop is written as the driver records any exception that ends a round early, with the
# exception type the driver gate raises: ``paused_execution_error`` + ``execution_error.type``.
PAUSED_EXECUTION_ERROR = "paused_execution_error"
OPERATOR_STOPPED = "OperatorStoppedSearch"

# The files of a round directory whose digests the search-state round row lists.
ROUND_FILES = (
    "manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "episodes/hint-00-teacher.json",
    "proposer-hint-audits.json", "hint-proposals.json", "proposer-response.json", "live-serving-check.json",
    "semantic-localization.json",
)
CONTINUATION_FILE = "continuations/hint-00.json"
EPISODE_FILE = "episodes/hint-00-teacher.json"

AuditFn = Callable[[str, int], dict[str, Any]]


class SearchError(RuntimeError):
    """An operator action that is not possible now (message says why)."""


@dataclass
class Proposal:
    index: int
    text: str
    level: int
    provider: str
    model: str
    audit: dict[str, Any]
    status: str = "pending"  # pending | approved | rejected
    reason: str = ""
    event_id: str | None = None

    @property
    def hint_sha256(self) -> str:
        return hint_sha256(self.text)

    @property
    def passed(self) -> bool:
        return bool(self.audit.get("passed"))

    def driver_row(self, site_step_id: str) -> dict[str, Any]:
        return {
            "text": self.text,
            "level": self.level,
            "proposal_id": R.proposal_id_for(site_step_id, self.text, self.level),
            "provider": self.provider,
            "model": self.model,
            "audit": driver_audit(self.audit),
        }

    def audit_row(self) -> dict[str, Any]:
        if self.status == "rejected" and self.passed:
            return {"passed": False, "reason": OPERATOR_REJECTED_REASON}
        if not self.passed:
            return {"passed": False, "reason": self.audit.get("reason") or "hint_audit_failed"}
        return {"passed": True, "audit": driver_audit(self.audit)}


@dataclass
class PartialOutput:
    """What a cancelled or failed continuation streamed before it ended (shown again after a reopen)."""

    reasoning: str = ""
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    completion_token_ids: list[int] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.reasoning or self.content or self.tool_calls or self.completion_token_ids)


@dataclass
class RoundDraft:
    index: int
    dir: Path
    feedback: dict[str, Any]
    site: dict[str, Any]
    candidate: dict[str, Any]
    config: dict[str, Any]
    stage: str = "site"  # site | hints | continuation | verdict | closed
    started: float = field(default_factory=time.monotonic)
    proposals: list[Proposal] = field(default_factory=list)
    prompt: list[dict[str, Any]] | None = None
    proposer_called: bool = False
    approved: Proposal | None = None
    record: dict[str, Any] | None = None
    episode: dict[str, Any] | None = None
    outcome: ContinuationOutcome | None = None
    partial: PartialOutput | None = None  # the last cancelled or failed run's streamed output
    retries: int = 0
    relocalization_requested: bool = False
    earlier_audit_rows: list[dict[str, Any]] = field(default_factory=list)  # rows already on disk (resume)

    @property
    def name(self) -> str:
        return R.round_name(self.index)


@dataclass
class SearchSettings:
    operator: str = "operator"
    policy_model: str | None = None
    policy_base_url: str | None = None
    policy_profile: Path | None = None
    policy_temperature: float = 0.7
    hint_url: str | None = None
    hint_model: str | None = None
    hint_count: int = 3
    hint_level: int = 1


# ================================================================ gates and status
def require_stage(draft: RoundDraft | None, *stages: str) -> RoundDraft:
    """The open round when it is at one of ``stages``; otherwise :class:`SearchError` saying where it is."""
    if draft is None or draft.stage not in stages:
        now = draft.stage if draft is not None else "no round in progress"
        raise SearchError(f"not possible now: the round is at {now!r}; expected {' or '.join(stages)}")
    return draft


def stopped_by_operator(state: Mapping[str, Any]) -> bool:
    error = state.get("execution_error")
    return state.get("status") == PAUSED_EXECUTION_ERROR and isinstance(error, dict) and error.get("type") == OPERATOR_STOPPED


def status_label(state: Mapping[str, Any]) -> str:
    """The status as the operator reads it (a stop is "stopped by operator", not an error)."""
    return "stopped by operator" if stopped_by_operator(state) else str(state.get("status"))


def begin_refusal(draft: RoundDraft | None, state: Mapping[str, Any]) -> str | None:
    """Why a new round cannot start (a round is open, the operator stopped the search), or None.
    The budgets are checked separately (:func:`~eviscene_tui.supervised.feedback.next_stop`)."""
    if draft is not None and draft.stage != "closed":
        return f"{draft.name} is still open (at {draft.stage!r})"
    if stopped_by_operator(state):
        return "the search was stopped by the operator; resume it first"
    return None


def stop_refusal(draft: RoundDraft | None, state: Mapping[str, Any]) -> str | None:
    """Why the operator cannot stop the search now, or None."""
    if draft is not None and draft.stage != "closed":
        return f"{draft.name} is open; finish or relocalize it first"
    if stopped_by_operator(state):
        return "the search is already stopped by the operator"
    status = str(state.get("status"))
    if status in TERMINAL_STATUSES:
        return f"the search has already ended: {status}"
    return None


def operator_stop_error(history_len: int) -> dict[str, Any]:
    """``execution_error`` of an operator stop before round ``history_len`` (as the driver gate writes it)."""
    return {"round": history_len, "type": OPERATOR_STOPPED}


# ================================================================ identity and documents
def search_identity(inputs: SupervisedInputs, output_dir: str, budgets: Budgets) -> dict[str, Any]:
    """The identity ``search-state.json`` is bound to (a reopen with other inputs or budgets is refused)."""
    i = inputs
    bound_inputs = {
        "trace": {"path": str(i.trace_path), "sha256": i.trace_sha256},
        "candidate": i.candidate_binding,
        "public_context": i.public_binding,
        "private_context": i.private_binding,
        "output_dir": output_dir,
        "search_mode": "feedback",
        "operator_gated": True,
        "supervisor": "eviscene-tui",
        "source_root": str(i.source_root) if i.source_root is not None else None,
        "initial_site": {"source_step_index": i.site.get("source_step_index"), "step_id": i.site.get("step_id")},
        "repair_attempts": budgets.max_attempts,
        "proposal_rounds": budgets.max_proposals,
        "search_seconds": budgets.max_seconds,
    }
    return {
        "version": SEARCH_VERSION,
        "inputs": bound_inputs,
        "max_attempts": budgets.max_attempts,
        "max_proposals": budgets.max_proposals,
        "max_seconds": budgets.max_seconds,
    }


@dataclass(frozen=True)
class RoundBindings:
    """``{path, sha256}`` of the files a round's ``run-inputs.json`` binds (None when absent)."""

    public: dict[str, Any] | None
    media: dict[str, Any] | None
    semantic_localization: dict[str, Any] | None
    serving_profile: dict[str, Any] | None


def run_config(settings: SearchSettings, inputs: SupervisedInputs, budgets: Budgets, output_dir: str, b: RoundBindings) -> dict[str, Any]:
    """The identity of a round's ``run-inputs.json`` (the driver's run configuration)."""
    s, i = settings, inputs
    return {
        "trace": {"path": str(i.trace_path), "sha256": i.trace_sha256},
        "candidate": i.candidate_binding,
        "audit": None,
        "semantic_verification": b.semantic_localization,
        "image": None,
        "gold": None,
        "public_context": b.public,
        "private_context": i.private_binding,
        "output_dir": output_dir,
        "policy_provider": "qwen_local",
        "policy_model": s.policy_model,
        "policy_base_url": s.policy_base_url,
        "policy_wire_api": "chat_completions",
        "policy_serving_profile": b.serving_profile,
        "hint_constructor_provider": "openai_compatible" if s.hint_url else "operator",
        "hint_constructor_model": s.hint_model if s.hint_url else s.operator,
        "hint_constructor_base_url": s.hint_url,
        "hint_constructor_wire_api": "chat_completions" if s.hint_url else None,
        "hint_constructor_thinking_level": None,
        "round_start_checkpoint": None,
        "round_start_checkpoint_manifest": None,
        "hint_count": 1,
        "hint_level": s.hint_level,
        "max_suffix_actions": 1,
        "run_student_diagnostic": False,
        "verification_bundle": None,
        "train_cases": None,
        "source_access_policy": None,
        "judge_model": "operator",
        "search_mode": "single",
        "policy_temperature": s.policy_temperature,
        "repair_attempts": budgets.max_attempts,
        "proposal_rounds": budgets.max_proposals,
        "search_seconds": budgets.max_seconds,
        "search_media": b.media,
        "precomputed_slate_cache": None,
        "candidate_offset": None,
        "candidate_length": None,
        "continuation_policy_version": R.CONTINUATION_POLICY_VERSION,
        "operator_gated": True,
        "operator": s.operator,
    }


def run_manifest_initial(inputs: SupervisedInputs) -> dict[str, Any]:
    """A round's ``manifest.json`` while it is generating."""
    src = inputs.candidate.get("source") if isinstance(inputs.candidate, dict) else None
    return {
        "schema_version": R.RUN_SCHEMA,
        "status": "generating",
        "trace": str(inputs.trace_path),
        "runtime_archive": None,
        "source_task_review": (src or {}).get("source_task_review") if isinstance(src, dict) else None,
        "source_audit": None,
        "train_cases_sha256": None,
        "source_access_policy": None,
        "candidate_count": 0,
        "accepted_count": 0,
    }


def run_manifest_final(
    inputs: SupervisedInputs, settings: SearchSettings, records: Sequence[Mapping[str, Any]], profile_sha256: str | None
) -> dict[str, Any]:
    """A round's ``manifest.json`` once its attempts are known (``profile_sha256``: of the serving profile)."""
    m = run_manifest_initial(inputs)
    s = settings
    m.update(
        {
            "status": "generated" if records else "no_admissible_hints",
            "policy_serving_attestation": {
                "profile": str(s.policy_profile) if s.policy_profile else None,
                "profile_sha256": profile_sha256,
                "profile_id": s.policy_model,
                "model_path": None,
                "checkpoint_manifest": None,
                "checkpoint_manifest_sha256": None,
            },
            "hint_constructor": {
                "provider": "openai_compatible" if s.hint_url else "operator",
                "model": s.hint_model if s.hint_url else s.operator,
                "wire_api": "chat_completions" if s.hint_url else None,
                "thinking_level": None,
                "supplies_training_distribution": False,
            },
            "candidate_count": len(records),
            "accepted_count": sum(1 for r in records if r.get("accepted") is True),
            "pending_hinted_episode_count": sum(1 for r in records if not r.get("local_verification")),
            "artifacts": {"repair_attempts": "repair_attempts.jsonl"},
        }
    )
    return m


def all_records(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [rec for row in history for rec in (row.get("records") or [])]


def merged_candidates(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every round's candidates, the first of each ``candidate_id`` kept (``repair_candidates.jsonl``)."""
    candidates: dict[str, Any] = {}
    for row in history:
        for cand in row.get("candidates") or []:
            if isinstance(cand, dict):
                candidates.setdefault(str(cand.get("candidate_id")), cand)
    return list(candidates.values())


def search_state_payload(state: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of ``search-state.json`` (``execution_error`` only while there is one)."""
    payload: dict[str, Any] = {
        "status": state["status"],
        "elapsed_seconds": round(float(state["elapsed_seconds"]), 3),
        "rounds": list(state["rounds"]),
    }
    if state.get("execution_error") is not None:
        payload["execution_error"] = state["execution_error"]
    return payload


def search_manifest(payload: Mapping[str, Any], budgets: Budgets) -> dict[str, Any]:
    """The search root's ``manifest.json`` for a ``search-state.json`` payload."""
    history = list(payload["rounds"])
    records = all_records(history)
    status = payload["status"]
    return {
        "schema_version": SEARCH_VERSION,
        "status": status,
        "converged": status == "converged",
        "candidate_count": len(records),
        "accepted_count": sum(1 for r in records if r.get("accepted") is True),
        "proposal_rounds": len(history),
        "attempt_budget": budgets.max_attempts,
        "proposal_budget": budgets.max_proposals,
        "elapsed_seconds": payload["elapsed_seconds"],
        "stop_reason": status,
        "rounds": [row.get("directory") for row in history],
        "execution_error": payload.get("execution_error"),
        "training_distribution_provider": "frozen_self_teacher_only",
    }


def earlier_teacher_episodes(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``round-inputs/round-NN/media.json`` episodes: the teacher episodes of earlier rounds."""
    return [
        {"path": fname, "sha256": digest}
        for row in history
        for fname, digest in (row.get("files") or {}).items()
        if fname.endswith("-teacher.json")
    ]


# ================================================================ sites
def next_site(inputs: SupervisedInputs, history: Sequence[Mapping[str, Any]], operator: str) -> tuple[dict[str, Any], bool]:
    """The next round's site and whether its feedback asks for a relocalization."""
    trace = inputs.trace
    if not history:
        site = dict(inputs.site)
        if site.get("localization_kind") == "operator":
            site["localization_verifier"] = f"operator:{operator}"
        return site, False
    last = history[-1]
    reloc = last.get("operator_relocalization")
    if isinstance(reloc, dict):
        step = int(reloc["to_source_step"])
        site = R.site_from_trace(
            trace,
            step,
            localization_kind="operator",
            semantic_category=reloc.get("category"),
            localization_verifier=f"operator:{reloc.get('operator') or operator}",
            basis={"source_step_index": step, "note": reloc.get("note"), "operator": reloc.get("operator")},
        )
        return site, False
    needs = bool(next_feedback(history).get("needs_relocalization"))
    return _reused_site(last, trace) or dict(inputs.site), needs


def _reused_site(last: Mapping[str, Any], trace: dict[str, Any]) -> dict[str, Any] | None:
    """The latest round's site: its last attempt's, else its last candidate's."""
    for rec in reversed(last.get("records") or []):
        if isinstance(rec.get("repair_site"), dict):
            return dict(rec["repair_site"])
    for cand in reversed(last.get("candidates") or []):
        site = R.site_from_candidate(cand, trace)
        if site:
            return site
    return None


@dataclass(frozen=True)
class NextLocalization:
    """The localization document the next round binds: ``doc`` to write, or ``reuse_from``
    (the latest round's directory, whose ``semantic-localization.json`` is copied), or neither."""

    doc: dict[str, Any] | None = None
    reuse_from: Path | None = None


def next_localization(
    inputs: SupervisedInputs, history: Sequence[Mapping[str, Any]], site: Mapping[str, Any], *, site_note: str | None, operator: str
) -> NextLocalization:
    trace = inputs.trace
    if not history:
        if site.get("localization_kind") == "operator":
            doc = R.operator_localization(trace, int(site["source_step_index"]), note=site_note or "operator-chosen starting step",
                                          operator=operator, category=site.get("semantic_category"))
            return NextLocalization(doc=doc)
        return NextLocalization(doc=inputs.semantic_localization)
    last = history[-1]
    reloc = last.get("operator_relocalization")
    if isinstance(reloc, dict):
        doc = R.operator_localization(trace, int(reloc["to_source_step"]), note=str(reloc.get("note") or ""),
                                      operator=str(reloc.get("operator") or ""), category=reloc.get("category"))
        return NextLocalization(doc=doc)
    return NextLocalization(reuse_from=Path(str(last.get("directory"))))


def relocalize_problem(trace: dict[str, Any], step_index: int, note: str, *, category: str | None = None) -> str | None:
    """Why a relocalization to ``step_index`` would be refused, or None."""
    if not (note or "").strip():
        return "relocalization needs a note saying why"
    if category is not None and category not in R.SEMANTIC_CATEGORIES:
        return f"unknown category {category!r}; one of {', '.join(R.SEMANTIC_CATEGORIES)}"
    try:
        R.site_from_trace(trace, step_index, localization_kind="operator")
    except ValueError as exc:
        return str(exc)
    return None


# ================================================================ hints
def audit_rows(draft: RoundDraft, extra: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """``proposer-hint-audits.json`` rows: earlier rows on disk, every decided or failing
    proposal (and the approved one), then ``extra``; a pending hint that passes is not listed."""
    rows = list(draft.earlier_audit_rows)
    rows += [p.audit_row() for p in draft.proposals if p.status != "pending" or not p.passed or p is draft.approved]
    rows += list(extra)
    return rows


def close_pending(draft: RoundDraft, note: str) -> None:
    """Ending a round without an attempt rejects every pending hint that passes its audit."""
    for p in draft.proposals:
        if p.status == "pending" and p.passed:
            p.status, p.reason = "rejected", note


def journal_hints(proposals: Sequence[Proposal]) -> list[dict[str, Any]]:
    """The ``hints`` of an ``add_hints`` journal comment (enough to rebuild the proposals)."""
    return [
        {"proposal_index": p.index, "text": p.text, "level": p.level, "provider": p.provider, "model": p.model}
        for p in proposals
    ]


def _event_data(event: Mapping[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    return data if isinstance(data, dict) else {}


def _hint_level(raw: Any, default: int) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else default


def _added_hints(hints: Any, *, start: int, event_id: Any, default_level: int, audit: AuditFn) -> list[Proposal]:
    """The proposals of one ``add_hints`` comment, numbered from ``start``."""
    out: list[Proposal] = []
    for h in hints if isinstance(hints, list) else []:
        if isinstance(h, dict) and isinstance(h.get("text"), str):
            level = _hint_level(h.get("level"), default_level)
            out.append(Proposal(start + len(out), h["text"], level, str(h.get("provider") or ""), str(h.get("model") or ""),
                                audit(h["text"], level), event_id=event_id))
    return out


def proposals_from_events(
    events: Sequence[Mapping[str, Any]], *, default_level: int, audit: AuditFn
) -> tuple[list[Proposal], Proposal | None]:
    """A round's proposals rebuilt from its journal events: hints added (typed or fetched),
    then each rejection and approval by proposal index. ``audit(text, level)`` recomputes
    each audit (a pure function of the hint, the private context and the feedback).
    Returns the proposals and the one approved last (None when none was)."""
    out: list[Proposal] = []
    approved: Proposal | None = None
    for ev in events:
        data = _event_data(ev)
        if ev.get("action") == "comment" and data.get("event") == "add_hints":
            out += _added_hints(data.get("hints"), start=len(out), event_id=ev.get("id"), default_level=default_level, audit=audit)
            continue
        i = data.get("proposal_index")
        if ev.get("action") not in ("reject_hint", "approve_hint") or type(i) is not int or not 0 <= i < len(out):
            continue
        p = out[i]
        p.status = "approved" if ev["action"] == "approve_hint" else "rejected"
        p.reason, p.event_id = str(ev.get("reason") or ""), ev.get("id")
        if p.status == "approved":
            approved = p
    return out, approved


def site_accepted(events: Sequence[Mapping[str, Any]]) -> bool:
    return any(_event_data(e).get("event") == "accept_site" for e in events)


def round_events(events: Sequence[Mapping[str, Any]], index: int) -> list[Mapping[str, Any]]:
    """The journal events that target round ``index``."""
    out = []
    for e in events:
        target = e.get("target")
        if isinstance(target, dict) and target.get("round") == index:
            out.append(e)
    return out


# ================================================================ continuation
def last_error_doc(retry: int, error_type: str) -> dict[str, Any]:
    """``generation-last-error.json`` as the driver writes it (the error's type only)."""
    return {"hint_index": 0, "retry": retry, "error_type": error_type, "archive": None}


def outcome_from_last_error(raw: Any) -> tuple[ContinuationOutcome | None, int]:
    """The last failed or cancelled run a ``generation-last-error.json`` describes, and the next retry number."""
    if not isinstance(raw, dict):
        return None, 0
    error_type = str(raw.get("error_type") or "error")
    retry = _hint_level(raw.get("retry"), 0)
    status = "cancelled" if error_type == "cancelled" else "failed"
    return ContinuationOutcome(status=status, error_type=error_type), retry + 1


# A partial output is kept in the journal; past this many characters per field it is cut
# (the journal is read whole on every open).
PARTIAL_TEXT_LIMIT = 100_000


def partial_from_accumulator(acc: StreamAccumulator) -> PartialOutput:
    """What a run streamed before it ended (text, tool calls and the completion token count),
    each text cut as it is journaled, so the round shows the same before and after a reopen."""
    return PartialOutput(
        reasoning="".join(acc.reasoning)[:PARTIAL_TEXT_LIMIT],
        content="".join(acc.content)[:PARTIAL_TEXT_LIMIT],
        tool_calls=[{"id": tc.id, "name": tc.name, "arguments": "".join(tc.arguments)} for _, tc in sorted(acc.tool_calls.items())],
        completion_token_ids=list(acc.completion_token_ids),
    )


def partial_to_journal(partial: PartialOutput) -> dict[str, Any]:
    return {
        "reasoning": partial.reasoning,
        "content": partial.content,
        "tool_calls": partial.tool_calls,
        "completion_token_ids": partial.completion_token_ids,
    }


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def partial_from_journal(events: Sequence[Mapping[str, Any]]) -> PartialOutput | None:
    """The partial output of the round's last ``continuation_ended`` comment, or None."""
    for ev in reversed(events):
        data = _event_data(ev)
        if ev.get("action") != "comment" or data.get("event") != "continuation_ended":
            continue
        raw = data.get("partial")
        if not isinstance(raw, dict):
            return None
        calls = [
            {"id": _str_or_none(c.get("id")), "name": _str_or_none(c.get("name")), "arguments": str(c.get("arguments") or "")}
            for c in raw.get("tool_calls") or [] if isinstance(c, dict)
        ]
        raw_ids = raw.get("completion_token_ids")
        ids = [i for i in raw_ids if type(i) is int] if isinstance(raw_ids, list) else []
        return PartialOutput(
            reasoning=str(raw.get("reasoning") or ""), content=str(raw.get("content") or ""), tool_calls=calls,
            completion_token_ids=ids,
        )
    return None


def failed_error_type(outcome: ContinuationOutcome) -> str:
    return outcome.error_type or ("cancelled" if outcome.status == "cancelled" else "error")


def continuation_identity(config: Mapping[str, Any], hint_sha: str) -> dict[str, Any]:
    """What ``continuations/hint-00.json`` is bound to (the run and the hint)."""
    return {"run": canonical_sha256(dict(config)), "hint": hint_sha}


def continuation_payload(step: dict[str, Any], hint: str, stop_reason: str, episode: dict[str, Any]) -> dict[str, Any]:
    return {
        "teacher_steps": [step],
        "student_steps": [],
        "hint": hint,
        "teacher_complete": True,
        "student_complete": False,
        "stop_reason": stop_reason,
        "teacher_episode_trace": episode,
        "local_targets": [],
    }


def attempt_continuation(
    stop_reason: str,
    episode_sha256: str,
    *,
    teacher_steps: int = 1,
    verified: bool = False,
    episode_trace: str = EPISODE_FILE,
) -> dict[str, Any]:
    """The ``continuation`` block of an attempt record (the episode path relative to the
    round or run). The supervised search records one teacher step, not verified by the
    driver's episode check; the sample trees record what their driver runs did."""
    return {
        "teacher_complete": True,
        "student_complete": False,
        "stop_reason": stop_reason,
        "teacher_step_count": teacher_steps,
        "student_step_count": 0,
        "hinted_teacher_episode_verified": verified,
        "unhinted_student_diagnostic": None,
        "unhinted_student_affects_acceptance": False,
        "hinted_teacher_episode_trace": episode_trace,
        "hinted_teacher_episode_trace_sha256": episode_sha256,
    }


def source_runtime_store(trace: Mapping[str, Any]) -> Any:
    """The source trace's runtime store path (``state.runtime_store.runtime_path``), or None."""
    state = trace.get("state")
    runtime = state.get("runtime_store") if isinstance(state, dict) else None
    return runtime.get("runtime_path") if isinstance(runtime, dict) else None


def processor_id(policy_model: str | None, profile: Any) -> Any:
    """The media processor a serving profile names (else the policy model)."""
    if isinstance(profile, dict):
        return profile.get("engine_model_path") or profile.get("model_path") or policy_model
    return policy_model


def media_block(processor: Any, shas: Sequence[str], paths: Sequence[str]) -> dict[str, Any]:
    """An attempt's ``psd_media``: the request's images, stored in the round's ``media/``."""
    return {
        "schema_version": "ifv-psd-media-v3",
        "processor_id": processor,
        "processor_config": {},
        "image_sha256": list(shas),
        "image_paths": list(paths),
        "merge_size": 2,
    }


# ================================================================ verdict
def verdict_checker(checker: Mapping[str, Any] | None, *, accepted: bool) -> dict[str, Any]:
    """The checker values of a verdict: known names, true / false / unset; an approval sets
    every check not given to true. :class:`SearchError` for anything else."""
    values = dict(checker or {})
    unknown = set(values) - set(CHECK_NAMES)
    if unknown:
        raise SearchError(f"unknown checker values: {', '.join(sorted(unknown))}")
    bad = [k for k, v in values.items() if v is not None and type(v) is not bool]
    if bad:
        raise SearchError(f"checker values must be true, false or unset: {', '.join(bad)}")
    if accepted:
        values = {name: True for name in CHECK_NAMES} | {k: v for k, v in values.items() if v is not None}
    return values


def earliest_error_step(given: Any, *, accepted: bool, site: Mapping[str, Any]) -> int:
    """The verdict's earliest error step: the one given, else the site for an approval, else -1."""
    if type(given) is int:
        return int(given)
    return int(site["source_step_index"]) if accepted else -1


def verification_bundle(hint_sha: str | None) -> dict[str, Any]:
    return {
        "schema_version": R.BUNDLE_SCHEMA,
        "attempts": [{"hint_index": 0, "hint_sha256": hint_sha, "local_verification": "judge/hint-00.json"}],
    }


# ================================================================ closing a round
def absolute_records(records: Sequence[Mapping[str, Any]], round_dir: Path) -> list[dict[str, Any]]:
    """Attempt records as the search-state row keeps them: the episode path absolute."""
    out = []
    for rec in records:
        r = dict(rec)
        cont = dict(r.get("continuation") or {})
        if cont.get("hinted_teacher_episode_trace"):
            cont["hinted_teacher_episode_trace"] = str(round_dir / cont["hinted_teacher_episode_trace"])
        r["continuation"] = cont
        out.append(r)
    return out


def round_row(
    draft: RoundDraft,
    *,
    records: Sequence[Mapping[str, Any]],
    audit: Sequence[Mapping[str, Any]],
    status: str,
    round_dir: Path,
    files: Mapping[str, str],
    operator_relocalization: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The search-state ``rounds[]`` row of a closed round (``round_dir`` resolved)."""
    row: dict[str, Any] = {
        "directory": str(round_dir),
        "files": dict(files),
        "records": absolute_records(records, round_dir),
        "candidates": [draft.candidate],
        "feedback": round_feedback(records, audit, status, [draft.episode] if draft.episode is not None else []),
        "no_further_hint": no_further_hint(records, audit, status),
    }
    if operator_relocalization is not None:
        row["operator_relocalization"] = dict(operator_relocalization)
    return row


def operator_relocalization(old_step: Any, new_step: int, note: str, category: str | None, operator: str, event_id: str) -> dict[str, Any]:
    """The ``operator_relocalization`` of a round row (read by :func:`next_feedback` and :func:`next_site`)."""
    return {
        "from_source_step": old_step,
        "to_source_step": new_step,
        "note": note,
        "category": category,
        "operator": operator,
        "event_id": event_id,
    }
