"""Append-only, hash-chained operator decision journal (no Textual import).

Public API::

    from eviscene_tui.journal import Journal, verify_chain, fold, is_stale
    j = Journal(path, operator="alice")      # takes the lock, or opens read-only
    if j.read_only: print(j.read_only_reason)
    ev = j.append("reject_hint", target={...}, reason="...", evidence={...})
    state = fold(j.events); state.triage(case)       # the case's one current label and note
"""

from eviscene_tui.journal.events import ACTIONS, SCHEMA_VERSION, TRIAGE_LABELS, EventError, build_event, event_hash, make_target
from eviscene_tui.journal.fold import Decision, DecisionState, Triage, evidence_for, fold, is_stale, stale_paths
from eviscene_tui.journal.paths import (
    case_key,
    journals_in_workdir,
    review_journal_path,
    supervised_journal_for_root,
    supervised_journal_path,
    supervised_root_path,
)
from eviscene_tui.journal.records import RecordIndex, RecordKey, read_workdirs, record_key, register_workdir, search_home
from eviscene_tui.journal.review import add_triage_label, clear_triage_label, merged_triage, open_review_journal, review_state
from eviscene_tui.journal.store import (
    BadLine,
    ChainReport,
    Journal,
    JournalError,
    JournalReadOnly,
    TornTailError,
    parse_journal_bytes,
    verify_chain,
)

__all__ = [
    "ACTIONS",
    "SCHEMA_VERSION",
    "TRIAGE_LABELS",
    "BadLine",
    "ChainReport",
    "Decision",
    "DecisionState",
    "EventError",
    "Journal",
    "JournalError",
    "JournalReadOnly",
    "TornTailError",
    "Triage",
    "RecordIndex",
    "RecordKey",
    "clear_triage_label",
    "merged_triage",
    "read_workdirs",
    "record_key",
    "register_workdir",
    "search_home",
    "add_triage_label",
    "build_event",
    "case_key",
    "event_hash",
    "evidence_for",
    "fold",
    "is_stale",
    "journals_in_workdir",
    "make_target",
    "open_review_journal",
    "parse_journal_bytes",
    "review_journal_path",
    "review_state",
    "stale_paths",
    "supervised_journal_for_root",
    "supervised_journal_path",
    "supervised_root_path",
    "verify_chain",
]
