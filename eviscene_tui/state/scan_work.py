"""The work a scan hands to its process pool: full checks of cases, and their rows.

A pool process imports this module to run the functions it is given, so it imports no
more than a check and a row need (the artifact layer and ``state.rows``). The gate's
marker and the no-site details, which need the gate's and the triage's services, are
imported only for the rare case that has a gate sidecar or no recoverable site: spawning
a worker that loaded them all would cost each worker more than the check of hundreds of
cases. Textual-free.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui import pace
from eviscene_tui.artifacts.layout import CaseRef
from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.artifacts.report import checked_case
from eviscene_tui.gate.protocol import SESSION_FILE, sidecar_path
from eviscene_tui.state.rows import CaseRow, last_round_status, problem_pairs, row_from_summary


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The full integrity problems of one case, as (code, absolute path) pairs."""

    key: str
    problems: tuple[tuple[str, str], ...]
    settled_before: float = 0.0  # wall-clock time the check started: files older than that are not mid-write
    checked_by: int = 0  # the process id that ran the check (a pool worker for large folders)

    def old_problems(self, grace: float) -> list[tuple[str, str]]:
        """The problems in files last written more than ``grace`` seconds before the check
        (a torn line there is not a writer at work; see :class:`TransientProblems`)."""
        out = []
        for code, path in self.problems:
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                continue
            if self.settled_before - mtime > grace:
                out.append((code, path))
        return out


#: how much lower the pool's processes run than the app: the app's own process (a key, a
#: capture opened with k) goes first when they share a core, and the pool still has every
#: core the app leaves idle
POOL_NICE = 5


def _pool_worker_start() -> None:
    """A pool process starts at a lower priority than the app (Unix; elsewhere as it is).
    Defined here: a pool process imports the module of its initializer too."""
    try:
        os.nice(POOL_NICE)
    except (AttributeError, OSError):
        pass


def gate_marker(root: str | os.PathLike[str]) -> str:
    """``state.gate.gate_marker`` of a case root; "" at once when it has no gate sidecar
    (the gate's services are imported only for a case that has one)."""
    if not os.path.isfile(os.path.join(sidecar_path(root), SESSION_FILE)):  # strings: asked of each case of a scan
        return ""
    from eviscene_tui.state.gate import gate_marker as marker  # lazy: a pool process loads the gate's services only for a gated case

    return marker(root)


def add_no_site_details(row: CaseRow, case_root: Path) -> None:
    """A no-site row: why the localizer found no site, and the category it proposed (its
    ledgers name none): what the triage queue sorts and groups by."""
    if not row.in_no_site_queue:
        return
    from eviscene_tui.state.triage import no_site_details  # lazy: a pool process loads triage only for a no-site case

    details = no_site_details(case_root)
    row.no_site_reason = "; ".join(details.reasons)
    if not row.category:
        row.category = details.category
    row.refresh_cells()


def check_refs(items: list[tuple[str, CaseRef]], base: str, path_map: PathMap | None = None) -> list[CheckResult]:
    """Check each (row key, case) fully. A module-level function so a process pool can run it."""
    out: list[CheckResult] = []
    for key, ref in items:
        pace.yield_to_input()  # in the app's integrity pass (background work): a key goes first
        started = time.time()
        _summary, problems = checked_case(ref, base, path_map=path_map)
        out.append(CheckResult(key, tuple(problem_pairs(problems)), started, os.getpid()))
    return out


def checked_rows(items: list[CaseRef], base: str, path_map: PathMap | None = None) -> list[tuple[CaseRow, CheckResult]]:
    """The row of each case with its full integrity problems (one read of its files for
    both). A module-level function so a process pool can run it."""
    out: list[tuple[CaseRow, CheckResult]] = []
    for ref in items:
        started = time.time()
        summary, problems = checked_case(ref, base, fingerprint=True, path_map=path_map)
        last = last_round_status(summary.path) if summary.status == "no_further_grounded_hint" else None
        row = row_from_summary(summary, last_round=last, ref=ref, problems=problems)
        row.gate = gate_marker(summary.path)
        add_no_site_details(row, summary.path)
        out.append((row, CheckResult(row.key, tuple(problem_pairs(problems)), started, os.getpid())))
    return out


def worker_ready() -> int:
    """Nothing but this module loaded: a pool's first task, so its processes start (and
    import the checkers) while the app does other work."""
    return os.getpid()
