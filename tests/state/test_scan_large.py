"""A large folder's rows read and checked in one pass, in a process pool, as discovery finds
the cases (state.scan.scan_large): the same rows and problems as the summary followed by the
integrity pass, and every case once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import generate_samples

from eviscene_tui.artifacts.layout import discover_cases
from eviscene_tui import pace
from eviscene_tui.state import scan, scan_work
from eviscene_tui.state.scan import build_row, check_refs, checked_rows, scan_large


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scan-large") / "runs"
    generate_samples(root)
    return root


def _fields(row) -> tuple:
    return (row.key, row.status, row.rounds, row.attempts, row.accepted, row.pending, row.problems, row.problem_codes,
            row.checked, row.no_site, row.gate)


def test_checked_rows_equal_the_summary_with_the_full_check(samples: Path) -> None:
    refs = list(discover_cases(samples))
    base = os.path.abspath(samples)
    got = checked_rows(refs, base)
    assert [_fields(row) for row, _check in got] == [_fields(build_row(ref, samples, None, full=True)) for ref in refs]
    expected = {c.key: c.problems for c in check_refs([(row.key, ref) for (row, _c), ref in zip(got, refs)], base)}
    assert {check.key: check.problems for _row, check in got} == expected
    assert any(check.problems for _row, check in got)  # the samples carry defects: the comparison means something


def test_scan_large_reads_every_case_once_in_worker_processes(samples: Path) -> None:
    refs = list(discover_cases(samples))
    batches = list(scan_large(iter(refs * 10), os.path.abspath(samples), workers=2))  # more than one chunk
    pairs = [pair for batch in batches for pair in batch]
    assert len(pairs) == len(refs) * 10
    assert sorted(row.key for row, _check in pairs) == sorted(build_row(ref, samples, None).key for ref in refs * 10)
    assert {check.checked_by for _row, check in pairs} and os.getpid() not in {check.checked_by for _row, check in pairs}


def test_the_pool_runs_below_the_app(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool's processes start at a lower priority (the app's own process goes first
    when they share a core): both pools are made with the start function that lowers it."""
    made: list[object] = []
    real = scan.ProcessPoolExecutor

    def pool(*args, **kwargs):
        made.append(kwargs.get("initializer"))
        return real(*args, **kwargs)

    monkeypatch.setattr(scan, "ProcessPoolExecutor", pool)
    refs = list(discover_cases(samples))
    base = os.path.abspath(samples)
    assert list(scan_large(iter(refs), base, workers=2))
    items = [(ref.path.name, ref) for ref in refs] * (scan.PARALLEL_MIN_CASES // len(refs) + 1)
    assert list(scan.integrity_pass(items, base, workers=2))
    assert made == [scan._pool_worker_start, scan._pool_worker_start]
    with real(max_workers=1, initializer=scan._pool_worker_start) as lowered:
        assert lowered.submit(os.nice, 0).result() == min(19, os.nice(0) + scan_work.POOL_NICE)


def test_checking_cases_gives_way_to_the_operator_between_cases(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before each case the check asks the operator's clock (``pace.yield_to_input``: a
    no-op outside background work, as in the pool's processes)."""
    asked: list[str] = []

    class Clock:
        @staticmethod
        def yield_to_input(max_wait: float = pace.MAX_WAIT) -> float:
            asked.append("yield")
            return 0.0

    monkeypatch.setattr(scan_work, "pace", Clock)
    refs = list(discover_cases(samples))[:3]
    check_refs([(ref.path.name, ref) for ref in refs], os.path.abspath(samples))
    assert asked == ["yield"] * len(refs)


def test_a_pool_process_loads_no_service_a_check_and_a_row_do_not_need() -> None:
    """A pool process imports ``state.scan_work`` to run its tasks: the gate's, the policy
    client's and the triage's modules are not loaded with it (each spawned process would
    pay for them before its first case)."""
    import subprocess
    import sys

    code = ("import sys, eviscene_tui.state.scan_work\n"
            "print(sorted(m for m in sys.modules if m.startswith(('eviscene_tui.state.gate', 'eviscene_tui.state.triage',"
            " 'eviscene_tui.policy', 'eviscene_tui.state.scan', 'httpx', 'textual')) and m != 'eviscene_tui.state.scan_work'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    # what a pool process is given to run, its start included, is defined there
    for given in (scan._pool_worker_start, scan.worker_ready, scan.check_refs, scan.checked_rows):
        assert given.__module__ == scan_work.__name__, given


def test_the_scan_and_the_integrity_pass_share_one_pool(samples: Path) -> None:
    """Given the scan's pool, the reads of the scan and the integrity pass after it run in
    the same processes (no second pool is spawned), and the pool stays open until its
    owner closes it."""
    refs = list(discover_cases(samples))
    base = os.path.abspath(samples)
    pool = scan.ScanPool(2)
    try:
        read = [check for batch in scan_large(iter(refs), base, pool=pool) for _row, check in batch]
        items = [(ref.path.name, ref) for ref in refs] * (scan.PARALLEL_MIN_CASES // len(refs) + 1)
        checked = [check for batch in scan.integrity_pass(items, base, pool=pool) for check in batch]
        assert len(read) == len(refs) and len(checked) == len(items)
        pids = {c.checked_by for c in read + checked}
        assert os.getpid() not in pids and len(pids) <= 2, pids
        assert pool.executor() is not None  # still open for its owner
    finally:
        pool.close()
    assert pool.executor() is None
