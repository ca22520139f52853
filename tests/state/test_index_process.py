"""The index process (``state/index_process.py``): a real spawned process indexes a case's
source trace (outside the case root, recorded by absolute path, as the driver writes it)
exactly as the app would on its own thread, with the quick briefs around the failure step;
its answer is used only for the very file the app opened, once, and only when it was sent."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from trace_fixtures import FAILURE, write_case

from eviscene_tui import switches
from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.step_index import index_steps
from eviscene_tui.artifacts.trace import load_trace
from eviscene_tui.state.index_process import IndexProcess, file_identity, index_case_trace

WINDOW = 4


@pytest.fixture
def process() -> Iterator[IndexProcess]:
    proc = IndexProcess()
    warmed = proc.warm()
    assert warmed is not None
    assert warmed.result(timeout=120) > 0  # the process's id: it is started and answers
    assert proc.ready
    yield proc
    proc.close()


@pytest.fixture
def indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "LAZY_MIN_BYTES", 0)  # the small test trace is indexed


def _trace_of(case: Path) -> Path:
    path = load_case(case).source_trace_path
    assert path is not None and not path.is_relative_to(case)
    return path


def test_the_process_indexes_the_trace_as_the_app_would_with_the_rows_around_the_failure(tmp_path: Path, process: IndexProcess,
                                                                                         indexed: None) -> None:
    case = write_case(tmp_path)
    path = _trace_of(case)
    assert process.begin(case, None, window=WINDOW)
    answer = process.take(case)
    assert answer is not None
    assert process.take(case) is None  # taken once
    with open(path, "rb") as fh:
        found = answer(path, os.fstat(fh.fileno()))
        local = index_steps(fh)
    assert found is not None and found.step_index is not None and local is not None
    assert list(found.step_index.starts) == list(local.starts) and list(found.step_index.ends) == list(local.ends)
    assert found.step_index.skeleton == local.skeleton and found.step_index.size == local.size
    assert sorted(found.quick_briefs) == list(range(FAILURE - WINDOW, FAILURE + WINDOW))
    here, _ = load_trace(path)
    assert here is not None and here.lazy
    for i, brief in found.quick_briefs.items():
        assert brief.to_dict() == here.quick_brief(i).to_dict()


def test_the_answer_for_a_file_changed_since_it_was_indexed_is_not_used(tmp_path: Path, process: IndexProcess, indexed: None) -> None:
    case = write_case(tmp_path)
    path = _trace_of(case)
    assert process.begin(case, None, window=WINDOW)
    answer = process.take(case)
    assert answer is not None
    with open(path, "rb") as fh:
        before = os.fstat(fh.fileno())
    assert answer(path, before) is not None  # the process has read it (the answer waits for it)
    future_identity = (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns + 1)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))  # rewritten in place meanwhile
    with open(path, "rb") as fh:
        now = os.fstat(fh.fileno())
        assert file_identity(now) == future_identity
        assert answer(path, now) is None  # indexed here instead
    # and the trace loads all the same, scanned on this thread
    trace, problems = load_trace(path, foreign=lambda p, st: None)
    assert trace is not None and trace.lazy and not problems


def test_the_answer_is_only_for_the_case_sent_and_only_for_its_trace(tmp_path: Path, process: IndexProcess, indexed: None) -> None:
    first, second = write_case(tmp_path, "case-a"), write_case(tmp_path, "case-b")
    assert process.begin(first, None, window=WINDOW)
    assert process.take(second) is None  # another case was sent
    assert process.begin(second, None, window=WINDOW)  # the first, opened and left, is replaced
    assert process.take(first) is None
    answer = process.take(second)
    assert answer is not None
    wrong = _trace_of(first)
    with open(wrong, "rb") as fh:
        assert answer(wrong, os.fstat(fh.fileno())) is None  # not the file it indexed


def test_nothing_is_sent_before_the_process_is_ready_or_with_the_switch_off(tmp_path: Path) -> None:
    case = write_case(tmp_path)
    cold = IndexProcess()
    assert not cold.ready and not cold.begin(case, None, window=WINDOW) and cold.take(case) is None
    switches.set_off("index_process")
    try:
        assert cold.warm() is None and not cold.ready
    finally:
        switches.set_off("index_process", False)


def test_small_and_missing_traces_are_left_to_the_app(tmp_path: Path) -> None:
    case = write_case(tmp_path)
    assert index_case_trace(str(case), None, WINDOW, 1 << 40) is None  # smaller than the app's threshold
    moved = write_case(tmp_path, "moved-case")
    path = _trace_of(moved)
    path.rename(path.with_name("elsewhere.json"))
    assert index_case_trace(str(moved), None, WINDOW, 0) is None  # no trace where it was recorded: the app reports it
    remote = index_case_trace(str(case), None, WINDOW, 0)
    assert remote is not None and remote.step_index is not None and remote.path == str(_trace_of(case))


def test_a_trace_the_index_declines_is_declined_once(tmp_path: Path, indexed: None) -> None:
    case = write_case(tmp_path)
    path = _trace_of(case)
    path.write_bytes(b'{"state": {"all_steps": [1, 2, 3]}}' + b" " * 64)  # steps that are not objects
    remote = index_case_trace(str(case), None, WINDOW, 0)
    assert remote is not None and remote.step_index is None and remote.quick_briefs == {}
