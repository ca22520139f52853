"""The case screen: source trace, localization, rounds timeline, side by side,
integrity. The case's state and its load / reload / fill / integrity state machine are
its session's (``state.case_session``); the screen runs the session's steps in workers,
keeps the bindings and repaints the panels whose part of the snapshot changed."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rich.cells import cell_len
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.widget import AwaitMount
from textual.screen import Screen
from textual.widgets import Input, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from eviscene_tui import pace
from eviscene_tui.ui.actions import bindings
from eviscene_tui.options import AppOptions
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.case_session import (
    GROUPS,
    Cancel,
    CaseChange,
    CaseEvent,
    CaseSession,
    FOREGROUND_LIMIT,
    CaseSnapshot,
    ProblemRow,
    Step,
    StepContext,
    StepCrashed,
)
from eviscene_tui.state.case_view import CaseView, CompareView, L, ProblemMark, Seg
from eviscene_tui.state.prefetch import Prefetched
from eviscene_tui.state.trace_rows import TraceRows
from eviscene_tui.artifacts.trace import SourceTrace
from eviscene_tui.ui import gc_hold
from eviscene_tui.ui import messages as M
from eviscene_tui.ui.widgets.doc import doc_content
from eviscene_tui.ui.widgets.trace_view import TraceView
from eviscene_tui.ui.widgets.key_footer import KeyFooter
from eviscene_tui.ui.widgets.search_box import SearchBox
from eviscene_tui.artifacts.case import CaseBundle
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.summary import CaseSummary
from eviscene_tui.journal.fold import Triage
from eviscene_tui.state.rows import CaseRow
from eviscene_tui.ui.screens.confirm import ConfirmScreen
from eviscene_tui.ui.screens.goto import GotoStepScreen
from eviscene_tui.ui.screens.label import TriageLabelScreen, TriagePick
from eviscene_tui.ui.screens.step_detail import StepDetailScreen
from eviscene_tui.ui.screens.stream import StreamScreen
from eviscene_tui.ui.screens.tokens import TokenScreen, prepare_capture
from eviscene_tui.gate.protocol import SESSION_FILE, sidecar_for
from eviscene_tui.state.gate import GateSession
from eviscene_tui.state.repair import plan_repair, start_repair
from eviscene_tui.ui.widgets.gate_panel import GatePanel

if TYPE_CHECKING:
    from eviscene_tui.ui.app import EvisceneApp

TABS = ("trace", "localization", "rounds", "compare", "integrity")
#: seconds after the screen opens by which the tab bodies are mounted whatever the trace does
PANELS_AT_THE_LATEST = 3.0


class CaseTabs(TabbedContent):
    """The case screen's tabs. Which pane is shown is decided by the screen alone
    (:attr:`shown`, set by ``CaseScreen.action_tab`` and by a click on a tab): a
    focus that lands in another pane does not switch to it, as TabbedContent would.
    Focus requests are delivered later than they are made (``Widget.focus`` defers),
    so the trace view's focus asked for at mount could arrive after a no-site case
    chose its localization tab and switch the tab back. The refused ``TabPane.Focused``
    bubbles on to the screen, which moves focus into the shown pane.

    The other tabs' bodies are mounted once, after the failure step is on screen (or
    when a tab is opened first): :attr:`panels_mounted`; they stay for the next case."""

    shown = "trace"
    panels_mounted = False
    #: the mounted bodies are in the DOM (set once their mounts are awaited)
    panels_in_dom = False
    #: the problem count the Integrity tab's label shows (None: "…"; -1: none painted yet)
    badge_painted: int | None = -1

    def on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        if event.tab_pane.id != self.shown:
            event.prevent_default()  # skip TabbedContent's handler (it activates that pane)


class PrivilegeBar(Static):
    """Says whether privileged material is shown; repainted only when that changes
    (an update lays the screen out again)."""

    revealed: bool | None = None  # None: not painted yet

    def show(self, revealed: bool) -> None:
        if self.revealed is revealed:
            return
        self.revealed = revealed
        if revealed:
            self.update(Content("\u26a0 PRIVILEGED MATERIAL SHOWN (gold, expected verdict, judge/localizer explanations, private context) \u00b7 v hides"))
            self.add_class("revealed")
        else:
            self.update(Content("privileged material hidden \u00b7 v reveals (gold, expected verdict, judge/localizer explanations, private context)"))
            self.remove_class("revealed")


class _ScreenHost:
    """A session's host: its steps run in the screen's thread workers (each group one at a
    time, a new one replacing the last), its delays are the screen's timers. One host per
    session: a step an earlier case's session starts late still reports to that session."""

    def __init__(self, screen: CaseScreen) -> None:
        self.screen = screen
        self.session: CaseSession | None = None

    def run(self, group: str, step: Step) -> None:
        screen, session = self.screen, self.session
        assert session is not None  # set as soon as the session is made
        screen.run_worker(partial(screen.run_case_step, session, group, step), thread=True, exclusive=True, group=group,
                          exit_on_error=False)

    def later(self, seconds: float, callback: Callable[[], None]) -> Cancel:
        return self.screen.set_timer(seconds, callback).stop


class CaseScreen(Screen):
    BINDINGS = bindings("case")
    #: the widget focused as the screen is composed (Textual's default, the first focusable
    #: widget, is the tab bar: focus then moved again at mount, each move restyling the screen)
    AUTO_FOCUS = "#trace-view"

    def __init__(self, ref: CaseRef | CaseSummary | Path, options: AppOptions, *, key: str | None = None) -> None:
        """``ref``: the case's runs row handle (its ``CaseRef``, or the summary it was built
        from), or the case folder itself."""
        super().__init__()
        self.options = options
        self.session = self._session_for(ref, key, revealed=False)

    def _session_for(self, ref: CaseRef | CaseSummary | Path, key: str | None, *, revealed: bool) -> CaseSession:
        host = _ScreenHost(self)
        session = host.session = CaseSession(ref, self.options, host, key=key, revealed=revealed, prefetched=self._take_prefetched,
                                             writing=self._being_written, gc_hold=gc_hold.hold, gc_release=gc_hold.release)
        session.subscribe(self._session_changed)
        return session

    def _take_prefetched(self, path: Path) -> Prefetched | None:
        """The case read ahead by the app (taken once; called by the load step)."""
        return self.eviscene.take_prefetched(path)

    def _being_written(self, key: str) -> bool:
        return key in self.eviscene.transient.pending_cases()

    def run_case_step(self, session: CaseSession, group: str, step: Step) -> None:
        """A thread worker: run one blocking step of ``session``; its events go back to it
        as messages (handled on the UI thread)."""
        worker = get_current_worker()

        def post(event: CaseEvent) -> None:
            self.post_message(M.CaseStepDone(session, event))

        try:
            step(StepContext(post, lambda: worker.is_cancelled))
        except Exception as exc:  # noqa: BLE001 - the session shows it (never "running..." forever)
            post(StepCrashed(group, exc))

    @on(M.CaseStepDone)
    def _step_done(self, message: M.CaseStepDone) -> None:
        message.session.receive(message.event)

    # -- what the session holds, read by the app, the benchmarks and the tests -------------------
    @property
    def ref(self) -> CaseRef | CaseSummary | Path:
        return self.session.ref

    @property
    def case_path(self) -> Path:
        return self.session.case_path

    @property
    def key(self) -> str:
        return self.session.key

    @property
    def revealed(self) -> bool:
        return self.session.revealed

    @property
    def bundle(self) -> CaseBundle | None:
        return self.session.bundle

    @property
    def view(self) -> CaseView | None:
        return self.session.view

    @property
    def trace(self) -> SourceTrace | None:
        return self.session.trace

    @property
    def trace_rows(self) -> TraceRows | None:
        return self.session.trace_rows

    @property
    def integrity(self) -> list[ProblemRow] | None:
        return self.session.integrity

    @property
    def compare(self) -> CompareView | None:
        return self.session.compare

    @property
    def marks(self) -> list[ProblemMark]:
        return self.session.marks

    def problem_rows(self) -> list[ProblemRow]:
        return self.session.problem_rows()

    # -- compose -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(Content(f"loading {safe_text(self.key, single_line=True, limit=80)}\u2026"), id="case-title", classes="title-bar")
        yield PrivilegeBar(id="privilege-bar", classes="privilege-bar")
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

    @property
    def eviscene(self) -> EvisceneApp:
        """The app, as its own type (this screen runs only inside it)."""
        return cast("EvisceneApp", self.app)

    def on_mount(self) -> None:
        self.session.revealed = self.eviscene.reveal_privileged
        self.session.watch_store(self.eviscene.store)
        self._paint_privilege_bar()
        self.query_one(TraceView).focus()
        self.session.load()
        self.set_timer(PANELS_AT_THE_LATEST, self._mount_panels)  # whatever happens with the trace
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
        self.session.close()

    def action_open_gate(self) -> None:
        if not (sidecar_for(self.case_path) / SESSION_FILE).is_file():
            self.notify("this search was not run under the operator gate (eviscene-tui gate)", severity="warning", markup=False)
            return
        self.eviscene.open_gate(self.case_path)

    # -- the session's updates ---------------------------------------------------------------
    def _session_changed(self, change: CaseChange) -> None:
        """Repaint the panels whose part changed, then do what the update asks once."""
        snap, update = change
        parts = update.parts
        try:
            tv = self.query_one(TraceView)
        except NoMatches:
            # the screen is being taken down (its widgets go before its own unmount closes
            # the session): a store change meanwhile has nothing to repaint
            return
        if "trace" in parts:
            self._paint_trace(snap)
        if update.rows is not None:
            tv.rows_updated(*update.rows)
        if update.marks is not None:
            tv.set_marks(update.marks)
        if update.goto is not None:
            tv.goto(update.goto)
        if parts & {"trace", "status"} or update.rows is not None:
            self._paint_trace_status()
        if "title" in parts:
            self._paint_problem_badge(snap)
            self._paint_title()
        if "revealed" in parts:
            self._paint_privilege_bar()
        if self._panels_ready():
            self._paint_panels(snap, parts)
        if update.run is not None:
            # a key pressed while the files were read (g, e, t): run it now
            self.call_after_refresh(update.run)
        if update.first:
            self._prefetch_next()
        if update.tab is not None:
            self.call_after_refresh(self.action_tab, update.tab)
        if update.trace_shown and (snap.trace.rows is None or snap.trace.rows.failure_index is None):
            self.call_after_refresh(self._mount_panels)
        # (with a failure step they are mounted once the frame that painted it is out:
        # TraceView.FailureShown; their mount and first paint would otherwise delay it)

    @on(TraceView.FailureShown)
    def _failure_shown(self, message: TraceView.FailureShown) -> None:
        message.stop()
        # a key pressed as the failure step appears (End, a page key) may still be on its
        # way from the terminal: it goes first
        self.set_timer(pace.QUIET_AFTER_INPUT, self._mount_panels_when_quiet)

    def _mount_panels_when_quiet(self) -> None:
        """The other tabs' bodies, mounted once the operator has pressed no key for a
        moment (``pace.QUIET_AFTER_INPUT``): their mount and first paint hold the UI thread
        for tens of ms (every hidden body laid out again), and the keys of the operator
        looking at the failure step go first. Opening a tab mounts them at once
        (``action_tab``), and the screen's timer mounts them at the latest
        ``PANELS_AT_THE_LATEST`` after the open."""
        if self.query_one(CaseTabs).panels_mounted:
            return
        wait = pace.QUIET_AFTER_INPUT - pace.idle_seconds()
        if wait > 0:
            self.set_timer(wait, self._mount_panels_when_quiet)
            return
        self._mount_panels()

    def _paint_trace(self, snap: CaseSnapshot) -> None:
        tv = self.query_one(TraceView)
        if snap.trace.rows is not None:
            tv.set_trace(snap.trace.rows)
        if snap.trace.missing is not None and snap.trace.rows is None:
            self._mount_panels()
            self._show_trace_missing(snap.trace.missing)

    def _paint_panels(self, snap: CaseSnapshot, parts: frozenset[str]) -> None:
        read = snap.title.view is not None  # until the case's files are read its documents say "loading"
        if "docs" in parts and read:
            self.query_one("#loc-doc", Static).update(doc_content(snap.docs.localization, snap.docs.revealed))
            self.query_one("#rounds-doc", Static).update(doc_content(snap.docs.rounds, snap.docs.revealed))
        if "quotes" in parts and read:
            self._paint_quotes(snap)
        if "compare" in parts:
            self._paint_compare(snap)
        if "integrity" in parts:
            self.query_one("#integrity-doc", Static).update(doc_content(snap.integrity.lines))

    def _paint_all(self) -> None:
        """Every panel from the session's snapshot (the tab bodies were just mounted)."""
        self._paint_title()
        if self.query("#integrity-doc"):  # (not when the screen was removed while they were mounted)
            self._paint_panels(self.session.snapshot(), frozenset(("docs", "quotes", "compare", "integrity")))

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

    # -- problems where they are shown --------------------------------------------------------
    def _paint_problem_badge(self, snap: CaseSnapshot) -> None:
        """The problem count on the Integrity tab's label."""
        count = snap.title.problems
        tabs = self.query_one(CaseTabs)
        if count == tabs.badge_painted:
            return  # (a new label lays the tab bar out again, and most updates leave it as it is)
        tabs.badge_painted = count
        tab = tabs.get_tab("integrity")
        if count is None:
            tab.label = Content("5 Integrity \u2026")
        elif count:
            tab.label = Content.assemble("5 Integrity ", (f"\u26a0 {count}", "bold $error"))
        else:
            tab.label = Content.assemble("5 Integrity ", ("\u2713", "$success"))

    def on_resize(self) -> None:
        self._paint_title()

    def _title_parts(self, view: CaseView) -> list[tuple[int, str, str]]:
        """The header's parts in display order as (rank, text, style): the lower the rank
        the more it matters; parts of the highest rank are dropped first when the header
        does not fit (the problem badge, rank 0, always stays)."""
        title = self.session.title_part()
        parts: list[tuple[int, str, str]] = []
        sep = " \u00b7 "
        if title.problems is None:
            parts.append((0, "checking integrity\u2026", "dim"))
        elif title.problems:
            count = title.problems
            parts.append((0, f" \u26a0 {count} problem{'s' if count != 1 else ''} ", "bold reverse $error"))
            parts.append((5, " (! next, 5 lists)", "dim"))
        else:
            parts.append((0, "\u2713 no integrity problems", "$success"))
        parts.append((1, sep + view.status, ""))
        if view.failure_index is not None:
            parts.append((2, f"{sep}failure step {view.failure_index}", ""))
        elif view.no_site:
            parts.append((2, f"{sep}no recoverable site", ""))
        for _rank, text, hint in title.notes:
            parts.append((1, sep + text, "bold $accent"))
            if hint:
                parts.append((6, f" ({hint})", "$accent"))
        parts.append((3, sep + view.title, ""))
        if title.progress:
            parts.append((3, sep + title.progress, "dim"))
        parts.append((4, sep + view.layout, "dim"))
        return parts

    def _paint_title(self) -> None:
        """The case header: the problem badge first, then the case's status, the app's
        repair search / gate / staleness, the failure step, the title and layout; fitted to
        the width by dropping the least important parts first."""
        session = self.session
        # the store notifies from its own batch handler, which can run while this screen is
        # being removed (its children already gone): then there is no header to paint
        titles = self.query("#case-title").results(Static)
        if session.view is None:
            if session.load_error is not None:
                for title in titles:
                    title.update(Content("could not open the case: " + safe_text(session.load_error, single_line=True, limit=300)), layout=False)
            return
        parts = self._title_parts(session.view)
        width = self.size.width or 10_000
        while sum(cell_len(t) for _r, t, _s in parts) > width:
            worst = max(r for r, _t, _s in parts)
            if worst == 0:
                break
            # drop the last part of the worst rank (a title goes before the status)
            index = max(i for i, (r, _t, _s) in enumerate(parts) if r == worst)
            del parts[index]
        for title in titles:
            # a one-row bar (app.tcss): no layout pass for a new status
            title.update(Content.assemble(*((t, s) if s else t for _r, t, s in parts)), layout=False)

    def action_next_problem(self) -> None:
        """Go to where the next problem is shown (its mark in the Rounds tab, else its line
        in the Integrity tab) and show its message."""
        if self.session.integrity is None:
            self.notify("The integrity check is still running", markup=False)
            return
        found = self.session.next_problem()
        if found is None:
            self.notify("No integrity problems in this case", markup=False)
            return
        cursor, total, (code, path, message), mark = found
        if mark is not None and mark.line is not None:
            self.action_tab("rounds")
            if self._panels_ready():
                self.query_one("#rounds-scroll", VerticalScroll).scroll_to(y=max(0, mark.line - 2), animate=False)
        else:
            self.action_tab("integrity")
            if self._panels_ready():
                self.query_one("#integrity-scroll", VerticalScroll).scroll_to(y=max(0, 2 * cursor - 1), animate=False)
        self.notify(f"{message}", title=f"problem {cursor + 1} of {total}: {code} \u00b7 {path}", timeout=8, markup=False)

    # -- painting ----------------------------------------------------------------------------
    def _mount_panels(self) -> None:
        tabs = self.query_one(CaseTabs)
        if tabs.panels_mounted:
            return
        if not all(pane.is_attached for pane in self.query(TabPane)):
            # the tab panes are not in the DOM yet (a fast case under load): try after the next refresh
            self.call_after_refresh(self._mount_panels)
            return
        tabs.panels_mounted = True
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
        self.call_later(self._paint_mounted_panels, mounts, list(bodies.values()))

    async def _paint_mounted_panels(self, mounts: list[AwaitMount], bodies: list[VerticalScroll]) -> None:
        """After the tab bodies are in the DOM: paint them, and focus the shown tab's body
        when a tab other than the trace was chosen before they existed."""
        for mount in mounts:
            await mount
        if not all(body.is_attached for body in bodies):
            return  # the screen was taken down meanwhile (the app quits, or the screen was popped)
        self.query_one(CaseTabs).panels_in_dom = True
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

    def _panels_ready(self) -> bool:
        """The tab bodies are mounted lazily (after the trace tab paints); once they are,
        :meth:`_paint_mounted_panels` paints them all. (A flag: every update of the session
        asks, and a query walks the whole screen.)"""
        return self.query_one(CaseTabs).panels_in_dom

    def _paint_quotes(self, snap: CaseSnapshot) -> None:
        # a reload while a driver writes the case mostly changes its status: the quotes
        # list is rebuilt only when the quotes changed (a rebuild re-lays out the tab)
        quotes = self.query_one("#quotes", OptionList)
        highlighted = quotes.highlighted
        quotes.clear_options()
        for i, q in enumerate(snap.quotes):
            label = Content.assemble((f"step {q.step_index if q.step_index is not None else '?'} ", "bold $accent"), (f"[{q.category}] " if q.category else "", "dim"), ("\u201c" + q.text + "\u201d", "italic"))
            quotes.add_option(Option(label, id=f"quote-{i}"))
        if not snap.quotes:
            quotes.add_option(Option(Content("no observed_basis quotes"), disabled=True))
        elif highlighted is not None and highlighted < len(snap.quotes):
            quotes.highlighted = highlighted

    def _paint_privilege_bar(self) -> None:
        self.query_one(PrivilegeBar).show(self.session.revealed)

    def _paint_trace_status(self) -> None:
        session = self.session
        status = session.status_part()
        line = self.query_one("#trace-status", Static)
        if status.step_count is None:
            if session.trace_missing is not None:
                line.update(Content("source trace unavailable (why: above; every missing input: 5 Integrity)"), layout=False)
            elif status.parts:
                line.update(Content(safe_text(status.parts[0], single_line=True, limit=200)), layout=False)
            return
        # numbered as the rows are (the step's index in state.all_steps, from 0), so the
        # cursor, its row and "failure at N" name the same step
        cursor = self.query_one(TraceView).cursor
        head = f"step {cursor} (of 0\u2013{status.step_count - 1})" if status.step_count else "no steps"
        # every cursor move repaints it: a one-row bar (app.tcss), no layout pass
        line.update(Content(" \u00b7 ".join((head, *status.parts))), layout=False)

    def _paint_compare(self, snap: CaseSnapshot) -> None:
        c = snap.compare.compare
        if c is None:
            if snap.compare.no_trace:  # no trace will come: say so instead of waiting
                self.query_one("#compare-left", Static).update(Content("no source trace to compare (the Trace tab says why)"))
            return
        left = [L(Seg(c.left_title, "title"))] + c.left
        right = [L(Seg(c.right_title, "title"))] + c.right
        self.query_one("#compare-left", Static).update(doc_content(left, snap.compare.revealed))
        self.query_one("#compare-right", Static).update(doc_content(right, snap.compare.revealed))
        if c.note:
            self.query_one("#compare-note", Static).update(Content(c.note))

    # -- live updates (called by the app) ----------------------------------------------------
    def case_files_changed(self, paths: set[str]) -> None:
        """Files changed (the app's watcher): the session reloads the case if they are its."""
        self.session.files_changed(paths)

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
        elif not self._panels_ready():
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
        if self.session.trace_rows is None or self.session.trace is None:
            self.notify("The trace is still loading", markup=False)
            return
        self.action_tab("trace")
        box = self.query_one("#trace-search", SearchBox)
        box.remove_class("-hidden")
        box.focus()
        box.select_all()

    @on(Input.Changed, "#trace-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.session.search_typed(event.value, lambda: self.query_one(TraceView).cursor)

    @on(Input.Submitted, "#trace-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.session.search(event.value, 1, self.query_one(TraceView).cursor)

    @on(SearchBox.Step)
    def _search_step(self, event: SearchBox.Step) -> None:
        self.session.search(self.query_one("#trace-search", SearchBox).value, event.direction, self.query_one(TraceView).cursor)

    @on(SearchBox.Closed)
    def _search_closed(self) -> None:
        self.query_one("#trace-search", SearchBox).add_class("-hidden")
        self.query_one(TraceView).focus()
        self.session.search_closed()  # closing the search clears its marks and its status

    # -- a step's detail -----------------------------------------------------------------------
    def action_step_detail(self) -> None:
        trace = self.session.trace
        if trace is None:
            self.notify("The trace is still loading", markup=False)
            return
        # the background fill pauses from the key press until the detail is painted (it
        # would share the interpreter with the detail's parse, layout and paint)
        release = self.session.begin_detail()
        self._detail(self.session, trace, self.query_one(TraceView).cursor, release)

    @work(thread=True, exclusive=True, group="case-detail", exit_on_error=False)
    def _detail(self, session: CaseSession, trace: SourceTrace, index: int, painted: Callable[[], None]) -> None:
        self.post_message(M.StepDetailReady(index, session.detail_doc(trace, index), painted))

    @on(M.StepDetailReady)
    def _on_detail(self, message: M.StepDetailReady) -> None:
        index = message.index
        self.app.push_screen(StepDetailScreen(index, message.detail, self.session.revealed, painted=message.painted),
                             callback=lambda result: self._open_tokens(f"step:{index}") if result == "tokens" else None)

    def action_toggle_reveal(self) -> None:
        revealed = self.session.toggle_reveal()
        if hasattr(self.app, "reveal_privileged"):
            self.app.reveal_privileged = revealed  # every case opened next shows it too (this session)
        self.notify("Privileged material shown" if revealed else "Privileged material hidden", markup=False, timeout=1.5)

    def action_reload(self) -> None:
        self.session.load()

    @on(OptionList.OptionSelected, "#quotes")
    def _quote_selected(self, event: OptionList.OptionSelected) -> None:
        view = self.session.view
        if view is None or event.option_id is None:
            return
        index = int(event.option_id.split("-", 1)[1])
        quote = view.quotes[index]
        if quote.step_index is None:
            self.notify("This quote names no step", markup=False)
            return
        self._trace_goto(quote.step_index)

    @on(TraceView.StepHighlighted)
    def _step_highlighted(self, event: TraceView.StepHighlighted) -> None:
        self._paint_trace_status()

    @on(TraceView.RowsWanted)
    def _on_rows_wanted(self, message: TraceView.RowsWanted) -> None:
        message.stop()
        self.session.rows_wanted(message.start, message.end)

    # -- triage: the label, the queue ------------------------------------------------------------
    def _triage_row(self) -> CaseRow | None:
        """This case as the runs store lists it (its record key), else as the case view
        read it (a case opened from elsewhere than the runs table)."""
        row = self.eviscene.store.get(self.key)
        view = self.session.view
        if row is not None and row.record is None and view is not None:
            row.record = view.record  # read with the case (the labels have not been read yet)
        if row is not None and row.record is not None:
            return row
        if view is None or view.record is None:
            return None
        ref = self.ref
        return CaseRow(key=self.key, case_id=view.case_id, candidate_id=view.candidate_id, ref=ref
                       if not isinstance(ref, Path) else CaseRef(path=ref, layout=Layout.UNKNOWN), record=view.record)
    def _current_triage(self) -> Triage | None:
        row = self._triage_row()
        return self.eviscene.triage.for_key(row.record) if row is not None else None

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
        if row is None or not self.eviscene.undo_triage(row):
            self.notify("No triage change of this case to undo", markup=False)

    def action_queue(self, step: int, *, after_label: bool = False) -> None:
        """Open the next (``step`` 1) or previous (-1) case of the runs table's current
        queue (its filter, search, sort and grouping) in place of this one."""
        row = self.eviscene.store.neighbour(self.key, step)
        if row is None:
            where = "last" if step > 0 else "first"
            self.notify(f"This is the {where} case of the queue" + (" (label saved)" if after_label else ""), markup=False, timeout=2)
            return
        self.show_case(row.ref if row.ref is not None else self.case_path, row.key)

    #: the worker groups of the screen that read the case shown (cancelled when another is shown)
    SCREEN_WORKERS = ("case-detail", "tokens-prepare")

    def show_case(self, ref: CaseRef | CaseSummary | Path, key: str) -> None:
        """Show another case in this screen (the next case of the queue): its widgets stay,
        so the case is painted as soon as it is read (a new screen is composed, styled and
        laid out first)."""
        self.app.post_message(M.CaseShown(str(self.case_path), False))
        for group in (*GROUPS, *self.SCREEN_WORKERS):
            self.workers.cancel_group(self, group)
        self.session.close()
        self.query("#case-gate").remove()
        self.session = self._session_for(ref, key, revealed=self.session.revealed)
        self.session.watch_store(self.eviscene.store)
        self._reset_widgets()
        self._mount_gate_card()
        self.app.post_message(M.CaseShown(str(self.case_path), True))
        self.session.load()

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
        tabs = self.query_one(CaseTabs)
        tabs.get_tab("integrity").label = Content("5 Integrity \u2026")
        tabs.badge_painted = None
        if self.query("#loc-doc"):
            loading = Content("loading\u2026")
            for doc in ("#loc-doc", "#rounds-doc", "#compare-left", "#compare-right", "#integrity-doc"):
                self.query_one(doc, Static).update(loading)
            self.query_one("#quotes", OptionList).clear_options()
        self.action_tab("trace")

    def _prefetch_next(self) -> None:
        """Read the next case of the queue in the background (``]`` or a label pick opens it)."""
        row = self.eviscene.store.neighbour(self.key, 1)
        if row is not None and row.ref is not None:
            self.eviscene.prefetch_case(row.ref.path, row.key)

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        return [("case: clear triage label", "Remove the case's label (journaled; u undoes it)", self.action_clear_label)]

    def _need_bundle(self, what: str = "", then: Callable[[], object] | None = None) -> bool:
        """True when the case's files are read. Otherwise say what is still being read
        and, with ``then``, run it as soon as they are (the last key pressed wins)."""
        if self.bundle is not None:
            return True
        reading = "the case's files (manifest, rounds, hints, run inputs, integrity bindings)"
        if then is not None:
            self.session.defer(then)
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
        self.eviscene.open_gate(message.root)

    def action_toggle_wrap(self) -> None:
        tv = self.query_one(TraceView)
        tv.set_wrap(not tv.wrapped)
        self.notify("Trace rows wrapped" if tv.wrapped else "Trace rows cut at the edge (w wraps)", markup=False, timeout=1.5)

    def action_open_tokens(self) -> None:
        source = None
        view = self.session.view
        if self.session.trace_rows is not None:
            source = f"step:{self.query_one(TraceView).cursor}"
        elif view is not None and view.failure_index is not None:
            source = f"step:{view.failure_index}"
        self._open_tokens(source)

    def _open_tokens(self, source: str | None) -> None:
        if not self._need_bundle("token inspector", lambda: self._open_tokens(source)):
            return
        bundle = self.session.bundle
        if source is None or bundle is None:
            self.app.push_screen(TokenScreen(bundle, self.options, source=source, integrity=self.session.integrity_for_tokens()))
            return
        # the capture is read and laid out first, and the token screen pushed with it: beside
        # this idle screen the worker runs at full speed (pushed first, it shared the
        # interpreter with the new screen's first layout and paint)
        self.query_one("#trace-status", Static).update(Content(f"opening the token capture of {source}\u2026"), layout=False)
        ticket = self.session.begin_tokens()  # the case's background work waits until it is painted
        self._prepare_tokens(ticket, bundle, source)

    @work(thread=True, exclusive=True, group="tokens-prepare", exit_on_error=False)
    def _prepare_tokens(self, request: int, bundle: CaseBundle, source: str) -> None:
        self.post_message(M.TokensPrepared(request, source, prepare_capture(bundle, source, self.options)))

    @on(M.TokensPrepared)
    def _on_tokens_prepared(self, message: M.TokensPrepared) -> None:
        self._paint_trace_status()
        current, hold = self.session.tokens_answered(message.request)
        if not current:
            return  # a later k asked again, or another case is shown: nothing to open
        if self.app.screen is not self:
            if hold is not None:
                hold.release()
            return
        screen = TokenScreen(self.session.bundle, self.options, source=message.source, prepared=message.answer,
                             integrity=self.session.integrity_for_tokens())
        self.app.push_screen(screen)
        if hold is not None:
            screen.call_after_refresh(hold.release)  # the capture is on screen
            # whatever becomes of that refresh (the screen popped first): the app's timer, which
            # outlives both screens (the session's stops with this screen)
            self.app.set_timer(FOREGROUND_LIMIT, hold.release)
