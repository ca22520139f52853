"""Scanning helpers run in worker threads: discovery + summaries -> CaseRows, and
mapping changed paths to cases. Textual-free.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.layout import CaseRef, discover_cases
from eviscene_tui.artifacts.summary import summarize_case
from eviscene_tui.state.gate import gate_marker
from eviscene_tui.state.rows import CaseRow, last_round_status, row_from_summary
from eviscene_tui.state.transient import TransientProblems


class LockedTransient(TransientProblems):
    """TransientProblems shared between worker threads and the UI thread."""

    def __init__(self, grace: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(grace, clock)
        self._lock = threading.Lock()

    def classify(self, case_key, problems):  # type: ignore[override]
        with self._lock:
            return super().classify(case_key, problems)

    def pending_cases(self):  # type: ignore[override]
        with self._lock:
            return super().pending_cases()

    def seed_old(self, case_key, problems):  # type: ignore[override]
        with self._lock:
            return super().seed_old(case_key, problems)


def build_row(ref: CaseRef, root: Path, transient: TransientProblems | None, *, initial: bool = False) -> CaseRow:
    summary = summarize_case(ref, base=root)
    last = last_round_status(summary.path) if summary.status == "no_further_grounded_hint" else None
    if transient is not None and initial:
        # files last written before the grace period are not being written now
        if summary.mtime and time.time() - summary.mtime > transient.grace:
            key = summary.rel_path if summary.rel_path and summary.rel_path != "." else (summary.path.name or str(summary.path))
            transient.seed_old(key, [(str(p.code), str(p.path)) for p in summary.problems])
    row = row_from_summary(summary, transient=transient, last_round=last, ref=ref)
    row.gate = gate_marker(summary.path)
    return row


def scan_rows(
    root: Path,
    transient: TransientProblems | None = None,
    *,
    cancelled: Callable[[], bool] = lambda: False,
    problems: list[Any] | None = None,
) -> Iterator[CaseRow]:
    """Discover and summarise every case under ``root``, one row at a time."""
    for ref in discover_cases(root, problems):
        if cancelled():
            return
        yield build_row(ref, root, transient, initial=True)


def batched(rows: Iterable[CaseRow], *, first: int = 20, size: int = 500, interval: float = 0.2) -> Iterator[list[CaseRow]]:
    """Group rows for posting: a small first batch (fast first paint), then batches
    of ``size`` or whatever arrived within ``interval`` seconds."""
    batch: list[CaseRow] = []
    limit = first
    last = time.monotonic()
    for row in rows:
        batch.append(row)
        now = time.monotonic()
        if len(batch) >= limit or now - last >= interval:
            yield batch
            batch = []
            limit = size
            last = now
    if batch:
        yield batch


class CaseIndex:
    """Absolute case root -> row key, to map watcher paths to cases."""

    def __init__(self) -> None:
        self._by_path: dict[str, str] = {}
        self._refs: dict[str, CaseRef] = {}

    def add(self, row: CaseRow) -> None:
        ref = row.ref
        path = getattr(ref, "path", None)
        if path is None:
            return
        apath = os.path.abspath(str(path))
        self._by_path[apath] = row.key
        if isinstance(ref, CaseRef):
            self._refs[row.key] = ref

    def remove(self, key: str) -> None:
        for path in [p for p, k in self._by_path.items() if k == key]:
            del self._by_path[path]
        self._refs.pop(key, None)

    def ref(self, key: str) -> CaseRef | None:
        return self._refs.get(key)

    def case_for(self, path: str) -> str | None:
        """The key of the case containing ``path`` (deepest match), or None."""
        p = os.path.abspath(path)
        while True:
            key = self._by_path.get(p)
            if key is not None:
                return key
            parent = os.path.dirname(p)
            if parent == p:
                return None
            p = parent

    def paths(self) -> dict[str, str]:
        return dict(self._by_path)
