"""The feedback object a feedback search gives each round (psd-run-format §4.1), as the
pure function of the search history the driver computes it with
(:func:`eviscene_tui.gate.protocol.revision_context`, the one copy of the rule).

``requests/round-NN.json`` holds it for round NN; on resume the driver requires each
new round's feedback to equal an existing request file (§4.4), so a reader can tell a
missing or replaced request from the history in ``search-state.json``.

An earlier version's in-app supervised search (its roots still open, read-only) added one
thing the driver lacks: an operator's
relocalization recorded on a round row (``operator_relocalization``) forces the next
round's ``needs_relocalization`` (and, for a round without an attempt, names the old and
the new site in ``anchor_feedback``); :func:`expected_feedback` follows it.

No Textual import here (architecture rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# the driver's rule, defined once (the bundled driver, the card's preview and this check use it)
from eviscene_tui.gate.protocol import LOCK_CHECKS, revision_context


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def expected_feedback(history: Sequence[Any]) -> dict[str, Any]:
    """:func:`revision_context`, with an operator relocalization on the last row applied
    (an earlier version's in-app search; see the module doc)."""
    feedback = revision_context(list(history))
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
    if found == want:  # compared in C: equal values (1 and 1.0 and True alike) need no walk
        return None
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
