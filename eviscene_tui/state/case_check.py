"""The open case's full integrity check, run in a process of its own below the app's priority.

The check reads and parses every file of the case, hashes the bound inputs and parses the
source trace (one ``orjson.loads`` of a whole document holds the interpreter lock for as long
as it takes). On a thread of the app it shares the lock with the UI thread, so right after a
case painted its failure step (when the check starts) a key or a token capture opened with
``k`` waited for it. Here it runs in one spawned process, niced (:data:`CHECK_NICE`): the app's
own process goes first whenever they share a core, and the check still has every core the app
leaves idle; and it follows the app's input clock (``pace.follow_clock``): between its units
of work (before a big parse, each MiB hashed) it gives way to a key and waits while the app
serves work the operator waits for (a capture opened with ``k``). The process is started at
the first check (or while the app is idle, :meth:`CheckProcess.warm`) and kept for the next
cases (a spawn costs an interpreter start and the package's imports: paid once).

Without a process (no semaphores, no fork, a worker killed) the check runs on the calling
thread, as background work too (``pace.background``). The switch ``check_process`` turns the
process off (``switches.py``): the benchmark compares the two.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TypeVar

from eviscene_tui import pace, switches
from eviscene_tui.artifacts.layout import CaseRef
from eviscene_tui.artifacts.paths import InputProvenance, PathMap
from eviscene_tui.artifacts.report import checked_case
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.scan import _start_resource_tracker

ProblemRow = tuple[str, str, str]  # (code, path, message)
T = TypeVar("T")

#: how much lower than the app the check's process runs: the same as the scan's pool (a key,
#: a capture opened with k go first when they share a core)
CHECK_NICE = 5
#: seconds between two looks whether the waiting check was cancelled
POLL = 0.1


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One case's problems: paths relative to the key root (``rows``) and to the case
    (``in_case``), the inputs it hashed, and the process that ran the check."""

    rows: tuple[ProblemRow, ...]
    in_case: tuple[ProblemRow, ...]
    checked: tuple[InputProvenance, ...]
    pid: int
    nice: int | None


def _relpath(path: str, base: str | os.PathLike[str]) -> str:
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path


def case_problems(ref: CaseRef, key_root: str, case_path: str, path_map: PathMap | None) -> CheckOutcome:
    """The full check of one case (a module-level function: the check's process runs it)."""
    checked: list[InputProvenance] = []
    with pace.background():  # nobody waits for it: the operator's keys and captures go first
        _summary, problems = checked_case(ref, key_root, path_map=path_map, provenance=checked)
    rows, in_case = [], []
    for p in problems:
        code, message = str(p.code), safe_text(p.message, single_line=True, limit=500)
        rows.append((code, safe_text(_relpath(p.path, key_root), single_line=True), message))
        in_case.append((code, safe_text(_relpath(p.path, case_path), single_line=True), message))
    return CheckOutcome(tuple(rows), tuple(in_case), tuple(checked), os.getpid(), _niceness())


def _niceness() -> int | None:
    try:
        return os.nice(0)
    except (AttributeError, OSError):
        return None


def _background_call(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` as background work (in the check's process: its loops follow the app's clock)."""
    with pace.background():
        return fn(*args)


def _process_start(clock: object) -> None:
    """The check's process starts below the app's priority (Unix; elsewhere as it is), and
    its loops give way to the app's keys and foreground work (``clock``: the app's
    ``pace.share_clock``)."""
    try:
        os.nice(CHECK_NICE)
    except (AttributeError, OSError):
        pass
    pace.follow_clock(clock)


class CheckProcess:
    """The one process the case screens' integrity checks (and a small folder's integrity
    pass, in batches) run in, started at the first or by :meth:`warm`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._failed = False  # the process could not be started: checks run on their thread

    def run(self, ref: CaseRef, key_root: str, case_path: str, path_map: PathMap | None,
            *, cancelled: Callable[[], bool] = lambda: False) -> CheckOutcome | None:
        """The case's check outcome (None: cancelled while it ran). Blocks: a worker thread's.
        An exception of the check itself is raised here."""
        return self.call(case_problems, ref, key_root, case_path, path_map, cancelled=cancelled)

    def call(self, fn: Callable[..., T], *args: object, cancelled: Callable[[], bool] = lambda: False) -> T | None:
        """``fn(*args)`` in the process, as background work (``fn``: a module-level function;
        here, on this thread, when there is no process), None when ``cancelled`` while it
        ran. Blocks: a worker thread's."""
        future = self._submit_call(fn, *args) if switches.on("check_process") else None
        if future is None:
            return _background_call(fn, *args)
        while True:
            try:
                return future.result(timeout=POLL)
            except FutureTimeout:
                if cancelled():
                    future.cancel()
                    return None
            except BrokenProcessPool:  # the process died (killed, out of memory): once more here
                self._drop()
                return _background_call(fn, *args)

    def warm(self) -> None:
        """Start the process now (its interpreter and imports) if it is not running: called
        while the app is idle, so the first case opened finds it ready. Never blocks."""
        if not switches.on("check_process"):
            return
        with self._lock:
            if self._pool is not None or self._failed:
                return
        self._submit_call(os.getpid)

    def _submit_call(self, fn: Callable[..., T], *args: object) -> Future[T] | None:
        with self._lock:
            if self._failed:
                return None
            try:
                if self._pool is None:
                    _start_resource_tracker()
                    # the app runs threads: forking it is unsafe, so the process is spawned
                    self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                     initializer=_process_start, initargs=(pace.share_clock(),))
                return self._pool.submit(_background_call, fn, *args)
            except BrokenProcessPool:
                self._pool = None
                return None
            except (OSError, RuntimeError, ValueError):  # no semaphores, no process
                self._failed = True
                self._pool = None
                return None

    def _drop(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> bool:
        """Whether the process is started (or starting)."""
        return self._pool is not None

    def close(self) -> None:
        """End the process (the next check starts another)."""
        self._drop()


#: the app's one check process
CHECKS = CheckProcess()

__all__ = ["CHECKS", "CHECK_NICE", "CheckOutcome", "CheckProcess", "case_problems"]
