"""The case screen: source trace, localization, rounds timeline, side by side,
integrity. Files are read and parsed only in workers; handlers paint."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widget import AwaitMount
from textual.screen import Screen
from textual.widgets import Input, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from eviscene_tui.ui.actions import bindings
from eviscene_tui.options import AppOptions
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.case_view import (
    CaseView,
    CompareView,
    L,
    ProblemMark,
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
from eviscene_tui.state.rows import duration as cell_stale
from eviscene_tui.state.trace_rows import FillGate, StepRow, TraceRows, row_from_brief
from eviscene_tui import pace
from eviscene_tui.ui import gc_hold
from eviscene_tui.ui import messages as M
from eviscene_tui.ui.widgets.doc import doc_content
from eviscene_tui.ui.widgets.trace_view import TraceView
from eviscene_tui.ui.widgets.key_footer import KeyFooter
from eviscene_tui.ui.widgets.search_box import SearchBox
from eviscene_tui.artifacts.case import CaseBundle, load_case
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.report import checked_case
from eviscene_tui.artifacts.summary import CaseSummary
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.artifacts.trace import SourceTrace, load_trace
from eviscene_tui.journal.fold import Triage
from eviscene_tui.state.claims import Claim, ClaimResult, check_claims
from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.trace_search import SearchCorpus, SearchHit, TraceSearch
from eviscene_tui.state.transient import TRANSIENT_CODES
from eviscene_tui.ui.screens.confirm import ConfirmScreen
from eviscene_tui.ui.screens.goto import GotoStepScreen
from eviscene_tui.ui.screens.label import TriageLabelScreen, TriagePick
from eviscene_tui.ui.screens.step_detail import StepDetailScreen
from eviscene_tui.ui.screens.stream import StreamScreen
from eviscene_tui.ui.screens.tokens import TokenScreen, prepare_capture
from eviscene_tui.artifacts.paths import InputProvenance, with_sha_status
from eviscene_tui.gate.protocol import SESSION_FILE, sidecar_for
from eviscene_tui.state.gate import GateSession
from eviscene_tui.state.repair import plan_repair, start_repair
from eviscene_tui.ui.widgets.gate_panel import GatePanel

WINDOW = 150  # rows built around the failure step before the first paint
WINDOW_LAZY = 16  # the same for an indexed trace, whose rows each parse a step: a screenful
TABS = ("trace", "localization", "rounds", "compare", "integrity")
RELOAD_DELAY = 0.15  # seconds from a change in the open case to its reload
#: seconds from the start of one reload to the start of the next while a driver keeps writing
#: the case: each reload repaints the header and panels on the UI thread and starts the work
#: that follows (comparison, integrity), so back to back during a full-speed burst (5 a second)
#: they kept the keys waiting; two a second still shows every change within a second
RELOAD_GAP = 0.5
#: seconds between the end of a full integrity check and the next one, while the files keep
#: changing (each check hashes every bound input, the source trace included: back to back
#: during a driver's burst they would keep a core busy and make the keys wait)
INTEGRITY_GAP = 2.0
#: the shortest timer the screen sets (see _reload_wait)
MIN_TIMER = 0.001
#: the longest the case's background work waits for a capture (k) or a step's detail to be painted
FOREGROUND_LIMIT = 2.0


def _check_failed_row(case_path: Path, exc: BaseException) -> tuple[str, str, str]:
    """The Integrity row of a full check that raised instead of answering."""
    text = safe_text(f"integrity check failed: {type(exc).__name__}: {exc}", single_line=True, limit=500)
    return ("error", safe_text(str(case_path), single_line=True), text)


class IntegrityReady(M.Message):
    """The full integrity result of the case: (code, path under the opened folder, message)
    for the Integrity tab and (code, path in the case, message) to place the marks;
    ``provenance``: the inputs with their sha256 verified (``artifacts.paths``)."""

    def __init__(self, request: int, problems: list[tuple[str, str, str]], in_case: list[tuple[str, str, str]] | None = None,
                 provenance: list[InputProvenance] | None = None) -> None:
        super().__init__()
        self.request = request
        self.problems = problems
        self.in_case = in_case or []
        self.provenance = provenance


class ClaimsChecked(M.Message):
    def __init__(self, claims: list[Claim], results: list[ClaimResult]) -> None:
        super().__init__()
        self.claims = claims
        self.results = results


class CompareReady(M.Message):
    def __init__(self, request: int, compare: CompareView) -> None:
        super().__init__()
        self.request = request
        self.compare = compare


class CaseTabs(TabbedContent):
    """The case screen's tabs. Which pane is shown is decided by the screen alone
    (:attr:`shown`, set by ``CaseScreen.action_tab`` and by a click on a tab): a
    focus that lands in another pane does not switch to it, as TabbedContent would.
    Focus requests are delivered later than they are made (``Widget.focus`` defers),
    so the trace view's focus asked for at mount could arrive after a no-site case
    chose its localization tab and switch the tab back. The refused ``TabPane.Focused``
    bubbles on to the screen, which moves focus into the shown pane."""

    shown = "trace"

    def on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        if event.tab_pane.id != self.shown:
            event.prevent_default()  # skip TabbedContent's handler (it activates that pane)


class CaseScreen(Screen):
    BINDINGS = bindings("case")

    def action_open_gate(self) -> None:
        if not (sidecar_for(self.case_path) / SESSION_FILE).is_file():
            self.notify("this search was not run under the operator gate (eviscene-tui gate)", severity="warning", markup=False)
            return
        self.app.open_gate(self.case_path)  # type: ignore[attr-defined]  # the EvisceneApp's

    def __init__(self, ref: CaseRef | CaseSummary | Path, options: AppOptions, *, key: str | None = None) -> None:
        """``ref``: the case's runs row handle (its ``CaseRef``, or the summary it was built
        from), or the case folder itself."""
        super().__init__()
        self.options = options
        self.revealed = False
        self._unsubscribe: Callable[[], None] | None = None
        self._gc_holds = 0  # holds this screen took on the garbage collector (see _hold_gc)
        self._request = 0
        self._tokens_request = 0  # the last k's capture being prepared (see _open_tokens)
        self._tokens_hold: pace.ForegroundHold | None = None  # background work waits until that capture is painted
        self._init_case(ref, key)

    def _init_case(self, ref: CaseRef | CaseSummary | Path, key: str | None) -> None:
        """What the screen holds of the case it shows (a new case of the queue starts here)."""
        self.ref = ref
        self.case_path = ref if isinstance(ref, Path) else ref.path
        self.key = key or self.case_path.name
        self._case_request = self._request + 1  # messages of an earlier case's work are older than this
        self.bundle: CaseBundle | None = None
        self.view: CaseView | None = None
        self.trace: SourceTrace | None = None
        self.trace_rows: TraceRows | None = None
        self.integrity: list[tuple[str, str, str]] | None = None
        self.provenance: list[InputProvenance] | None = None  # inputs with their sha256 verified (integrity worker)
        self.compare: CompareView | None = None
        self._integrity_in_case: list[tuple[str, str, str]] = []
        self.marks: list[ProblemMark] = []  # one per problem in check order
        self._problem_cursor = -1
        self._trace_request = -1  # the load that published the trace rows shown
        self._trace_failed = False
        self._reload_timer: Timer | None = None
        self._loading = False  # a load of the case is running
        self._integrity_running = False  # a full integrity check is running
        self._integrity_pending = False  # and another was asked for meanwhile
        self._integrity_timer: Timer | None = None  # the next check waits for INTEGRITY_GAP
        self._fill_gate = FillGate()  # held while the UI waits for on-demand rows or a detail
        self._detail_gate = FillGate()  # held while the UI waits for a detail (rows off screen wait)
        self._reload_again = False  # files changed during that load
        self.updated_at: float | None = None  # perf_counter of the last case view painted (benchmarks)
        self._repaint_scheduled = False
        self._docs_painted: tuple[Any, ...] | None = None  # (localization, rounds, revealed) last painted
        self._integrity_painted: tuple[Any, ...] | None = None  # what the Integrity tab last showed
        self._compare_painted: tuple[Any, ...] | None = None  # (comparison, revealed) last painted
        self._reload_started = -RELOAD_GAP  # monotonic time the last load started
        self._quotes_painted: list[Any] | None = None
        self._panels_mounted = getattr(self, "_panels_mounted", False)  # the tab bodies stay mounted for the next case
        self.opened_at = time.perf_counter()
        self._trace_search: TraceSearch | None = None  # built on the first "/"
        self._corpus = SearchCorpus()  # an indexed trace's searchable text, built by the background fill
        self._search_timer: Timer | None = None
        self._search_status: str | None = None
        self.failure_shown_at: float | None = None
        self._when_loaded: Callable[[], object] | None = None  # an action asked for before the case's files were read
        self._claims_checked: list[Claim] | None = None  # the claims a check was started for
        self._claim_results: list[ClaimResult] | None = None  # their steps in the trace (None: not searched yet)

    # -- compose -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(Content(f"loading {safe_text(self.key, single_line=True, limit=80)}\u2026"), id="case-title", classes="title-bar")
        yield Static(id="privilege-bar", classes="privilege-bar")
        with CaseTabs(initial="trace", id="case-tabs"):
            with TabPane("1 Trace", id="trace"):
                yield TraceView(id="trace-view")
                # shown instead of the steps when the source trace cannot be read
                yield Static(id="trace-missing", classes="-hidden")
                yield SearchBox(placeholder="search the steps (Enter / down: next, up: previous, Esc: close)", id="trace-search", classes="-hidden")
                yield Static(Content("reading the source trace\u2026"), id="trace-status", classes="status-bar")
            # the other tabs' bodies are mounted after the failure step is on screen
            # (or when a tab is opened first): see _mount_panels
            for pane_id, title in (("localization", "2 Localization"), ("rounds", "3 Rounds"), ("compare", "4 Compare"), ("integrity", "5 Integrity")):
                with TabPane(title, id=pane_id):
                    yield Static(Content("loading\u2026"), classes="panel-placeholder")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.revealed = bool(getattr(self.app, "reveal_privileged", False))
        store = getattr(self.app, "store", None)
        if store is not None:
            self._unsubscribe = store.subscribe(self._store_changed)
        self._paint_privilege_bar()
        self.query_one(TraceView).focus()
        self.load()
        self.set_timer(3.0, self._mount_panels)  # whatever happens with the trace
        self._mount_gate_card()
        self.app.post_message(M.CaseShown(str(self.case_path), True))

    def _mount_gate_card(self) -> None:
        """A search run under ``eviscene-tui gate``: its pending gate as a card above the
        tabs (Tab to it; its decision keys work only while it has focus)."""

        if not (sidecar_for(self.case_path) / SESSION_FILE).is_file():
            return

        self.mount(GatePanel(GateSession(self.case_path, operator=self.options.operator), compact=True, id="case-gate"),
                   before=self.query_one("#case-tabs"))

    def on_unmount(self) -> None:
        self.app.post_message(M.CaseShown(str(self.case_path), False))
        if self._unsubscribe is not None:
            self._unsubscribe()
        while self._gc_holds:
            gc_hold.release()
            self._gc_holds -= 1
        if self._tokens_hold is not None:
            self._tokens_hold.release()

    # -- loading -----------------------------------------------------------------------------
    def load(self) -> None:
        self._request += 1
        self._reload_started = time.monotonic()
        self._loading = True
        self._load_case(self._request, self.trace)

    @work(thread=True, exclusive=True, group="case-load", exit_on_error=False)
    def _load_case(self, request: int, known_trace: SourceTrace | None) -> None:
        """Open the case; on first open read the source trace *first* (the failure step
        is what the operator waits for; a big trace is only indexed), then build the
        panels and the side-by-side comparison, then fill the rest of the trace rows."""

        take = getattr(self.app, "take_prefetched", None)
        early = take(self.case_path) if take is not None and known_trace is None and request == self._case_request else None
        if early is not None:
            # the next case of the queue, read while the operator looked at the one before:
            # its panels at once, then its trace rows
            self.post_message(M.CaseLoaded(request, early.bundle, early.view))
            fill = self._trace_window(request, early.bundle)
            if fill is not None:
                self._compare_now(request, early.bundle, fill[0], early.view.failure_index)
                self._background_fill(request, early.bundle, *fill)
            return
        try:
            bundle = load_case(self.case_path, path_map=self.options.path_map)
        except Exception as exc:  # noqa: BLE001 - shown, never crashes the app
            self.post_message(M.CaseLoadFailed(request, f"{type(exc).__name__}: {exc}"))
            return
        fill = None
        if known_trace is None:
            fill = self._trace_window(request, bundle)
        else:
            bundle.adopt_trace(known_trace)
        try:
            view = build_case_view(bundle, key=self.key, base=self.options.key_root)
        except Exception as exc:  # noqa: BLE001 - shown as the case's load error
            self.post_message(M.CaseLoadFailed(request, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(M.CaseLoaded(request, bundle, view))
        if fill is not None:
            trace, data, pending = fill
            # the comparison needs only the failure step: before the rest of the rows
            self._compare_now(request, bundle, trace, view.failure_index)
            self._background_fill(request, bundle, trace, data, pending)
        elif known_trace is not None:
            self._compare_now(request, bundle, known_trace, view.failure_index)

    @work(thread=True, exclusive=True, group="trace-fill", exit_on_error=False)
    def _background_fill(self, request: int, bundle: CaseBundle, trace: SourceTrace, data: TraceRows, pending: list[int]) -> None:
        """The rest of the rows (a reload of the case after a live update does not stop
        this: the rows belong to the trace, which a reload keeps)."""
        worker = get_current_worker()
        with pace.background():  # nobody waits for these rows: a key goes first
            filled = self._fill_rows(request, trace, data, pending, worker)
        if not filled:
            return
        broken = trace.broken if trace.lazy else None
        if broken is not None:
            self._reload_trace_whole(request, bundle, broken)
        else:
            self.post_message(M.TraceRowsComplete(request))

    def _fill_rows(self, request: int, trace: SourceTrace, data: TraceRows, pending: list[int], worker: Worker[None]) -> bool:
        """Build the rows not built yet, posting progress about four times a second (an
        indexed trace parses each step here, once); False when cancelled."""
        rows = data.rows
        posted = time.perf_counter()
        lo = hi = None
        corpus = self._corpus if trace.lazy else None
        for n, i in enumerate(pending):
            if n % 16 == 0 and worker.is_cancelled:
                return False
            # what the operator waits for (rows on screen, a step's detail, a key) goes first
            self._fill_gate.wait(0.25)
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
            if now - posted >= 0.25:
                data.refresh_policy_indices()
                self.post_message(M.TraceRowsFilled(request, lo, hi + 1))
                posted, lo, hi = now, None, None
        data.refresh_policy_indices()
        self.post_message(M.TraceRowsFilled(request, lo if lo is not None else 0, (hi + 1) if hi is not None else 0))
        return True

    def _reload_trace_whole(self, request: int, bundle: CaseBundle, broken: Problem) -> None:
        """An indexed trace whose range did not parse as one object: read it the whole-file
        way (which reports problems precisely) and show that instead."""

        trace, problems = load_trace(broken.path, lazy=False)
        if trace is None:
            why = "; ".join(safe_text(p.message, single_line=True, limit=200) for p in problems) or "unreadable"
            self.post_message(M.TraceFailed(request, why))
            return
        bundle.adopt_trace(trace, problems)
        self._publish_trace(request, trace, problems, self.view.failure_index if self.view else None, window=None)

    @work(thread=True, exclusive=True, group="trace-demand", exit_on_error=False)
    def _rows_on_demand(self, request: int, start: int, end: int) -> None:
        """Rows on screen that the background fill has not reached yet."""
        data, trace = self.trace_rows, self.trace
        if data is None or trace is None:
            return
        self._fill_gate.hold()
        try:
            # the rows on screen first (posted at once), then the margin around them
            visible = (start + end) // 2 - (end - start) // 6, (start + end) // 2 + (end - start) // 6 + 1
            for margin, (lo, hi) in enumerate((visible, (start, end))):
                for i in data.missing_between(lo, hi):
                    if margin:
                        self._detail_gate.wait(0.5)  # a step's detail asked for goes before the margin
                    if data.rows[i] is None:
                        data.rows[i] = row_from_brief(trace.quick_brief(i))
                self.post_message(M.TraceRowsFilled(request, lo, hi))
        finally:
            self._fill_gate.release()

    def _trace_window(self, request: int, bundle: CaseBundle) -> tuple[SourceTrace, TraceRows, list[int]] | None:
        """Load the trace (a big one is only indexed), build the rows around the failure
        step, post TraceReady; the rows still to build, nearest first."""

        try:
            path = bundle.source_trace_path
            if path is not None and str(path).endswith(".gz"):
                self.post_message(M.TraceLoading(request, "decompressing and indexing the gzip source trace (its first open is slower)\u2026"))
            trace, problems = bundle.trace(spool_dir=self.options.workdir / "spool")
            failure_index = failure_index_for(bundle)
        except Exception as exc:  # noqa: BLE001 - shown as the trace's load error
            self.post_message(M.TraceFailed(request, f"{type(exc).__name__}: {exc}"))
            return None
        if trace is None:
            why = "; ".join(safe_text(p.message, single_line=True, limit=1000) for p in problems) or "no source trace is referenced by this case"
            self.post_message(M.TraceFailed(request, why))
            return None
        return self._publish_trace(request, trace, problems, failure_index, window=WINDOW_LAZY if trace.lazy else WINDOW)

    def _publish_trace(
        self, request: int, trace: SourceTrace, problems: list[Problem], failure_index: int | None, *, window: int | None
    ) -> tuple[SourceTrace, TraceRows, list[int]]:
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
        self.post_message(M.TraceReady(request, data, trace))
        time.sleep(0.03)  # let the UI thread take the GIL and paint the failure step first
        pending = list(range(hi, count)) + list(range(lo - 1, -1, -1))
        if trace.lazy:
            pending = list(range(lo, hi)) + pending  # the window too: its rows came from a cut parse
        return trace, data, pending

    @on(M.CaseLoadFailed)
    def _on_load_failed(self, message: M.CaseLoadFailed) -> None:
        if message.request == self._request:
            self._load_settled()
        self.query_one("#case-title", Static).update(Content("could not open the case: " + safe_text(message.message, single_line=True, limit=300)), layout=False)

    @on(M.CaseLoaded)
    def _on_loaded(self, message: M.CaseLoaded) -> None:
        if message.request != self._request:
            return
        first = self.bundle is None
        previous_failure = self.view.failure_index if self.view else None
        self.bundle = message.bundle
        self.view = message.view
        if self._when_loaded is not None:
            # a key pressed while the files were read (g, e, t): run it now
            queued, self._when_loaded = self._when_loaded, None
            self.call_after_refresh(queued)
        self._place_marks()
        self._paint_case()
        self.updated_at = time.perf_counter()
        self._load_settled()
        if first:
            self._prefetch_next()
        if first and self.view.no_site:
            # a no-recoverable-site case opens on its explanation (why no site was found)
            self.call_after_refresh(self.action_tab, "localization")
            if self.view.closest_step is not None and self.trace_rows is not None:
                self.query_one(TraceView).goto(self.view.closest_step)
        if self.trace_rows is not None:
            self.trace_rows.failure_index = self.view.failure_index
            tv = self.query_one(TraceView)
            tv.rows_updated(0, 0)
            if not first and previous_failure != self.view.failure_index and self.view.failure_index is not None:
                tv.goto(self.view.failure_index)
            self._paint_trace_status()
        if not first or self.trace is not None or self._trace_failed:
            self._check_integrity(message.request)
        self._start_claims_check()

    def _compare_now(self, request: int, bundle: CaseBundle, trace: SourceTrace, failure_index: int | None) -> None:
        try:
            source = trace.step(failure_index) if failure_index is not None else None
            teacher, label = pick_teacher_step(bundle, failure_index)
            compare = build_compare(source, teacher, source_index=failure_index, teacher_label=label)
        except Exception as exc:  # noqa: BLE001 - shown in the Compare tab
            compare = CompareView("source step", "teacher step", [], [], note=f"could not compare: {type(exc).__name__}")
        self.post_message(CompareReady(request, compare))

    @on(M.TraceReady)
    def _on_trace_ready(self, message: M.TraceReady) -> None:
        if message.request not in (self._request, self._trace_request):
            return
        self._trace_request = message.request
        self.trace = message.trace
        self.trace_rows = message.data
        tv = self.query_one(TraceView)
        tv.set_trace(message.data)
        self.failure_shown_at = time.perf_counter() - self.opened_at
        self._hold_gc()
        self._paint_trace_status()
        self.call_after_refresh(self._mount_panels)
        self._start_claims_check()
        if self.view is not None:
            # the panels arrived first: the full integrity check (hashes) can start now
            self._check_integrity(self._request)
            if self.view.no_site and self.view.closest_step is not None:
                tv.goto(self.view.closest_step)

    def _start_claims_check(self) -> None:
        """Once both the case view and the trace are here: search the trace for what the
        localizer's explanation quotes and names (once per set of claims)."""
        if self.view is None or self.trace is None or not self.view.claims:
            return
        if self._claims_checked == self.view.claims:
            return
        self._claims_checked = list(self.view.claims)
        self._claim_results = None
        self._check_claims(self.trace, list(self.view.claims))

    @work(thread=True, exclusive=True, group="case-claims", exit_on_error=False)
    def _check_claims(self, trace: SourceTrace, claims: list[Claim]) -> None:
        worker = get_current_worker()
        try:
            with pace.background():  # nobody waits on this line: keys go first
                results = check_claims(claims, TraceSearch(trace, self._corpus if trace.lazy else None), cancelled=lambda: worker.is_cancelled)
        except Exception:  # noqa: BLE001 - the claims line then says nothing was checked
            results = []
        if results is not None:
            self.post_message(ClaimsChecked(claims, results))

    @on(ClaimsChecked)
    def _on_claims(self, message: ClaimsChecked) -> None:
        if self.view is not None and message.claims == self.view.claims:
            self._claim_results = message.results
            self._paint_docs()

    @on(M.TraceLoading)
    def _on_trace_loading(self, message: M.TraceLoading) -> None:
        if message.request == self._request and self.trace_rows is None:
            self.query_one("#trace-status", Static).update(Content(safe_text(message.text, single_line=True, limit=200)), layout=False)

    @on(M.TraceRowsFilled)
    def _on_rows_filled(self, message: M.TraceRowsFilled) -> None:
        if self.trace_rows is not None and message.request == self._trace_request:
            self.query_one(TraceView).rows_updated(message.start, message.end)
            if self.trace_rows.lazy:
                self._paint_trace_status()

    @on(M.TraceRowsComplete)
    def _on_rows_complete(self, message: M.TraceRowsComplete) -> None:
        if message.request == self._trace_request:
            self._hold_gc()

    def _hold_gc(self) -> None:
        """Keep full garbage collections off what the case holds now: the trace's index and
        rows stay for as long as the case is open, and a full collection walking them
        stalled keys during the fill and a driver's burst (see ui/gc_hold.py).
        Taken when the trace is shown and again when every row is built."""
        gc_hold.hold()
        self._gc_holds += 1

    @on(TraceView.RowsWanted)
    def _on_rows_wanted(self, message: TraceView.RowsWanted) -> None:
        message.stop()
        if self.trace_rows is not None and self.trace_rows.missing_between(message.start, message.end):
            self._rows_on_demand(self._trace_request, message.start, message.end)

    @on(M.TraceFailed)
    def _on_trace_failed(self, message: M.TraceFailed) -> None:
        if message.request != self._request:
            return
        self._trace_failed = True
        self._mount_panels()
        self._show_trace_missing(message.message)
        self.query_one("#trace-status", Static).update(Content("source trace unavailable (why: above; every missing input: 5 Integrity)"), layout=False)
        self._check_integrity(self._request)
        if self._lazy_ready():
            self._compare_painted = None
            self.query_one("#compare-left", Static).update(Content("source trace unavailable"))

    def _show_trace_missing(self, why: str) -> None:
        """The Trace tab's body says what is missing and where it was looked for (wrapped),
        instead of an empty step list."""
        body = self.query_one("#trace-missing", Static)
        body.update(Content.assemble(
            ("The source trace of this case is not available.", "bold $error"),
            "\n\n",
            safe_text(why, limit=2000),
            "\n\n",
            ("The driver keeps its inputs (source trace, candidate, gold, images) outside the run "
             "directory and records their absolute paths; --path-map OLD=NEW (or [paths] map in the "
             "config file) says where a copied tree's inputs are now. The other tabs show what the "
             "run directory holds; 5 Integrity lists every missing input.", "dim"),
        ))
        body.remove_class("-hidden")
        self.query_one(TraceView).display = False

    @on(CompareReady)
    def _on_compare(self, message: CompareReady) -> None:
        if message.request < self._case_request:
            return  # the case shown before this one (the queue moved on)
        self.compare = message.compare
        self._paint_compare()

    def _check_integrity(self, request: int) -> None:
        """One full integrity check at a time (it hashes every bound file, the trace too):
        a request during a check runs one more check when it ends, so a burst of driver
        writes does not pile up checks that compete with the UI."""
        if self._integrity_running or self.bundle is None or self._integrity_timer is not None:
            # running or just ran: once more INTEGRITY_GAP after it ends; no case yet: the
            # case's arrival starts it
            self._integrity_pending = True
            return
        self._integrity_running = True
        self._integrity(request)

    @work(thread=True, exclusive=True, group="case-integrity", exit_on_error=False)
    def _integrity(self, request: int) -> None:
        bundle = self.bundle
        if bundle is None:  # started only once the case is loaded
            return
        layout = Layout(bundle.layout) if bundle.layout in Layout._value2member_map_ else Layout.UNKNOWN
        ref = self.ref if isinstance(self.ref, CaseRef) else CaseRef(path=self.case_path, layout=layout)
        try:
            checked: list[InputProvenance] = []
            with pace.background():  # re-run while a driver writes the case: keys go first
                _summary, problems = checked_case(ref, self.options.key_root, path_map=self.options.path_map, provenance=checked)
        except Exception as exc:  # noqa: BLE001 - shown as the check's one problem in the Integrity tab and badge
            self.post_message(IntegrityReady(request, [_check_failed_row(self.case_path, exc)]))
            return
        rows, in_case = [], []
        for p in problems:
            code, message = str(p.code), safe_text(p.message, single_line=True, limit=500)
            rows.append((code, safe_text(_relpath(p.path, self.options.key_root), single_line=True), message))
            in_case.append((code, safe_text(_relpath(p.path, self.case_path), single_line=True), message))

        shown = self.view.provenance if self.view is not None else []
        self.post_message(IntegrityReady(request, rows, in_case, with_sha_status(shown, checked)))

    @on(Worker.StateChanged)
    def _integrity_worker_ended(self, event: Worker.StateChanged) -> None:
        """A check that failed unexpectedly (no IntegrityReady) must not block the next."""
        if event.worker.group == "case-integrity" and event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self._integrity_running = False
            if event.state == WorkerState.ERROR and not self._integrity_pending:
                # shown, never "running..." forever: the failure is the check's result
                error = event.worker.error if isinstance(event.worker.error, BaseException) else RuntimeError("no result")
                self.post_message(IntegrityReady(self._request, [_check_failed_row(self.case_path, error)]))
                return
            self._integrity_followup()

    def _integrity_followup(self) -> None:
        """A check ended: one asked for meanwhile runs INTEGRITY_GAP later (coalesced)."""
        if self._integrity_pending and self._integrity_timer is None:
            self._integrity_timer = self.set_timer(INTEGRITY_GAP, self._integrity_due)

    def _integrity_due(self) -> None:
        self._integrity_timer = None
        self._integrity_pending = False
        self._check_integrity(self._request)

    @on(IntegrityReady)
    def _on_integrity(self, message: IntegrityReady) -> None:
        if message.request < self._case_request:
            return  # the case shown before this one (the queue moved on)
        self._integrity_running = False
        # the newest check that finished (a later one follows if files changed meanwhile)
        self.integrity = message.problems
        self._integrity_in_case = message.in_case
        self._place_marks()
        self._paint_problem_badges()
        self._paint_docs()
        self.provenance = message.provenance
        self._paint_trace_status()
        self._paint_integrity()
        self._integrity_followup()

    # -- problems where they are shown --------------------------------------------------------
    def _place_marks(self) -> None:
        if self.view is None or self.integrity is None:
            self.marks = []
            return
        self.marks = place_problems(self.view, self._integrity_in_case)

    def problem_rows(self) -> list[tuple[str, str, str]]:
        """Every problem of the case once: the full check's, then any the case loader
        reported that the check did not (same code and path)."""
        rows = list(self.integrity or [])
        seen = {(code, path) for code, path, _m in rows}
        for code, path, message in self.view.problems if self.view is not None else []:
            if (code, path) not in seen:
                seen.add((code, path))
                rows.append((code, path, message))
        return rows

    def _paint_problem_badges(self) -> None:
        """The problem count in the header and on the Integrity tab's label."""
        count = len(self.problem_rows()) if self.integrity is not None else None
        tabs = self.query_one(TabbedContent)
        tab = tabs.get_tab("integrity")
        if count is None:
            tab.label = Content("5 Integrity \u2026")
        elif count:
            tab.label = Content.assemble("5 Integrity ", (f"\u26a0 {count}", "bold $error"))
        else:
            tab.label = Content.assemble("5 Integrity ", ("\u2713", "$success"))
        self._paint_title()

    def on_resize(self) -> None:
        self._paint_title()

    def _title_parts(self) -> list[tuple[int, str, str]]:
        """The header's parts in display order as (rank, text, style): the lower the rank
        the more it matters; parts of the highest rank are dropped first when the header
        does not fit (the problem badge, rank 0, always stays)."""
        view = self.view
        assert view is not None
        parts: list[tuple[int, str, str]] = []
        sep = " \u00b7 "
        if self.integrity is None:
            parts.append((0, "checking integrity\u2026", "dim"))
        else:
            count = len(self.problem_rows())
            if count:
                parts.append((0, f" \u26a0 {count} problem{'s' if count != 1 else ''} ", "bold reverse $error"))
                parts.append((5, " (! next, 5 lists)", "dim"))
            else:
                parts.append((0, "\u2713 no integrity problems", "$success"))
        parts.append((1, sep + view.status, ""))
        if view.failure_index is not None:
            parts.append((2, f"{sep}failure step {view.failure_index}", ""))
        elif view.no_site:
            parts.append((2, f"{sep}no recoverable site", ""))
        for _rank, text, hint in self._activity_notes():
            parts.append((1, sep + text, "bold $accent"))
            if hint:
                parts.append((6, f" ({hint})", "$accent"))
        parts.append((3, sep + view.title, ""))
        progress = self._queue_progress()
        if progress:
            parts.append((3, sep + progress, "dim"))
        parts.append((4, sep + view.layout, "dim"))
        return parts

    def _queue_progress(self) -> str:
        """``queue: 13 of 32 labelled`` (the runs table's current queue), or ""."""
        store = getattr(self.app, "store", None)
        if store is None:
            return ""
        labelled, total = store.queue_progress()
        return f"queue: {labelled} of {total} labelled" if total > 1 else ""

    def _paint_title(self) -> None:
        """The case header: the problem badge first, then the case's status, the app's
        supervised search / gate / staleness, the failure step, the title and layout;
        fitted to the width by dropping the least important parts first."""
        if self.view is None:
            return
        parts = self._title_parts()
        width = self.size.width or 10_000
        while sum(cell_len(t) for _r, t, _s in parts) > width:
            worst = max(r for r, _t, _s in parts)
            if worst == 0:
                break
            # drop the last part of the worst rank (a title goes before the status)
            index = max(i for i, (r, _t, _s) in enumerate(parts) if r == worst)
            del parts[index]
        # the store notifies from its own batch handler, which can run while this screen is
        # being removed (its children already gone): then there is no header to paint
        for title in self.query("#case-title").results(Static):
            # a one-row bar (app.tcss): no layout pass for a new status
            title.update(Content.assemble(*((t, s) if s else t for _r, t, s in parts)), layout=False)

    def _activity_notes(self) -> list[tuple[int, str, str]]:
        """What the runs table knows about the case beyond its files: the app's supervised
        search of it, a gated driver, a search gone quiet (already sanitised in the row),
        as (rank, note, key hint)."""
        store = getattr(self.app, "store", None)
        row = store.get(self.key) if store is not None else None
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
            notes.append((1, "stale: no writes for " + cell_stale(row.stale_for), ""))
        return notes

    def _store_changed(self, reason: str) -> None:
        if reason == "rows" and self.view is not None:
            self._paint_title()

    def action_next_problem(self) -> None:
        """Go to where the next problem is shown (its mark in the Rounds tab, else its line
        in the Integrity tab) and show its message."""
        if self.integrity is None:
            self.notify("The integrity check is still running", markup=False)
            return
        rows = self.problem_rows()
        if not rows:
            self.notify("No integrity problems in this case", markup=False)
            return
        self._problem_cursor = (self._problem_cursor + 1) % len(rows)
        code, path, message = rows[self._problem_cursor]
        mark = self.marks[self._problem_cursor] if self._problem_cursor < len(self.marks) else None
        if mark is not None and mark.line is not None:
            self.action_tab("rounds")
            if self._lazy_ready():
                self.query_one("#rounds-scroll", VerticalScroll).scroll_to(y=max(0, mark.line - 2), animate=False)
        else:
            self.action_tab("integrity")
            if self._lazy_ready():
                self.query_one("#integrity-scroll", VerticalScroll).scroll_to(y=max(0, 2 * self._problem_cursor - 1), animate=False)
        self.notify(f"{message}", title=f"problem {self._problem_cursor + 1} of {len(rows)}: {code} \u00b7 {path}", timeout=8, markup=False)

    # -- painting ----------------------------------------------------------------------------
    def _mount_panels(self) -> None:
        if self._panels_mounted:
            return
        if not all(pane.is_attached for pane in self.query(TabPane)):
            # the tab panes are not in the DOM yet (a fast case under load): try after the next refresh
            self.call_after_refresh(self._mount_panels)
            return
        self._panels_mounted = True
        bodies = {
            "localization": VerticalScroll(
                Static(Content("loading\u2026"), id="loc-doc"),
                Static(Content.from_markup("[b]observed_basis quotes[/b] [dim](Enter jumps to the step)[/]"), classes="section-title"),
                OptionList(id="quotes", classes="quote-list", markup=False),
                classes="panel-scroll",
                id="localization-scroll",
            ),
            "rounds": VerticalScroll(Static(Content("loading\u2026"), id="rounds-doc"), classes="panel-scroll", id="rounds-scroll"),
            "compare": VerticalScroll(
                Static(Content("source failure step vs the teacher's repaired step; \u2260 marks fields that differ"), id="compare-note"),
                Horizontal(
                    Static(Content("waiting for the trace\u2026"), id="compare-left", classes="compare-pane"),
                    Static(Content(""), id="compare-right", classes="compare-pane"),
                ),
                classes="panel-scroll",
                id="compare-scroll",
            ),
            "integrity": VerticalScroll(Static(Content("checking\u2026"), id="integrity-doc"), classes="panel-scroll", id="integrity-scroll"),
        }
        mounts = []
        for pane_id, body in bodies.items():
            pane = self.query_one(f"#{pane_id}", TabPane)
            pane.query(".panel-placeholder").remove()
            mounts.append(pane.mount(body))
        self.call_later(self._panels_ready, mounts)

    async def _panels_ready(self, mounts: list[AwaitMount]) -> None:
        """After the tab bodies are in the DOM: paint them, and focus the shown tab's body
        when a tab other than the trace was chosen before they existed."""
        for mount in mounts:
            await mount
        self._paint_all()
        active = self.query_one(TabbedContent).active
        if active != "trace" and self.query_one(CaseTabs).shown == active:
            self.action_tab(active)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane is None or event.pane.id is None:
            return
        if event.pane.id != "trace":
            self._mount_panels()
        if event.pane.id != self.query_one(CaseTabs).shown:
            self.action_tab(event.pane.id)  # a click on a tab: it becomes the shown one, focus follows

    @on(TabPane.Focused)
    def _focus_outside_shown_tab(self, event: TabPane.Focused) -> None:
        """A focus landed in a hidden pane (CaseTabs refused to switch): focus the shown pane."""
        event.stop()
        self.action_tab(self.query_one(CaseTabs).shown)

    def _lazy_ready(self) -> bool:
        """The tab bodies are mounted lazily (after the trace tab paints)."""
        if self.query("#integrity-doc") and self.query("#quotes") and self.query("#compare-left"):
            return True
        if not self._repaint_scheduled:
            self._repaint_scheduled = True
            self.set_timer(0.05, self._paint_all)
        return False

    def _paint_all(self) -> None:
        self._repaint_scheduled = False
        if self.view is not None:
            self._paint_case()
        self._paint_compare()
        self._paint_integrity()

    def _paint_case(self) -> None:
        view = self.view
        assert view is not None
        self._paint_title()
        if not self._lazy_ready():
            return
        self._paint_docs()
        self._paint_quotes(view)
        self._paint_integrity()

    def _paint_quotes(self, view: CaseView) -> None:
        # a reload while a driver writes the case mostly changes its status: the quotes
        # list is rebuilt only when the quotes changed (a rebuild re-lays out the tab)
        if view.quotes == self._quotes_painted and self.query_one("#quotes", OptionList).option_count:
            return
        self._quotes_painted = list(view.quotes)
        quotes = self.query_one("#quotes", OptionList)
        highlighted = quotes.highlighted
        quotes.clear_options()
        for i, q in enumerate(view.quotes):
            label = Content.assemble((f"step {q.step_index if q.step_index is not None else '?'} ", "bold $accent"), (f"[{q.category}] " if q.category else "", "dim"), ("\u201c" + q.text + "\u201d", "italic"))
            quotes.add_option(Option(label, id=f"quote-{i}"))
        if not view.quotes:
            quotes.add_option(Option(Content("no observed_basis quotes"), disabled=True))
        elif highlighted is not None and highlighted < len(view.quotes):
            quotes.highlighted = highlighted

    def _paint_docs(self) -> None:
        if self.view is None or not self._lazy_ready():
            return
        rounds = marked_rounds(self.view, self.marks) if self.marks else self.view.rounds
        localization = self.view.localization
        at = self.view.claims_at
        if self.view.claims and at is not None:
            # the localizer's quotes and named events, as the trace search found them
            localization = localization[:at] + claims_lines(self._claim_results, self.view.claims) + localization[at:]
        # the documents are rebuilt (and their tabs laid out again) only when their lines
        # changed: a driver's burst reloads the case many times with the same rounds
        painted = (localization, rounds, self.revealed)
        if painted == self._docs_painted:
            return
        self._docs_painted = painted
        self.query_one("#loc-doc", Static).update(doc_content(localization, self.revealed))
        self.query_one("#rounds-doc", Static).update(doc_content(rounds, self.revealed))

    def _paint_privilege_bar(self) -> None:
        bar = self.query_one("#privilege-bar", Static)
        if self.revealed:
            bar.update(Content("\u26a0 PRIVILEGED MATERIAL SHOWN (gold, expected verdict, judge/localizer explanations, private context) \u00b7 v hides"))
            bar.add_class("revealed")
        else:
            bar.update(Content("privileged material hidden \u00b7 v reveals (gold, expected verdict, judge/localizer explanations, private context)"))
            bar.remove_class("revealed")

    def _paint_trace_status(self) -> None:
        data = self.trace_rows
        if data is None:
            return
        tv = self.query_one(TraceView)
        # numbered as the rows are (the step's index in state.all_steps, from 0), so the
        # cursor, its row and "failure at N" name the same step
        parts = [f"step {tv.cursor} (of 0\u2013{data.step_count - 1})" if data.step_count else "no steps"]
        if data.failure_index is not None:
            parts.append(f"failure at {data.failure_index}")
        elif self.view is not None and self.view.no_site:
            parts.append("no recoverable site" + (f" (closest: {self.view.closest_step})" if self.view.closest_step is not None else ""))
        if self._search_status:
            parts.append(self._search_status)
        # where the source trace came from (artifacts.paths), before the details a narrow
        # terminal can lose
        source = next((p for p in (self.provenance or (self.view.provenance if self.view else [])) if p.key == "trace"), None)
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
        # every cursor move repaints it: a one-row bar (app.tcss), no layout pass
        self.query_one("#trace-status", Static).update(Content(" \u00b7 ".join(parts)), layout=False)

    def _paint_compare(self) -> None:
        c = self.compare
        if not self._lazy_ready():
            return
        if c is None:
            if self._trace_failed:  # no trace will come: say so instead of waiting
                self._compare_painted = None
                self.query_one("#compare-left", Static).update(Content("no source trace to compare (the Trace tab says why)"))
            return

        painted = (c, self.revealed)
        if painted == self._compare_painted:
            return  # a reload during a driver's burst mostly rebuilds the same comparison
        self._compare_painted = painted
        left = [L(Seg(c.left_title, "title"))] + c.left
        right = [L(Seg(c.right_title, "title"))] + c.right
        self.query_one("#compare-left", Static).update(doc_content(left, self.revealed))
        self.query_one("#compare-right", Static).update(doc_content(right, self.revealed))
        if c.note:
            self.query_one("#compare-note", Static).update(Content(c.note))

    def _paint_integrity(self) -> None:
        if not self._lazy_ready():
            return
        lines = []
        if self.integrity is None:
            lines.append(L(Seg("running the full integrity check\u2026", "dim")))
        rows = self.problem_rows()
        if self.integrity is not None and not rows:
            lines.append(L(Seg("\u2713 no problems found", "ok")))
        transient = getattr(self.app, "transient", None)
        writing = transient is not None and self.key in transient.pending_cases()
        provenance = self.provenance or (self.view.provenance if self.view else [])
        painted = (self.integrity is None, tuple(rows), writing, tuple(provenance), self.view.record if self.view else None)
        if painted == self._integrity_painted:
            return  # the same problems and inputs (a reload or check during a driver's burst)
        self._integrity_painted = painted
        for code, path, message in rows:
            if writing and code in TRANSIENT_CODES:
                lines.append(L(S(code, "warn"), Seg("  "), S(path, "accent"), Seg("  being written (a problem only if it stays torn)", "warn")))
            else:
                lines.append(L(S(code, "bad"), Seg("  "), S(path, "accent")))
            lines.append(L(Seg("    "), S(message, "")))
        # where each input was found (rule, inside/outside the root, sha256), after the problems
        lines.append(L(Seg("")))
        lines.extend(provenance_lines(provenance))
        lines.extend(self._records_lines())
        self.query_one("#integrity-doc", Static).update(doc_content(lines))

    def _records_lines(self) -> list[tuple[Seg, ...]]:
        """What this case's records (labels, searches, stream records) are keyed by, and
        where new ones are written (a case keyed by its location says it does not follow a move)."""
        record = self.view.record if self.view is not None else None
        if record is None:
            return []
        return [
            L(Seg("Records of this case (labels, supervised search, stream records)", "title")),
            L(Seg("  "), S(record.describe(), "dim" if record.follows_moves else "warn", limit=400)),
            L(Seg("  new records go to "), S(str(self.options.workdir), "accent", limit=400), S(f" ({self.options.workdir_source})", "dim")),
        ]

    # -- live updates (called by the app) ----------------------------------------------------
    def case_files_changed(self, paths: set[str]) -> None:
        """Files of this case changed (the app's watcher, already debounced). A burst is
        coalesced: one reload RELOAD_DELAY after the first change of the burst (a restarted
        timer would wait for the driver to pause, which at full speed it does not), never
        sooner than RELOAD_GAP after the previous reload started, and never two loads at
        once - a change during a load reloads once more when it ends (and the gap allows)."""
        root = os.path.abspath(self.case_path)
        if not any(p == root or p.startswith(root + os.sep) for p in paths):
            return
        if self._reload_timer is None:
            self._reload_timer = self.set_timer(self._reload_wait(RELOAD_DELAY), self._reload_now)

    def _reload_wait(self, least: float) -> float:
        """Seconds until the next reload may start: at least ``least``, and RELOAD_GAP
        after the start of the previous one; never 0 (a zero-interval Textual timer that
        wakes late, as on a loaded machine, divides by its interval)."""
        return max(least, self._reload_started + RELOAD_GAP - time.monotonic(), MIN_TIMER)

    def _reload_now(self) -> None:
        self._reload_timer = None
        if self._loading:
            self._reload_again = True
            return
        self.load()

    def _load_settled(self) -> None:
        self._loading = False
        if self._reload_again:
            self._reload_again = False
            if self._reload_timer is None:
                self._reload_timer = self.set_timer(self._reload_wait(0.0), self._reload_now)

    # -- actions -----------------------------------------------------------------------------
    def action_back(self) -> None:
        self.app.pop_screen()

    def action_tab(self, name: str) -> None:
        """Show tab ``name`` and move focus into it (THE way the shown tab changes)."""
        tabs = self.query_one(CaseTabs)
        tabs.shown = name
        tabs.active = name
        if name == "trace":
            self.query_one(TraceView).focus()
        elif not self._lazy_ready():
            self._mount_panels()
            return
        else:
            # the tab's scroll view takes the keys: down / PgDn scroll it at once (the
            # Localization tab's quotes list is one Tab further)
            self.query_one(f"#{name}-scroll", VerticalScroll).focus()

    def _trace_goto(self, index: int) -> None:
        self.action_tab("trace")
        self.query_one(TraceView).goto(index)

    def action_goto_failure(self) -> None:
        if self.view is None:
            self._need_bundle("failure step", self.action_goto_failure)
            return
        target = self.view.failure_index
        if target is None and self.view.closest_step is not None:
            target = self.view.closest_step
            self.notify(f"No recoverable site; going to the step the localizer came closest to ({target})", markup=False)
        if target is None:
            self.notify("This case has no localized failure step", severity="warning", markup=False)
            return
        self._trace_goto(target)

    def action_policy(self, direction: int) -> None:
        if self.trace_rows is None:
            return
        tv = self.query_one(TraceView)
        target = self.trace_rows.next_policy(tv.cursor, direction)
        if target is None:
            self.notify("No further policy step in that direction", markup=False, timeout=1.5)
            return
        self._trace_goto(target)

    def action_goto_step(self) -> None:
        if self.trace_rows is None:
            self.notify("The trace is still loading", markup=False)
            return

        def done(value: int | None) -> None:
            if value is not None:
                self._trace_goto(value)

        self.app.push_screen(GotoStepScreen(self.trace_rows.step_count), done)

    # -- search in the trace ------------------------------------------------------------------
    def action_search(self) -> None:
        if self.trace_rows is None or self.trace is None:
            self.notify("The trace is still loading", markup=False)
            return
        self.action_tab("trace")
        box = self.query_one("#trace-search", SearchBox)
        box.remove_class("-hidden")
        box.focus()
        box.select_all()

    @on(Input.Changed, "#trace-search")
    def _search_changed(self, event: Input.Changed) -> None:
        if self._search_timer is not None:
            self._search_timer.stop()
        query = event.value
        # the first match at or after the highlighted step, once typing pauses
        self._search_timer = self.set_timer(0.12, lambda: self._search(query, 1, include_start=True))

    @on(Input.Submitted, "#trace-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self._search(event.value, 1)

    @on(SearchBox.Step)
    def _search_step(self, event: SearchBox.Step) -> None:
        self._search(self.query_one("#trace-search", SearchBox).value, event.direction)

    @on(SearchBox.Closed)
    def _search_closed(self) -> None:
        self.query_one("#trace-search", SearchBox).add_class("-hidden")
        tv = self.query_one(TraceView)
        tv.set_marks(())  # closing the search clears its marks and its status
        tv.focus()
        self._search_status = None
        self._paint_trace_status()

    def _search(self, query: str, direction: int, *, include_start: bool = False) -> None:
        if self.trace is None:
            return
        if not query.strip():
            self._search_status = None
            self.query_one(TraceView).set_marks(())
            self._paint_trace_status()
            return
        if self._trace_search is None or self._trace_search.trace is not self.trace:
            self._trace_search = TraceSearch(self.trace, self._corpus if self.trace.lazy else None)
            self._search_status = "searching the steps\u2026"
            self._paint_trace_status()
        self._run_search(self._trace_search, query, self.query_one(TraceView).cursor, direction, include_start)

    @work(thread=True, exclusive=True, group="trace-search", exit_on_error=False)
    def _run_search(self, search: TraceSearch, query: str, start: int, direction: int, include_start: bool) -> None:
        worker = get_current_worker()
        try:
            hit = search.find(query, start, direction, include_start=include_start, cancelled=lambda: worker.is_cancelled)
        except Exception as exc:  # noqa: BLE001 - shown in the status line, never crashes the screen

            self.post_message(M.TraceSearchDone(SearchHit(None, 0, (), query), error=f"{type(exc).__name__}: {exc}"))
            return
        if hit is not None:  # None: a newer search replaced this one
            self.post_message(M.TraceSearchDone(hit))

    @on(M.TraceSearchDone)
    def _search_done(self, message: M.TraceSearchDone) -> None:
        hit = message.hit
        box = self.query_one("#trace-search", SearchBox)
        if hit.query != box.value:
            return  # a newer query is on its way
        shown = safe_text(hit.query, single_line=True, limit=40)
        tv = self.query_one(TraceView)
        tv.set_marks(hit.matches)
        if message.error:
            self._search_status = "search failed: " + safe_text(message.error, single_line=True, limit=120)
        elif hit.index is None:
            self._search_status = f"no step contains \u201c{shown}\u201d"
        else:
            self._search_status = f"match {hit.ordinal} of {hit.total} steps for \u201c{shown}\u201d"
            tv.goto(hit.index)
        self._paint_trace_status()

    def action_step_detail(self) -> None:
        if self.trace is None:
            self.notify("The trace is still loading", markup=False)
            return
        # the background fill pauses from the key press until the detail is painted (it
        # would share the interpreter with the detail's parse, layout and paint)
        self._fill_gate.hold()
        self._detail_gate.hold()
        foreground = pace.ForegroundHold()  # the integrity check's hashing waits too
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._fill_gate.release()
                self._detail_gate.release()
                foreground.release()

        self.set_timer(FOREGROUND_LIMIT, release)  # whatever becomes of the detail
        self._detail(self.trace, self.query_one(TraceView).cursor, release)

    @work(thread=True, exclusive=True, group="case-detail", exit_on_error=False)
    def _detail(self, trace: SourceTrace, index: int, painted: Callable[[], None]) -> None:
        try:
            detail = trace.step_detail(index)
            doc = step_detail_doc(detail, failure_index=self.view.failure_index if self.view else None)
        except Exception as exc:  # noqa: BLE001 - shown in the step detail

            doc = [L(S(f"could not read step {index}: {type(exc).__name__}: {exc}", "bad"))]
        self.post_message(M.StepDetailReady(index, doc, painted))

    @on(M.StepDetailReady)
    def _on_detail(self, message: M.StepDetailReady) -> None:
        index = message.index
        self.app.push_screen(StepDetailScreen(index, message.detail, self.revealed, painted=message.painted),
                             callback=lambda result: self._open_tokens(f"step:{index}") if result == "tokens" else None)

    def action_toggle_reveal(self) -> None:
        self.revealed = not self.revealed
        if hasattr(self.app, "reveal_privileged"):
            self.app.reveal_privileged = self.revealed  # every case opened next shows it too (this session)
        self._paint_privilege_bar()
        self._paint_docs()
        self._paint_compare()
        self.notify("Privileged material shown" if self.revealed else "Privileged material hidden", markup=False, timeout=1.5)

    def action_reload(self) -> None:
        self.load()

    @on(OptionList.OptionSelected, "#quotes")
    def _quote_selected(self, event: OptionList.OptionSelected) -> None:
        if self.view is None or event.option_id is None:
            return
        index = int(event.option_id.split("-", 1)[1])
        quote = self.view.quotes[index]
        if quote.step_index is None:
            self.notify("This quote names no step", markup=False)
            return
        self._trace_goto(quote.step_index)

    @on(TraceView.StepHighlighted)
    def _step_highlighted(self, event: TraceView.StepHighlighted) -> None:
        self._paint_trace_status()

    # -- triage: the label, the queue ------------------------------------------------------------
    def _triage_row(self) -> CaseRow | None:
        """This case as the runs store lists it (its record key), else as the case view
        read it (a case opened from elsewhere than the runs table)."""
        store = getattr(self.app, "store", None)
        row = store.get(self.key) if store is not None else None
        if row is not None and row.record is None and self.view is not None:
            row.record = self.view.record  # read with the case (the labels have not been read yet)
        if row is not None and row.record is not None:
            return row
        if self.view is None or self.view.record is None:
            return None
        return CaseRow(key=self.key, case_id=self.view.case_id, candidate_id=self.view.candidate_id, ref=self.ref
                       if not isinstance(self.ref, Path) else CaseRef(path=self.ref, layout=Layout.UNKNOWN), record=self.view.record)

    def _current_triage(self) -> Triage | None:
        row = self._triage_row()
        marks = getattr(self.app, "triage", None)
        return marks.for_key(row.record) if marks is not None and row is not None else None

    def action_triage_label(self) -> None:
        row = self._triage_row()
        if row is None:
            self._need_bundle("label picker", self.action_triage_label)
            return
        current = self._current_triage()
        labels = self.options.settings.triage.labels

        def done(pick: TriagePick | None) -> None:
            if pick is None:
                return
            self.app.record_triage([row], pick.label, pick.note)  # type: ignore[attr-defined]  # the EvisceneApp's
            if self.options.settings.triage.advance_after_label:
                self.action_queue(1, after_label=True)

        self.app.push_screen(TriageLabelScreen(safe_text(self.key, single_line=True, limit=60), labels,
                                               current.label if current else "", current.note if current else ""), done)

    def action_clear_label(self) -> None:
        row = self._triage_row()
        current = self._current_triage()
        if row is None or current is None or not current.label:
            self.notify("This case has no label to clear", markup=False)
            return
        self.app.record_triage([row], None, current.note)  # type: ignore[attr-defined]  # the EvisceneApp's

    def action_undo_label(self) -> None:
        row = self._triage_row()
        undo = getattr(self.app, "undo_triage", None)
        if row is None or undo is None or not undo(row):
            self.notify("No triage change of this case to undo", markup=False)

    def action_queue(self, step: int, *, after_label: bool = False) -> None:
        """Open the next (``step`` 1) or previous (-1) case of the runs table's current
        queue (its filter, search, sort and grouping) in place of this one."""
        store = getattr(self.app, "store", None)
        row = store.neighbour(self.key, step) if store is not None else None
        if row is None:
            where = "last" if step > 0 else "first"
            self.notify(f"This is the {where} case of the queue" + (" (label saved)" if after_label else ""), markup=False, timeout=2)
            return
        self.show_case(row.ref if row.ref is not None else self.case_path, row.key)

    #: the worker groups that read or search the case shown (cancelled when another is shown)
    CASE_WORKERS = ("case-load", "trace-fill", "trace-demand", "case-integrity", "case-detail", "trace-search", "case-claims", "tokens-prepare")

    def show_case(self, ref: CaseRef | CaseSummary | Path, key: str) -> None:
        """Show another case in this screen (the next case of the queue): its widgets stay,
        so the case is painted as soon as it is read (a new screen is composed, styled and
        laid out first)."""
        self.app.post_message(M.CaseShown(str(self.case_path), False))
        for group in self.CASE_WORKERS:
            self.workers.cancel_group(self, group)
        for timer in (self._reload_timer, self._integrity_timer, self._search_timer):
            if timer is not None:
                timer.stop()
        while self._gc_holds:
            gc_hold.release()
            self._gc_holds -= 1
        self.query("#case-gate").remove()
        self._init_case(ref, key)
        self._reset_widgets()
        self._mount_gate_card()
        self.app.post_message(M.CaseShown(str(self.case_path), True))
        self.load()

    def _reset_widgets(self) -> None:
        """Every panel back to "loading" for the case now shown."""
        self.query_one("#case-title", Static).update(Content(f"loading {safe_text(self.key, single_line=True, limit=80)}\u2026"), layout=False)
        tv = self.query_one(TraceView)
        tv.display = True
        tv.set_marks(())
        tv.set_trace(TraceRows(step_count=0, rows=[]))
        self.query_one("#trace-missing", Static).add_class("-hidden")
        self.query_one("#trace-search", SearchBox).add_class("-hidden")
        self.query_one("#trace-status", Static).update(Content("reading the source trace\u2026"), layout=False)
        self.query_one(TabbedContent).get_tab("integrity").label = Content("5 Integrity \u2026")
        if self.query("#loc-doc"):
            loading = Content("loading\u2026")
            for doc in ("#loc-doc", "#rounds-doc", "#compare-left", "#compare-right", "#integrity-doc"):
                self.query_one(doc, Static).update(loading)
            self.query_one("#quotes", OptionList).clear_options()
        self.action_tab("trace")

    def _prefetch_next(self) -> None:
        """Read the next case of the queue in the background (``]`` or a label pick opens it)."""
        store = getattr(self.app, "store", None)
        prefetch = getattr(self.app, "prefetch_case", None)
        row = store.neighbour(self.key, 1) if store is not None else None
        if row is not None and prefetch is not None and row.ref is not None:
            prefetch(row.ref.path, row.key)

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        return [("case: clear triage label", "Remove the case's label (journaled; u undoes it)", self.action_clear_label)]

    def _need_bundle(self, what: str = "", then: Callable[[], object] | None = None) -> bool:
        """True when the case's files are read. Otherwise say what is still being read
        and, with ``then``, run it as soon as they are (the last key pressed wins)."""
        if self.bundle is not None:
            return True
        reading = "the case's files (manifest, rounds, hints, run inputs, integrity bindings)"
        if then is not None:
            self._when_loaded = then
            self.notify(f"Still reading {reading}; the {what} opens as soon as they are read", markup=False)
        else:
            self.notify(f"Still reading {reading}; try again in a moment", markup=False)
        return False

    def _after_integrity_consent(self, what: str, go: Callable[[], object]) -> None:
        """Run ``go`` at once on a sound case; on a case with integrity problems (or one
        still being checked) say so first and go on only if the operator agrees."""
        if self.integrity is not None and not self.problem_rows():
            go()
            return

        if self.integrity is None:
            title = "The integrity check of this case has not finished"
            lines = ["Problems it may still find (tampered hashes, missing or unknown files) are not known yet."]
        else:
            rows = self.problem_rows()
            title = f"\u26a0 This case has {len(rows)} integrity problem{'s' if len(rows) != 1 else ''}"
            lines = [f"{code}  {path}" for code, path, _m in rows[:8]]
            if len(rows) > 8:
                lines.append(f"\u2026 and {len(rows) - 8} more (the Integrity tab lists them)")
            lines.append(f"A {what} builds on these files; what it shows may not be what the driver saw.")

        def done(agreed: bool | None) -> None:
            if agreed:
                go()

        self.app.push_screen(ConfirmScreen(title, lines, f"Open the {what} anyway?"), done)

    def action_open_stream(self) -> None:
        if not self._need_bundle("teacher stream", self.action_open_stream):
            return
        view = self.view
        self._after_integrity_consent(
            "teacher stream",
            lambda: self.app.push_screen(StreamScreen(self.bundle, self.options, round_index=view.latest_round if view else None, hint_text=view.latest_hint if view else None)),
        )

    def action_open_repair(self) -> None:
        """``g``: the bundled driver's search of this case, under the gate: attach to the
        driver that runs it, else start it (or resume it), and open its gate screen."""
        if not self._need_bundle("repair search", self.action_open_repair):
            return
        self._after_integrity_consent("repair search", self._repair_worker)

    @work(thread=True, exclusive=True, group="case-repair", exit_on_error=False)
    def _repair_worker(self) -> None:
        plan = plan_repair(self.options, self.case_path)
        if plan.attach or plan.refusal:
            self.post_message(M.RepairPlanned(plan.root, plan.refusal, "" if plan.refusal else "attached to its driver"))
            return
        try:
            proc, log = start_repair(plan)
        except OSError as exc:
            self.post_message(M.RepairPlanned(plan.root, f"cannot start the bundled driver: {exc.strerror or exc}", ""))
            return
        what = "resumed" if plan.resume else "started"
        self.post_message(M.RepairPlanned(plan.root, "", f"bundled driver {what} under the gate (pid {proc.pid}; log {log})"))

    def on_repair_planned(self, message: M.RepairPlanned) -> None:
        if message.refusal:
            self.notify(safe_text(f"repair: {message.refusal}", single_line=True), severity="warning", markup=False)
            return
        self.notify(safe_text(message.note, single_line=True), markup=False)
        self.app.open_gate(message.root)  # type: ignore[attr-defined]  # the EvisceneApp's

    def action_toggle_wrap(self) -> None:
        tv = self.query_one(TraceView)
        tv.set_wrap(not tv.wrapped)
        self.notify("Trace rows wrapped" if tv.wrapped else "Trace rows cut at the edge (w wraps)", markup=False, timeout=1.5)

    def action_open_tokens(self) -> None:
        source = None
        if self.trace_rows is not None:
            cursor = self.query_one(TraceView).cursor
            source = f"step:{cursor}"
        elif self.view is not None and self.view.failure_index is not None:
            source = f"step:{self.view.failure_index}"
        self._open_tokens(source)

    def _open_tokens(self, source: str | None) -> None:
        if not self._need_bundle("token inspector", lambda: self._open_tokens(source)):
            return
        if source is None or self.bundle is None:
            self.app.push_screen(TokenScreen(self.bundle, self.options, source=source, integrity=self._integrity_for_tokens()))
            return
        # the capture is read and laid out first, and the token screen pushed with it: beside
        # this idle screen the worker runs at full speed (pushed first, it shared the cores
        # with the new screen's first layout and paint, and k took longer to paint the
        # capture: `make bench` prints that figure)
        self._tokens_request += 1
        self.query_one("#trace-status", Static).update(Content(f"opening the token capture of {source}\u2026"), layout=False)
        # from the key until the capture is painted, the case's background work (the trace's
        # fill, the integrity check hashing the trace) waits: it would share the cores with it
        if self._tokens_hold is not None:
            self._tokens_hold.release()
        hold = self._tokens_hold = pace.ForegroundHold()
        self.set_timer(FOREGROUND_LIMIT, hold.release)  # whatever becomes of the capture
        self._prepare_tokens(self._tokens_request, self.bundle, source)

    @work(thread=True, exclusive=True, group="tokens-prepare", exit_on_error=False)
    def _prepare_tokens(self, request: int, bundle: CaseBundle, source: str) -> None:
        self.post_message(M.TokensPrepared(request, source, prepare_capture(bundle, source, self.options)))

    @on(M.TokensPrepared)
    def _on_tokens_prepared(self, message: M.TokensPrepared) -> None:
        self._paint_trace_status()
        # a later k asked again, or the operator went elsewhere meanwhile: nothing to open
        if message.request != self._tokens_request:
            return
        hold, self._tokens_hold = self._tokens_hold, None
        if self.app.screen is not self:
            if hold is not None:
                hold.release()
            return
        screen = TokenScreen(self.bundle, self.options, source=message.source, prepared=message.answer,
                             integrity=self._integrity_for_tokens())
        self.app.push_screen(screen)
        if hold is not None:
            screen.call_after_refresh(hold.release)  # the capture is on screen

    def _integrity_for_tokens(self) -> list[tuple[str, str, str]]:
        """The integrity check's problems (code, absolute path, message), for the token
        screen to flag what it found about a capture's media binding."""
        base = Path(self.case_path)
        return [(code, os.path.normpath(str(base / rel)), message) for code, rel, message in (self._integrity_in_case or [])]


def _relpath(path: str, base: Path) -> str:
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path
