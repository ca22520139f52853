"""The runs store: every case row, plus the filter, sort and search that shape the
visible list. Textual-free and unit-tested without Pilot.

Subscribers (``subscribe(callback)``) are called with a short reason string after
each change; the UI re-reads :meth:`RunsStore.visible`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING
from dataclasses import dataclass, replace

from eviscene_tui.journal.fold import Triage
from eviscene_tui.journal.records import RecordKey
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.observable import Observable
from eviscene_tui.state.rows import (

    COLUMN_KEYS,
    CONVERGED_STATUSES,
    ENDED_STATUSES,
    RUNNING_STATUSES,
    BAD_STATUSES,
    CaseRow,
    ColumnStats,
    sort_value,
)

if TYPE_CHECKING:
    from eviscene_tui.state.scan import Activity


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0] if text else ""


@dataclass(frozen=True, slots=True)
class Filter:
    name: str
    title: str
    help: str

    def accepts(self, row: CaseRow) -> bool:
        name = self.name
        if name == "all":
            return True
        if name == "triage":
            return row.in_triage
        if name == "nosite":
            return row.in_no_site_queue
        if name == "converged":
            return row.status in CONVERGED_STATUSES
        if name == "running":
            return row.status in RUNNING_STATUSES
        if name == "paused":
            return row.status.startswith("paused_")
        if name == "ended":
            return row.status in ENDED_STATUSES
        if name == "problems":
            return row.problems > 0 or row.status in BAD_STATUSES
        if name == "pending":
            return row.pending > 0
        if name == "labelled":
            return bool(row.label)
        if name == "awaiting":
            return row.awaiting_operator
        return True


FILTERS: dict[str, Filter] = {
    f.name: f
    for f in (
        Filter("all", "all cases", "show every case"),
        Filter("triage", "triage queue", "no recoverable site / no further grounded hint, paused_*, or with problems"),
        Filter("nosite", "no-recoverable-site queue", "cases whose localization found no recoverable site"),
        Filter("converged", "converged", "searches that converged on an accepted attempt"),
        Filter("running", "running", "searching / generating"),
        Filter("paused", "paused", "paused_pending_verifier, paused_execution_error, paused_storage_budget"),
        Filter("ended", "ended", "budgets exhausted, no further hint, no admissible hints, generated"),
        Filter("pending", "pending verification", "cases with attempts pending verification"),
        Filter("problems", "with problems", "cases with integrity problems or unreadable manifests"),
        Filter("labelled", "triage-labelled", "cases an operator gave a triage label"),
        Filter("awaiting", "awaiting operator", "gated driver searches waiting for an operator decision, or whose gated driver is gone"),
    )
}


#: what the runs table can be grouped by (row attribute -> title)
GROUPS: dict[str, str] = {
    "label": "label",
    "category": "category",
    "no_site_reason": "no-site reason",
    "status": "status",
}


def group_value(row: CaseRow, name: str) -> str:
    """The group a row belongs to (the attribute's display value; a placeholder when blank)."""
    value = str(getattr(row, name, "") or "")
    if value:
        return value
    return {"label": "(unlabelled)", "no_site_reason": "(has a site)"}.get(name, "(none)")


class RunsStore(Observable[str]):
    """Holds every :class:`CaseRow` by key and derives the visible, sorted list."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, CaseRow] = {}
        self._order: list[str] = []  # discovery order (stable tie-break)
        self._visible: list[CaseRow] | None = None
        self._progress: tuple[int, int] | None = None  # queue_progress, until the next change
        self.filter_name = "all"
        self.search = ""
        self.sort_key = "key"
        self.sort_reverse = False
        self.unlabelled_only = False  # only the unlabelled cases of the current filter (the queue's work left)
        self.group_by = ""  # "" or a GROUPS key: rows ordered by it, a header line per group
        self.selected: set[str] = set()  # row keys picked with space (labelled together)
        self.scan_done = 0
        self.scanning = False
        self.check_done = 0  # cases the full integrity pass has checked
        self.check_total = 0
        self.checking = False
        self._last_search = ""
        self._last_search_result: list[CaseRow] | None = None
        self._counts: dict[str, int] = {name: 0 for name in FILTERS}
        #: the widest cells of the visible rows, kept up to date as rows change (None: to
        #: be counted again, after the filter, the search or the unlabelled toggle changed)
        self._stats: ColumnStats | None = None

    def _changed(self, reason: str, *, rows_changed: bool = False, shown_changed: bool = False) -> None:
        """``shown_changed``: which rows are visible changed beyond the rows changed (a
        filter, the search): the visible rows' column widths are counted again."""
        self._visible = None
        self._progress = None
        if rows_changed:
            self._last_search_result = None
        if shown_changed:
            self._stats = None
        self._notify(reason)

    def _shown(self, row: CaseRow) -> bool:
        """``row`` is one of :meth:`visible` (the filter, the search and the unlabelled toggle
        let it through)."""
        if self.unlabelled_only and row.label:
            return False
        terms = self.search.strip().casefold().split()
        if terms and not all(t in row.haystack for t in terms):
            return False
        return FILTERS.get(self.filter_name, FILTERS["all"]).accepts(row)

    def _stats_update(self, old: CaseRow | None, row: CaseRow | None) -> None:
        """Keep the visible rows' column widths: ``old`` replaced by ``row`` (None: none)."""
        stats = self._stats
        if stats is None:
            return
        if old is not None:
            stats.discard(old.key)
        if row is not None and self._shown(row):
            stats.add(row)

    def visible_stats(self) -> ColumnStats:
        """The widest cells of :meth:`visible`'s rows (``ColumnStats``), kept up to date as
        rows arrive and change; counted over every visible row only after a filter, search
        or toggle change. Valid until the next change of the store."""
        if self._stats is None:
            self._stats = ColumnStats(self.visible())
        return self._stats

    # -- rows -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: str) -> CaseRow | None:
        return self._rows.get(key)

    def rows(self) -> list[CaseRow]:
        return [self._rows[k] for k in self._order]

    def upsert(self, rows: Iterable[CaseRow]) -> int:
        count = 0
        for row in rows:
            old = self._rows.get(row.key)
            if old is None:
                self._order.append(row.key)
            else:
                self._count(old, -1)
            self._rows[row.key] = row
            self._count(row, 1)
            self._stats_update(old, row)
            count += 1
        if count:
            self._changed("rows", rows_changed=True)
        return count

    def remove(self, keys: Iterable[str]) -> int:
        removed = 0
        for key in keys:
            old = self._rows.pop(key, None)
            if old is not None:
                self._count(old, -1)
                self._stats_update(old, None)
                removed += 1
        if removed:
            self._order = [k for k in self._order if k in self._rows]
            self._changed("rows", rows_changed=True)
        return removed

    def set_records(self, records: Mapping[str, RecordKey]) -> None:
        """Give the rows their record keys (read with the labels, after the scan); not
        shown, so nothing is repainted."""
        for key, rk in records.items():
            row = self._rows.get(key)
            if row is not None:
                row.record = rk

    def set_triage(self, current: Mapping[str, Triage]) -> None:
        """Apply the current triage labels (record key -> :class:`Triage`, merged over the
        review journals of every work directory that holds the cases' records)."""
        changed = []
        for row in self._rows.values():
            t = current.get(row.record.key) if row.record is not None else None
            label, note = (t.label, _first_line(t.note)) if t is not None else ("", "")
            if (label, note) != (row.label, row.note):
                changed.append(replace(row, label=label, note=note))
        if changed:
            self.upsert(changed)

    def clear(self) -> None:
        self._rows.clear()
        self._order.clear()
        self._counts = {name: 0 for name in FILTERS}
        self._changed("rows", rows_changed=True, shown_changed=True)

    # -- scan progress ----------------------------------------------------------------
    def set_progress(self, done: int, scanning: bool) -> None:
        self.scan_done = done
        self.scanning = scanning
        self._notify("progress")

    def set_check_progress(self, done: int, total: int, checking: bool) -> None:
        """Progress of the background integrity pass (shown in the status line)."""
        self.check_done = done
        self.check_total = total
        self.checking = checking
        self._notify("progress")

    def apply_checks(self, results: Iterable[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]]) -> int:
        """Set the full integrity result of cases: (key, settled, being written) problem
        pairs. A row already ``checked`` (re-read after a change) is newer and kept."""
        count = 0
        for key, settled, fresh in results:
            row = self._rows.get(key)
            if row is None or row.checked:
                continue
            self._count(row, -1)
            row.set_checked(len(settled), tuple(sorted({code for code, _ in settled})), bool(fresh))
            self._count(row, 1)
            self._stats_update(row, row)  # its problem and status cells changed in place
            count += 1
        if count:
            self._changed("rows", rows_changed=True)
        return count

    def apply_activity(self, marks: dict[str, Activity]) -> int:
        """Set each row's supervised-search status and staleness (``state.scan.Activity``)."""
        changed = []
        for key, mark in marks.items():
            row = self._rows.get(key)
            # staleness is redrawn when it starts, ends or crosses another hour
            if row is not None and (row.supervised, row.stale_for // 3600, row.stale_for > 0) != (mark.supervised, mark.stale_for // 3600, mark.stale_for > 0):
                changed.append(replace(row, supervised=mark.supervised, stale_for=mark.stale_for))
        return self.upsert(changed) if changed else 0

    # -- filter / sort / search -------------------------------------------------------
    def set_filter(self, name: str) -> None:
        if name not in FILTERS:
            raise KeyError(name)
        self.filter_name = name
        self._changed("filter", shown_changed=True)

    def set_search(self, text: str) -> None:
        self.search = text
        self._changed("search", shown_changed=True)

    def set_sort(self, key: str, reverse: bool | None = None) -> None:
        if key not in COLUMN_KEYS:
            raise KeyError(key)
        if reverse is None:
            reverse = (not self.sort_reverse) if key == self.sort_key else False
        self.sort_key = key
        self.sort_reverse = reverse
        self._changed("sort")

    def cycle_sort(self, step: int = 1) -> str:
        index = COLUMN_KEYS.index(self.sort_key) if self.sort_key in COLUMN_KEYS else 0
        key = COLUMN_KEYS[(index + step) % len(COLUMN_KEYS)]
        self.set_sort(key, reverse=False)
        return key

    def _search_rows(self) -> list[CaseRow]:
        needle = self.search.strip().casefold()
        base = self.rows()
        if not needle:
            return base
        # incremental: a query that extends the previous one filters the previous result
        if self._last_search_result is not None and self._last_search and needle.startswith(self._last_search):
            base = self._last_search_result
        terms = needle.split()
        result = [r for r in base if all(t in r.haystack for t in terms)]
        self._last_search = needle
        self._last_search_result = result
        return result

    def _queue_rows(self) -> list[CaseRow]:
        """The current queue: the rows the filter and the search let through (the
        unlabelled toggle aside)."""
        flt = FILTERS.get(self.filter_name, FILTERS["all"])
        return [r for r in self._search_rows() if flt.accepts(r)]

    def _sorted(self, rows: list[CaseRow]) -> list[CaseRow]:
        key = self.sort_key
        if key == "key":
            rows.sort(key=lambda r: r.key.casefold(), reverse=self.sort_reverse)
        else:
            rows.sort(key=lambda r: r.key.casefold())
            rows.sort(key=lambda r: (sort_value(r, key) is None, sort_value(r, key)), reverse=self.sort_reverse)
        if self.group_by:
            rows.sort(key=lambda r: group_value(r, self.group_by).casefold())  # stable: the sort holds in a group
        return rows

    def visible(self) -> list[CaseRow]:
        if self._visible is None:
            rows = self._queue_rows()
            if self.unlabelled_only:
                rows = [r for r in rows if not r.label]
            self._visible = self._sorted(rows)
        return self._visible

    def groups(self) -> list[tuple[int, str, int, int]]:
        """The groups of :meth:`visible` when grouping: (index of its first row, title,
        rows, labelled rows); [] when not grouping."""
        if not self.group_by:
            return []
        out: list[tuple[int, str, int, int]] = []
        current: str | None = None
        for i, row in enumerate(self.visible()):
            value = group_value(row, self.group_by)
            if value != current:
                out.append((i, value, 0, 0))
                current = value
            start, title, n, done = out[-1]
            out[-1] = (start, title, n + 1, done + (1 if row.label else 0))
        return out

    def queue_progress(self) -> tuple[int, int]:
        """(labelled, total) over the current queue (filter and search), kept until a change."""
        if self._progress is None:
            # without the unlabelled toggle the queue is what is shown (sorted, and kept)
            rows = self._queue_rows() if self.unlabelled_only else self.visible()
            self._progress = (sum(1 for r in rows if r.label), len(rows))
        return self._progress

    def neighbour(self, key: str, step: int) -> CaseRow | None:
        """The case ``step`` (+1 / -1) after ``key`` in the current queue's order; a case
        no longer listed (labelled while only the unlabelled ones are shown) counts from
        where it would sort."""
        rows = self.visible()
        keys = [r.key for r in rows]
        if key in keys:
            i = keys.index(key) + step
            return rows[i] if 0 <= i < len(rows) else None
        row = self._rows.get(key)
        if row is None:
            return None
        placed = self._sorted([*rows, row])
        at = next(i for i, r in enumerate(placed) if r is row)
        i = at if step > 0 else at - 1
        return rows[i] if 0 <= i < len(rows) else None

    # -- selection (space) ------------------------------------------------------------------
    def toggle_selected(self, key: str) -> bool:
        if key in self.selected:
            self.selected.discard(key)
        elif key in self._rows:
            self.selected.add(key)
        self._changed("selection")
        return key in self.selected

    def clear_selection(self) -> None:
        if self.selected:
            self.selected.clear()
            self._changed("selection")

    def selected_rows(self) -> list[CaseRow]:
        return [r for r in self.visible() if r.key in self.selected] + [
            self._rows[k] for k in sorted(self.selected) if k in self._rows and k not in {r.key for r in self.visible()}
        ]

    def set_unlabelled_only(self, on: bool) -> None:
        self.unlabelled_only = on
        self._changed("filter", shown_changed=True)

    def set_group(self, name: str) -> None:
        if name and name not in GROUPS:
            raise KeyError(name)
        self.group_by = name
        self._changed("sort")

    def view_state(self) -> dict[str, object]:
        """What lasts across restarts (``ui-state.json`` in the work directory)."""
        return {"filter": self.filter_name, "sort": self.sort_key, "reverse": self.sort_reverse,
                "unlabelled_only": self.unlabelled_only, "group_by": self.group_by}

    def restore_view(self, state: Mapping[str, object]) -> None:
        """Take back :meth:`view_state` (unknown or bad values keep the defaults)."""
        name, sort = state.get("filter"), state.get("sort")
        if isinstance(name, str) and name in FILTERS:
            self.filter_name = name
        if isinstance(sort, str) and sort in COLUMN_KEYS:
            self.sort_key = sort
        if isinstance(state.get("reverse"), bool):
            self.sort_reverse = bool(state["reverse"])
        if isinstance(state.get("unlabelled_only"), bool):
            self.unlabelled_only = bool(state["unlabelled_only"])
        if state.get("group_by") in ("", *GROUPS):
            self.group_by = str(state["group_by"])
        self._changed("filter", shown_changed=True)

    def counts(self) -> dict[str, int]:
        """Rows per filter (for the filter bar), maintained incrementally."""
        return dict(self._counts)

    def _count(self, row: CaseRow, sign: int) -> None:
        for name, flt in FILTERS.items():
            if flt.accepts(row):
                self._counts[name] += sign

    def describe(self) -> str:
        flt = FILTERS.get(self.filter_name, FILTERS["all"])
        labelled, total = self.queue_progress()
        parts = [f"{len(self.visible())} of {len(self._rows)} cases", flt.title + (" (unlabelled only)" if self.unlabelled_only else ""),
                 f"{labelled} of {total} labelled"]
        if self.selected:
            parts.append(f"{len(self.selected)} selected")
        if self.search.strip():
            parts.append("search \u201c" + safe_text(self.search.strip(), single_line=True, limit=40) + "\u201d")
        if self.sort_key != "key" or self.sort_reverse:  # the default order goes unsaid (room for what matters)
            parts.append(f"sort {self.sort_key}{' desc' if self.sort_reverse else ''}")
        if self.group_by:
            parts.append(f"grouped by {GROUPS[self.group_by]}")
        return " · ".join(parts)
