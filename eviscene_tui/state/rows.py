"""Rows of the runs table: one display-ready projection per case.

A :class:`CaseRow` holds already-sanitised strings (every run-derived string has
passed :func:`safe_text`) plus the raw sort keys. The UI only paints them.
No Textual import here.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from rich.cells import cell_len

from eviscene_tui.artifacts.fileio import read_regular
from eviscene_tui.safe_text import safe_text

if TYPE_CHECKING:
    from collections.abc import Iterable

    from eviscene_tui.journal.records import RecordKey
    from eviscene_tui.artifacts.layout import CaseRef
    from eviscene_tui.artifacts.problems import Problem
    from eviscene_tui.artifacts.summary import CaseSummary
    from eviscene_tui.state.transient import TransientProblems

# Statuses that put a case in the no-recoverable-site queue / the triage queue.
NO_SITE_STATUSES = frozenset({"no_recoverable_site", "no_further_grounded_hint"})
RUNNING_STATUSES = frozenset({"searching", "generating"})
CONVERGED_STATUSES = frozenset({"converged"})
ENDED_STATUSES = frozenset(
    {
        "attempt_budget_exhausted",
        "proposal_budget_exhausted",
        "time_budget_exhausted",
        "no_further_grounded_hint",
        "no_admissible_hints",
        "no_recoverable_site",
        "generated",
    }
)
BAD_STATUSES = frozenset({"unreadable", "unsupported", "unknown"})


def status_tone(status: str) -> str:
    """A colour class for a status: ok / warn / bad / run / dim."""
    if status in CONVERGED_STATUSES:
        return "ok"
    if status in RUNNING_STATUSES:
        return "run"
    if status.startswith("paused_"):
        return "warn"
    if status in NO_SITE_STATUSES or status in BAD_STATUSES:
        return "bad"
    return "dim"


@dataclass(slots=True)
class CaseRow:
    """One case in the runs table. ``key`` is unique (the case path relative to the root)."""

    key: str
    case_id: str = ""
    layout: str = ""
    status: str = ""
    rounds: int = 0
    attempts: int = 0
    accepted: int = 0
    pending: int = 0
    localization_kind: str = ""
    category: str = ""
    problems: int = 0
    problem_codes: tuple[str, ...] = ()
    mtime: float = 0.0
    hint_texts: tuple[str, ...] = ()
    being_written: bool = False  # a torn line that may still be completed by a writer
    no_site: bool = False  # the current round found no recoverable site
    label: str = ""  # the case's one current triage label ("" = unlabelled), from the review journals
    note: str = ""  # the note of that label (first line, for the search and the table)
    candidate_id: str = ""  # the candidate the run binds (its ledgers, else its bound candidate.json)
    no_site_reason: str = ""  # why no recoverable site was found (codes, "; " joined), for no-site cases
    gate: str = ""  # operator gate marker (state.gate.gate_marker): awaiting operator / driver gone / gated
    supervised: str = ""  # status of the app's own supervised search of this case ("" = none)
    stale_for: float = 0.0  # a "searching" case nothing has written to for this many seconds (0 = not stale)
    status_note: str = ""  # shown after the status: what an unsupported layout's own state says
    checked: bool = False  # problems come from the full integrity check (as ``check``), not the cheap summary
    # what opens the case: its CaseRef (or the summary it was built from, which has its path)
    ref: CaseRef | CaseSummary | None = field(default=None, compare=False, repr=False)
    #: the case's record key (journal.records): what its labels, searches and records are keyed by
    record: RecordKey | None = field(default=None, compare=False, repr=False)
    _haystack: str = field(default="", compare=False, repr=False)
    _cells: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    _widths: tuple[int, ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.key = safe_text(self.key, single_line=True)
        self.case_id = safe_text(self.case_id, single_line=True)
        self.layout = safe_text(self.layout, single_line=True)
        self.status = safe_text(self.status, single_line=True) or "unknown"
        self.localization_kind = safe_text(self.localization_kind, single_line=True)
        self.category = safe_text(self.category, single_line=True)
        self.hint_texts = tuple(safe_text(h, single_line=True) for h in self.hint_texts if h)
        self.label = safe_text(self.label, single_line=True, limit=40)
        self.note = safe_text(self.note, single_line=True, limit=200)
        self.candidate_id = safe_text(self.candidate_id, single_line=True)
        self.no_site_reason = safe_text(self.no_site_reason, single_line=True, limit=200)
        self.gate = safe_text(self.gate, single_line=True, limit=60)
        self.status_note = safe_text(self.status_note, single_line=True, limit=60)
        parts = [self.key, self.case_id, self.candidate_id, *self.hint_texts, self.label, self.note]
        self._haystack = "\n".join(parts).casefold()
        self._cells = None
        self._widths = None

    def cells(self) -> tuple[str, ...]:
        """The display text of every column (in ``COLUMNS`` order), computed once."""
        if self._cells is None:
            self._cells = tuple(_cell_text(self, c) for c in COLUMNS)
        return self._cells

    def cell_widths(self) -> tuple[int, ...]:
        """The width in cells of each of :meth:`cells`, computed once (column layout)."""
        if self._widths is None:
            self._widths = tuple(cell_len(text) for text in self.cells())
        return self._widths

    def refresh_cells(self) -> None:
        """After fields were set in place (by the worker that built the row): sanitise
        them again and recompute the cells and the search text."""
        self.__post_init__()

    def set_checked(self, problems: int, codes: tuple[str, ...], being_written: bool) -> None:
        """Take the full integrity result in place (the runs store does this for the
        10,000 rows of a pass: a new row per case would re-sanitise and re-format every
        cell); only the cells that depend on it are recomputed."""
        self.problems = problems
        self.problem_codes = codes
        self.being_written = being_written
        self.checked = True
        if self._cells is not None:
            cells = list(self._cells)
            for key in ("problems", "status"):
                cells[COLUMN_INDEX[key]] = _cell_text(self, COLUMNS[COLUMN_INDEX[key]])
            self._cells = tuple(cells)
            self._widths = None

    @property
    def haystack(self) -> str:
        return self._haystack

    @property
    def in_triage(self) -> bool:
        return (
            self.no_site or self.status in NO_SITE_STATUSES or self.status.startswith("paused_") or self.problems > 0
            or self.awaiting_operator
        )

    @property
    def awaiting_operator(self) -> bool:
        """A gated driver waits for a decision, or a gated driver is gone."""
        return self.gate.startswith("awaiting operator") or self.gate == "driver gone"

    @property
    def in_no_site_queue(self) -> bool:
        return self.no_site or self.status == "no_recoverable_site"

    @property
    def tone(self) -> str:
        return status_tone(self.status)

    def changed_text(self) -> str:
        if not self.mtime:
            return ""
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.mtime))


@dataclass(frozen=True, slots=True)
class Column:
    key: str  # sort key name (CaseRow attribute or "changed")
    title: str
    min_width: int  # narrower than this the column is dropped instead
    max_width: int = 0  # the widest it is ever made (0 = as wide as its content)
    align: str = "left"
    help: str = ""
    drop: int = 0  # drop order on narrow terminals: 1 goes first; 0 = always shown
    weight: float = 1.0  # share of the spare width relative to other columns
    comfort: int = 0  # an always-shown column: other columns drop before it gets narrower than this


COLUMNS: tuple[Column, ...] = (
    Column("key", "case", 24, help="case path under the opened folder", weight=3.0, comfort=30),
    Column("case_id", "case id", 14, 40, help="case id recorded in the run", drop=4, weight=0.5),
    Column("layout", "layout", 6, 7, help="feedback search, single run, slate", drop=1),
    Column("status", "status", 12, 48, help="search or run manifest status", weight=1.5, comfort=24),
    Column("rounds", "rnd", 3, 4, "right", help="feedback rounds", drop=10),
    Column("attempts", "att", 3, 5, "right", help="attempt records", drop=9),
    Column("accepted", "acc", 3, 5, "right", help="accepted attempts", drop=8),
    Column("pending", "pnd", 3, 5, "right", help="attempts pending verification", drop=7),
    Column("localization_kind", "localization", 8, 24, help="localization kind of the current site", drop=5),
    Column("category", "category", 8, 32, help="semantic category of the current site (no site: the localizer's or the bound candidate's)", drop=6),
    Column("no_site_reason", "why no site", 11, 40, help="why no recoverable site was found (the localizer's outcome)", drop=2, weight=0.3),
    Column("label", "label", 6, 20, help="the case's triage label (l labels; u the unlabelled ones)", weight=0.8, comfort=20),
    Column("problems", "prb", 3, 6, "right", help="integrity problems (as `eviscene-tui check`; \u2026 until checked)"),
    Column("mtime", "changed", 16, 16, help="last change time", drop=3),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
COLUMN_INDEX = {key: i for i, key in enumerate(COLUMN_KEYS)}
SEPARATOR = 1  # cells between two columns


class ColumnStats:
    """The widest cell of each column over a set of rows, kept up to date as rows come and
    go (:meth:`add`, :meth:`discard`), so the layout of a 10,000-row table does not look at
    every row whenever a batch of them arrives. Equal to :func:`longest_cells` over the
    rows it holds. Each row's widths are kept as they were added: a row changed in place
    is discarded and added again (:meth:`add` does both for a key it holds)."""

    __slots__ = ("_widths", "_counts", "_longest")

    def __init__(self, rows: Iterable[CaseRow] = ()) -> None:
        self._widths: dict[str, tuple[int, ...]] = {}  # row key -> its cell widths as added
        self._counts: list[dict[int, int]] = [{} for _ in COLUMNS]  # per column: width -> rows that wide
        self._longest: list[int] = [0] * len(COLUMNS)
        for row in rows:
            self.add(row)

    def __len__(self) -> int:
        return len(self._widths)

    def __contains__(self, key: object) -> bool:
        return key in self._widths

    def add(self, row: CaseRow) -> None:
        """Count ``row`` (in place of the row it replaces, with the same key)."""
        if row.key in self._widths:
            self.discard(row.key)
        widths = row.cell_widths()
        self._widths[row.key] = widths
        longest = self._longest
        for i, (counts, w) in enumerate(zip(self._counts, widths)):
            counts[w] = counts.get(w, 0) + 1
            if w > longest[i]:
                longest[i] = w

    def discard(self, key: str) -> None:
        """No longer count the row with ``key`` (nothing when it is not counted)."""
        widths = self._widths.pop(key, None)
        if widths is None:
            return
        longest = self._longest
        for i, (counts, w) in enumerate(zip(self._counts, widths)):
            left = counts[w] - 1
            if left:
                counts[w] = left
            else:
                del counts[w]
                if w == longest[i]:
                    longest[i] = max(counts, default=0)

    def longest(self) -> list[int]:
        """The widest cell of each column (in ``COLUMNS`` order; 0 for no rows)."""
        return list(self._longest)


def longest_cells(rows: list[CaseRow]) -> list[int]:
    """The widest cell of each column over ``rows`` (in ``COLUMNS`` order), recomputed."""
    return [max(column) for column in zip(*(r.cell_widths() for r in rows))] if rows else [0] * len(COLUMNS)


def column_widths(rows: list["CaseRow"], width: int, *, sort_key: str = "",
                  longest: list[int] | None = None) -> list[tuple[Column, int]]:
    """Which columns to show and how wide, for a table ``width`` cells wide.

    A droppable column empty in every row is not shown. Columns are dropped in their
    ``drop`` order until the rest fit at their minimum
    (case, status and problems always stay). The columns with a comfortable width
    (case, status) start at it, the sorted column keeps room for its arrow. Then the
    spare cells go, one at a time,
    to the visible column furthest from its content's natural width (the longest
    value, capped by ``max_width``), so a long case name and a long category share the
    room instead of one of them taking it all; what is left goes to the case column.
    ``longest``: the widest cell of each column over ``rows`` (:meth:`ColumnStats.longest`,
    kept up to date as they arrived), else recomputed over every row.
    """
    natural: dict[str, int] = {}
    longest_of = longest if longest is not None else longest_cells(rows)
    for i, column in enumerate(COLUMNS):
        title = cell_len(column.title) + (1 if column.key == sort_key else 0)
        value = max(title, longest_of[i], column.min_width)
        natural[column.key] = min(value, column.max_width) if column.max_width else value
    # a droppable column no row has anything in (no case without a site: "why no site") goes
    # first; then the drop order
    empty = empty_columns(rows, longest_of)
    shown = [c for c in COLUMNS if c.key not in empty]
    droppable = sorted((c for c in shown if c.drop), key=lambda c: c.drop)

    def floor(c: Column) -> int:
        # the sorted column's title keeps room for its sort arrow
        return max(c.min_width, cell_len(c.title) + 1) if c.key == sort_key else c.min_width

    def least(c: Column) -> int:
        return max(floor(c), min(natural[c.key], c.comfort)) if c.comfort else floor(c)

    def needed(columns: list[Column]) -> int:
        return sum(least(c) for c in columns) + SEPARATOR * (len(columns) - 1)

    while needed(shown) > width and droppable:
        gone = droppable.pop(0)
        shown = [c for c in shown if c is not gone]
    # the columns with a comfortable width (case, status) get it first: status is what the
    # operator triages on; the rest is shared by content
    widths = {c.key: least(c) for c in shown}
    if sum(widths.values()) + SEPARATOR * (len(shown) - 1) > width:
        # not even the comfortable widths fit (only the kept columns are left): start lower
        widths = {c.key: floor(c) for c in shown}
    weights = {c.key: c.weight for c in shown}
    spare = width - sum(widths.values()) - SEPARATOR * (len(shown) - 1)
    while spare > 0:
        short = [c.key for c in shown if widths[c.key] < natural[c.key]]
        if not short:
            break
        # the next cell goes to the column showing the smallest share of its content
        key = min(short, key=lambda k: (widths[k] / natural[k] / weights[k], COLUMN_INDEX[k]))
        widths[key] += 1
        spare -= 1
    if spare > 0:
        widths["key"] += spare
    return [(c, widths[c.key]) for c in shown]


def empty_columns(rows: list[CaseRow], longest: list[int] | None = None) -> set[str]:
    """The droppable columns no row has anything in (not shown, and not "hidden");
    ``longest``: the widest cells of ``rows`` when known (:func:`longest_cells`)."""
    if not rows:
        return set()
    if longest is None:
        longest = longest_cells(rows)
    return {c.key for i, c in enumerate(COLUMNS) if c.drop and longest[i] == 0}


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, cut in the middle with an ellipsis: names
    that share a long prefix stay distinguishable by their ends."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "\u2026"[:width]
    head_cells = (width - 1) // 3
    tail_cells = width - 1 - head_cells
    head = ""
    for ch in text:
        if cell_len(head + ch) > head_cells:
            break
        head += ch
    tail = ""
    for ch in reversed(text):
        if cell_len(ch + tail) > tail_cells:
            break
        tail = ch + tail
    return head + "\u2026" + tail


LAYOUT_SHORT = {
    "feedback_search": "search",
    "single_run": "run",
    "slate": "slate",
    "unknown": "?",
}


def cell_text(row: CaseRow, column: Column) -> str:
    """The display text of one cell (already safe)."""
    return row.cells()[COLUMN_INDEX[column.key]]


def _cell_text(row: CaseRow, column: Column) -> str:
    key = column.key
    if key == "mtime":
        return row.changed_text()
    if key == "layout":
        return LAYOUT_SHORT.get(row.layout, row.layout)
    if key == "status":
        shown = "unsupported layout" if row.status == "unsupported" else row.status
        if row.status_note:
            shown += f" ({row.status_note})"
        text = shown + (" (being written)" if row.being_written else "")
        if row.awaiting_operator:
            text = gate_short(row.gate) + " · " + text  # first: the column is narrow and this needs a person
        elif row.gate:
            text += " · " + row.gate
        if row.stale_for:
            text += f" \u00b7 stale: no writes for {duration(row.stale_for)}"
        if row.supervised:
            text += f" \u00b7 repair: {row.supervised}"
        return text
    if key == "problems":
        # until the full check reaches a case its count is the cheap summary's: marked as provisional
        return str(row.problems) if row.checked else (f"{row.problems}\u2026" if row.problems else "\u2026")
    if key == "case_id":
        return "" if row.case_id == row.key else row.case_id
    value = getattr(row, key)
    if isinstance(value, int):
        return str(value)
    return str(value or "")


def gate_short(marker: str) -> str:
    """A gate marker as the status cell starts with it: what needs a person first and
    short (``awaiting operator · driver gone`` -> ``driver gone, awaiting``), so a
    narrow status column still shows that the driver is gone."""
    if marker == "awaiting operator · driver gone":
        return "driver gone, awaiting"
    if marker == "awaiting operator":
        return "awaiting operator"
    return marker


def shorten_start(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, its start cut with an ellipsis: ids that share
    a prefix (``case-rally-…``) stay distinguishable by their ends."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "\u2026"[:width]
    tail = ""
    for ch in reversed(text):
        if cell_len(ch + tail) > width - 1:
            break
        tail = ch + tail
    return "\u2026" + tail


def duration(seconds: float) -> str:
    """A rough length of time for a status line: 40 min, 3 h, 2 d."""
    if seconds >= 86400:
        return f"{seconds / 86400:.0f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 60:.0f} min"


def sort_value(row: CaseRow, key: str) -> Any:
    value = getattr(row, key)
    if isinstance(value, str):
        return value.casefold()
    return value


def last_round_status(case_path: Any) -> str | None:
    """Status of the newest ``rounds/round-NN/manifest.json`` of a search root (one
    small read; called from a worker thread, never from a widget)."""
    rounds = Path(case_path) / "rounds"
    try:
        names = [n for n in (e.name for e in os.scandir(rounds)) if re.match(r"^round-\d{2,}$", n)]
    except OSError:
        return None
    if not names:
        return None
    newest = max(names, key=lambda n: int(n.split("-", 1)[1]))
    try:
        value = orjson.loads(read_regular(rounds / newest / "manifest.json", limit=1 << 20))
    except (OSError, orjson.JSONDecodeError):
        return None
    status = value.get("status") if isinstance(value, dict) else None
    return status if isinstance(status, str) else None


def problem_pairs(problems: Iterable[Problem]) -> list[tuple[str, str]]:
    """(code, absolute path) of each problem: how rows and the transient tracker name them."""
    return [(str(p.code), os.path.abspath(str(p.path))) for p in problems]


def row_key(summary: CaseSummary) -> str:
    """The runs-table key of a summarised case: its path under the opened folder."""
    return summary.rel_path if summary.rel_path and summary.rel_path != "." else (summary.path.name or str(summary.path))


def row_from_summary(
    summary: CaseSummary,
    *,
    transient: TransientProblems | None = None,
    last_round: str | None = None,
    ref: CaseRef | None = None,
    problems: list[Problem] | None = None,
) -> CaseRow:
    """Project an artifact-layer ``CaseSummary`` onto a :class:`CaseRow`.

    ``transient`` (a :class:`~eviscene_tui.state.transient.TransientProblems`) turns
    fresh torn lines into "being written" instead of problems. ``last_round`` is the
    newest round's manifest status (for the no-recoverable-site queue). ``problems``:
    the case's full integrity problems (the row is then ``checked``); without them the
    row counts the summary's own problems until the integrity pass reaches it.
    """
    key = row_key(summary)
    source = summary.problems if problems is None else problems
    pairs = problem_pairs(source)
    fresh: list[tuple[str, str]] = []
    if transient is not None:
        settled, fresh = transient.classify(key, pairs)
    else:
        settled = pairs
    status = summary.status or "unknown"
    note = ""
    if str(summary.layout) == "slate":
        # one label wherever a slate root is shown: the app does not read this layout, so
        # its own state ("repairing", "searching") is a note, not the case's status
        note = "slate" if status in ("unsupported", "unreadable", "unknown") else f"slate: {status}"
        status = "unsupported"
    no_site = status == "no_recoverable_site" or last_round == "no_recoverable_site"
    return CaseRow(
        key=key,
        case_id=summary.case_id or summary.key or "",
        candidate_id=summary.candidate_id or "",
        layout=str(summary.layout),
        status=status,
        rounds=summary.rounds,
        attempts=summary.attempts,
        accepted=summary.accepted,
        pending=summary.pending,
        localization_kind=summary.localization_kind or "",
        category=summary.semantic_category or "",
        problems=len(settled),
        problem_codes=tuple(sorted({c for c, _ in settled})),
        mtime=summary.mtime,
        hint_texts=tuple(summary.hint_texts),
        being_written=bool(fresh),
        no_site=no_site,
        status_note=note,
        checked=problems is not None,
        ref=ref if ref is not None else summary,
    )
