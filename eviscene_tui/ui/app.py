"""The eviscene-tui Textual application.

Data flow (one direction): workers read files through the artifact layer, build
Textual-free state (``eviscene_tui.state``) and post typed messages
(``ui.messages``); handlers here and in the screens update the store and widgets.
"""

from __future__ import annotations

import asyncio
import os
import queue
import time
from dataclasses import replace
from collections.abc import Callable, Iterable
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, get_current_worker
from watchfiles import awatch

from eviscene_tui.artifacts.report import PARALLEL_MIN_CASES
from eviscene_tui.options import AppOptions
from eviscene_tui.probes import AppProbes
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state import case_check, index_process
from eviscene_tui.state.case_session import WINDOW_LAZY
from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.runs import RunsStore
from eviscene_tui.state.scan_work import CheckResult
from eviscene_tui.state.scan import (
    CaseIndex,
    EntryPoller,
    KeyThrottle,
    LockedTransient,
    OpenCasePoller,
    ScannedTree,
    ScanPool,
    activity,
    batched,
    build_row,
    integrity_pass,
    outside,
    scan_large,
    supervised_stamp,
)
from eviscene_tui import pace
from eviscene_tui.ui import gc_hold
from eviscene_tui.ui import messages as M
from eviscene_tui.ui.actions import BY_ID, applied_keymap, bindings, effective_keys
from eviscene_tui.ui.executor import DaemonThreadExecutor
from eviscene_tui.ui.themes import DARK, DEFAULT_THEME, LIGHT, app_themes, theme_css_paths
from eviscene_tui.artifacts.layout import CaseRef, discover_cases
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import policy_config
from eviscene_tui.policy.status_line import ProfileError, status_summary
from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui.screens.case import CaseScreen
from eviscene_tui.ui.screens.gate import GateScreen
from eviscene_tui.ui.screens.help import HelpScreen, section_for
from eviscene_tui.ui.screens.runs import RunsScreen
from eviscene_tui.ui.triage_ops import TriageOps
from eviscene_tui.state.triage import TriageMarks

APP_CSS = Path(__file__).with_name("app.tcss")
#: the OS-level name of the native thread watchfiles runs inotify (or its polling) on


class EvisceneApp(TriageOps, App[int]):
    TITLE = "eviscene-tui"
    CSS_PATH = [APP_CSS, *theme_css_paths()]
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {lambda: CaseCommands}

    BINDINGS = bindings("app")

    #: (label, text) of the policy server status, polled every few seconds; None = no policy configured
    policy_status: reactive[tuple[str, str] | None] = reactive(None, always_update=True)

    def __init__(
        self,
        options: AppOptions,
        *,
        watch: bool = True,
        transient_grace: float = 2.0,
        scanned: ScannedTree | None = None,
    ) -> None:
        """``scanned``: the opened folder already scanned and checked (``state.scan.scan_tree``);
        the app then starts with its rows instead of scanning (a rescan scans)."""
        super().__init__()
        self.options = options
        self._scanned = scanned
        self.store = RunsStore()
        self.transient = LockedTransient(grace=transient_grace)
        self.case_index = CaseIndex()
        self.settings = options.settings  # read once by the CLI; never re-read here
        self.watch_enabled = watch
        self._scan_started = 0.0
        self._scan_id = 0  # results of an older scan's integrity pass are dropped
        self._scan_pool: ScanPool | None = None  # a large folder's process pool: the scan's, then its integrity pass's
        self._refresh_queue: queue.Queue[set[str]] = queue.Queue()
        self._stop_watch = asyncio.Event()
        self.watch_ready = asyncio.Event()
        self.watch_polling = False  # the watcher polls (--poll, or inotify failed): see OpenCasePoller
        self.open_cases: frozenset[str] = frozenset()  # roots of the cases open on screen (read by the refresher)
        self._case_screens: dict[str, int] = {}  # case root -> its case screens in the stack
        self.triage = TriageMarks()  # the listed cases' current triage labels (state.triage.load_triage)
        self.reveal_privileged = False  # v on a case screen: for every case until hidden again (this session)
        self.probes = AppProbes()  # what the tests and the bench count (eviscene_tui/probes.py)

    # -- lifecycle -----------------------------------------------------------------------
    def on_load(self) -> None:
        # every thread worker runs on a daemon thread that never holds the process open:
        # q quits even while a worker is stuck in a read (ui/executor.py)
        asyncio.get_running_loop().set_default_executor(DaemonThreadExecutor())

    def on_mount(self) -> None:
        for theme in app_themes():
            self.register_theme(theme)
        wanted = self.options.theme or self.settings.theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            self.notify(
                f"Unknown theme {safe_text(wanted, single_line=True, limit=60)!s}; using {DEFAULT_THEME}. "
                f"Available: {', '.join(sorted(self.available_themes))}",
                severity="warning",
                markup=False,
            )
            wanted = DEFAULT_THEME
        self.theme = wanted
        if self.settings.keys:
            self.set_keymap(self.settings.keys)
        for problem in self.settings.problems:
            self.notify(safe_text(problem, limit=300), title="config", severity="warning", markup=False, timeout=10)

        self.restore_view()
        self.push_screen(RunsScreen())
        if self._scanned is not None:
            self._adopt_scan(self._scanned)
            self.load_labels()  # its rows are here (a scan reads them when it finishes: _on_scan_finished)
        else:
            self.start_scan()
        self.refresher()
        if self.watch_enabled:
            self.watch_root()
        self.poll_policy_status()
        self.set_interval(self.ACTIVITY_INTERVAL, self.check_activity)
        self.set_interval(self.SUPERVISED_POLL, self.poll_supervised)
        self.set_interval(self.IDLE_GC_INTERVAL, self.collect_garbage_when_idle)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent):
            pace.note_input()
        await super().on_event(event)

    #: how often the app looks whether a deferred full garbage collection is due (ui/gc_hold.py)
    IDLE_GC_INTERVAL = 0.25

    def collect_garbage_when_idle(self) -> None:
        """While a screen holds big data off the garbage collector, run the full collection the
        interpreter deferred when the operator pauses (not in the middle of a page scroll)."""
        if gc_hold.idle_collection_due(pace.idle_seconds()):
            gc_hold.collect_deferred()
            self.probes.collected()

    async def action_quit(self) -> None:
        self._stop_watch.set()
        self._close_scan_pool()
        self.exit(0)

    def on_unmount(self) -> None:
        self._close_scan_pool()

    def _close_scan_pool(self, pool: ScanPool | None = None) -> None:
        """Shut down the scan's process pool (``pool``: only if it is still that one)."""
        current = self._scan_pool
        if current is not None and (pool is None or pool is current):
            self._scan_pool = None
            current.close()

    # -- policy status -------------------------------------------------------------------
    @work(exclusive=True, group="policy-status", exit_on_error=False)
    async def poll_policy_status(self) -> None:
        """Poll /health, /version, /v1/models and /metrics of the configured policy."""

        try:
            target = self.options.policy_target()
        except ProfileError as exc:
            self.post_message(M.PolicyStatusChanged("no policy", str(exc)))
            return
        if target is None:
            return
        self.post_message(M.PolicyStatusChanged(target.label, "polling " + ", ".join(target.base_urls)))
        async with PolicyClient(target, policy_config(self.settings.policy)) as client:
            async for statuses in client.poll_status():
                self.post_message(M.PolicyStatusChanged(target.label, f"{target.model}  {status_summary(statuses)}"))

    @on(M.PolicyStatusChanged)
    def _on_policy_status(self, message: M.PolicyStatusChanged) -> None:
        self.policy_status = (message.label, message.text)

    # -- scan ----------------------------------------------------------------------------
    def start_scan(self) -> None:
        self._scan_id += 1
        self.workers.cancel_group(self, "integrity")
        self._close_scan_pool()
        self.store.set_check_progress(0, 0, False)
        self.store.clear()
        self._scan_started = time.perf_counter()
        self.probes.scan_started()
        self.store.set_progress(0, True)
        self.scan()

    def _adopt_scan(self, tree: ScannedTree) -> None:
        """Start from a folder scanned and checked before the app opened: its rows and
        check results go through the same handlers as the scan worker's and the integrity
        pass's messages."""
        self._scan_id += 1
        self._scan_started = time.perf_counter()
        self.probes.scan_started()
        rows = [replace(row) for row in tree.rows]  # the store's own rows (a tree's are shared)
        self.store.set_progress(0, True)
        self._on_batch(M.SummariesBatch(rows, done=len(rows), initial=True))
        self.probes.scan_finished(0.0)
        self.store.set_progress(len(rows), False)
        for problem in tree.problems[:5]:
            self.notify(safe_text(problem, limit=300), title="discovery", severity="warning", markup=False)
        checks = list(tree.checks)
        self.store.set_check_progress(0, len(checks), True)
        self._on_integrity_checked(M.IntegrityChecked(self._scan_id, checks, done=len(checks), total=len(checks)))
        self._on_integrity_finished(M.IntegrityFinished(self._scan_id, len(checks), 0.0))
        self.check_activity()

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def scan(self) -> None:
        """Discover the cases and post their rows: the first :data:`PARALLEL_MIN_CASES`
        summarised here (they paint at once; the integrity pass checks them after the scan),
        the rest of a large folder read and fully checked in processes as discovery finds
        them (each row arrives with its final problem count)."""
        worker = get_current_worker()
        scan_id = self._scan_id
        root = self.options.root
        problems: list[Problem] = []
        started = time.perf_counter()
        key_base = self.options.key_root
        refs = discover_cases(root, problems)
        head = list(islice(refs, PARALLEL_MIN_CASES))
        pool = None
        if len(head) == PARALLEL_MIN_CASES:
            # a large folder: the pool's processes start (and import the checkers) once the
            # first rows are posted, while the rest of the first rows are read here; the
            # integrity pass of those rows uses it after
            pool = ScanPool()
            if scan_id == self._scan_id:
                self._scan_pool = pool
        finished = False
        try:
            done = self._post_rows((build_row(ref, key_base, self.transient, initial=True) for ref in head), 0, worker,
                                   after_first=pool.start if pool is not None else None)
            if pool is not None and not worker.is_cancelled:
                checked = 0
                for results in scan_large(refs, os.path.abspath(key_base), cancelled=lambda: worker.is_cancelled,
                                          path_map=self.options.path_map, pool=pool):
                    done += len(results)
                    checked += len(results)
                    self.post_message(M.SummariesBatch([row for row, _check in results], done=done, initial=True))
                    self.post_message(M.IntegrityChecked(scan_id, [check for _row, check in results], done=checked, total=checked))
            # the gated searches the app was told about outside the opened folder (not written yet: added once they are)
            extra = (build_row(ref, key_base, self.transient, initial=True)
                     for other in outside(root, self.options.gate_roots) if other.exists() for ref in discover_cases(other, problems))
            done = self._post_rows(extra, done, worker)
            finished = not worker.is_cancelled
        finally:
            if pool is not None and not finished:  # a scan cancelled or failed: no integrity pass takes its pool
                pool.close()
        if not finished:
            return
        self.post_message(
            M.ScanFinished(done, time.perf_counter() - started, [f"{p.code}: {p.path}: {p.message}" for p in problems])
        )

    def _post_rows(self, rows: Iterable[CaseRow], done: int, worker: Worker[None], *,
                   after_first: Callable[[], object] | None = None) -> int:
        """Post ``rows`` in batches (the scan worker's); how many rows are posted in all.
        ``after_first``: called once the first batch is posted (the first paint comes first)."""
        for batch in batched(rows):
            if worker.is_cancelled:
                return done
            first = done == 0
            done += len(batch)
            self.post_message(M.SummariesBatch(batch, done=done, initial=True))
            if first and after_first is not None:
                after_first()
        return done

    @on(M.SummariesBatch)
    def _on_batch(self, message: M.SummariesBatch) -> None:
        if self.triage.by_record:
            marked = []
            for r in message.rows:
                if r.record is None:
                    r.record = self.triage.records.get(r.key)
                t = self.triage.for_key(r.record)
                marked.append(replace(r, label=t.label, note=t.note.strip().split("\n", 1)[0]) if t is not None else r)
            message.rows = marked
        if not message.initial:
            # a re-read row keeps the supervised-search mark until the next activity pass,
            # and its record key (read with the labels)
            carried = []
            for row in message.rows:
                old = self.store.get(row.key)
                if old is not None and old.record is not None and row.record is None:
                    row.record = old.record
                carried.append(replace(row, supervised=old.supervised) if old is not None and old.supervised and not row.supervised else row)
            message.rows = carried
        for row in message.rows:
            self.case_index.add(row)
        self.store.upsert(message.rows)
        if message.initial:
            gc_hold.freeze_arrived()  # the scan's rows live as long as the store: off full collections
            self.store.set_progress(message.done, True)
            self.probes.first_rows(time.perf_counter() - self._scan_started)
        if any(r.being_written for r in message.rows):
            keys = {r.key for r in message.rows if r.being_written}
            self.set_timer(self.transient.grace + 0.3, lambda: self._recheck(keys))

    def _recheck(self, keys: set[str]) -> None:
        paths = set()
        for key in keys:
            ref = self.case_index.ref(key)
            if ref is not None:
                paths.add(os.path.abspath(str(ref.path)))
        if paths:
            self._refresh_queue.put(paths)

    @on(M.ScanFinished)
    def _on_scan_finished(self, message: M.ScanFinished) -> None:
        self.probes.scan_finished(message.seconds)
        self.store.set_progress(message.count, False)
        for problem in message.problems[:5]:
            self.notify(safe_text(problem, limit=300), title="discovery", severity="warning", markup=False)
        self.start_integrity_pass()
        self.load_labels()
        self.check_activity()

    # -- supervised searches of the cases and stale searches -------------------------------------
    ACTIVITY_INTERVAL = 30.0

    @work(thread=True, exclusive=True, group="activity", exit_on_error=False)
    def check_activity(self) -> None:
        """Which cases have a supervised search in the work directory, and which searches
        say ``searching`` but have gone quiet (read in a thread, applied by the handler)."""
        with pace.background():  # nobody waits for these marks the way they wait for a key
            marks = activity(self.store.rows(), self.read_workdirs(), opened=self.options.root)
        self.post_message(M.ActivityChecked(marks))

    @on(M.ActivityChecked)
    def _on_activity(self, message: M.ActivityChecked) -> None:
        self.store.apply_activity(message.marks)

    #: how often the work directory's supervised search state files are looked at (a few
    #: ``stat`` calls): a search run by this app or another instance shows in its row soon
    SUPERVISED_POLL = 1.0
    _supervised_stamp: tuple[tuple[str, int, int], ...] | None = None

    @work(thread=True, exclusive=True, group="supervised-poll", exit_on_error=False)
    def poll_supervised(self) -> None:
        self.post_message(M.SupervisedStamp(supervised_stamp(self.read_workdirs())))

    @on(M.SupervisedChanged)
    def _on_supervised_changed(self, _message: M.SupervisedChanged) -> None:
        self.check_activity()

    @on(M.SupervisedStamp)
    def _on_supervised_stamp(self, message: M.SupervisedStamp) -> None:
        if message.stamp != self._supervised_stamp:
            self._supervised_stamp = message.stamp
            self.check_activity()

    # -- full integrity pass (the same result as ``check``) -----------------------------------
    def start_integrity_pass(self) -> None:
        """Check every listed case fully, the visible ones first; rows update as results arrive."""
        store = self.store
        first = [r for r in store.visible() if not r.checked]
        seen = {r.key for r in first}
        rest = [r for r in store.rows() if not r.checked and r.key not in seen]
        items = [(r.key, r.ref) for r in first + rest if isinstance(r.ref, CaseRef)]
        store.set_check_progress(0, len(items), bool(items))
        if items:
            self.check_integrity(self._scan_id, items, self._scan_pool)
        else:
            self._close_scan_pool()
            self.probes.check_finished(0.0)
            case_check.CHECKS.warm()  # idle until a case is chosen: its check process starts now
            index_process.INDEXES.warm()  # and the process that indexes a big source trace

    @work(thread=True, exclusive=True, group="integrity", exit_on_error=False)
    def check_integrity(self, scan_id: int, items: list[tuple[str, CaseRef]], pool: ScanPool | None = None) -> None:
        """The full check of ``items`` (in ``pool``, the scan's warm process pool, when
        the folder is large; it is shut down when the pass ends)."""
        try:
            self._check_integrity(scan_id, items, pool)
        finally:
            if pool is not None:
                pool.close()

    def _check_integrity(self, scan_id: int, items: list[tuple[str, CaseRef]], pool: ScanPool | None) -> None:
        worker = get_current_worker()
        started = time.perf_counter()
        base = os.path.abspath(self.options.key_root)
        done = 0
        pending: list[CheckResult] = []
        last_post = time.monotonic()
        try:
            # nobody waits for a row's problem count the way they wait for a key or a capture
            # opened meanwhile (the pass hashes every case's bound inputs): keys go first
            with pace.background():
                # a large folder in the scan's warm pool; a small one in the case screen's
                # check process (niced, following the app's input clock): its parses never
                # hold this process's interpreter lock
                for results in integrity_pass(items, base, cancelled=lambda: worker.is_cancelled, path_map=self.options.path_map,
                                              pool=pool, run=case_check.CHECKS.call):
                    pending.extend(results)
                    if time.monotonic() - last_post >= 0.2:
                        done += len(pending)
                        self.post_message(M.IntegrityChecked(scan_id, pending, done=done, total=len(items)))
                        pending, last_post = [], time.monotonic()
        except (OSError, RuntimeError, ValueError) as exc:
            self.post_message(M.IntegrityFinished(scan_id, done, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"))
            return
        if worker.is_cancelled:
            return
        done += len(pending)
        if pending:
            self.post_message(M.IntegrityChecked(scan_id, pending, done=done, total=len(items)))
        self.post_message(M.IntegrityFinished(scan_id, done, time.perf_counter() - started))

    @on(M.IntegrityChecked)
    def _on_integrity_checked(self, message: M.IntegrityChecked) -> None:
        if message.scan != self._scan_id:
            return
        applied = []
        for result in message.results:
            self.probes.checked_by(result.checked_by)
            # a torn file the scan did not read (a round's manifest) is only "being written"
            # when it changed recently, as for the files the scan did read
            self.transient.seed_old(result.key, result.old_problems(self.transient.grace))
            settled, fresh = self.transient.classify(result.key, result.problems)
            applied.append((result.key, tuple(settled), tuple(fresh)))
        self.store.apply_checks(applied)
        self.store.set_check_progress(message.done, message.total, True)
        writing = {key for key, _settled, fresh in applied if fresh}
        if writing:
            self.set_timer(self.transient.grace + 0.3, lambda: self._recheck(writing))

    @on(M.IntegrityFinished)
    def _on_integrity_finished(self, message: M.IntegrityFinished) -> None:
        if message.scan != self._scan_id:
            return
        self.probes.check_finished(message.seconds)
        self.store.set_check_progress(message.count, self.store.check_total, False)
        # the app is idle until a case is chosen: the case screen's check process starts now
        case_check.CHECKS.warm()
        index_process.INDEXES.warm()
        if message.error:
            self.notify("Integrity check stopped: " + safe_text(message.error, single_line=True, limit=300), severity="error", markup=False)

    @on(M.CasesRemoved)
    def _on_removed(self, message: M.CasesRemoved) -> None:
        for key in message.keys:
            self.case_index.remove(key)
        self.store.remove(message.keys)

    # -- live updates --------------------------------------------------------------------
    @work(exclusive=True, group="watch", exit_on_error=False)
    async def watch_root(self) -> None:
        root = str(self.options.root)
        kwargs: dict[str, Any] = {"debounce": 150, "step": 40, "recursive": True, "ignore_permission_denied": True}
        if self.options.poll:
            kwargs.update(force_polling=True, poll_delay_ms=250)
        for attempt in range(2):
            try:
                watcher = awatch(root, stop_event=self._stop_watch, **kwargs)
                self.watch_polling = bool(kwargs.get("force_polling"))
                self.watch_ready.set()
                async for changes in watcher:
                    paths = {os.path.abspath(path) for _change, path in changes}
                    if paths:
                        self.post_message(M.FilesChanged(paths))
                return
            except Exception as exc:  # noqa: BLE001 - a watcher failure is notified and falls back to polling
                if attempt == 0 and not kwargs.get("force_polling"):
                    # e.g. the inotify watch limit on a huge tree: fall back to polling
                    kwargs.update(force_polling=True, poll_delay_ms=500)
                    self.notify(
                        f"File watcher failed ({type(exc).__name__}: {safe_text(exc, single_line=True, limit=160)}); polling instead",
                        severity="warning",
                        markup=False,
                    )
                    continue
                self.notify(
                    f"Live updates stopped: {type(exc).__name__}: {safe_text(exc, single_line=True, limit=200)}",
                    severity="warning",
                    markup=False,
                )
                return

    @on(M.CaseShown)
    def _on_case_shown(self, message: M.CaseShown) -> None:
        root = os.path.abspath(message.path)
        count = self._case_screens.get(root, 0) + (1 if message.shown else -1)
        if count > 0:
            self._case_screens[root] = count
        else:
            self._case_screens.pop(root, None)
        self.open_cases = frozenset(self._case_screens)  # one reference swap: the refresher reads it

    @on(M.FilesChanged)
    def _on_files_changed(self, message: M.FilesChanged) -> None:
        self._refresh_queue.put(set(message.paths))

        for screen in self.screen_stack:
            if isinstance(screen, CaseScreen):
                screen.case_files_changed(message.paths)

    def refresh_paths(self, paths: Iterable[str]) -> None:
        """Re-summarise the cases containing ``paths`` (used by tests and the watcher)."""
        self._refresh_queue.put({os.path.abspath(p) for p in paths})

    #: a case whose files keep changing is re-read (its whole integrity check) at most this often
    REFRESH_GAP = 1.0
    #: with ``--poll``: how often the folders that hold cases are stat-ed for new entries
    ENTRY_POLL = 0.1

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def refresher(self) -> None:
        """Re-read the cases whose files changed (watcher batches, rechecks), coalesced:
        a burst of changes to one case is re-read at most every REFRESH_GAP seconds. With
        ``--poll`` this thread also looks for new cases every ENTRY_POLL seconds."""
        worker = get_current_worker()
        root = Path(self.options.root)
        root_abs = os.path.abspath(root)
        throttle = KeyThrottle(self.REFRESH_GAP)
        poller = EntryPoller(root_abs) if self.options.poll and self.watch_enabled else None
        idle = self.ENTRY_POLL if poller is not None else 0.25
        open_poller = OpenCasePoller()
        while not worker.is_cancelled:
            if self.watch_polling:
                # the polling watcher sees a file that keeps changing once a second: the open
                # cases' files are looked at here, often (they reach the screens as watcher news)
                changed = open_poller.tick(self.open_cases, time.monotonic())
                if changed:
                    self.post_message(M.FilesChanged(changed))
            paths = self._next_paths(throttle.wait(time.monotonic(), idle))
            if poller is not None:
                paths |= poller.tick(self.case_index.folders(), time.monotonic(), self._is_case)
            if worker.is_cancelled:
                return
            due = throttle.due(time.monotonic())
            if paths or due:
                self._refresh_once(paths, root, root_abs, throttle, due)

    def _is_case(self, path: str) -> bool:
        """``path`` is a listed case's root (or inside one)."""
        return self.case_index.case_for(path) is not None

    def _next_paths(self, timeout: float) -> set[str]:
        """Every path queued within ``timeout`` seconds (empty when none was)."""
        try:
            paths = self._refresh_queue.get(timeout=timeout) if timeout > 0 else self._refresh_queue.get_nowait()
        except queue.Empty:
            return set()
        try:
            while True:
                paths |= self._refresh_queue.get_nowait()
        except queue.Empty:
            pass
        return paths

    def _refresh_once(self, paths: set[str], root: Path, root_abs: str, throttle: KeyThrottle | None = None,
                      due: set[str] | None = None) -> None:
        known: set[str] = set()
        unknown_tops: set[str] = set()
        for path in paths:
            key = self.case_index.case_for(path)
            if key is not None:
                known.add(key)
                continue
            rel = os.path.relpath(path, root_abs)
            if rel.startswith(".."):
                continue
            first = rel.split(os.sep, 1)[0]
            unknown_tops.add(root_abs if first in (".", "") else os.path.join(root_abs, first))
        if throttle is not None:
            known = throttle.admit(known, time.monotonic()) | (due or set())
        rows = []
        removed = []
        for key in known:
            ref = self.case_index.ref(key)
            if ref is None:
                continue
            if not os.path.isdir(ref.path):
                removed.append(key)
                continue
            with pace.background():  # a listed case re-read after its files changed: keys go first
                rows.append(build_row(ref, self.options.key_root, self.transient, full=True, path_map=self.options.path_map))
        for top in unknown_tops:
            if not os.path.isdir(top):
                continue
            for ref in discover_cases(Path(top)):
                row = build_row(ref, self.options.key_root, self.transient, full=True, path_map=self.options.path_map)
                if self.store.get(row.key) is None or row.key not in known:
                    rows.append(row)
        if removed:
            self.post_message(M.CasesRemoved(removed))
        if rows:
            self.post_message(M.SummariesBatch(rows, done=len(rows), initial=False))

    # -- actions -------------------------------------------------------------------------
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        self.push_screen(HelpScreen(section_for(self.screen), config=self.settings.path))

    def action_toggle_theme(self) -> None:
        self.switch_theme(LIGHT if self.theme == DARK else DARK)

    def switch_theme(self, name: str) -> None:
        if name not in self.available_themes:
            self.notify(f"Unknown theme {safe_text(name, single_line=True, limit=60)}", severity="warning", markup=False)
            return
        self.theme = name
        self.notify(f"Theme: {name}", markup=False, timeout=2)

    def open_gate(self, root: Any) -> None:
        """The operator gate screen of a gated driver search (``eviscene-tui gate``)."""

        self.push_screen(GateScreen(GateSession(root, operator=self.options.operator), self.options))

    def open_case_by_key(self, key: str) -> None:
        """Open a case from anywhere (the palette): back to the runs screen first."""
        row = self.store.get(key)
        if row is None:
            self.notify("That case is no longer listed", severity="warning", markup=False)
            return

        while len(self.screen_stack) > 2 and not isinstance(self.screen, RunsScreen):
            self.pop_screen()
        self.open_case(row)

    def open_case(self, row: Any) -> None:
        ref = row.ref if hasattr(row, "ref") else row
        # its big source trace is indexed in the index process while the screen is built
        index_process.INDEXES.begin(ref if isinstance(ref, Path) else ref.path, self.options.path_map, window=WINDOW_LAZY)
        self.push_screen(CaseScreen(ref, self.options, key=getattr(row, "key", None)))

    # -- command palette -----------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield SystemCommand("theme: switch to dark", "Use the eviscene-dark theme", lambda: self.switch_theme(DARK))
        yield SystemCommand("theme: switch to light", "Use the eviscene-light theme", lambda: self.switch_theme(LIGHT))
        yield SystemCommand("theme: choose any theme", "Pick any registered Textual theme", self.action_change_theme)
        yield SystemCommand(
            "app: save screenshot", "Save an SVG screenshot of the current screen", lambda: self.set_timer(0.1, self.deliver_screenshot)
        )
        titles: set[str] = set()
        for title, help_text, callback in registry_commands(screen, self.get_key_display):
            titles.add(title.split("  (", 1)[0])
            yield SystemCommand(title, help_text, callback)
        provider = getattr(screen, "palette_commands", None)
        if provider is not None:
            for title, help_text, callback in provider():
                if title not in titles:  # already offered with its key from the registry
                    yield SystemCommand(title, help_text, callback)


def registry_commands(screen: Screen, display: Callable[[Binding], str]) -> list[tuple[str, str, Callable[[], Any]]]:
    """Palette commands for every registered binding active on ``screen`` (its focused
    widget chain, the screen and the app), each titled with the key that runs it."""
    out: list[tuple[str, str, Callable[[], Any]]] = []
    seen: set[str] = set()
    keymap: dict[str, str] = applied_keymap(screen.app)
    for active in screen.active_bindings.values():
        action_id = active.binding.id
        action = BY_ID.get(action_id) if action_id else None
        if action is None or action.command is None or action.id in seen:
            continue
        seen.add(action.id)
        keys = ", ".join(display(Binding(k, action.action, action.label)) for k in effective_keys(action, keymap))
        node = active.node
        out.append((f"{action.command}  ({keys})", action.help, partial(screen.app.run_action, action.action, node)))
    return out


class CaseCommands(Provider):
    """"open: <case>" for every case in the runs store, matched by path or case id."""

    async def search(self, query: str) -> Hits:
        app = self.app
        if not isinstance(app, EvisceneApp):
            return
        text = query.strip()
        for prefix in ("open:", "open"):
            if text.lower().startswith(prefix):
                text = text[len(prefix):].strip()
                break
        if not text:
            return
        matcher = self.matcher(text)
        for i, row in enumerate(app.store.rows()):
            if i % 500 == 499:
                await asyncio.sleep(0)  # keep the palette responsive on 10,000 cases
            label = row.key if not row.case_id or row.case_id == row.key else f"{row.key}  {row.case_id}"
            score = matcher.match(label)
            if score > 0:
                yield Hit(
                    score,
                    Content.assemble("open: ", matcher.highlight(label)),
                    lambda r=row: app.open_case_by_key(r.key),
                    text=f"open: {label}",
                    help=f"open this case ({row.status})",
                )
