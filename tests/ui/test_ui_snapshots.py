"""A few SVG snapshots at fixed sizes (pytest-textual-snapshot).

Deterministic: a fixed copy of the samples with fixed mtimes, TZ=UTC, the folder
opened by a relative path, no file watcher. Update with ``pytest --snapshot-update``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from ui_helpers import make_app, sample_root, wait_checked, wait_for

FIXED = 1_795_000_000  # 2026-11-18 UTC


@pytest.fixture
def fixed_root(tmp_path_factory, tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "sample_runs"
    shutil.copytree(sample_root(tmp_path_factory), root, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.utime(Path(dirpath) / name, (FIXED, FIXED), follow_symlinks=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(tmp_path)
    yield Path("sample_runs")
    time.tzset()


async def _scanned(pilot) -> None:
    app = pilot.app
    await wait_checked(pilot, app)


def _open(key: str, *keys: str):
    async def run_before(pilot) -> None:
        from eviscene_tui.ui.screens.case import CaseScreen
        from eviscene_tui.ui.widgets.runs_table import RunsTable

        app = pilot.app
        await _scanned(pilot)
        app.screen.query_one(RunsTable).select_key(key)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.trace_rows is not None and app.screen.compare is not None, 20)
        await wait_for(pilot, lambda: app.screen.integrity is not None, 20)
        for k in keys:
            await pilot.press(k)
        await pilot.pause(0.1)

    return run_before


def test_snapshot_runs_screen_80x24(fixed_root: Path, snap_compare) -> None:
    """Narrow: the least useful columns are dropped, the problem column stays."""
    assert snap_compare(make_app(fixed_root), terminal_size=(80, 24), run_before=_scanned)


def test_snapshot_runs_screen_200x60(fixed_root: Path, snap_compare) -> None:
    """Wide: every column, widths shared by content."""
    assert snap_compare(make_app(fixed_root), terminal_size=(200, 60), run_before=_scanned)


def test_snapshot_case_trace_failure_step(fixed_root: Path, snap_compare) -> None:
    assert snap_compare(make_app(fixed_root), terminal_size=(80, 24), run_before=_open("feedback-converged-3-rounds"))


def test_snapshot_case_rounds_timeline(fixed_root: Path, snap_compare) -> None:
    assert snap_compare(make_app(fixed_root), terminal_size=(100, 40), run_before=_open("feedback-converged-3-rounds", "3"))


def test_snapshot_no_site_explanation_light(fixed_root: Path, snap_compare) -> None:
    assert snap_compare(make_app(fixed_root, theme="eviscene-light"), terminal_size=(100, 40), run_before=_open("search-no-recoverable-site", "2"))
