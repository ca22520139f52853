"""The open case's integrity check process (state/case_check.py)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from conftest import generate_samples

from eviscene_tui import pace
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.scaffold.samples import copy_case
from eviscene_tui.state.case_check import CHECK_NICE, CheckProcess, case_problems


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("case-check") / "runs"
    generate_samples(root)
    return root


def _ref(samples: Path, tmp_path: Path) -> tuple[CaseRef, Path]:
    root = tmp_path / "runs"
    case = copy_case(samples, "damaged", root)
    return CaseRef(path=case, layout=Layout.SINGLE_RUN), root


def test_warmed_the_process_is_started_before_the_first_check_and_runs_it(samples: Path, tmp_path: Path) -> None:
    ref, root = _ref(samples, tmp_path)
    checks = CheckProcess()
    before = {p.pid for p in multiprocessing.active_children()}
    try:
        checks.warm()
        started = {p.pid for p in multiprocessing.active_children()} - before
        assert len(started) == 1
        outcome = checks.run(ref, str(root), str(ref.path), None)
        assert outcome is not None and outcome.pid in started
        assert outcome.nice == min(19, os.nice(0) + CHECK_NICE)
        assert outcome.rows == case_problems(ref, str(root), str(ref.path), None).rows  # what a check here finds
    finally:
        checks.close()


def test_a_check_whose_process_was_killed_runs_here(samples: Path, tmp_path: Path) -> None:
    ref, root = _ref(samples, tmp_path)
    checks = CheckProcess()
    before = {p.pid for p in multiprocessing.active_children()}
    try:
        checks.warm()
        for child in multiprocessing.active_children():
            if child.pid not in before:
                child.kill()
                child.join()
        outcome = checks.run(ref, str(root), str(ref.path), None)
        assert outcome is not None and outcome.pid == os.getpid() and outcome.rows
        again = checks.run(ref, str(root), str(ref.path), None)  # the next check starts a new process
        assert again is not None and again.pid != os.getpid() and again.rows == outcome.rows
    finally:
        checks.close()


def test_the_checks_process_follows_the_apps_foreground_work() -> None:
    """Its loops give way to a capture opened with k in the app, as the app's threads do."""
    checks = CheckProcess()
    try:
        checks.warm()
        hold = pace.ForegroundHold()
        try:
            future = checks._submit_call(pace.foreground_held)
            assert future is not None and future.result(timeout=60) is True
        finally:
            hold.release()
        future = checks._submit_call(pace.foreground_held)
        assert future is not None and future.result(timeout=60) is False
    finally:
        checks.close()
