"""``load_trace`` with an index built elsewhere (the app's index process): used for the file
it opened, with the quick briefs it came with; declined means the whole-file path; no answer
means the scan runs here. The trace lies outside any case root, as the driver's inputs do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trace_fixtures import FAILURE, STEPS, write_case

from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.step_index import index_steps
from eviscene_tui.artifacts.trace import ForeignSteps, StepBrief, load_trace


@pytest.fixture
def trace_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(trace_module, "LAZY_MIN_BYTES", 0)
    path = load_case(write_case(tmp_path)).source_trace_path
    assert path is not None
    return path


def _no_scan_here(*args: object, **kwargs: object) -> None:
    raise AssertionError("the trace was scanned here")


def test_a_foreign_index_of_the_file_opened_is_used_with_its_briefs(trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open(trace_path, "rb") as fh:
        local = index_steps(fh)
    assert local is not None
    brief = StepBrief(FAILURE)
    brief.tool_name = "from the index process"
    seen: list[tuple[Path, int]] = []

    def foreign(path: Path, st: os.stat_result) -> ForeignSteps:
        seen.append((path, st.st_size))
        return ForeignSteps(local, {FAILURE: brief, STEPS + 5: StepBrief(STEPS + 5), 3: StepBrief(4)})

    monkeypatch.setattr(trace_module, "index_steps", _no_scan_here)
    trace, problems = load_trace(trace_path, foreign=foreign)
    assert trace is not None and trace.lazy and not problems
    assert seen == [(trace_path, trace_path.stat().st_size)]  # asked with the file it opened
    assert trace.step_count == STEPS
    assert trace.quick_brief(FAILURE) is brief  # the row painted first comes with the index
    assert trace.quick_brief(3).index == 3  # a brief of another step is not taken for this one
    assert trace.brief(FAILURE).tool_name == "web_search"  # the full parse stays the reference


def test_a_declined_trace_takes_the_whole_file_path_without_a_scan_here(trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "index_steps", _no_scan_here)
    trace, problems = load_trace(trace_path, foreign=lambda path, st: ForeignSteps(None, {}))
    assert trace is not None and not trace.lazy and not problems
    assert trace.step_count == STEPS


def test_no_answer_means_the_scan_runs_here(trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[int] = []
    real = trace_module.index_steps

    def counted(fh, **kwargs):  # type: ignore[no-untyped-def]
        scans.append(1)
        return real(fh, **kwargs)

    monkeypatch.setattr(trace_module, "index_steps", counted)
    trace, _ = load_trace(trace_path, foreign=lambda path, st: None)
    assert trace is not None and trace.lazy and scans == [1]
