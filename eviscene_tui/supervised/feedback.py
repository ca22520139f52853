"""The driver's feedback rules (psd-run-format §4), as pure functions.

- :func:`public_attempt_feedback`: one attempt as the next proposer sees it;
- :func:`round_feedback`: the ``feedback`` block of a search-state round row;
- :func:`revision_context`: the feedback object for the next round (§4.1);
- :func:`revision_rejection`: the feedback filter on a proposed hint (§4.2.3);
- :func:`next_feedback`: :func:`revision_context` plus the operator's explicit
  relocalization request recorded on the last round row (see below);
- :class:`Budgets` and :func:`next_stop`: the stop conditions, in the driver's order (§4.3).

Operator relocalization. The driver has no operator, so its feedback is a pure
function of the attempts. When the operator asks for relocalization, the round
row gets ``operator_relocalization = {from_source_step, to_source_step, note,
event_id}``. :func:`next_feedback` then forces ``needs_relocalization: true``;
when that round had no attempt (relocalization at the site gate, before any
continuation) ``anchor_feedback`` is built for the old site:
``{selected_source_step: old, earliest_error_step: new, checker: {anchor_matches: false}}``.
With an attempt (relocalization as a verdict) the attempt itself carries
``anchor_matches: false`` and ``earliest_error_step = new``, so the driver rule
already gives the same ``anchor_feedback``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from eviscene_tui.artifacts import projection
from eviscene_tui.artifacts.models import CHECK_NAMES
from eviscene_tui.settings import SupervisedSettings

LOCK_CHECKS = ("source_error_confirmed", "repaired_at_selected_step", "procedural_hint", "anchor_matches")
TERMINAL_STATUSES = (
    "converged",
    "attempt_budget_exhausted",
    "proposal_budget_exhausted",
    "time_budget_exhausted",
    "no_further_grounded_hint",
)
STORAGE_BUDGET_BYTES = 2 << 30


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --------------------------------------------------------------------- attempts
def checker_values(local_verification: Any) -> dict[str, bool]:
    """The six check values that are real booleans (never explanations/evidence).

    Read from ``checks`` rows ``{name, passed}``; a check absent there falls back
    to the same key in ``review``. Values that are not ``True``/``False`` are dropped.
    """
    lv = _map(local_verification)
    out: dict[str, bool] = {}
    checks = lv.get("checks")
    if isinstance(checks, list):
        for row in checks:
            row = _map(row)
            name, passed = row.get("name"), row.get("passed")
            if name in CHECK_NAMES and type(passed) is bool and name not in out:
                out[name] = passed
    review = _map(lv.get("review"))
    for name in CHECK_NAMES:
        if name not in out and type(review.get(name)) is bool:
            out[name] = review[name]
    return {name: out[name] for name in CHECK_NAMES if name in out}


def trace_steps(episode: Any) -> list[dict[str, Any]]:
    """The ``trace_steps`` projection of a teacher episode's repaired (suffix) steps.

    Steps flagged ``metadata.psd_suffix_step`` (the teacher's); no token captures.
    ``index`` is the step's index in the episode's ``state.all_steps``.
    """
    return projection.trace_steps(episode, suffix_only=True)


def public_attempt_feedback(record: Mapping[str, Any], episode: Any = None) -> dict[str, Any]:
    """One attempt as the next round's proposer sees it (no private material)."""
    lv = _map(record.get("local_verification"))
    review = _map(lv.get("review"))
    earliest = review.get("earliest_error_step")
    return {
        "hint": str(_map(record.get("hint_record")).get("text") or ""),
        "selected_source_step": _map(record.get("repair_site")).get("source_step_index"),
        "checker": checker_values(lv),
        "earliest_error_step": earliest if type(earliest) is int else -1,
        "task_passed": record.get("hinted_episode_pass") is True,
        "strict_trace_passed": record.get("hinted_strict_trace_audit_pass") is True,
        "accepted": record.get("accepted") is True,
        "repaired_steps": trace_steps(episode),
    }


def rejected_reasons(audit_rows: Sequence[Any]) -> list[str]:
    out = []
    for row in audit_rows:
        row = _map(row)
        if row.get("passed") is True:
            continue
        reason = row.get("reason")
        out.append(reason if isinstance(reason, str) and reason else "hint_audit_failed")
    return out


def round_feedback(
    records: Sequence[Mapping[str, Any]],
    audit_rows: Sequence[Any],
    status: str,
    episodes: Sequence[Any] = (),
) -> dict[str, Any]:
    """The ``feedback`` block of a round row (search-state ``rounds[]``)."""
    eps = list(episodes) + [None] * (len(records) - len(episodes))
    return {
        "attempts": [public_attempt_feedback(r, e) for r, e in zip(records, eps)],
        "rejected_proposal_reasons": rejected_reasons(audit_rows),
        "status": status,
    }


def no_further_hint(records: Sequence[Any], audit_rows: Sequence[Any], status: str) -> bool:
    """No records and no audit rows (an explicit empty proposal), or no_recoverable_site."""
    return status == "no_recoverable_site" or (not records and not audit_rows)


# --------------------------------------------------------------------- the loop
def _row_feedback(row: Any) -> Mapping[str, Any]:
    return _map(_map(row).get("feedback"))


def revision_context(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The feedback object for the next round, exactly per §4.1.

    ``history`` is the list of search-state round rows, each with ``feedback``.
    """
    previous_rounds = [dict(_row_feedback(row)) for row in history]
    attempts = [_map(a) for fb in previous_rounds for a in (fb.get("attempts") or []) if isinstance(a, Mapping)]
    lock = ""
    for attempt in attempts:
        checker = _map(attempt.get("checker"))
        if all(checker.get(name) is True for name in LOCK_CHECKS):
            hint = str(attempt.get("hint") or "")
            if not lock or hint == lock or hint.startswith(lock + "\n"):
                lock = hint
    excluded: list[str] = []
    for attempt in attempts:
        hint = str(attempt.get("hint") or "")
        if hint not in excluded:
            excluded.append(hint)
    last = attempts[-1] if attempts else None
    needs = bool(attempts) and not lock and _map(last.get("checker") if last else None).get("anchor_matches") is False
    anchor = (
        {
            "selected_source_step": last.get("selected_source_step"),
            "earliest_error_step": last.get("earliest_error_step"),
            "checker": dict(_map(last.get("checker"))),
        }
        if last is not None
        else {}
    )
    return {
        "previous_rounds": previous_rounds,
        "locked_hint": lock,
        "excluded_hints": excluded,
        "needs_relocalization": needs,
        "anchor_feedback": anchor,
    }


def next_feedback(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`revision_context` plus the operator's relocalization request (module doc)."""
    feedback = revision_context(history)
    if not history:
        return feedback
    last = _map(history[-1])
    reloc = _map(last.get("operator_relocalization"))
    if reloc:
        feedback["needs_relocalization"] = True
        if not _row_feedback(last).get("attempts"):
            feedback["anchor_feedback"] = {
                "selected_source_step": reloc.get("from_source_step"),
                "earliest_error_step": reloc.get("to_source_step"),
                "checker": {"anchor_matches": False},
            }
    return feedback


def revision_rejection(hint: str, feedback: Mapping[str, Any]) -> str:
    """§4.2.3: ``repeated_completed_hint`` / ``changed_verified_hint`` / ``""``."""
    stripped = (hint or "").strip()
    excluded = feedback.get("excluded_hints") or []
    if any(isinstance(h, str) and h.strip() == stripped for h in excluded):
        return "repeated_completed_hint"
    lock = feedback.get("locked_hint") or ""
    if lock and not (hint or "").startswith(lock + "\n"):
        return "changed_verified_hint"
    return ""


# --------------------------------------------------------------------- budgets
class BudgetError(ValueError):
    pass


def _is_int(value: Any) -> bool:
    return type(value) is int


@dataclass(frozen=True)
class Budgets:
    """Stop budgets; defaults as the driver (6 attempts / 12 proposal rounds / 1800 s)."""

    max_attempts: int = 6
    max_proposals: int = 12
    max_seconds: float = 1800

    def __post_init__(self) -> None:
        validate_budgets(self.max_attempts, self.max_proposals, self.max_seconds)


def validate_budgets(max_attempts: Any, max_proposals: Any, max_seconds: Any) -> None:
    """As the driver, before any call: attempts int 1..32; proposals int in
    [max_attempts, 64]; seconds 1..86400."""
    if not _is_int(max_attempts) or not 1 <= max_attempts <= 32:
        raise BudgetError(f"max_attempts must be an integer between 1 and 32, got {max_attempts!r}")
    if not _is_int(max_proposals) or not max_attempts <= max_proposals <= 64:
        raise BudgetError(
            f"max_proposals must be an integer between max_attempts ({max_attempts}) and 64, got {max_proposals!r}"
        )
    if type(max_seconds) not in (int, float) or not 1 <= max_seconds <= 86400:
        raise BudgetError(f"max_seconds must be between 1 and 86400, got {max_seconds!r}")


def tree_size(root: str | os.PathLike[str]) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def next_stop(
    state: Mapping[str, Any],
    budgets: Budgets,
    *,
    root: str | os.PathLike[str] | None = None,
    storage_limit: int = STORAGE_BUDGET_BYTES,
) -> str | None:
    """The status that stops the search before the next round, or None to go on.

    ``state`` is the search-state payload (``rounds``, ``elapsed_seconds``).
    Order as ``run_search``: converged, attempt budget, proposal budget, time
    budget, no further grounded hint, then the 2 GiB storage budget (when ``root``).
    """
    rows = [r for r in (state.get("rounds") or []) if isinstance(r, Mapping)]
    records = [rec for row in rows for rec in (row.get("records") or []) if isinstance(rec, Mapping)]
    if any(rec.get("accepted") is True for rec in records):
        return "converged"
    if len(records) >= budgets.max_attempts:
        return "attempt_budget_exhausted"
    if len(rows) >= budgets.max_proposals:
        return "proposal_budget_exhausted"
    elapsed = state.get("elapsed_seconds") or 0
    if isinstance(elapsed, (int, float)) and elapsed >= budgets.max_seconds:
        return "time_budget_exhausted"
    if rows and rows[-1].get("no_further_hint") is True:
        return "no_further_grounded_hint"
    if root is not None and Path(root).is_dir() and tree_size(root) >= storage_limit:
        return "paused_storage_budget"
    return None


def budgets_from_settings(settings: SupervisedSettings) -> Budgets:
    """Budgets from the ``[supervised]`` table of the user's settings (already checked
    by ``load_settings`` with the driver's rules; driver defaults where not given)."""
    return Budgets(max_attempts=settings.max_attempts, max_proposals=settings.max_proposals, max_seconds=settings.max_seconds)
