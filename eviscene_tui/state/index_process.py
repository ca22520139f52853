"""Big source traces indexed in a process of the app's own, begun as the case is opened.

Opening a case with a big trace waits for the byte scan that builds its step index
(``artifacts.step_index``). On a thread of the app that scan shares the interpreter lock
with the UI thread, which is busy mounting and painting the case screen at that very
moment: each waits for the other (the text-heavy trace's open: the scan's 60 ms of CPU
took 100 ms and more). Here the scan runs in one spawned process, at the app's priority
(the operator waits for it), and it starts when the operator presses Enter, before the
case screen is built: :meth:`IndexProcess.begin` (the UI thread; it never blocks) sends
the case folder to the process, which reads the case as the app does, and indexes its
source trace when it is a plain one of at least ``trace.LAZY_MIN_BYTES``, and builds the
quick briefs of the steps around its failure step (the rows painted first). The case's load
step takes the answer (:meth:`IndexProcess.take`) and ``artifacts.trace`` uses it only for
the very file it opened (same path, device, inode, size and modification time);
otherwise, and whenever the process is not there yet, cannot start, dies or fails, the
scan runs on the load step's thread as before, and reports what it finds.

The process is started while the app is idle (:meth:`IndexProcess.warm`, beside the
check process's), never at a key press: a case opened before it is ready is indexed on
its thread. The switch ``index_process`` turns it off (``switches.py``): the benchmark
compares the two. Textual-free.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import NamedTuple, TypeVar

from eviscene_tui import switches
from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.fileio import open_regular
from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.artifacts.step_index import StepIndex, index_steps
from eviscene_tui.artifacts.trace import ForeignIndex, ForeignSteps, StepBrief, quick_briefs
from eviscene_tui.state.case_view import failure_index_for
from eviscene_tui.state.scan import _start_resource_tracker

#: seconds between two looks whether the load step waiting for an index was cancelled
POLL = 0.1

Identity = tuple[int, int, int, int]
T = TypeVar("T")


class RemoteIndex(NamedTuple):
    """The index process's answer for one case: the trace it read (as the case resolves
    it), that file's identity when it was read, its index (None: the index declined it),
    and the seconds the process spent."""

    path: str
    identity: Identity
    step_index: StepIndex | None
    quick_briefs: dict[int, StepBrief]
    seconds: float


def file_identity(st: os.stat_result) -> Identity:
    """Device, inode, size and modification time: the same file, unchanged."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def index_case_trace(case_path: str, path_map: PathMap | None, window: int, min_bytes: int) -> RemoteIndex | None:
    """The step index of the case's source trace and the quick briefs of the ``window``
    steps each side of its failure step (runs in the index process), or None when there
    is nothing for it to index (no trace, a gzip one, one smaller than ``min_bytes``: the
    app's ``trace.LAZY_MIN_BYTES``). An exception is the app's cue to index the trace on
    its own thread (which reports it)."""
    started = time.perf_counter()
    bundle = load_case(Path(case_path), path_map=path_map)
    path = bundle.source_trace_path
    if path is None or str(path).endswith(".gz"):
        return None  # a gzip trace is decompressed into the app's spool as it is indexed
    with open_regular(path) as fh:
        st = os.fstat(fh.fileno())
        if st.st_size < min_bytes or fh.read(2) == b"\x1f\x8b":
            return None
        fh.seek(0)
        index = index_steps(fh)
    briefs: dict[int, StepBrief] = {}
    failure = failure_index_for(bundle)
    if index is not None and failure is not None:
        briefs = quick_briefs(index, path, range(failure - window, failure + window))
    return RemoteIndex(str(path), file_identity(st), index, briefs, time.perf_counter() - started)


def _ready() -> int:
    return os.getpid()


class IndexProcess:
    """The one process big source traces are indexed in, and the case being indexed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._failed = False  # the process could not be started: traces are indexed on their thread
        self._warmed: Future[int] | None = None  # the process's first call: once answered, cases opened are sent to it
        self._pending: tuple[str, Future[RemoteIndex | None]] | None = None  # (case folder, its answer)

    def warm(self) -> Future[int] | None:
        """Start the process now (its interpreter and imports) if it is not running: called
        while the app is idle. Never blocks. The process's first call (its answer: the
        process id), None when there is no process or it was started before."""
        if not switches.on("index_process"):
            return None
        with self._lock:
            if self._pool is not None or self._failed:
                return None
            self._warmed = self._submit(_ready)
            return self._warmed

    @property
    def ready(self) -> bool:
        """Whether a case opened now is indexed in the process (it is started and answered)."""
        warmed = self._warmed
        return (self._pool is not None and warmed is not None and warmed.done() and not warmed.cancelled()
                and warmed.exception() is None)

    def begin(self, case_path: str | os.PathLike[str], path_map: PathMap | None, *, window: int) -> bool:
        """Send the case being opened to the process (the UI thread: never blocks), with
        how many rows each side of its failure step the screen builds first; False when
        it is not ready (its trace is then indexed on the load step's thread)."""
        if not switches.on("index_process") or not self.ready:
            return False
        key = os.path.abspath(case_path)
        with self._lock:
            previous, self._pending = self._pending, None
            if previous is not None:
                previous[1].cancel()  # a case opened and left before its turn
            future = self._submit(index_case_trace, key, path_map, window, trace_module.LAZY_MIN_BYTES)
            if future is None:
                return False
            self._pending = (key, future)
        return True

    def take(self, case_path: str | os.PathLike[str], cancelled: Callable[[], bool] = lambda: False) -> ForeignIndex | None:
        """The process's answer for this case, as ``artifacts.trace`` takes it (taken once;
        None when the case was not sent). Its call blocks: the load step's thread."""
        key = os.path.abspath(case_path)
        with self._lock:
            pending = self._pending
            if pending is None or pending[0] != key:
                return None
            self._pending = None
        future = pending[1]

        def answer(path: Path, st: os.stat_result) -> ForeignSteps | None:
            remote = self._wait(future, cancelled)
            if remote is None or remote.path != str(path) or remote.identity != file_identity(st):
                return None  # not this file (replaced meanwhile), or no answer: scanned here
            return ForeignSteps(remote.step_index, remote.quick_briefs)

        return answer

    def _wait(self, future: Future[RemoteIndex | None], cancelled: Callable[[], bool]) -> RemoteIndex | None:
        while True:
            try:
                return future.result(timeout=POLL)
            except FutureTimeout:
                if cancelled():
                    future.cancel()
                    return None
            except BrokenProcessPool:  # the process died (killed, out of memory)
                self.close()
                return None
            except CancelledError:
                return None
            except Exception:  # noqa: BLE001 - the scan on the load step's thread reports it precisely
                return None

    def _submit(self, fn: Callable[..., T], *args: object) -> Future[T] | None:
        # with the lock held
        if self._failed:
            return None
        try:
            if self._pool is None:
                _start_resource_tracker()
                # the app runs threads: forking it is unsafe, so the process is spawned
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            return self._pool.submit(fn, *args)
        except BrokenProcessPool:
            self._pool = self._warmed = None
            return None
        except (OSError, RuntimeError, ValueError):  # no semaphores, no process
            self._failed = True
            self._pool = None
            return None

    def close(self) -> None:
        """End the process (the next :meth:`warm` starts another)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._warmed = self._pending = None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


#: the app's one index process
INDEXES = IndexProcess()

__all__ = ["INDEXES", "IndexProcess", "RemoteIndex", "file_identity", "index_case_trace"]
