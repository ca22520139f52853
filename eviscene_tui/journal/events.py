"""Decision events: the fields, the hash rule and the chain link.

An event is one JSON object on one line of the journal (canonical JSON, see
``jsonio.canonical_json_bytes``)::

    {"schema_version": "eviscene-tui-decision-v1",
     "seq": 0, "id": "<32 hex>", "ts": "2026-11-29T23:01:02.345Z",
     "operator": "alice", "action": "reject_attempt",
     "target": {"case": "...", "round": 0, "step_index": 7,
                "hint_sha256": "...", "attempt_id": "psd-repair-hint:..."},
     "reason": "...", "evidence": {"rounds/round-00/repair_attempts.jsonl": "<sha256>"},
     "data": {...action specific...},
     "prev": "<hash of the previous event>" | null,
     "hash": "<sha256 of the canonical JSON of this object without 'hash'>"}

``data`` carries what an action needs beyond the target: ``label`` for
``triage_label`` (the case's one current label; ``triage_clear`` removes it; the note is
the event's ``reason``, multi-line; ``case_id`` / ``candidate_id`` / ``folder`` say which
case ``target.case``, its record key, named when it was labelled), ``undoes`` (the undone event id) for ``undo``, ``checker`` and
``earliest_error_step`` for verdicts, ``to_step_index`` for ``relocalize``,
``torn_tail`` for the acknowledgement of a torn journal tail.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_json_bytes, sha256_bytes
from eviscene_tui.gate import protocol as P
from eviscene_tui.settings import DEFAULT_TRIAGE_LABELS, TRIAGE_LABEL_PATTERN

SCHEMA_VERSION = "eviscene-tui-decision-v1"

# the journal's action names are the gate protocol's (one per decision kind, and the
# journal's own: triage labels and their clearing, comments, undo; two written by earlier
# versions only)
ACTIONS = P.JOURNAL_ACTIONS
#: the default label set (``[triage] labels`` in the config file replaces it); an event's
#: label is any name of the label pattern, so journals keep reading when the set changes
TRIAGE_LABELS = DEFAULT_TRIAGE_LABELS
TARGET_KEYS = ("case", "round", "step_index", "hint_sha256", "attempt_id")
EVENT_KEYS = (
    "schema_version",
    "seq",
    "id",
    "ts",
    "operator",
    "action",
    "target",
    "reason",
    "evidence",
    "data",
    "prev",
    "hash",
)


class EventError(ValueError):
    """An event that cannot be built (bad action, label, or target)."""


def utc_now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def event_hash(event: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the event without its ``hash`` key."""
    body = {k: v for k, v in event.items() if k != "hash"}
    return sha256_bytes(canonical_json_bytes(body))


def make_target(
    case: str | None = None,
    round: int | None = None,
    step_index: int | None = None,
    hint_sha256: str | None = None,
    attempt_id: str | None = None,
) -> dict[str, Any]:
    return {
        "case": case,
        "round": round,
        "step_index": step_index,
        "hint_sha256": hint_sha256,
        "attempt_id": attempt_id,
    }


def build_event(
    *,
    seq: int,
    prev: str | None,
    operator: str,
    action: str,
    target: dict[str, Any] | None = None,
    reason: str = "",
    evidence: dict[str, str] | None = None,
    data: dict[str, Any] | None = None,
    event_id: str | None = None,
    ts: str | None = None,
) -> dict[str, Any]:
    """Build a complete, hashed event (not yet written)."""
    if action not in ACTIONS:
        raise EventError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    data = dict(data or {})
    if action == P.TRIAGE_LABEL and not (isinstance(data.get("label"), str) and TRIAGE_LABEL_PATTERN.match(data["label"])):
        raise EventError("a triage label is a short snake_case name (lower-case letters, digits and _)")
    if action == P.UNDO and not isinstance(data.get("undoes"), str):
        raise EventError("undo needs data.undoes = the id of the event it reverses")
    if action in P.REASON_REQUIRED_JOURNAL_ACTIONS and not (reason or "").strip():
        raise EventError(f"{action} needs a reason")
    tgt = make_target()
    for key, value in (target or {}).items():
        if key not in TARGET_KEYS:
            raise EventError(f"unknown target field {key!r}")
        tgt[key] = value
    ev: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "seq": seq,
        "id": event_id or uuid.uuid4().hex,
        "ts": ts or utc_now(),
        "operator": operator,
        "action": action,
        "target": tgt,
        "reason": reason or "",
        "evidence": dict(sorted((evidence or {}).items())),
        "data": data,
        "prev": prev,
    }
    ev["hash"] = event_hash(ev)
    return ev


def validate_event_shape(ev: Any) -> str | None:
    """Return a message when ``ev`` is not a well-formed event, else None."""
    if not isinstance(ev, dict):
        return "event is not a JSON object"
    missing = [k for k in EVENT_KEYS if k not in ev]
    if missing:
        return f"event lacks {', '.join(missing)}"
    if type(ev["seq"]) is not int:
        return "seq is not an integer"
    if ev["action"] not in ACTIONS:
        return f"unknown action {ev['action']!r}"
    if not isinstance(ev["target"], dict) or not isinstance(ev["evidence"], dict) or not isinstance(ev["data"], dict):
        return "target, evidence and data must be objects"
    return None
