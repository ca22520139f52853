"""The case screen's trace index scanned in the trace process (state/trace_prep.py): the
load takes the process's index of the same file, and scans on its own thread whenever the
process is not there, died, or indexed another file."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest
from conftest import wait_until_sync
from trace_fixtures import STEPS, write_case

from eviscene_tui import switches
from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.trace import index_plain_trace
from eviscene_tui.state.case_check import WarmProcess
from eviscene_tui.state.trace_prep import TracePrep, prepared_index


@pytest.fixture
def process():
    prep = WarmProcess(nice=0, background=False, switch="trace_process")
    yield prep
    prep.close()


@pytest.fixture
def case(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(trace_module, "LAZY_MIN_BYTES", 0)  # a small trace takes the indexed path
    return write_case(tmp_path)


def _started(process: WarmProcess) -> int:
    """Start the process (if it is not) and wait until it answered; its pid."""
    process.warm()
    wait_until_sync(lambda: process.ready, what="the warmed process answered")
    pid = process.call(os.getpid)
    assert pid is not None and pid != os.getpid()
    return pid


def _trace_path(case: Path) -> Path:
    path = load_case(case).source_trace_path
    assert path is not None
    return Path(path)


def _spans(index) -> list[tuple[int, int]]:
    return [index.span(i) for i in range(len(index))]


def test_the_load_takes_the_index_the_process_scanned(case: Path, process: WarmProcess) -> None:
    pid = _started(process)
    prep = TracePrep(case, None, process)
    assert prep.started
    trace, problems = load_case(case).trace(indexer=prep.indexer())
    assert problems == [] and trace is not None and trace.lazy and len(trace) == STEPS
    assert prep.indexed_by == pid
    here = index_plain_trace(_trace_path(case))
    assert here is not None and _spans(trace.raw_steps.step_index) == _spans(here)  # type: ignore[attr-defined]
    assert trace.raw_step(STEPS - 1)["round"] == STEPS  # its steps read here, from the ranges the process found


def test_not_running_or_switched_off_the_load_scans_here(case: Path, process: WarmProcess) -> None:
    prep = TracePrep(case, None, process)  # never started for an open: a start costs more than the scan
    assert not prep.started
    process.warm()
    starting = not process.ready  # (a spawned interpreter takes far longer than this line)
    assert TracePrep(case, None, process).started is not starting  # nor queued behind a start
    _started(process)
    switches.set_off("trace_process")
    try:
        off = TracePrep(case, None, process)
    finally:
        switches.set_off("trace_process", False)
    assert not off.started
    trace, _ = load_case(case).trace(indexer=off.indexer())
    assert trace is not None and trace.lazy and off.indexed_by == os.getpid()


def test_a_process_killed_under_the_scan_or_another_file_scans_here(case: Path, process: WarmProcess, tmp_path: Path) -> None:
    pid = _started(process)
    prep = TracePrep(case, None, process)
    for child in multiprocessing.active_children():
        if child.pid == pid:
            child.kill()
            child.join()
    trace, _ = load_case(case).trace(indexer=prep.indexer())
    assert trace is not None and trace.lazy and len(trace) == STEPS and prep.indexed_by == os.getpid()
    # a process that indexed another file than the one the load reads: the load scans it
    pid = _started(process)
    other = write_case(tmp_path / "other", "other-case")
    prep = TracePrep(other, None, process)
    index = prep.indexer()(_trace_path(case))
    here = index_plain_trace(_trace_path(case))
    assert index is not None and here is not None and _spans(index) == _spans(here) and prep.indexed_by == os.getpid()


def test_nothing_to_prepare_for_a_small_or_missing_trace(case: Path, tmp_path: Path) -> None:
    size = _trace_path(case).stat().st_size
    assert prepared_index(str(case), None, size + 1) is None  # below the indexed size
    prepared = prepared_index(str(case), None, size)
    assert prepared is not None and prepared.index is not None and prepared.pid == os.getpid()
    assert prepared_index(str(tmp_path / "no-such-case"), None, 0) is None
    _trace_path(case).write_bytes(b'{"state": {"all_steps": [1, 2]}}')  # a document the scan declines
    declined = prepared_index(str(case), None, 0)
    assert declined is not None and declined.index is None
