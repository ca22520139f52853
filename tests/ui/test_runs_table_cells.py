"""The runs table's cells (issue 20 §4): at 120 columns a status cell shows what needs a
person ("driver gone") and a case id its distinguishing end; a gated row outside the
opened folder is checked in full whenever its gate moves (no "…" until ctrl+r); the
filter bar names every filter key."""

from __future__ import annotations

import argparse

from ui_helpers import copy_case, wait_for, wait_scan

from eviscene_tui.options import AppOptions
from eviscene_tui.settings import Settings
from eviscene_tui.state.rows import COLUMNS, CaseRow, cell_text, column_widths
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.ui.widgets.runs_table import fit
from eviscene_tui.state.rows import shorten_start


def _rows() -> list[CaseRow]:
    prefix = "multi-case/repairs/psd-2026-11-cluster-a-shard-"
    return [
        CaseRow(key=prefix + "0001", case_id="case-flood-valencia-0007", status="converged", category="incomplete_event_verification"),
        CaseRow(key=prefix + "0002", case_id="case-rally-tbilisi-0999", status="searching", gate="awaiting operator · driver gone",
                category="wrong_search_direction", label="needs_relocalization"),
    ]


def test_at_120_columns_the_status_and_the_case_id_keep_what_matters():
    rows = _rows()
    widths = {c.key: w for c, w in column_widths(rows, 120)}
    status = next(c for c in COLUMNS if c.key == "status")
    shown = fit(cell_text(rows[1], status), widths["status"])
    assert shown.startswith("driver gone"), shown
    wide = {c.key: w for c, w in column_widths(rows, 150)}
    case_id = next(c for c in COLUMNS if c.key == "case_id")
    cut = fit(shorten_start(cell_text(rows[1], case_id), wide["case_id"]), wide["case_id"])
    assert "tbilisi-0999" in cut and not cut.startswith("case\u2026"), cut


async def test_a_gated_row_outside_the_root_stays_checked_when_its_gate_moves(tmp_path_factory, tmp_path, monkeypatch):
    import eviscene_tui.state.scan as scan_module
    import eviscene_tui.ui.screens.runs as runs_module

    opened = tmp_path / "runs"
    copy_case(tmp_path_factory, "single-generating", opened)
    extra = copy_case(tmp_path_factory, "feedback-converged-3-rounds", tmp_path / "runs.eviscene-tui" / "demo")
    marker = {"now": "gated"}

    def fake_marker(path) -> str:
        return marker["now"] if str(path).startswith(str(extra)) else ""

    monkeypatch.setattr(runs_module, "gate_marker", fake_marker)
    monkeypatch.setattr(scan_module, "gate_marker", fake_marker)
    args = argparse.Namespace(theme=None, poll=False, operator="t", workdir=None, config=None, gate_roots=[str(extra)])
    app = EvisceneApp(AppOptions.from_args(opened, args, settings=Settings()), watch=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_scan(pilot, app)
        gated = next(r for r in app.store.rows() if r.gate)
        await wait_for(pilot, lambda: app.store.get(gated.key).checked)  # the integrity pass reached it
        marker["now"] = "driver gone"  # the gate moved (its search converged and the driver left)
        await wait_for(pilot, lambda: app.store.get(gated.key).gate == "driver gone")
        row = app.store.get(gated.key)
        assert row.checked and "\u2026" not in cell_text(row, next(c for c in COLUMNS if c.key == "problems"))


async def test_the_filter_bar_names_the_awaiting_filter_key(tmp_path_factory, tmp_path):
    from conftest import screen_text

    copy_case(tmp_path_factory, "single-generating", tmp_path / "runs")
    args = argparse.Namespace(theme=None, poll=False, operator="t", workdir=None, config=None)
    app = EvisceneApp(AppOptions.from_args(tmp_path / "runs", args, settings=Settings()), watch=False)
    async with app.run_test(size=(200, 30)) as pilot:
        await wait_scan(pilot, app)
        bar = str(app.screen.query_one("#filter-bar").content)
        assert "w awaiting 0" in bar and "u unlabelled only" in bar
        assert "w awaiting" in screen_text(app)


async def test_a_narrow_filter_bar_wraps_between_filters_never_inside_one(tmp_path_factory, tmp_path):
    """At 120 and at 80 columns the bar needs more than one line: each filter's key, name
    and count stay on one line (``w`` used to end one line and ``awaiting 0`` begin the next)."""
    from conftest import screen_text

    copy_case(tmp_path_factory, "single-generating", tmp_path / "runs")
    args = argparse.Namespace(theme=None, poll=False, operator="t", workdir=None, config=None)
    app = EvisceneApp(AppOptions.from_args(tmp_path / "runs", args, settings=Settings()), watch=False)
    items = ("a all 1", "t triage 0", "c converged 0", "x problems 0", "L labelled 0", "w awaiting 0", "u unlabelled only")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        for width in (120, 80):
            await pilot.resize_terminal(width, 30)
            def bar_lines() -> list[str]:
                return [line.strip() for line in str(app.screen.query_one("#filter-bar").content).split("\n")]

            await wait_for(pilot, lambda width=width: len(bar_lines()) > 1 and all(len(line) <= width - 2 for line in bar_lines()))
            lines = bar_lines()
            for item in items:
                assert any(item in line for line in lines), (item, lines)
            shown = screen_text(app)
            assert all(item in shown for item in items), shown
