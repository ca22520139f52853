"""The app's triage work: reading the current labels, recording a label / clear / undo,
the view settings that last (filter, sort, grouping across restarts; privileged reveal
for the session). A mixin of :class:`~eviscene_tui.ui.app.EvisceneApp`: the writes run
as app workers, so they finish (and are confirmed) when the case screen that asked for
them has already moved on to the next case of the queue.

Writes go to the work directory only (``options.workdir``, its review journal), and the
first record of a case there is noted in the registry (``journal.records``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from textual import work

from eviscene_tui import pace
from eviscene_tui.journal.fold import fold
from eviscene_tui.journal.paths import review_journal_path
from eviscene_tui.journal.records import record_key, register_workdir
from eviscene_tui.journal.review import add_triage_label, clear_triage_label, merged_events, open_review_journal
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.prefetch import Prefetched, prefetch
from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.triage import ListedCase, TriageMarks, load_triage
from eviscene_tui.storage import WorkDir
from eviscene_tui.ui import messages as M

if TYPE_CHECKING:
    from eviscene_tui.options import AppOptions
    from eviscene_tui.probes import AppProbes
    from eviscene_tui.state.runs import RunsStore

UI_STATE = "ui-state.json"  # the runs table's filter, sort and grouping, in the work directory
#: one triage write at a time: two picks in a row (two keys a case) must not meet at the
#: journal's lock (a second open of it, even in this process, would be refused as read-only)
_WRITES = threading.Lock()


def _listed(rows: list[CaseRow]) -> list[ListedCase]:
    out = []
    for row in rows:
        path = getattr(row.ref, "path", None)
        layout = getattr(row.ref, "layout", None)
        if path is not None:
            out.append(ListedCase(row.key, os.fspath(path), row.record, str(layout) if layout is not None else None))
    return out


def _case_fields(row: CaseRow) -> dict[str, Any]:
    """What the journal event says about the case besides its record key (for people and exports)."""
    path = getattr(row.ref, "path", None)
    wrapper_key = getattr(row.ref, "key", None)  # a row without a case id shows its wrapper key instead
    case_id = row.case_id if row.case_id and row.case_id != wrapper_key else None
    return {"case_id": case_id, "candidate_id": row.candidate_id or None, "folder": os.fspath(path) if path else None}


class TriageOps:
    """Mixed into the app (which provides ``options``, ``store``, ``notify`` and the workers)."""

    options: AppOptions
    store: RunsStore
    triage: TriageMarks
    #: privileged material shown on every case screen until hidden again (this session only)
    reveal_privileged: bool = False
    probes: AppProbes

    # -- reading --------------------------------------------------------------------------------
    _labels_asked = 0  # the newest read asked for: an older one that ends later is dropped

    def load_labels(self) -> None:
        """Read the current label of every listed case again (in a worker)."""
        self._labels_asked += 1
        self._load_labels(self._labels_asked, self.store.rows())

    @work(thread=True, group="labels", exit_on_error=False)
    def _load_labels(self, asked: int, rows: list[CaseRow]) -> None:
        try:
            # nobody waits for the labels the way they wait for a key (10,000 cases: seconds of
            # identity reads beside the integrity pass): keys go first
            with pace.background():
                marks = load_triage(_listed(rows), opened=self.options.root, workdir=self.options.workdir)
        except Exception as exc:  # noqa: BLE001 - labels are shown when they can be read; the app keeps working
            self.post_message(M.LabelsLoaded(None, f"{type(exc).__name__}: {exc}", asked))  # type: ignore[attr-defined]  # the app's
            return
        self.post_message(M.LabelsLoaded(marks, None, asked))  # type: ignore[attr-defined]  # the app's

    def on_labels_loaded(self, message: M.LabelsLoaded) -> None:
        if message.asked != self._labels_asked:
            return  # a later read is on its way (it sees a write this one may have missed)
        if message.error or message.marks is None:
            self.notify("Triage labels unavailable: " + safe_text(message.error or "", single_line=True, limit=200),  # type: ignore[attr-defined]
                        severity="warning", markup=False)
            return
        self.triage = message.marks
        self.store.set_records(message.marks.records)
        self.store.set_triage(message.marks.by_record)
        self.probes.labels_loaded()
        self.check_activity()  # type: ignore[attr-defined]  # the app's: the searches in the work directories just found

    def read_workdirs(self) -> list[Path]:
        """Where the listed cases' records were found (the work directory first)."""
        found = list(self.triage.workdirs)
        return found if found else [self.options.workdir]

    # -- writing --------------------------------------------------------------------------------
    def record_triage(self, rows: list[CaseRow], label: str | None, note: str) -> None:
        """Set (``label``) or clear (None) the label of ``rows``, each with ``note``."""
        self._write_triage(list(rows), label, note)

    @work(thread=True, group="label-write", exit_on_error=False)
    def _write_triage(self, rows: list[CaseRow], label: str | None, note: str) -> None:
        work_dir = WorkDir(self.options.workdir, evidence_roots=[self.options.root])
        target = work_dir.guard(review_journal_path(work_dir.path))
        labels = self.options.settings.triage.labels
        what = "label" if label else "clear"
        try:
            with _WRITES:
                events = self._append_triage(work_dir, rows, label, note, labels)
        except Exception as exc:  # noqa: BLE001 - shown, never crashes
            self.post_message(M.LabelWritten(what, label, [r.key for r in rows], error=f"{type(exc).__name__}: {exc}"))  # type: ignore[attr-defined]
            return
        self.post_message(M.LabelWritten(what, label, [r.key for r in rows], journal=str(target), events=events))  # type: ignore[attr-defined]

    def _append_triage(self, work_dir: WorkDir, rows: list[CaseRow], label: str | None, note: str, labels: list[str]) -> list[dict[str, Any]]:
        events = []
        journal = open_review_journal(work_dir.path, operator=self.options.operator)
        try:
            for row in rows:
                folder = getattr(row.ref, "path", None)
                if folder is None:
                    continue
                if row.record is None:  # labelled before the labels (and record keys) were read
                    layout = getattr(row.ref, "layout", None)
                    row.record = record_key(folder, str(layout) if layout is not None else None)
                if label is None:
                    events.append(clear_triage_label(journal, row.record.key, note, **_case_fields(row)))
                else:
                    # what the label was given on: the case's manifest (decisions marks it stale when it changes)
                    events.append(add_triage_label(journal, row.record.key, label, note, labels=labels, root=folder,
                                                   evidence=["manifest.json"], **_case_fields(row)))
                register_workdir(work_dir.path, row.record, folder)
        finally:
            journal.close()
        return events

    def undo_triage(self, row: CaseRow) -> bool:
        """Undo the case's current triage change (its previous label comes back); False
        when there is nothing to undo."""
        current = self.triage.for_key(row.record)
        if current is None:
            return False
        self._write_undo(row, current.event_id)
        return True

    @work(thread=True, group="label-write", exit_on_error=False)
    def _write_undo(self, row: CaseRow, event_id: str) -> None:
        work_dir = WorkDir(self.options.workdir, evidence_roots=[self.options.root])
        target = work_dir.guard(review_journal_path(work_dir.path))
        try:
            with _WRITES:
                self._append_undo(work_dir, row, event_id)
        except Exception as exc:  # noqa: BLE001 - shown, never crashes
            self.post_message(M.LabelWritten("undo", None, [row.key], error=f"{type(exc).__name__}: {exc}"))  # type: ignore[attr-defined]
            return
        self.post_message(M.LabelWritten("undo", None, [row.key], journal=str(target)))  # type: ignore[attr-defined]

    def _append_undo(self, work_dir: WorkDir, row: CaseRow, event_id: str) -> None:
        # the event may live in another work directory's journal: the undo is written here,
        # and the merged history (state.triage) applies it wherever the event is
        journals = [*self.triage.journals, review_journal_path(work_dir.path)]
        original = next((e for e in self.triage_events(journals) if e.get("id") == event_id), None)
        if original is None:
            raise ValueError("the label to undo is no longer in any journal")
        journal = open_review_journal(work_dir.path, operator=self.options.operator)
        try:
            journal.append("undo", target=dict(original.get("target") or {}), reason="undo triage change",
                           data={"undoes": event_id, "undone_action": original.get("action")})
            if row.record is not None:
                register_workdir(work_dir.path, row.record, getattr(row.ref, "path", "") or "")
        finally:
            journal.close()

    def triage_events(self, journals: list[Path]) -> list[dict[str, Any]]:
        return merged_events(list(dict.fromkeys(journals)))

    def on_label_written(self, message: M.LabelWritten) -> None:
        if message.error:
            self.notify("Triage change not recorded: " + safe_text(message.error, single_line=True, limit=300),  # type: ignore[attr-defined]
                        severity="error", markup=False)
            return
        n = len(message.keys)
        what = {"label": f"label {message.label}", "clear": "label cleared", "undo": "last triage change undone"}[message.what]
        whom = safe_text(message.keys[0], single_line=True, limit=60) if n == 1 else f"{n} cases"
        self.notify(f"Saved: {what} for {whom} (in {safe_text(message.journal, single_line=True, limit=200)})",  # type: ignore[attr-defined]
                    markup=False, timeout=3)
        if message.events:
            # the new labels at once (an undo right after them undoes them); then every journal again
            current = dict(self.triage.by_record)
            current.update(fold(message.events).triage_by_case_full())
            self.triage = replace(self.triage, by_record=current)
            self.store.set_triage(current)
        self.load_labels()

    # -- the next case of the queue, read ahead -------------------------------------------------
    _prefetched: dict[str, Prefetched] = {}  # replaced (never mutated in place) by the read-ahead worker

    def prefetch_case(self, path: Path, key: str) -> None:
        """Read the case at ``path`` (its files, source trace and case view) in the
        background, for the case screen that opens it next (``take_prefetched``)."""
        if os.path.abspath(path) not in self._prefetched:
            self._prefetch(Path(path), key)

    @work(thread=True, exclusive=True, group="case-prefetch", exit_on_error=False)
    def _prefetch(self, path: Path, key: str) -> None:
        with pace.background():  # nobody waits for it yet: keys go first
            ready = prefetch(path, key, self.options)
        if ready is not None:
            self._prefetched = {os.path.abspath(path): ready}  # one case ahead (one reference swap)

    def take_prefetched(self, path: Path) -> Prefetched | None:
        """The case read ahead for ``path`` when its files did not change since (any thread)."""
        current = self._prefetched
        ready = current.get(os.path.abspath(path))
        if ready is not None:
            self._prefetched = {k: v for k, v in current.items() if v is not ready}  # used once
        return ready if ready is not None and ready.still_current() else None

    # -- the view settings that last ------------------------------------------------------------
    def restore_view(self) -> None:
        path = Path(self.options.workdir) / UI_STATE
        try:
            state = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return
        if isinstance(state, dict):
            self.store.restore_view(state)

    @work(thread=True, exclusive=True, group="ui-state", exit_on_error=False)
    def save_view(self) -> None:
        """The runs table's filter, sort and grouping, for the next start (atomic replace)."""
        work_dir = WorkDir(self.options.workdir, evidence_roots=[self.options.root])
        try:
            work_dir.replace(work_dir.sub(UI_STATE), orjson.dumps(self.store.view_state(), option=orjson.OPT_INDENT_2) + b"\n")
        except OSError:
            pass  # a read-only work directory: the view simply starts at its defaults next time
