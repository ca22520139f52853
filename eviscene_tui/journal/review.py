"""The review sidecar journal: triage labels and decisions taken while reviewing a
driver-owned root.

One journal per work directory (``<workdir>/journal/review.jsonl``, see
:mod:`eviscene_tui.journal.paths`), never inside a run root. ``target.case`` is the
case's record key (:mod:`eviscene_tui.journal.records`); ``data`` also names the case's
``case_id``, ``candidate_id`` and the ``folder`` it was in. A case has one current label
(:class:`~eviscene_tui.journal.fold.Triage`): labelling again replaces it,
:func:`clear_triage_label` removes it, ``Journal.undo`` of the current one brings the
one before back. The note is the event's ``reason`` (multi-line)::

    j = open_review_journal(options.workdir, operator=options.operator)
    add_triage_label(j, rk.key, "unrecoverable", "no site", labels=settings.triage.labels)
    merged_triage(review_journals(workdirs), index)   # {case: Triage} over every work directory
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from eviscene_tui.gate import protocol as P
from eviscene_tui.journal.events import TRIAGE_LABELS
from eviscene_tui.journal.fold import DecisionState, Triage, evidence_for, fold
from eviscene_tui.journal.paths import review_journal_path
from eviscene_tui.journal.records import RecordIndex
from eviscene_tui.journal.store import Journal, parse_journal_bytes


def open_review_journal(workdir: str | os.PathLike[str], *, operator: str) -> Journal:
    """Open (and lock) the review journal; read-only with a reason when another instance holds it."""
    return Journal(review_journal_path(workdir), operator=operator)


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    events, _ = parse_journal_bytes(data)
    return events


def review_state(workdir: str | os.PathLike[str]) -> DecisionState:
    """Fold of one work directory's review journal, read without taking the lock."""
    return fold(_events(review_journal_path(workdir)))


def _case_data(case_id: str | None, candidate_id: str | None, folder: str | os.PathLike[str] | None) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if case_id:
        data["case_id"] = case_id
    if candidate_id:
        data["candidate_id"] = candidate_id
    if folder is not None:
        data["folder"] = os.path.abspath(os.fspath(folder))
    return data


def add_triage_label(
    journal: Journal,
    case: str,
    label: str,
    note: str = "",
    *,
    labels: Sequence[str] = TRIAGE_LABELS,
    root: str | os.PathLike[str] | None = None,
    evidence: Iterable[str | os.PathLike[str]] = (),
    case_id: str | None = None,
    candidate_id: str | None = None,
    folder: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Set the case's label (one of ``labels``, the configured set), with its note."""
    if label not in labels:
        raise ValueError(f"triage label must be one of {', '.join(labels)}")
    return journal.append(
        P.TRIAGE_LABEL,
        target={"case": case},
        reason=note,
        data={"label": label, **_case_data(case_id, candidate_id, folder)},
        evidence=evidence_for(evidence, Path(root)) if root is not None else {},
    )


def clear_triage_label(
    journal: Journal,
    case: str,
    note: str = "",
    *,
    case_id: str | None = None,
    candidate_id: str | None = None,
    folder: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Remove the case's label (its note, when given, stays as the case's note)."""
    return journal.append(P.TRIAGE_CLEAR, target={"case": case}, reason=note, data=_case_data(case_id, candidate_id, folder))


def merged_events(journals: Iterable[str | os.PathLike[str]], index: RecordIndex | None = None) -> list[dict[str, Any]]:
    """The events of several review journals as one history, ordered by time: a label
    taken from one folder is replaced, cleared or undone from another. ``target.case``
    is mapped to the case's record key (an earlier version's path key included) when
    ``index`` knows the case; the files are not changed."""
    out: list[tuple[str, int, int, dict[str, Any]]] = []
    for n, path in enumerate(journals):
        workdir = Path(path).parent.parent
        for ev in _events(Path(path)):
            target = ev.get("target")
            if index is not None and isinstance(target, dict):
                hit = index.resolve(target.get("case"), workdir)
                if hit is not None and hit.key.key != target.get("case"):
                    ev = {**ev, "target": {**target, "case": hit.key.key}}
            raw_seq = ev.get("seq")
            seq = raw_seq if isinstance(raw_seq, int) else 0
            out.append((str(ev.get("ts") or ""), n, seq, ev))
    out.sort(key=lambda item: item[:3])
    return [ev for _ts, _n, _seq, ev in out]


def merged_triage(journals: Iterable[str | os.PathLike[str]], index: RecordIndex | None = None) -> dict[str, Triage]:
    """record key -> the case's current :class:`Triage` over every journal given."""
    return fold(merged_events(journals, index)).triage_by_case_full()
