"""Current decision state = a fold over the journal's events.

- ``undo`` reverses the event it names (``data.undoes``); undoing twice is a no-op.
- A later decision on the same subject supersedes an earlier one:
  hints by (case, round, hint_sha256), attempts by (case, round, attempt_id),
  relocalizations by (case, round); a case has ONE current triage label: every
  ``triage_label`` / ``triage_clear`` of a case supersedes the case's previous one
  (a note given with the old fixed label ``note`` only updates the note). Undoing the
  current one brings back the one before. Comments are never superseded.
- :func:`is_stale` compares the evidence hashes an event recorded with the files
  as they are now.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from eviscene_tui.artifacts.jsonio import sha256_file
from eviscene_tui.gate import protocol as P

_HINT_ACTIONS = P.HINT_JOURNAL_ACTIONS  # (approve, reject): the gate protocol spells them
TRIAGE_ACTIONS = (P.TRIAGE_LABEL, P.TRIAGE_CLEAR)
LEGACY_NOTE_LABEL = "note"  # an earlier version's fixed label set had "note" as a label
_ATTEMPT_ACTIONS = P.ATTEMPT_JOURNAL_ACTIONS


@dataclass
class Decision:
    event: dict[str, Any]
    undone_by: str | None = None
    superseded_by: str | None = None

    @property
    def id(self) -> str:
        return str(self.event.get("id"))

    @property
    def action(self) -> str:
        return str(self.event.get("action"))

    @property
    def target(self) -> dict[str, Any]:
        t = self.event.get("target")
        return t if isinstance(t, dict) else {}

    @property
    def active(self) -> bool:
        return self.undone_by is None and self.superseded_by is None

    @property
    def status(self) -> str:
        if self.undone_by:
            return "undone"
        if self.superseded_by:
            return "superseded"
        return "active"

    def row(self) -> dict[str, Any]:
        """Flat export row."""
        ev = self.event
        data = _v if isinstance(_v := ev.get("data"), dict) else {}
        t = self.target
        return {
            "seq": ev.get("seq"),
            "id": ev.get("id"),
            "ts": ev.get("ts"),
            "operator": ev.get("operator"),
            "action": ev.get("action"),
            "case": t.get("case"),
            "round": t.get("round"),
            "step_index": t.get("step_index"),
            "hint_sha256": t.get("hint_sha256"),
            "attempt_id": t.get("attempt_id"),
            "label": data.get("label"),
            "reason": ev.get("reason"),
            "status": self.status,
            "undone_by": self.undone_by,
            "superseded_by": self.superseded_by,
            "evidence": ev.get("evidence") or {},
            "data": data,
        }


def _subject(ev: dict[str, Any]) -> tuple[Any, ...] | None:
    t = _v if isinstance(_v := ev.get("target"), dict) else {}
    action = ev.get("action")
    if action in _HINT_ACTIONS:
        return ("hint", t.get("case"), t.get("round"), t.get("hint_sha256"))
    if action in _ATTEMPT_ACTIONS:
        return ("attempt", t.get("case"), t.get("round"), t.get("attempt_id"))
    if action == P.SPECS["relocalize"].journal:
        return ("relocalize", t.get("case"), t.get("round"))
    if action == P.TRIAGE_LABEL and _legacy_note(ev):
        return ("triage-note", t.get("case"))
    if action in TRIAGE_ACTIONS:
        return ("triage", t.get("case"))
    return None


def _legacy_note(ev: dict[str, Any]) -> bool:
    """An earlier version's ``note`` label: a note on the case, not its label."""
    data = _v if isinstance(_v := ev.get("data"), dict) else {}
    return data.get("label") == LEGACY_NOTE_LABEL


@dataclass(frozen=True, slots=True)
class Triage:
    """The current triage state of one case: its label ("" = none) and note."""

    label: str
    note: str
    operator: str
    ts: str
    event_id: str  # the event that set it (what an undo reverses)
    action: str

    @property
    def labelled(self) -> bool:
        return bool(self.label)


@dataclass
class DecisionState:
    decisions: list[Decision] = field(default_factory=list)
    undos: list[dict[str, Any]] = field(default_factory=list)

    def active(self) -> list[Decision]:
        return [d for d in self.decisions if d.active]

    def by_id(self, event_id: str) -> Decision | None:
        for d in self.decisions:
            if d.id == event_id:
                return d
        return None

    def _latest(self, subject: tuple[Any, ...]) -> Decision | None:
        for d in reversed(self.decisions):
            if d.active and _subject(d.event) == subject:
                return d
        return None

    def hint_status(self, case: str | None, round_index: int | None, hint_sha: str) -> str | None:
        """``approved`` / ``rejected`` / None for one hint."""
        d = self._latest(("hint", case, round_index, hint_sha))
        if d is None:
            return None
        return "approved" if d.action == _HINT_ACTIONS[0] else "rejected"

    def attempt_verdict(self, case: str | None, round_index: int | None, attempt_id: str) -> str | None:
        d = self._latest(("attempt", case, round_index, attempt_id))
        if d is None:
            return None
        return "approved" if d.action == _ATTEMPT_ACTIONS[0] else "rejected"

    def triage(self, case: str | None) -> Triage | None:
        """The case's current label and note (``label`` "" after a clear), or None when
        nothing was ever recorded (or all of it was undone)."""
        return self.triage_by_case_full().get(str(case))

    def triage_by_case_full(self) -> dict[str, Triage]:
        """case -> its current :class:`Triage` (also a cleared one: its undo brings the
        label before back)."""
        out: dict[str, Triage] = {}
        for d in self.decisions:
            if not d.active or d.action not in TRIAGE_ACTIONS:
                continue
            case = str(d.target.get("case"))
            ev = d.event
            note = str(ev.get("reason") or "")
            if _legacy_note(ev):
                old = out.get(case)
                out[case] = Triage(old.label if old else "", note, str(ev.get("operator") or ""), str(ev.get("ts") or ""), d.id, d.action)
                continue
            data = _v if isinstance(_v := ev.get("data"), dict) else {}
            label = str(data.get("label") or "") if d.action == P.TRIAGE_LABEL else ""
            out[case] = Triage(label, note, str(ev.get("operator") or ""), str(ev.get("ts") or ""), d.id, d.action)
        return out

    def triage_labels(self, case: str | None) -> set[str]:
        """The case's current label as a set (empty or one label)."""
        t = self.triage(case)
        return {t.label} if t is not None and t.label else set()

    def triage_by_case(self) -> dict[str, set[str]]:
        """case -> {its current label} (cases with a label only)."""
        return {case: {t.label} for case, t in self.triage_by_case_full().items() if t.label}

    def cases_with_label(self, label: str) -> list[str]:
        return sorted(case for case, labels in self.triage_by_case().items() if label in labels)


def fold(events: Iterable[dict[str, Any]]) -> DecisionState:
    state = DecisionState()
    index: dict[str, Decision] = {}
    latest: dict[tuple[Any, ...], Decision] = {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        if ev.get("action") == "undo":
            state.undos.append(ev)
            _undo(state, index, latest, ev)
            continue
        d = Decision(ev)
        subject = _subject(ev)
        if subject is not None:
            older = latest.get(subject)
            if older is not None and older.undone_by is None:
                older.superseded_by = d.id
            latest[subject] = d
        state.decisions.append(d)
        index[d.id] = d
    return state


def _undo(state: DecisionState, index: dict[str, Decision], latest: dict[tuple[Any, ...], Decision], ev: dict[str, Any]) -> None:
    """Mark the decision an undo event names as undone (once). Undoing the latest decision
    on a subject re-activates the one it superseded."""
    data = _v if isinstance(_v := ev.get("data"), dict) else {}
    target = index.get(str(data.get("undoes")))
    if target is None or target.undone_by is not None:
        return
    target.undone_by = str(ev.get("id"))
    subject = _subject(target.event)
    if subject is None or latest.get(subject) is not target:
        return
    previous = next(
        (d for d in reversed(state.decisions) if d is not target and d.undone_by is None and _subject(d.event) == subject),
        None,
    )
    if previous is not None:
        previous.superseded_by = None
        latest[subject] = previous
    else:
        latest.pop(subject, None)


# ---------------------------------------------------------------------- evidence
def evidence_for(paths: Iterable[str | os.PathLike[str]], base_dir: str | os.PathLike[str]) -> dict[str, str]:
    """{path relative to base_dir: sha256} for each existing file (missing files are skipped)."""
    base = Path(base_dir)
    out: dict[str, str] = {}
    for p in paths:
        path = Path(p)
        if not path.is_absolute():
            path = base / path
        if not path.is_file():
            continue
        out[os.path.relpath(path, base)] = sha256_file(path)
    return out


def stale_paths(event: dict[str, Any], base_dir: str | os.PathLike[str]) -> list[str]:
    """Evidence paths whose file is missing or whose sha256 differs now."""
    evidence = _v if isinstance(_v := event.get("evidence"), dict) else {}
    base = Path(base_dir)
    out = []
    for rel, digest in evidence.items():
        path = base / rel
        try:
            if sha256_file(path) != digest:
                out.append(rel)
        except OSError:
            out.append(rel)
    return out


def is_stale(event: dict[str, Any], base_dir: str | os.PathLike[str]) -> bool:
    """True when any evidence file the decision was made on changed or vanished."""
    return bool(stale_paths(event, base_dir))
