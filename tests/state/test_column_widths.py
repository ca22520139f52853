"""Runs table column widths: the status column (what the operator triages on) is
readable at 120 columns, and a sorted column keeps room for its arrow."""

from __future__ import annotations

from pathlib import Path

import pytest

from eviscene_tui.state.rows import COLUMNS, cell_text, column_widths
from eviscene_tui.state.scan import scan_rows

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="sample_runs not generated")


@pytest.fixture(scope="module")
def rows():
    return list(scan_rows(SAMPLES))


@pytest.mark.parametrize("width", [100, 120, 160])
def test_status_is_readable(rows, width):
    layout = dict((c.key, w) for c, w in column_widths(rows, width))
    status = next(c for c in COLUMNS if c.key == "status")
    longest = max(len(cell_text(r, status)) for r in rows)
    assert layout["status"] >= min(longest, status.comfort), layout
    total = sum(layout.values()) + len(layout) - 1
    assert total <= width


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("key", ["problems", "rounds", "attempts"])
def test_sorted_column_keeps_its_arrow(rows, width, key):
    layout = dict((c.key, w) for c, w in column_widths(rows, width, sort_key=key))
    column = next(c for c in COLUMNS if c.key == key)
    if key in layout:
        assert layout[key] >= len(column.title) + 1
