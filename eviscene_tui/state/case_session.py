"""The case screen's live state, without Textual: :class:`CaseSession`.

One session per case shown. It owns the case's lifecycle — the load and the reloads
while a driver writes the case, the source trace and its rows (the window around the
failure step first, the rest filled in the background), the side-by-side comparison,
the claims check, the full integrity check (one at a time, coalesced) — and discards
results that no longer belong to what it shows (an older load, a closed session).

Its blocking steps (``_load_step``, ``_fill_step``, …) run off the UI thread: the
session hands them to its host (:class:`CaseHost`, the screen), whose worker runs the
step and hands every event the step posts back to :meth:`CaseSession.receive` on the
UI thread. Subscribers (``state.observable``) get the :class:`CaseSnapshot` — frozen parts, one per panel —
and an :class:`Update` naming the parts that changed (compared by value, so a reload
that reads the same files repaints nothing) and what the screen should do once
(move the cursor, show a tab, run a queued action).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from eviscene_tui import pace
from eviscene_tui.artifacts.case import CaseBundle, load_case
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.paths import InputProvenance, with_sha_status
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.artifacts.summary import CaseSummary
from eviscene_tui.artifacts.trace import SourceTrace, load_trace
from eviscene_tui.options import AppOptions
from eviscene_tui.probes import CaseProbes
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state import case_check, index_process
from eviscene_tui.state.case_view import (
    CaseView,
    CompareView,
    L,
    Line,
    ProblemMark,
    Quote,
    S,
    Seg,
    build_case_view,
    build_compare,
    claims_lines,
    failure_index_for,
    marked_rounds,
    pick_teacher_step,
    place_problems,
    provenance_lines,
    step_detail_doc,
)
from eviscene_tui.state.claims import Claim, ClaimResult, check_claims
from eviscene_tui.state.observable import Observable
from eviscene_tui.state.prefetch import Prefetched
from eviscene_tui.state.rows import CaseRow, duration
from eviscene_tui.state.runs import RunsStore
from eviscene_tui.state.trace_rows import FillGate, StepRow, TraceRows, row_from_brief
from eviscene_tui.state.trace_search import SearchCorpus, SearchHit, TraceSearch
from eviscene_tui.state.transient import TRANSIENT_CODES

WINDOW = 150  # rows built around the failure step before the first paint
WINDOW_LAZY = 16  # the same for an indexed trace, whose rows each parse a step: a screenful
RELOAD_DELAY = 0.15  # seconds from a change in the open case to its reload
#: seconds from the start of one reload to the start of the next while a driver keeps writing
#: the case: each reload repaints the header and panels on the UI thread and starts the work
#: that follows (comparison, integrity), so back to back during a full-speed burst they kept
#: the keys waiting; two a second still shows every change within a second
RELOAD_GAP = 0.5
#: seconds between the end of a full integrity check and the next one, while the files keep
#: changing (each check hashes every bound input, the source trace included: back to back
#: during a driver's burst they would keep a core busy and make the keys wait)
INTEGRITY_GAP = 2.0
#: the shortest timer the session asks for (a zero-interval Textual timer that wakes late,
#: as on a loaded machine, divides by its interval)
MIN_TIMER = 0.001
#: the longest the case's background work waits for a capture (k) or a step's detail to be painted
FOREGROUND_LIMIT = 2.0
#: seconds of typing pause before a search of the trace starts
SEARCH_PAUSE = 0.12
#: seconds between the fill's progress events (each repaints the rows on screen)
FILL_PROGRESS = 0.25

Cancel = Callable[[], None]
ProblemRow = tuple[str, str, str]  # (code, path, message)


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class Loaded:
    load: int
    bundle: CaseBundle
    view: CaseView


@dataclass(frozen=True, slots=True)
class LoadFailed:
    load: int
    message: str


@dataclass(frozen=True, slots=True)
class TraceLoading:
    load: int
    text: str


@dataclass(frozen=True, slots=True)
class TraceShown:
    """The source trace is parsed; ``data`` holds at least the window around the failure step."""

    load: int
    data: TraceRows
    trace: SourceTrace


@dataclass(frozen=True, slots=True)
class TraceFailed:
    load: int
    why: str


@dataclass(frozen=True, slots=True)
class RowsFilled:
    load: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class RowsComplete:
    load: int


@dataclass(frozen=True, slots=True)
class CompareDone:
    compare: CompareView


@dataclass(frozen=True, slots=True)
class IntegrityDone:
    """The full check: (code, path under the opened folder, message) for the Integrity tab,
    (code, path in the case, message) to place the marks, the inputs with their sha256
    verified (``artifacts.paths``)."""

    problems: tuple[ProblemRow, ...]
    in_case: tuple[ProblemRow, ...] = ()
    provenance: tuple[InputProvenance, ...] | None = None


@dataclass(frozen=True, slots=True)
class ClaimsDone:
    claims: tuple[Claim, ...]
    results: tuple[ClaimResult, ...]


@dataclass(frozen=True, slots=True)
class SearchDone:
    hit: SearchHit
    error: str | None = None


@dataclass(frozen=True, slots=True)
class StepCrashed:
    """A step raised what it does not catch itself (the host reports it)."""

    group: str
    error: BaseException


CaseEvent = (Loaded | LoadFailed | TraceLoading | TraceShown | TraceFailed | RowsFilled | RowsComplete | CompareDone
             | IntegrityDone | ClaimsDone | SearchDone | StepCrashed)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step running off the UI thread gets: where its events go, whether it was cancelled."""

    post: Callable[[CaseEvent], None]
    cancelled: Callable[[], bool]


Step = Callable[[StepContext], None]


class CaseHost(Protocol):
    """What the session asks of the screen: run a step off the UI thread (one at a time per
    ``group``, a new one replacing the last), and call back after a delay (cancellable)."""

    def run(self, group: str, step: Step) -> None: ...

    def later(self, seconds: float, callback: Callable[[], None]) -> Cancel: ...


#: the step groups of a case (the host cancels them when another case is shown)
GROUPS = ("case-load", "trace-fill", "trace-demand", "case-integrity", "case-claims", "trace-search")


# ----------------------------------------------------------------------------- the parts
@dataclass(frozen=True, slots=True)
class TitlePart:
    """The header: the case view (None: not read yet), the number of problems (None: the
    check is running), why the case could not be read, what the runs table knows about
    the case beyond its files as (rank, note, key hint), and the queue's progress."""

    view: CaseView | None
    problems: int | None
    load_error: str | None
    notes: tuple[tuple[int, str, str], ...] = ()
    progress: str = ""


@dataclass(frozen=True, slots=True)
class TracePart:
    """The Trace tab's body: the rows shown (compared by identity), or why there is no trace."""

    rows: TraceRows | None = field(compare=False)
    rows_id: int
    missing: str | None


@dataclass(frozen=True, slots=True)
class StatusPart:
    """The trace's status line after its "step N" (the cursor is the view's)."""

    step_count: int | None  # None: the trace is not shown yet
    parts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DocsPart:
    localization: tuple[Line, ...]
    rounds: tuple[Line, ...]
    revealed: bool


@dataclass(frozen=True, slots=True)
class ComparePart:
    compare: CompareView | None
    no_trace: bool
    revealed: bool


@dataclass(frozen=True, slots=True)
class IntegrityPart:
    lines: tuple[Line, ...]


@dataclass(frozen=True, slots=True)
class CaseSnapshot:
    key: str
    revealed: bool
    title: TitlePart
    trace: TracePart
    status: StatusPart
    docs: DocsPart
    quotes: tuple[Quote, ...]
    compare: ComparePart
    integrity: IntegrityPart


PARTS = ("revealed", "title", "trace", "status", "docs", "quotes", "compare", "integrity")


@dataclass(frozen=True, slots=True)
class Update:
    """What changed since the last snapshot, and what the screen does once."""

    parts: frozenset[str]
    rows: tuple[int, int] | None = None  # rows built in [start, end): repaint them
    goto: int | None = None  # move the trace's cursor to this step
    tab: str | None = None  # show this tab
    first: bool = False  # the case's files were read for the first time
    trace_shown: bool = False  # the trace's rows are shown for the first time
    run: Callable[[], object] | None = None  # an action asked for before the case was read
    marks: frozenset[int] | None = None  # the search's matching steps (empty: clear them)


def _check_failed_row(case_path: Path, exc: BaseException) -> ProblemRow:
    """The Integrity row of a full check that raised instead of answering."""
    text = safe_text(f"integrity check failed: {type(exc).__name__}: {exc}", single_line=True, limit=500)
    return ("error", safe_text(str(case_path), single_line=True), text)


def _activity_notes(row: CaseRow | None) -> list[tuple[int, str, str]]:
    """What the runs table knows about the case beyond its files: the app's repair search of
    it, a gated driver, a search gone quiet (already sanitised in the row), as (rank, note,
    key hint)."""
    if row is None:
        return []
    notes = []
    if row.label:
        notes.append((1, f"label: {row.label}", "l relabels, u undoes"))
    if row.supervised:
        earlier = "earlier in-app search" in row.supervised  # kept read-only: g starts a repair under the gate
        notes.append((1, f"repair: {row.supervised}", "g starts a repair" if earlier else "g opens its gate"))
    if row.gate:
        notes.append((1, f"driver gate: {row.gate}", "G opens it"))
    if row.stale_for:
        notes.append((1, "stale: no writes for " + duration(row.stale_for), ""))
    return notes


def _no_op() -> None:
    return None


#: what subscribers get on each change: the snapshot, and what changed in it
CaseChange = tuple["CaseSnapshot", "Update"]


class CaseSession(Observable[CaseChange]):
    """The live state of one case shown on the case screen."""

    def __init__(
        self,
        ref: CaseRef | CaseSummary | Path,
        options: AppOptions,
        host: CaseHost,
        *,
        key: str | None = None,
        revealed: bool = False,
        prefetched: Callable[[Path], Prefetched | None] | None = None,
        writing: Callable[[str], bool] | None = None,
        gc_hold: Callable[[], None] = _no_op,
        gc_release: Callable[[], None] = _no_op,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``prefetched``: the case read ahead (the app's, taken once); ``writing``: whether
        a driver is writing the case with this key (its torn files are not problems yet);
        ``gc_hold``/``gc_release``: keep what the case holds off full garbage collections."""
        super().__init__()
        self.ref = ref
        self.case_path = ref if isinstance(ref, Path) else ref.path
        self.key = key or self.case_path.name
        self.options = options
        self.revealed = revealed
        self._host = host
        self._prefetched = prefetched
        self._writing = writing
        self._gc_hold, self._gc_release = gc_hold, gc_release
        self._clock = clock
        self.closed = False
        self.probes = CaseProbes()  # when it opened and last read the case, for the bench
        # the case
        self.bundle: CaseBundle | None = None
        self.view: CaseView | None = None
        self.load_error: str | None = None
        self.load_count = 0  # the loads started; events of an older load are stale
        self.loading = False
        self._reload_started = -RELOAD_GAP  # clock time the last load started
        self._reload_again = False  # files changed during that load
        self._reload_cancel: Cancel | None = None
        self._deferred: Callable[[], object] | None = None
        # the trace
        self.trace: SourceTrace | None = None
        self.trace_rows: TraceRows | None = None
        self.trace_missing: str | None = None
        self.trace_loading: str | None = None
        self._trace_load = -1  # the load that published the trace rows shown
        self.corpus = SearchCorpus()  # an indexed trace's searchable text, built by the background fill
        self.fill_gate = FillGate()  # held while the UI waits for on-demand rows or a detail
        self.detail_gate = FillGate()  # held while the UI waits for a detail (rows off screen wait)
        self.gc_holds = 0
        # comparison, claims, integrity
        self.compare: CompareView | None = None
        self._claims_checked: list[Claim] | None = None
        self.claim_results: list[ClaimResult] | None = None
        self.integrity: list[ProblemRow] | None = None
        self.integrity_in_case: list[ProblemRow] = []
        self.provenance: list[InputProvenance] | None = None
        self.marks: list[ProblemMark] = []  # one per problem in check order
        self.integrity_running = False
        self._integrity_pending = False
        self._integrity_wait: Cancel | None = None  # the next check waits for INTEGRITY_GAP
        self._problem_cursor = -1
        # search, tokens
        self._search: TraceSearch | None = None
        self.search_status: str | None = None
        self._search_typed: str | None = None  # the query last typed (a hit of another is stale)
        self._search_cancel: Cancel | None = None
        self._tokens_ticket = 0
        self._tokens_hold: pace.ForegroundHold | None = None
        self._last: CaseSnapshot | None = None
        self._docs_memo: tuple[tuple[object, ...], DocsPart] | None = None
        self._integrity_memo: tuple[tuple[object, ...], IntegrityPart] | None = None
        self._store: RunsStore | None = None
        self._unwatch_store: Cancel | None = None

    # -- snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> CaseSnapshot:
        return CaseSnapshot(
            key=self.key,
            revealed=self.revealed,
            title=self.title_part(),
            trace=TracePart(self.trace_rows, id(self.trace_rows) if self.trace_rows is not None else 0, self.trace_missing),
            status=self.status_part(),
            docs=self._docs_part(),
            quotes=tuple(self.view.quotes) if self.view is not None else (),
            compare=ComparePart(self.compare, self.trace_missing is not None, self.revealed),
            integrity=self._integrity_part(),
        )

    def _publish(self, **cues: Any) -> None:
        if self.closed:
            return
        snap = self.snapshot()
        last = self._last
        changed = frozenset(p for p in PARTS if last is None or getattr(snap, p) != getattr(last, p))
        self._last = snap
        self._notify((snap, Update(changed, **cues)))

    def watch_store(self, store: RunsStore) -> None:
        """Follow the runs table's row of the case (label, gate, staleness) and its queue."""
        self._store = store
        self._unwatch_store = store.subscribe(self._store_changed)

    def _store_changed(self, reason: str) -> None:
        if reason == "rows" and self.view is not None:
            self._publish()

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the case's files (again): the trace is read on the first load only."""
        if self.closed:
            return
        self.load_count += 1
        if self.load_count == 1:
            self._hold_gc()  # from the open on: a full collection would land before the failure step is painted
        self._reload_started = self._clock()
        self.loading = True
        self._host.run("case-load", partial(self._load_step, self.load_count, self.trace))

    def _load_step(self, load: int, known_trace: SourceTrace | None, ctx: StepContext) -> None:
        """Open the case; on first open read the source trace *first* (the failure step is
        what the operator waits for; a big trace is only indexed), then build the panels
        and the side-by-side comparison, then fill the rest of the trace rows."""
        early = self._prefetched(self.case_path) if self._prefetched is not None and known_trace is None and load == 1 else None
        if early is not None:
            # the next case of the queue, read while the operator looked at the one before:
            # its panels at once, then its trace rows
            ctx.post(Loaded(load, early.bundle, early.view))
            fill = self._trace_window(load, early.bundle, ctx)
            if fill is not None:
                ctx.post(self._compare_now(early.bundle, fill[0], early.view.failure_index))
                self._host.run("trace-fill", partial(self._fill_step, load, early.bundle, *fill))
            return
        try:
            bundle = load_case(self.case_path, path_map=self.options.path_map)
        except Exception as exc:  # noqa: BLE001 - shown, never crashes the app
            ctx.post(LoadFailed(load, f"{type(exc).__name__}: {exc}"))
            return
        fill = self._trace_window(load, bundle, ctx) if known_trace is None else None
        if known_trace is not None:
            bundle.adopt_trace(known_trace)
        try:
            view = build_case_view(bundle, key=self.key, base=self.options.key_root)
        except Exception as exc:  # noqa: BLE001 - shown as the case's load error
            ctx.post(LoadFailed(load, f"{type(exc).__name__}: {exc}"))
            return
        ctx.post(Loaded(load, bundle, view))
        if fill is not None:
            # the comparison needs only the failure step: before the rest of the rows
            ctx.post(self._compare_now(bundle, fill[0], view.failure_index))
            self._host.run("trace-fill", partial(self._fill_step, load, bundle, *fill))
        elif known_trace is not None:
            ctx.post(self._compare_now(bundle, known_trace, view.failure_index))

    def _trace_window(self, load: int, bundle: CaseBundle, ctx: StepContext) -> tuple[SourceTrace, TraceRows, list[int]] | None:
        """Load the trace (a big one is only indexed), build the rows around the failure
        step, post TraceShown; the rows still to build, nearest first."""
        try:
            path = bundle.source_trace_path
            if path is not None and str(path).endswith(".gz"):
                ctx.post(TraceLoading(load, "decompressing and indexing the gzip source trace (its first open is slower)\u2026"))
            # a big trace's index may be built already, begun in the index process at Enter
            foreign = index_process.INDEXES.take(self.case_path, ctx.cancelled) if load == 1 else None
            trace, problems = bundle.trace(spool_dir=self.options.workdir / "spool", foreign=foreign)
            failure_index = failure_index_for(bundle)
        except Exception as exc:  # noqa: BLE001 - shown as the trace's load error
            ctx.post(TraceFailed(load, f"{type(exc).__name__}: {exc}"))
            return None
        if trace is None:
            why = "; ".join(safe_text(p.message, single_line=True, limit=1000) for p in problems) or "no source trace is referenced by this case"
            ctx.post(TraceFailed(load, why))
            return None
        return self._publish_trace(load, trace, problems, failure_index, ctx, window=WINDOW_LAZY if trace.lazy else WINDOW)

    def _publish_trace(self, load: int, trace: SourceTrace, problems: list[Problem], failure_index: int | None, ctx: StepContext,
                       *, window: int | None) -> tuple[SourceTrace, TraceRows, list[int]]:
        count = trace.step_count
        rows: list[StepRow | None] = [None] * count
        valid = failure_index if failure_index is not None and 0 <= failure_index < count else None
        centre = valid if valid is not None else 0
        span = count if window is None else window
        lo, hi = max(0, centre - span), min(count, centre + span)
        for i in range(lo, hi):
            rows[i] = row_from_brief(trace.quick_brief(i))
        data = TraceRows(
            step_count=count,
            rows=rows,
            policy_indices=[] if trace.lazy else trace.policy_step_indices(),
            failure_index=valid,
            path=safe_text(str(trace.path), single_line=True),
            size_bytes=trace.size_bytes or 0,
            problems=[safe_text(p.message, single_line=True, limit=200) for p in problems],
            lazy=trace.lazy,
            gzip=trace.gzip,
            index_seconds=trace.index_seconds,
        )
        if trace.lazy:
            data.refresh_policy_indices()
        ctx.post(TraceShown(load, data, trace))
        time.sleep(0.03)  # let the UI thread take the GIL and paint the failure step first
        pending = list(range(hi, count)) + list(range(lo - 1, -1, -1))
        if trace.lazy:
            pending = list(range(lo, hi)) + pending  # the window too: its rows came from a cut parse
        return trace, data, pending

    def _fill_step(self, load: int, bundle: CaseBundle, trace: SourceTrace, data: TraceRows, pending: list[int], ctx: StepContext) -> None:
        """The rest of the rows (a reload of the case after a live update does not stop
        this: the rows belong to the trace, which a reload keeps)."""
        with pace.background():  # nobody waits for these rows: a key goes first
            filled = self.fill_rows(load, trace, data, pending, ctx)
        if not filled:
            return
        broken = trace.broken if trace.lazy else None
        if broken is None:
            ctx.post(RowsComplete(load))
            return
        # an indexed trace whose range did not parse as one object: read it the whole-file
        # way (which reports problems precisely) and show that instead
        whole, problems = load_trace(broken.path, lazy=False)
        if whole is None:
            ctx.post(TraceFailed(load, "; ".join(safe_text(p.message, single_line=True, limit=200) for p in problems) or "unreadable"))
            return
        bundle.adopt_trace(whole, problems)
        view = self.view
        self._publish_trace(load, whole, problems, view.failure_index if view else None, ctx, window=None)

    def fill_rows(self, load: int, trace: SourceTrace, data: TraceRows, pending: list[int], ctx: StepContext) -> bool:
        """Build the rows not built yet, posting progress about four times a second (an
        indexed trace parses each step here, once); False when cancelled."""
        rows = data.rows
        posted = time.perf_counter()
        lo = hi = None
        corpus = self.corpus if trace.lazy else None
        for n, i in enumerate(pending):
            if n % 16 == 0 and ctx.cancelled():
                return False
            # what the operator waits for (rows on screen, a step's detail, a key) goes first
            self.fill_gate.wait(0.25)
            pace.yield_to_input()
            if corpus is not None:
                # an indexed trace: every step fully parsed once here (which verifies its
                # range); its brief is the reference for a row built from a cut parse
                row = row_from_brief(trace.brief(i))
                if rows[i] != row:
                    rows[i] = row
                if i not in corpus:
                    corpus.add(i, trace.raw_steps[i])
            elif rows[i] is None:
                rows[i] = row_from_brief(trace.brief(i))
            lo = i if lo is None else min(lo, i)
            hi = i if hi is None else max(hi, i)
            now = time.perf_counter()
            if now - posted >= FILL_PROGRESS:
                data.refresh_policy_indices()
                ctx.post(RowsFilled(load, lo, hi + 1))
                posted, lo, hi = now, None, None
        data.refresh_policy_indices()
        ctx.post(RowsFilled(load, lo if lo is not None else 0, (hi + 1) if hi is not None else 0))
        return True

    def rows_wanted(self, start: int, end: int) -> None:
        """Rows on screen that the background fill has not reached yet: built now."""
        if self.trace_rows is not None and self.trace_rows.missing_between(start, end):
            self._host.run("trace-demand", partial(self._rows_step, self._trace_load, self.trace_rows, self.trace, start, end))

    def _rows_step(self, load: int, data: TraceRows, trace: SourceTrace | None, start: int, end: int, ctx: StepContext) -> None:
        if trace is None:
            return
        self.fill_gate.hold()
        # the rows on screen are what the operator waits for (End, a page key): the case's
        # other background work (the integrity check hashing the trace) waits for them too
        foreground = pace.ForegroundHold()
        try:
            # the rows on screen first (posted at once), then the margin around them
            visible = (start + end) // 2 - (end - start) // 6, (start + end) // 2 + (end - start) // 6 + 1
            for margin, (lo, hi) in enumerate((visible, (start, end))):
                for i in data.missing_between(lo, hi):
                    if margin:
                        self.detail_gate.wait(0.5)  # a step's detail asked for goes before the margin
                    if data.rows[i] is None:
                        data.rows[i] = row_from_brief(trace.quick_brief(i))
                ctx.post(RowsFilled(load, lo, hi))
                foreground.release()  # the margin is not waited for
        finally:
            foreground.release()
            self.fill_gate.release()

    def _compare_now(self, bundle: CaseBundle, trace: SourceTrace, failure_index: int | None) -> CompareDone:
        try:
            source = trace.step(failure_index) if failure_index is not None else None
            teacher, label = pick_teacher_step(bundle, failure_index)
            compare = build_compare(source, teacher, source_index=failure_index, teacher_label=label)
        except Exception as exc:  # noqa: BLE001 - shown in the Compare tab
            compare = CompareView("source step", "teacher step", [], [], note=f"could not compare: {type(exc).__name__}")
        return CompareDone(compare)

    # -- events back from the steps (UI thread) ------------------------------------------------
    def receive(self, event: CaseEvent) -> None:
        """An event a step posted, on the UI thread: applied unless it is stale."""
        if self.closed:
            return
        match event:
            case Loaded():
                self._on_loaded(event)
            case LoadFailed():
                self._on_load_failed(event)
            case TraceLoading():
                self._on_trace_loading(event)
            case TraceShown():
                self._on_trace_shown(event)
            case TraceFailed():
                self._on_trace_failed(event)
            case RowsFilled():
                self._on_rows_filled(event)
            case RowsComplete():
                if event.load == self._trace_load:
                    self._hold_gc()
            case CompareDone():
                self.compare = event.compare
                self._publish()
            case IntegrityDone():
                self._on_integrity(event)
            case ClaimsDone():
                self._on_claims(event)
            case SearchDone():
                self._on_search(event)
            case StepCrashed():
                self._on_crashed(event)

    def _on_loaded(self, event: Loaded) -> None:
        if event.load != self.load_count:
            return
        first = self.bundle is None
        previous_failure = self.view.failure_index if self.view else None
        self.bundle, self.view, self.load_error = event.bundle, event.view, None
        queued, self._deferred = self._deferred, None
        self._place_marks()
        self.probes.view_read()
        goto = None
        tab = None
        if first and self.view.no_site:
            tab = "localization"  # a no-recoverable-site case opens on why no site was found
            goto = self.view.closest_step if self.trace_rows is not None else None
        if self.trace_rows is not None:
            self.trace_rows.failure_index = self.view.failure_index
            if not first and previous_failure != self.view.failure_index and self.view.failure_index is not None:
                goto = self.view.failure_index
        self._settle_load()
        self._publish(first=first, goto=goto, tab=tab, run=queued, rows=(0, 0) if self.trace_rows is not None else None)
        if not first or self.trace is not None or self.trace_missing is not None:
            self._check_integrity()
        self._start_claims()

    def _on_load_failed(self, event: LoadFailed) -> None:
        if event.load == self.load_count:
            self._settle_load()
        self.load_error = event.message
        self._publish()

    def _on_trace_loading(self, event: TraceLoading) -> None:
        if event.load == self.load_count and self.trace_rows is None:
            self.trace_loading = event.text
            self._publish()

    def _on_trace_shown(self, event: TraceShown) -> None:
        if event.load not in (self.load_count, self._trace_load):
            return
        self._trace_load = event.load
        self.trace, self.trace_rows = event.trace, event.data
        self._hold_gc()
        goto = self.view.closest_step if self.view is not None and self.view.no_site else None
        self._publish(trace_shown=True, goto=goto)
        self._start_claims()
        if self.view is not None:
            self._check_integrity()  # the panels arrived first: the full check (hashes) can start now

    def _on_trace_failed(self, event: TraceFailed) -> None:
        if event.load != self.load_count and event.load != self._trace_load:
            return
        self.trace_missing = event.why
        self._publish()
        self._check_integrity()

    def _on_rows_filled(self, event: RowsFilled) -> None:
        if self.trace_rows is not None and event.load == self._trace_load:
            self._publish(rows=(event.start, event.end))

    def _hold_gc(self) -> None:
        """Keep full garbage collections off what the case holds now: the trace's index and
        rows stay for as long as the case is open, and a full collection walking them
        stalled keys during the fill and a driver's burst (see ui/gc_hold.py). Taken when
        the case is first loaded (the open allocates enough to start a full collection of
        everything the app holds, in the middle of the screen's first paint), when the
        trace is shown and again when every row is built."""
        self._gc_hold()
        self.gc_holds += 1

    def _settle_load(self) -> None:
        self.loading = False
        if self._reload_again:
            self._reload_again = False
            if self._reload_cancel is None:
                self._reload_cancel = self._host.later(self.reload_wait(0.0), self._reload_due)

    # -- live updates --------------------------------------------------------------------------
    def files_changed(self, paths: set[str]) -> None:
        """Files changed (the app's watcher, already debounced). A burst of changes in this
        case is coalesced: one reload RELOAD_DELAY after the first change of the burst (a
        restarted timer would wait for the driver to pause, which at full speed it does not),
        never sooner than RELOAD_GAP after the previous reload started, and never two loads at
        once - a change during a load reloads once more when it ends (and the gap allows)."""
        root = os.path.abspath(self.case_path)
        if self.closed or not any(p == root or p.startswith(root + os.sep) for p in paths):
            return
        if self._reload_cancel is None:
            self._reload_cancel = self._host.later(self.reload_wait(RELOAD_DELAY), self._reload_due)

    def reload_wait(self, least: float) -> float:
        """Seconds until the next reload may start: at least ``least``, and RELOAD_GAP after
        the start of the previous one; never 0 (see MIN_TIMER)."""
        return max(least, self._reload_started + RELOAD_GAP - self._clock(), MIN_TIMER)

    def _reload_due(self) -> None:
        self._reload_cancel = None
        if self.loading:
            self._reload_again = True
            return
        self.load()

    # -- claims --------------------------------------------------------------------------------
    def _start_claims(self) -> None:
        """Once both the case view and the trace are here: search the trace for what the
        localizer's explanation quotes and names (once per set of claims)."""
        if self.view is None or self.trace is None or not self.view.claims or self._claims_checked == self.view.claims:
            return
        self._claims_checked = list(self.view.claims)
        self.claim_results = None
        self._host.run("case-claims", partial(self._claims_step, self.trace, tuple(self.view.claims)))

    def _claims_step(self, trace: SourceTrace, claims: tuple[Claim, ...], ctx: StepContext) -> None:
        try:
            with pace.background():  # nobody waits on this line: keys go first
                results = check_claims(list(claims), TraceSearch(trace, self.corpus if trace.lazy else None), cancelled=ctx.cancelled)
        except Exception:  # noqa: BLE001 - the claims line then says nothing was checked
            results = []
        if results is not None:
            ctx.post(ClaimsDone(claims, tuple(results)))

    def _on_claims(self, event: ClaimsDone) -> None:
        if self.view is not None and list(event.claims) == self.view.claims:
            self.claim_results = list(event.results)
            self._publish()

    # -- integrity -----------------------------------------------------------------------------
    def _check_integrity(self) -> None:
        """One full integrity check at a time (it hashes every bound file, the trace too): a
        request during a check runs one more check when it ends, so a burst of driver writes
        does not pile up checks that compete with the UI."""
        if self.integrity_running or self.bundle is None or self._integrity_wait is not None:
            # running or just ran: once more INTEGRITY_GAP after it ends; no case yet: the
            # case's arrival starts it
            self._integrity_pending = True
            return
        self.integrity_running = True
        self._host.run("case-integrity", partial(self._integrity_step, self.bundle, self.view))

    def _integrity_step(self, bundle: CaseBundle, view: CaseView | None, ctx: StepContext) -> None:
        layout = Layout.of(bundle.layout)
        ref = self.ref if isinstance(self.ref, CaseRef) else CaseRef(path=self.case_path, layout=layout)
        try:
            # in the check's own process, below the app's priority: its parses and hashes
            # never hold this process's interpreter lock while a key or a capture is served
            outcome = case_check.CHECKS.run(ref, str(self.options.key_root), str(self.case_path), self.options.path_map,
                                            cancelled=ctx.cancelled)
            if outcome is None:  # cancelled: another case is shown
                return
            self.probes.checked_by(outcome.pid, outcome.nice)
            provenance = tuple(with_sha_status(view.provenance if view is not None else [], list(outcome.checked)))
        except Exception as exc:  # noqa: BLE001 - shown as the check's one problem in the Integrity tab and badge
            ctx.post(IntegrityDone((_check_failed_row(self.case_path, exc),)))
            return
        ctx.post(IntegrityDone(outcome.rows, outcome.in_case, provenance))

    def _on_integrity(self, event: IntegrityDone) -> None:
        self.integrity_running = False
        # the newest check that finished (a later one follows if files changed meanwhile)
        self.integrity = list(event.problems)
        self.integrity_in_case = list(event.in_case)
        self.provenance = list(event.provenance) if event.provenance is not None else None
        self._place_marks()
        self._publish()
        self._integrity_followup()

    def _on_crashed(self, event: StepCrashed) -> None:
        if event.group == "case-integrity":
            # shown, never "running..." forever: the failure is the check's result
            self._on_integrity(IntegrityDone((_check_failed_row(self.case_path, event.error),)))
        elif event.group == "case-load":
            self._on_load_failed(LoadFailed(self.load_count, f"{type(event.error).__name__}: {event.error}"))

    def _integrity_followup(self) -> None:
        """A check ended: one asked for meanwhile runs INTEGRITY_GAP later (coalesced)."""
        if self._integrity_pending and self._integrity_wait is None:
            self._integrity_wait = self._host.later(INTEGRITY_GAP, self._integrity_due)

    def _integrity_due(self) -> None:
        self._integrity_wait = None
        self._integrity_pending = False
        self._check_integrity()

    @property
    def integrity_waiting(self) -> bool:
        """A check asked for during the last one waits for INTEGRITY_GAP."""
        return self._integrity_wait is not None

    # -- problems ------------------------------------------------------------------------------
    def _place_marks(self) -> None:
        self.marks = place_problems(self.view, self.integrity_in_case) if self.view is not None and self.integrity is not None else []

    def problem_rows(self) -> list[ProblemRow]:
        """Every problem of the case once: the full check's, then any the case loader
        reported that the check did not (same code and path)."""
        rows = list(self.integrity or [])
        seen = {(code, path) for code, path, _m in rows}
        for code, path, message in self.view.problems if self.view is not None else []:
            if (code, path) not in seen:
                seen.add((code, path))
                rows.append((code, path, message))
        return rows

    def next_problem(self) -> tuple[int, int, ProblemRow, ProblemMark | None] | None:
        """The next problem (its number from 0, how many, its row and its mark), or None."""
        rows = self.problem_rows()
        if self.integrity is None or not rows:
            return None
        self._problem_cursor = (self._problem_cursor + 1) % len(rows)
        mark = self.marks[self._problem_cursor] if self._problem_cursor < len(self.marks) else None
        return self._problem_cursor, len(rows), rows[self._problem_cursor], mark

    def integrity_for_tokens(self) -> list[ProblemRow]:
        """The check's problems (code, absolute path, message), for the token screen to
        flag what it found about a capture's media binding."""
        base = Path(self.case_path)
        return [(code, os.path.normpath(str(base / rel)), message) for code, rel, message in self.integrity_in_case]

    # -- the parts -----------------------------------------------------------------------------
    def title_part(self) -> TitlePart:
        problems = len(self.problem_rows()) if self.integrity is not None else None
        store = self._store
        if store is None:
            return TitlePart(self.view, problems, self.load_error)
        labelled, total = store.queue_progress()
        progress = f"queue: {labelled} of {total} labelled" if total > 1 else ""
        return TitlePart(self.view, problems, self.load_error, tuple(_activity_notes(store.get(self.key))), progress)

    def _docs_part(self) -> DocsPart:
        # built again only when what it is made of was replaced: the fill's progress publishes
        # four times a second, and marking a long rounds timeline is not free
        inputs = (self.view, self.marks, self.claim_results, self.revealed)
        memo = self._docs_memo
        if memo is not None and all(a is b for a, b in zip(memo[0], inputs, strict=True)):
            return memo[1]
        part = self._build_docs()
        self._docs_memo = (inputs, part)
        return part

    def _build_docs(self) -> DocsPart:
        view = self.view
        if view is None:
            return DocsPart((), (), self.revealed)
        rounds = marked_rounds(view, self.marks) if self.marks else view.rounds
        localization = view.localization
        at = view.claims_at
        if view.claims and at is not None:
            # the localizer's quotes and named events, as the trace search found them
            localization = localization[:at] + claims_lines(self.claim_results, view.claims) + localization[at:]
        return DocsPart(tuple(localization), tuple(rounds), self.revealed)

    def status_part(self) -> StatusPart:
        data = self.trace_rows
        if data is None:
            return StatusPart(None, (self.trace_loading,) if self.trace_loading else ())
        view = self.view
        parts = []
        if data.failure_index is not None:
            parts.append(f"failure at {data.failure_index}")
        elif view is not None and view.no_site:
            parts.append("no recoverable site" + (f" (closest: {view.closest_step})" if view.closest_step is not None else ""))
        if self.search_status:
            parts.append(self.search_status)
        # where the source trace came from (artifacts.paths), before the details a narrow
        # terminal can lose
        source = next((p for p in (self.provenance or (view.provenance if view else [])) if p.key == "trace"), None)
        if source is not None:
            parts.append(safe_text(source.short(), single_line=True))
        parts.append(f"{len(data.policy_indices)} policy steps")
        if data.size_bytes:
            parts.append(f"{data.size_bytes / 1e6:.1f} MB")
        if data.gzip:
            parts.append("gzip (its first open decompresses it, slower)")
        if data.lazy:
            filled = data.filled()
            if filled < data.step_count:
                parts.append(f"reading steps {filled}/{data.step_count}\u2026")
        if data.problems:
            parts.append("problems: " + "; ".join(data.problems[:2]))
        return StatusPart(data.step_count, tuple(parts))

    def _integrity_part(self) -> IntegrityPart:
        inputs = (self.integrity, self.view, self.provenance, self._writing is not None and self._writing(self.key))
        memo = self._integrity_memo
        if memo is not None and all(a is b for a, b in zip(memo[0], inputs, strict=True)):
            return memo[1]
        part = IntegrityPart(tuple(self._integrity_lines(inputs[3])))
        self._integrity_memo = (inputs, part)
        return part

    def _integrity_lines(self, writing: bool) -> list[Line]:
        lines: list[Line] = []
        if self.integrity is None:
            lines.append(L(Seg("running the full integrity check\u2026", "dim")))
        rows = self.problem_rows()
        if self.integrity is not None and not rows:
            lines.append(L(Seg("\u2713 no problems found", "ok")))
        for code, path, message in rows:
            if writing and code in TRANSIENT_CODES:
                lines.append(L(S(code, "warn"), Seg("  "), S(path, "accent"), Seg("  being written (a problem only if it stays torn)", "warn")))
            else:
                lines.append(L(S(code, "bad"), Seg("  "), S(path, "accent")))
            lines.append(L(Seg("    "), S(message, "")))
        # where each input was found (rule, inside/outside the root, sha256), after the problems
        lines.append(L(Seg("")))
        lines.extend(provenance_lines(self.provenance or (self.view.provenance if self.view else [])))
        record = self.view.record if self.view is not None else None
        if record is not None:
            # what this case's records are keyed by and where new ones go (a case keyed by
            # its location says it does not follow a move)
            options = self.options
            lines.append(L(Seg("Records of this case (labels, supervised search, stream records)", "title")))
            lines.append(L(Seg("  "), S(record.describe(), "dim" if record.follows_moves else "warn", limit=400)))
            lines.append(L(Seg("  new records go to "), S(str(options.workdir), "accent", limit=400), S(f" ({options.workdir_source})", "dim")))
        return lines

    # -- what the operator asks for ------------------------------------------------------------
    def defer(self, action: Callable[[], object]) -> None:
        """Run ``action`` once the case's files are read (the last one asked for wins)."""
        self._deferred = action

    def toggle_reveal(self) -> bool:
        self.revealed = not self.revealed
        self._publish()
        return self.revealed

    def begin_detail(self) -> Callable[[], None]:
        """A step's detail is wanted: the background fill and the integrity check's hashing
        pause from the key press until the detail is painted (the returned release, called
        at the latest FOREGROUND_LIMIT later)."""
        self.fill_gate.hold()
        self.detail_gate.hold()
        foreground = pace.ForegroundHold()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.fill_gate.release()
                self.detail_gate.release()
                foreground.release()

        self._host.later(FOREGROUND_LIMIT, release)  # whatever becomes of the detail
        return release

    def detail_doc(self, trace: SourceTrace, index: int) -> list[Line]:
        """The detail of step ``index`` (blocking: a worker's)."""
        try:
            return step_detail_doc(trace.step_detail(index), failure_index=self.view.failure_index if self.view else None)
        except Exception as exc:  # noqa: BLE001 - shown in the step detail
            return [L(S(f"could not read step {index}: {type(exc).__name__}: {exc}", "bad"))]

    def begin_tokens(self) -> int:
        """``k``: from the key until the capture is painted, the case's background work (the
        trace's fill, the integrity check hashing the trace) waits: it would share the cores
        with it. The ticket tells the answer to this k from an older one."""
        if self._tokens_hold is not None:
            self._tokens_hold.release()
        hold = self._tokens_hold = pace.ForegroundHold()
        self._host.later(FOREGROUND_LIMIT, hold.release)  # whatever becomes of the capture
        self._tokens_ticket += 1
        return self._tokens_ticket

    def tokens_answered(self, ticket: int) -> tuple[bool, pace.ForegroundHold | None]:
        """The capture of ``ticket`` is read: whether it is the last k's, and its hold (the
        caller releases it once the capture is painted)."""
        if ticket != self._tokens_ticket:
            return False, None
        hold, self._tokens_hold = self._tokens_hold, None
        return True, hold

    # -- search in the trace -------------------------------------------------------------------
    def search_typed(self, query: str, cursor: Callable[[], int]) -> None:
        """The query changed: the first match at or after the cursor, once typing pauses."""
        self._search_typed = query
        if self._search_cancel is not None:
            self._search_cancel()
        self._search_cancel = self._host.later(SEARCH_PAUSE, lambda: self.search(query, 1, cursor(), include_start=True))

    def search(self, query: str, direction: int, start: int, *, include_start: bool = False) -> None:
        self._search_cancel = None
        self._search_typed = query
        trace = self.trace
        if trace is None:
            return
        if not query.strip():
            self.search_status = None
            self._publish(marks=frozenset())
            return
        if self._search is None or self._search.trace is not trace:
            self._search = TraceSearch(trace, self.corpus if trace.lazy else None)
            self.search_status = "searching the steps\u2026"
            self._publish()
        self._host.run("trace-search", partial(self._search_step, self._search, query, start, direction, include_start))

    def _search_step(self, search: TraceSearch, query: str, start: int, direction: int, include_start: bool, ctx: StepContext) -> None:
        # the operator waits for the answer: the trace's fill and the integrity check wait for it
        foreground = pace.ForegroundHold()
        try:
            hit = search.find(query, start, direction, include_start=include_start, cancelled=ctx.cancelled)
        except Exception as exc:  # noqa: BLE001 - shown in the status line, never crashes the screen
            ctx.post(SearchDone(SearchHit(None, 0, (), query), error=f"{type(exc).__name__}: {exc}"))
            return
        finally:
            foreground.release()
        if hit is not None:  # None: a newer search replaced this one
            ctx.post(SearchDone(hit))

    def _on_search(self, event: SearchDone) -> None:
        hit = event.hit
        if hit.query != self._search_typed:
            return  # a newer query is on its way
        shown = safe_text(hit.query, single_line=True, limit=40)
        goto = None
        if event.error:
            self.search_status = "search failed: " + safe_text(event.error, single_line=True, limit=120)
        elif hit.index is None:
            self.search_status = f"no step contains \u201c{shown}\u201d"
        else:
            self.search_status = f"match {hit.ordinal} of {hit.total} steps for \u201c{shown}\u201d"
            goto = hit.index
        self._publish(marks=frozenset(hit.matches), goto=goto)

    def search_closed(self) -> None:
        self.search_status = None
        self._search_typed = None
        self._publish(marks=frozenset())

    # -- the end -------------------------------------------------------------------------------
    def close(self) -> None:
        """The case is no longer shown: its timers stop, its holds are released, and what its
        steps still post is dropped."""
        self.closed = True
        for cancel in (self._reload_cancel, self._integrity_wait, self._search_cancel):
            if cancel is not None:
                cancel()
        self._reload_cancel = self._integrity_wait = self._search_cancel = None
        while self.gc_holds:
            self._gc_release()
            self.gc_holds -= 1
        if self._tokens_hold is not None:
            self._tokens_hold.release()
            self._tokens_hold = None
        self._unsubscribe_all()
        if self._unwatch_store is not None:
            self._unwatch_store()
            self._unwatch_store = None

