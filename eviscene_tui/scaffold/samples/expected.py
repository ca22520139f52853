"""What ``eviscene-tui check sample_runs --json`` must report for each sample case.

Keys are case paths relative to ``sample_runs``. ``problems`` is the exact set of
problem codes; ``problem_paths`` (optional) maps a code to path fragments that at
least one problem with that code must contain.

Counting follows the summary rules (``artifacts/summary.py``): for a feedback search, attempts / accepted / pending
come from the ROOT ``repair_attempts.jsonl``, which is the concatenation of the
history rows (``search-state.rounds[*].records``). A round that is paused pending
its verifier is not in the history yet, so a ``paused_pending_verifier`` search
reports pending 0 at the search level (its pending row lives in
``rounds/round-00/repair_attempts.jsonl`` and the round manifest's
``pending_hinted_episode_count``).
"""

from __future__ import annotations

from typing import Any

MULTI_CONVERGED_KEY = "8301050608582e18"  # sha256(candidate_id)[:16] of case-flood-valencia-0512's seed
MULTI_BUDGET_KEY = "dfed9aca8c89c222"  # ... of case-rally-tbilisi-0733's seed
# the bound inputs of ``single-copied-without-inputs`` (none was copied along)
COPIED_WITHOUT_INPUTS_MISSING = (
    "trace.json", "candidate.json", "audit.json", "gold.json", "public-context.json", "private-context.json",
    "image.png", "serving-profile.json", "semantic-verification.json", "source-access-policy.json",
)


def _row(layout: str, status: str, rounds: int, attempts: int, accepted: int, pending: int, problems: set[str] | None = None,
         problem_paths: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {
        "layout": layout,
        "status": status,
        "rounds": rounds,
        "attempts": attempts,
        "accepted": accepted,
        "pending": pending,
        "problems": sorted(problems or set()),
        "problem_paths": problem_paths or {},
    }

# ``synthetic.make_slate_case`` (not in sample_runs): slate files are recognised, not read
SLATE_EXPECTED = _row("slate", "searching", 1, 0, 0, 0, {"unsupported_layout"})


EXPECTED: dict[str, dict[str, Any]] = {
    "damaged": _row(
        "feedback_search",
        "converged",
        2,
        1,  # the root aggregate's second row is torn: only round-00's (rejected) row parses
        0,
        0,
        {
            "json_invalid",
            "jsonl_torn_line",
            "bound_hash_mismatch",
            "file_hash_mismatch",
            "missing_artifact",
            "path_outside_root",
            "leftover_tmp",
            "schema_unknown",
            "media_mismatch",
        },
        {
            "json_invalid": ["damaged/rounds/round-00/manifest.json"],
            "jsonl_torn_line": ["damaged/repair_attempts.jsonl"],
            "bound_hash_mismatch": ["damaged/requests/round-01.json"],
            "file_hash_mismatch": ["damaged/rounds/round-01/episodes/hint-00-teacher.json"],
            "missing_artifact": ["damaged/rounds/round-00/episodes/hint-00-teacher.json"],
            "path_outside_root": ["damaged/rounds/round-00"],
            "leftover_tmp": ["damaged/manifest.json.tmp"],
            "schema_unknown": ["damaged/rounds/round-01/judge/hint-00.json"],
            "media_mismatch": ["damaged/rounds/round-01"],
        },
    ),
    "damaged-unreadable-manifest": _row(
        "single_run", "unreadable", 1, 0, 0, 0, {"json_invalid"},
        {"json_invalid": ["damaged-unreadable-manifest/manifest.json"]},
    ),
    "feedback-converged-3-rounds": _row("feedback_search", "converged", 3, 3, 1, 0),
    "hostile-strings": _row("single_run", "generated", 1, 1, 1, 0),
    f"multi-case/repairs/{MULTI_CONVERGED_KEY}": _row("feedback_search", "converged", 1, 1, 1, 0),
    f"multi-case/repairs/{MULTI_BUDGET_KEY}": _row("feedback_search", "attempt_budget_exhausted", 1, 1, 0, 0),
    "search-no-recoverable-site": _row("feedback_search", "no_further_grounded_hint", 1, 0, 0, 0),
    "search-paused-execution-error": _row(
        "feedback_search", "paused_execution_error", 1, 0, 0, 0, {"token_capture_incomplete"},
        {"token_capture_incomplete": ["search-paused-execution-error/rounds/round-00/continuations/hint-00"]},
    ),
    "search-paused-pending-verifier": _row("feedback_search", "paused_pending_verifier", 1, 0, 0, 0),
    # rsynced without its inputs: one missing_artifact per bound input, named where it
    # was looked for (beside the root, where the driver left it on the cluster)
    "single-copied-without-inputs": _row(
        "single_run", "generated", 1, 1, 1, 0, {"missing_artifact"},
        {"missing_artifact": [f"inputs/single-copied-without-inputs/{name}" for name in COPIED_WITHOUT_INPUTS_MISSING]},
    ),
    "single-generating": _row("single_run", "generating", 1, 1, 0, 1),
    "single-no-admissible-hints": _row("single_run", "no_admissible_hints", 1, 0, 0, 0),
}

# ``synthetic.make_slate_case`` (not in sample_runs): slate files are recognised, not read
SLATE_EXPECTED = _row("slate", "searching", 1, 0, 0, 0, {"unsupported_layout"})
