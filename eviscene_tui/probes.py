"""Figures the product keeps only for its tests and ``make bench``: how often something
happened, when it first did, which processes did a piece of work.

They are one seam, apart from the state the product acts on: a component holds its probe
(``app.probes``, ``client.probes``, ``view.probes``) and only records into it through
the methods below; nothing in the package reads a probe back
(``tests/core/test_probes.py`` checks it on the source). Tests and the bench read the
fields. Standard library only (floor 1): the policy client records here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AppProbes:
    """The app's: its scans, integrity passes, deferred garbage collections, label reads."""

    #: seconds from a scan's start to its first rows in the store (the first batch)
    first_rows_at: float | None = None
    #: the process ids that ran the integrity pass (the app's own, or the pool's)
    check_processes: set[int] = field(default_factory=set)
    #: full garbage collections the app ran in the operator's pauses (ui/gc_hold.py)
    deferred_collections: int = 0
    #: how many times the listed cases' triage labels were read and applied
    labels_loads: int = 0

    def scan_started(self) -> None:
        self.first_rows_at = None

    def first_rows(self, seconds: float) -> None:
        """Rows of a scan arrived ``seconds`` after it started (only the first counts)."""
        if self.first_rows_at is None:
            self.first_rows_at = seconds

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
    """A view's: how much it rendered or was handed (its caches and coalescing at work)."""

    #: lines rendered afresh, not from the view's cache (the token view)
    lines_built: int = 0
    #: ``append`` calls that added text (the stream view: its feed coalesces events)
    appends: int = 0

    def line_built(self) -> None:
        self.lines_built += 1

    def appended(self) -> None:
        self.appends += 1


__all__ = ["AppProbes", "ClientProbes", "ViewProbes"]
