"""The bundled driver's documents: what each file of its search root holds, as pure functions.

Nothing here reads or writes a file or talks to a server. The driver
(``driver.py``) asks these functions what a file's content must be and hands the
bytes to the layout writer (``layout.py``). Field sets follow psd-run-format
§2.3-§2.14, so ``check`` and every view read the bundled driver's roots as any
driver's:

- identities: :func:`search_identity`, :func:`run_config`;
- manifests: :func:`run_manifest_initial` / :func:`run_manifest_final`, :func:`search_manifest`;
- the search state: :func:`search_state_payload`, :func:`round_row`;
- the continuation: :func:`continuation_identity`, :func:`continuation_payload`,
  :func:`attempt_continuation`, :func:`media_block`;
- verdicts: :func:`verdict_checker`, :func:`verification_bundle`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_sha256
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.bundled import records as R
from eviscene_tui.gate.bundled.source import CaseInputs
from eviscene_tui.settings import SupervisedSettings

SEARCH_VERSION = R.SEARCH_SCHEMA
OPERATOR_RELOCALIZATION_REASON = "operator_relocalization"

# The files of a round directory whose digests the search-state round row lists.
ROUND_FILES = (
    "manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "episodes/hint-00-teacher.json",
    "proposer-hint-audits.json", "hint-proposals.json", "proposer-response.json", "live-serving-check.json",
    "semantic-localization.json",
)
CONTINUATION_FILE = "continuations/hint-00.json"
EPISODE_FILE = "episodes/hint-00-teacher.json"


class SearchError(RuntimeError):
    """The search cannot go on (message says why): the round pauses, as any driver's."""


@dataclass(frozen=True)
class Budgets:
    """Stop budgets; defaults as the driver (6 attempts / 12 proposal rounds / 1800 s),
    checked by the protocol's rule."""

    max_attempts: int = 6
    max_proposals: int = 12
    max_seconds: float = 1800

    def __post_init__(self) -> None:
        P.validate_budgets(self.max_attempts, self.max_proposals, self.max_seconds)

    @classmethod
    def from_settings(cls, settings: SupervisedSettings) -> Budgets:
        """From the ``[supervised]`` table of the user's settings (already checked by
        ``load_settings`` with the driver's rules; driver defaults where not given)."""
        return cls(settings.max_attempts, settings.max_proposals, settings.max_seconds)


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


# ================================================================ identity and documents
def search_identity(inputs: CaseInputs, output_dir: str, budgets: Budgets) -> dict[str, Any]:
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
        "initial_site": {"source_step_index": (i.site or {}).get("source_step_index"), "step_id": (i.site or {}).get("step_id")},
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


def run_config(settings: SearchSettings, inputs: CaseInputs, budgets: Budgets, output_dir: str, b: RoundBindings) -> dict[str, Any]:
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


def run_manifest_initial(inputs: CaseInputs) -> dict[str, Any]:
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
    inputs: CaseInputs, settings: SearchSettings, records: Sequence[Mapping[str, Any]], profile_sha256: str | None
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


def tree_size(root: str | os.PathLike[str]) -> int:
    """Bytes of every file under ``root`` (the driver's 2 GiB storage budget)."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def reused_site(last: Mapping[str, Any], trace: dict[str, Any]) -> dict[str, Any] | None:
    """The latest round's site: its last attempt's, else its last candidate's."""
    for rec in reversed(last.get("records") or []):
        if isinstance(rec, dict) and isinstance(rec.get("repair_site"), dict):
            return dict(rec["repair_site"])
    for cand in reversed(last.get("candidates") or []):
        site = R.site_from_candidate(cand, trace) if isinstance(cand, dict) else None
        if site:
            return site
    return None


def earlier_teacher_episodes(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``round-inputs/round-NN/media.json`` episodes: the teacher episodes of earlier rounds."""
    return [
        {"path": fname, "sha256": digest}
        for row in history
        for fname, digest in (row.get("files") or {}).items()
        if fname.endswith("-teacher.json")
    ]


# ================================================================ continuation


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
    round or run). The bundled driver records one teacher step, not verified by the
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
    unknown = set(values) - set(P.CHECK_NAMES)
    if unknown:
        raise SearchError(f"unknown checker values: {', '.join(sorted(unknown))}")
    bad = [k for k, v in values.items() if v is not None and type(v) is not bool]
    if bad:
        raise SearchError(f"checker values must be true, false or unset: {', '.join(bad)}")
    if accepted:
        values = {name: True for name in P.CHECK_NAMES} | {k: v for k, v in values.items() if v is not None}
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
    *,
    candidate: Mapping[str, Any] | None,
    episode: Mapping[str, Any] | None,
    records: Sequence[Mapping[str, Any]],
    audit: Sequence[Mapping[str, Any]],
    status: str,
    round_dir: Path,
    files: Mapping[str, str],
) -> dict[str, Any]:
    """The search-state ``rounds[]`` row of a closed round (``round_dir`` resolved)."""
    row: dict[str, Any] = {
        "directory": str(round_dir),
        "files": dict(files),
        "records": absolute_records(records, round_dir),
        "candidates": [dict(candidate)] if candidate is not None else [],
        "feedback": P.round_feedback(list(records), list(audit), status, [episode] if episode is not None else []),
        "no_further_hint": P.no_further_hint(list(records), list(audit), status),
    }
    return row
