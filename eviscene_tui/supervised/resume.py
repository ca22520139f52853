"""Reading back what an interrupted supervised round left in its directory (no writes).

A reopened search rebuilds its open round from the journal and these files: whether
the round finished starting, the approved hint when only its files know it, the
recorded attempt (the round is then at its verdict gate) and the last failed or
cancelled run. :class:`~eviscene_tui.supervised.search.SupervisedSearch` decides what
to do with them (and writes what a crash left unwritten, when it may).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import read_bound, read_json, read_jsonl
from eviscene_tui.supervised import stages as S
from eviscene_tui.supervised.continuation import ContinuationOutcome
from eviscene_tui.supervised.stages import Proposal


@dataclass
class RoundStart:
    """A round that finished starting: its run identity, its request's feedback and its candidate."""

    config: Any
    feedback: dict[str, Any]
    candidate: dict[str, Any]


def round_start(rdir: Path, request: Path) -> RoundStart | None:
    """The round's start as written, or None when it was interrupted while starting
    (a file missing or not verifying)."""
    ri = read_bound(rdir / "run-inputs.json")
    fb = read_bound(request)
    cands, _ = read_jsonl(rdir / "repair_candidates.jsonl")
    if ri.problems or fb.problems or not cands or not (rdir / "manifest.json").is_file():
        return None
    return RoundStart(config=ri.identity, feedback=fb.payload if isinstance(fb.payload, dict) else {}, candidate=cands[-1])


class UnreadableApproval(ValueError):
    """``hint-proposals.json`` exists but its approved row is not a JSON object."""


def approved_row(rdir: Path) -> dict[str, Any] | None:
    """The approved hint's row of ``hint-proposals.json`` (written once a hint is approved).

    Raises :class:`UnreadableApproval` when the file's first row is not an object, so the
    caller says so instead of resuming with an empty hint."""
    path = rdir / "hint-proposals.json"
    props = read_bound(path) if path.is_file() else None
    if props is not None and isinstance(props.payload, list) and props.payload:
        row = props.payload[0]
        if not isinstance(row, dict):
            raise UnreadableApproval(f"{rdir.name}/hint-proposals.json: the approved hint's row is {type(row).__name__}, not an object")
        return row
    return None


def approval_from_row(row: dict[str, Any]) -> Proposal:
    """The approved hint as a journal from before proposals were journaled leaves it: only in its files."""
    return Proposal(0, row.get("text", ""), row.get("level", 1), row.get("provider", ""), row.get("model", ""),
                    dict(row.get("audit") or {}, reason=""), status="approved")


def earlier_audit_rows(rdir: Path) -> list[dict[str, Any]]:
    """The rows of ``proposer-hint-audits.json`` already on disk."""
    existing, _ = read_json(rdir / "proposer-hint-audits.json")
    if not isinstance(existing, dict):
        return []
    return [r for r in existing.get("proposals") or [] if isinstance(r, dict)]


def recorded_attempt(rdir: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the last attempt record, its teacher episode) when the round recorded one."""
    attempts = rdir / "repair_attempts.jsonl"
    recs, _ = read_jsonl(attempts) if attempts.is_file() else ([], [])
    if not recs:
        return None
    raw, _ = read_json(rdir / S.EPISODE_FILE)
    return recs[-1], raw if isinstance(raw, dict) else {}


def last_error_outcome(rdir: Path) -> tuple[ContinuationOutcome | None, int]:
    """The last failed or cancelled run of this round (``generation-last-error.json``) and its retry count."""
    path = rdir / "generation-last-error.json"
    raw, _ = read_json(path) if path.is_file() else (None, [])
    return S.outcome_from_last_error(raw)
