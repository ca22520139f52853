"""Typed messages posted by workers (file reading, parsing, watching) to the UI.

Workers never touch widgets: they post one of these and the App / Screen handler
mutates state and widgets.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.trace_rows import TraceRows


class SummariesBatch(Message):
    """A batch of case rows from the scan (or a re-summary after a change)."""

    def __init__(self, rows: list[CaseRow], *, done: int, total: int | None, initial: bool) -> None:
        super().__init__()
        self.rows = rows
        self.done = done
        self.total = total
        self.initial = initial


class ScanFinished(Message):
    def __init__(self, count: int, seconds: float, problems: list[str]) -> None:
        super().__init__()
        self.count = count
        self.seconds = seconds
        self.problems = problems


class CasesRemoved(Message):
    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys


class FilesChanged(Message):
    """The watcher saw changes under these directories (absolute paths)."""

    def __init__(self, paths: set[str]) -> None:
        super().__init__()
        self.paths = paths


class CaseLoaded(Message):
    def __init__(self, request: int, bundle: Any, view: Any) -> None:
        super().__init__()
        self.request = request
        self.bundle = bundle
        self.view = view


class CaseLoadFailed(Message):
    def __init__(self, request: int, message: str) -> None:
        super().__init__()
        self.request = request
        self.message = message


class TraceReady(Message):
    """The source trace is parsed; ``rows`` holds at least the window around the
    failure step (the rest arrives as :class:`TraceRowsFilled`)."""

    def __init__(self, request: int, data: TraceRows, trace: Any) -> None:
        super().__init__()
        self.request = request
        self.data = data
        self.trace = trace


class TraceRowsFilled(Message):
    def __init__(self, request: int, start: int, end: int) -> None:
        super().__init__()
        self.request = request
        self.start = start
        self.end = end


class TraceSearchDone(Message):
    """A search of the trace's steps finished (``hit`` is a ``state.trace_search.SearchHit``)."""

    def __init__(self, hit: Any, error: str | None = None) -> None:
        super().__init__()
        self.hit = hit
        self.error = error


class TraceFailed(Message):
    def __init__(self, request: int, message: str) -> None:
        super().__init__()
        self.request = request
        self.message = message


class StepDetailReady(Message):
    def __init__(self, index: int, detail: Any) -> None:
        super().__init__()
        self.index = index
        self.detail = detail


class LabelsLoaded(Message):
    def __init__(self, labels: dict[str, tuple[str, ...]], error: str | None) -> None:
        super().__init__()
        self.labels = labels
        self.error = error


class LabelWritten(Message):
    def __init__(self, label: str, error: str | None) -> None:
        super().__init__()
        self.label = label
        self.error = error
