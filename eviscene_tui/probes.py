"""Figures the product keeps only for its tests and ``make bench``: how often something
happened, when it first did, which processes did a piece of work.

They are one seam, apart from the state the product acts on: a component holds its probe
(``app.probes``, ``client.probes``, ``view.probes``, ``session.probes``) and only records
into it through the methods below; nothing in the package reads a probe back, and no
attribute of the product is kept only for tests and the bench to read
(``tests/core/test_probes.py`` checks both on the source). Tests and the bench read the
fields. Standard library only (floor 1): the policy client records here too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class AppProbes:
    """The app's: its scans, integrity passes, deferred garbage collections, label reads."""

    #: seconds from a scan's start to its first rows in the store (the first batch)
    first_rows_at: float | None = None
    #: seconds the last scan took (None while it runs; 0 for a folder scanned before the app opened)
    scan_seconds: float | None = None
    #: seconds the last scan's integrity pass took (None while it runs)
    check_seconds: float | None = None
    #: the process ids that ran the integrity pass (the app's own, or the pool's)
    check_processes: set[int] = field(default_factory=set)
    #: full garbage collections the app ran in the operator's pauses (ui/gc_hold.py)
    deferred_collections: int = 0
    #: how many times the listed cases' triage labels were read and applied
    labels_loads: int = 0

    def scan_started(self) -> None:
        self.first_rows_at = self.scan_seconds = self.check_seconds = None

    def first_rows(self, seconds: float) -> None:
        """Rows of a scan arrived ``seconds`` after it started (only the first counts)."""
        if self.first_rows_at is None:
            self.first_rows_at = seconds

    def scan_finished(self, seconds: float) -> None:
        self.scan_seconds = seconds

    def check_finished(self, seconds: float) -> None:
        self.check_seconds = seconds

    def checked_by(self, pid: int) -> None:
        self.check_processes.add(pid)

    def collected(self) -> None:
        self.deferred_collections += 1

    def labels_loaded(self) -> None:
        self.labels_loads += 1


@dataclass
class ClientProbes:
    """The policy client's: which body reader its streams took."""

    #: streams whose body was read straight from the connection (policy/direct_body.py)
    direct_streams: int = 0

    def direct_stream(self) -> None:
        self.direct_streams += 1


@dataclass
class ViewProbes:
    """A view's: how much it rendered or was handed (its caches and coalescing at work), and
    when it painted what the benchmarks time (``time.perf_counter``, to match frame ends)."""

    #: lines rendered afresh, not from the view's cache (the token view)
    lines_built: int = 0
    #: ``append`` calls that added text (the stream view: its feed coalesces events)
    appends: int = 0
    #: when the first row was rendered (the runs table: a case row)
    first_row_painted_at: float | None = None
    #: (row, when) of the last row rendered afresh (the trace view: a step's first line)
    last_row_painted: tuple[int, float] | None = None
    #: the row last rendered under the cursor (the runs table: a key's move is on the screen
    #: at the end of the first frame after it whose mark this is)
    cursor_painted: int | None = None
    #: when the failure step was first rendered (the trace view)
    failure_painted_at: float | None = None
    #: flushes that painted buffered events (the stream view: it flushes on a timer)
    flushes: int = 0
    #: (events painted so far, when) at the last flush (the stream view)
    last_flush: tuple[int, float] = (0, 0.0)

    def line_built(self) -> None:
        self.lines_built += 1

    def appended(self) -> None:
        self.appends += 1

    def painted_cursor(self, row: int) -> None:
        self.cursor_painted = row

    def painted_first_row(self) -> None:
        """A row was rendered (only the first counts: a view that calls this on every row
        pays no clock read after it)."""
        if self.first_row_painted_at is None:
            self.first_row_painted_at = time.perf_counter()

    def painted_row(self, row: int) -> None:
        self.last_row_painted = (row, time.perf_counter())

    def painted_failure(self) -> None:
        if self.failure_painted_at is None:
            self.failure_painted_at = time.perf_counter()

    def flushed(self, events: int) -> None:
        """A flush painted the feed's events up to its ``events``-th."""
        self.flushes += 1
        self.last_flush = (events, time.perf_counter())


@dataclass
class CaseProbes:
    """A case session's: when it opened, when it last read the case's view, which process
    ran its integrity check."""

    #: when the session was made (the case screen opened)
    opened_at: float = field(default_factory=time.perf_counter)
    #: when the case's view was last read (a load or a reload published it)
    updated_at: float | None = None

    #: the process that ran the case's last full integrity check, and its niceness
    check_pid: int | None = None
    check_nice: int | None = None

    def view_read(self) -> None:
        self.updated_at = time.perf_counter()

    def checked_by(self, pid: int, nice: int | None) -> None:
        self.check_pid, self.check_nice = pid, nice


__all__ = ["AppProbes", "CaseProbes", "ClientProbes", "ViewProbes"]
