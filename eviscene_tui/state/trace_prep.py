"""A case screen's big source trace indexed in a process of its own while the screen is built.

Opening a case with a big plain trace waits for one scan of the trace's bytes (the step
index, ``artifacts.step_index``): about 0.1 s of one core for 200 MB. On a thread of the app
that scan shares the interpreter lock with the UI thread, which is composing, styling and
laying out the new screen at the same moment, so the two take turns on one core. Here the
scan runs in one warm process (:data:`TRACE_PREP`, started while the app is idle, at the
app's priority: the operator waits for it), on the other core, and starts as the screen is
created, before it is composed: the process reads the case as the screen will (to find the
trace) and indexes the trace; the screen's load step takes the finished index for the same
file (:meth:`TracePrep.indexer`). Only the index crosses between the processes (two arrays
of offsets and the document around the steps); the steps are read by the app, from its own
descriptor, which checks that the file is the size it was when it was indexed.

When the process is not running yet (it is never started for an open: a start costs more
than the scan), is switched off (``trace_process``), died, or found something else (no
trace, a small one, a gzip one, a file it declines), the load step scans on its own
thread as before. Textual-free.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.artifacts.step_index import StepIndex
from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.trace import TraceIndexer, index_plain_trace
from eviscene_tui.state.case_check import WarmProcess

#: the process the case screens' trace scans run in: at the app's priority
TRACE_PREP = WarmProcess(nice=0, background=False, switch="trace_process")


@dataclass(frozen=True, slots=True)
class PreparedIndex:
    """The trace a case refers to (its path as the case resolved it), its step index (None:
    the scan declined it) and the process that scanned it."""

    path: str
    index: StepIndex | None
    pid: int


def prepared_index(case_path: str, path_map: PathMap | None, min_bytes: int) -> PreparedIndex | None:
    """The case's plain source trace of ``min_bytes`` or more indexed (a module-level
    function: the process runs it), or None when there is nothing to index here (no trace,
    smaller, gzip, unreadable)."""
    try:
        path = load_case(Path(case_path), path_map=path_map).source_trace_path
        if path is None or str(path).endswith(".gz") or os.stat(path).st_size < min_bytes:
            return None
    except Exception:  # noqa: BLE001 - the load step reads the case again and reports
        return None
    return PreparedIndex(str(path), index_plain_trace(path), os.getpid())


class TracePrep:
    """One case's trace index, started in :data:`TRACE_PREP` (when it runs) as the case
    screen is created; ``indexed_by``: the process whose index the load took (this one's
    when it scanned on its own thread)."""

    def __init__(self, case_path: Path, path_map: PathMap | None, process: WarmProcess = TRACE_PREP) -> None:
        self._process = process
        # the size from which load_trace indexes, as this process sees it (it may be set lower)
        self._args = (str(case_path), path_map, trace_module.LAZY_MIN_BYTES)
        self._future: Future[PreparedIndex | None] | None = process.submit(prepared_index, *self._args)
        self.indexed_by: int | None = None

    @property
    def started(self) -> bool:
        """Whether the scan runs in the process."""
        return self._future is not None

    def indexer(self) -> TraceIndexer:
        """What ``load_trace`` calls for a plain trace's index: the prepared one when it is of
        the same file (waited for: at most one scan), else the scan on the calling thread
        (``index_plain_trace``). Blocks: the load step's thread."""

        def index(path: Path) -> StepIndex | None:
            future, self._future = self._future, None  # taken once
            if future is not None:
                prepared = self._process.wait(future, prepared_index, *self._args)
                if prepared is not None and prepared.path == str(path):
                    self.indexed_by = prepared.pid
                    return prepared.index
            self.indexed_by = os.getpid()
            return index_plain_trace(path)

        return index

    def cancel(self) -> None:
        """The screen closed before the index was taken (a queued scan is dropped)."""
        future, self._future = self._future, None
        if future is not None:
            future.cancel()


__all__ = ["TRACE_PREP", "PreparedIndex", "TracePrep", "prepared_index"]
