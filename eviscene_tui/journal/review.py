"""The review sidecar journal: decisions taken while reviewing a driver-owned root.

One journal per opened root, in the app's work directory
(``<workdir>/journal/review.jsonl``, see :mod:`eviscene_tui.journal.paths`);
``target.case`` is the case path relative to the opened root and evidence paths
are relative to the opened root. Never written inside the root.

    j = open_review_journal(options.workdir, operator=options.operator)
    add_triage_label(j, "repairs/abc", "unrecoverable", "no site", root=options.root,
                     evidence=["repairs/abc/manifest.json"])
    review_state(options.workdir).triage_by_case()   # {case: {labels}} for the runs-screen filter
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from eviscene_tui.journal.events import TRIAGE_LABELS
from eviscene_tui.journal.fold import DecisionState, evidence_for, fold
from eviscene_tui.journal.paths import review_journal_path
from eviscene_tui.journal.store import Journal, parse_journal_bytes


def open_review_journal(workdir: str | os.PathLike[str], *, operator: str) -> Journal:
    """Open (and lock) the review journal; read-only with a reason when another instance holds it."""
    return Journal(review_journal_path(workdir), operator=operator)


def review_state(workdir: str | os.PathLike[str]) -> DecisionState:
    """Fold of the review journal, read without taking the lock (cheap; for views)."""
    path = review_journal_path(workdir)
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    events, _ = parse_journal_bytes(data)
    return fold(events)


def add_triage_label(
    journal: Journal,
    case: str,
    label: str,
    reason: str = "",
    *,
    root: str | os.PathLike[str],
    evidence: Iterable[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """Record a triage label (``needs_relocalization``, ``unrecoverable``, ``data_problem``, ``note``)."""
    if label not in TRIAGE_LABELS:
        raise ValueError(f"triage label must be one of {', '.join(TRIAGE_LABELS)}")
    return journal.append(
        "triage_label",
        target={"case": case},
        reason=reason,
        data={"label": label},
        evidence=evidence_for(evidence, Path(root)),
    )
