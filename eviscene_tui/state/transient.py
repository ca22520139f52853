"""Torn lines while a writer is mid-write.

The driver rewrites ``repair_attempts.jsonl`` and ``manifest.json`` in place (not
atomically), so a reader can see a half-written last line. Such a problem is shown
as "being written" first and only counts as a real problem when it is still there
after ``grace`` seconds. Textual-free; the clock is injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

TRANSIENT_CODES = frozenset({"jsonl_torn_line", "json_invalid"})


class TransientProblems:
    def __init__(self, grace: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self.clock = clock
        self._first_seen: dict[tuple[str, str, str], float] = {}

    def classify(self, case_key: str, problems: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """Split ``(code, path)`` pairs of one case into (settled, being_written).

        A transient-code problem seen for less than ``grace`` seconds is
        "being written"; after that it is settled (a real problem). Problems that
        disappear are forgotten.
        """
        now = self.clock()
        settled: list[tuple[str, str]] = []
        fresh: list[tuple[str, str]] = []
        current: set[tuple[str, str, str]] = set()
        for code, path in problems:
            if code not in TRANSIENT_CODES:
                settled.append((code, path))
                continue
            ident = (case_key, code, path)
            current.add(ident)
            first = self._first_seen.setdefault(ident, now)
            if now - first < self.grace:
                fresh.append((code, path))
            else:
                settled.append((code, path))
        for ident in [i for i in self._first_seen if i[0] == case_key and i not in current]:
            del self._first_seen[ident]
        return settled, fresh

    def pending_cases(self) -> set[str]:
        """Cases with a transient problem still inside its grace period."""
        now = self.clock()
        return {key for (key, _c, _p), first in self._first_seen.items() if now - first < self.grace}

    def seed_old(self, case_key: str, problems: Iterable[tuple[str, str]]) -> None:
        """Mark problems found by the initial scan as already settled (a file torn
        since before the app started is not being written now... unless it changes)."""
        now = self.clock()
        for code, path in problems:
            if code in TRANSIENT_CODES:
                self._first_seen.setdefault((case_key, code, path), now - self.grace)
