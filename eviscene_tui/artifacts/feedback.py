"""The feedback object a feedback search gives each round (psd-run-format §4.1), as the
pure function of the search history the driver computes it with.

``requests/round-NN.json`` holds it for round NN; on resume the driver requires each
new round's feedback to equal an existing request file (§4.4), so a reader can tell a
missing or replaced request from the history in ``search-state.json``.

The app's own supervised search adds one thing the driver lacks: an operator's
relocalization recorded on a round row (``operator_relocalization``) forces the next
round's ``needs_relocalization`` (and, for a round without an attempt, names the old and
the new site in ``anchor_feedback``); :func:`expected_feedback` follows it.

No Textual import here (architecture rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

LOCK_CHECKS = ("source_error_confirmed", "repaired_at_selected_step", "procedural_hint", "anchor_matches")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def revision_context(history: Sequence[Any]) -> dict[str, Any]:
    """The feedback object for the round after ``history`` (the search-state round rows,
    each with its ``feedback``), exactly per §4.1."""
    previous_rounds = [dict(_map(_map(row).get("feedback"))) for row in history]
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


def expected_feedback(history: Sequence[Any]) -> dict[str, Any]:
    """:func:`revision_context`, with an operator relocalization on the last row applied
    (the app's supervised search; see the module doc)."""
    feedback = revision_context(history)
    if not history:
        return feedback
    last = _map(history[-1])
    reloc = _map(last.get("operator_relocalization"))
    if reloc:
        feedback["needs_relocalization"] = True
        if not _map(last.get("feedback")).get("attempts"):
            feedback["anchor_feedback"] = {
                "selected_source_step": reloc.get("from_source_step"),
                "earliest_error_step": reloc.get("to_source_step"),
                "checker": {"anchor_matches": False},
            }
    return feedback


def first_difference(found: Any, want: Any, where: str = "") -> str | None:
    """The first place two JSON values differ (``previous_rounds[1].attempts[0].hint``),
    None when equal."""
    if type(found) is not type(want) and not (isinstance(found, (int, float)) and isinstance(want, (int, float))):
        return where or "the whole value"
    if isinstance(want, dict):
        for key in list(want) + [k for k in found if k not in want]:
            if key not in found or key not in want:
                return f"{where}.{key}".lstrip(".")
            got = first_difference(found[key], want[key], f"{where}.{key}")
            if got is not None:
                return got.lstrip(".")
        return None
    if isinstance(want, list):
        if len(found) != len(want):
            return f"{where} (length {len(found)}, expected {len(want)})".lstrip(".")
        for i, (a, b) in enumerate(zip(found, want)):
            got = first_difference(a, b, f"{where}[{i}]")
            if got is not None:
                return got
        return None
    return None if found == want else (where or "the whole value")


__all__ = ["LOCK_CHECKS", "expected_feedback", "first_difference", "revision_context"]
