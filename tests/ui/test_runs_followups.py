"""The runs row and the case header follow the bundled driver's search files (``repair``);
the case header fits the terminal width, dropping its least important parts first."""

from __future__ import annotations

import orjson
from ui_helpers import copy_case, make_app, open_case, wait_for, wait_scan

from eviscene_tui.gate.bundled import repair_root
from eviscene_tui.journal.records import record_key
from eviscene_tui.scaffold.samples.tree import Tree
from eviscene_tui.storage import default_workdir

CASE = "feedback-converged-3-rounds"


def _write_state(root, key: str, status: str, **extra) -> None:
    tree = Tree()
    tree.bound("search-state.json", {"version": "ifv-psd-feedback-search-v1"}, {"status": status, "elapsed_seconds": 1.0, "rounds": [], **extra})
    sroot = repair_root(default_workdir(root), record_key(root / key).key)
    sroot.mkdir(parents=True, exist_ok=True)
    tmp = sroot / ".search-state.json.tmp"
    tmp.write_bytes(tree.files["search-state.json"])
    tmp.replace(sroot / "search-state.json")


STOPPED = {"status": "paused_execution_error", "execution_error": {"type": "OperatorStoppedSearch", "message": "stopped"}}


async def test_runs_row_follows_a_repair_stop_without_a_rescan(tmp_path_factory, tmp_path) -> None:
    root = tmp_path / "runs"
    copy_case(tmp_path_factory, CASE, root)
    copy_case(tmp_path_factory, "single-generating", root)
    _write_state(root, CASE, "searching")
    app = make_app(root)
    app.ACTIVITY_INTERVAL = 3600.0  # only the work directory poll can bring the change
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_scan(pilot, app)
        assert await wait_for(pilot, lambda: app.store.get(CASE).supervised == "searching")
        # the bundled driver stops the search (a stop decided at its gate)
        _write_state(root, CASE, **STOPPED)
        assert await wait_for(pilot, lambda: app.store.get(CASE).supervised == "stopped by operator")
        screen = await open_case(pilot, app, CASE)
        assert await wait_for(pilot, lambda: "repair: stopped by operator" in str(screen.query_one("#case-title").content))


async def test_case_header_keeps_badge_and_repair_state_at_80_columns(tmp_path_factory, tmp_path) -> None:
    root = tmp_path / "runs"
    copy_case(tmp_path_factory, "damaged", root)
    copy_case(tmp_path_factory, CASE, root)
    _write_state(root, "damaged", **STOPPED)
    app = make_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_scan(pilot, app)
        assert await wait_for(pilot, lambda: app.store.get("damaged").supervised == "stopped by operator")
        screen = await open_case(pilot, app, "damaged")
        title = screen.query_one("#case-title")
        assert await wait_for(pilot, lambda: screen.integrity is not None and "\u26a0" in str(title.content))
        await pilot.pause()
        text = str(title.content)
        assert "problems" in text and "repair: stopped by operator" in text, text
        assert len(text) <= 80, text
        # the rendered line holds the same text: nothing is cut
        assert "repair: stopped by operator" in "".join(s.text for s in title.render_line(0))
        await pilot.resize_terminal(200, 24)
        assert await wait_for(pilot, lambda: "(g opens its gate)" in str(title.content) and screen.view.layout in str(title.content))


async def test_case_header_no_problems_is_not_cut_at_120(tmp_path_factory, tmp_path) -> None:
    root = tmp_path / "runs"
    copy_case(tmp_path_factory, CASE, root)
    app = make_app(root)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_case(pilot, app, CASE)
        title = screen.query_one("#case-title")
        assert await wait_for(pilot, lambda: "\u2713 no integrity problems" in "".join(s.text for s in title.render_line(0)))


def test_state_stamp_changes_with_a_write(tmp_path) -> None:
    from eviscene_tui.state.scan import supervised_stamp

    root = tmp_path / "runs"
    root.mkdir()
    assert supervised_stamp(default_workdir(root)) == ()
    _write_state(root, CASE, "searching")
    one = supervised_stamp(default_workdir(root))
    _write_state(root, CASE, **STOPPED)
    assert len(one) == 1 and supervised_stamp(default_workdir(root)) != one
    assert orjson.loads((repair_root(default_workdir(root), record_key(root / CASE).key) / "search-state.json").read_bytes())


def _line(widget, y: int = 0) -> str:
    return "".join(s.text for s in widget.render_line(y))


async def test_hidden_columns_note_follows_the_width_and_fits(tmp_path_factory, tmp_path) -> None:
    from ui_helpers import sample_root

    from eviscene_tui.ui.widgets.runs_table import RunsTable

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 30)) as pilot:
        await wait_scan(pilot, app)
        status = app.screen.query_one("#runs-status")
        table = app.screen.query_one(RunsTable)
        assert table.hidden_columns
        assert await wait_for(pilot, lambda: "not shown" in str(status.content))
        text = str(status.content)
        assert len(text) <= 80 and text.rstrip() == _line(status).rstrip(), text
        await pilot.resize_terminal(220, 30)
        assert await wait_for(pilot, lambda: not table.hidden_columns)
        assert await wait_for(pilot, lambda: "not shown" not in str(status.content)), str(status.content)
        await pilot.resize_terminal(120, 30)
        assert await wait_for(pilot, lambda: "not shown" in str(status.content))
        hidden = ", ".join(c.title for c in table.hidden_columns)
        assert hidden in str(status.content) and len(str(status.content)) <= 120


async def test_trace_tab_says_what_is_missing_and_where_it_was_looked_for(tmp_path_factory, tmp_path) -> None:
    from ui_helpers import sample_root

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_case(pilot, app, "single-copied-without-inputs")
        body = screen.query_one("#trace-missing")
        assert await wait_for(pilot, lambda: body.display and "not available" in str(body.content))
        await pilot.pause()
        text = str(body.content)
        assert "run-inputs.json records it at /data/eviscene/" in text and "looked for at" in text and "--path-map" in text
        # wrapped inside the pane, not cut: the pane's first lines hold its text
        shown = " ".join(_line(body, y).strip() for y in range(body.size.height))
        assert "source trace not found" in shown and "looked for" in shown
        assert not screen.query_one("#trace-view").display


async def test_a_key_pressed_while_the_case_files_are_read_runs_when_they_are(tmp_path_factory, tmp_path, notices) -> None:
    from ui_helpers import sample_root

    from eviscene_tui.ui.screens.case import ConfirmScreen

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        screen = await open_case(pilot, app, CASE)
        # as right after the trace is painted: the case's files are not read yet
        screen.session.bundle = None
        screen.action_open_repair()

        def told() -> bool:
            return any("Still reading the case's files" in n and "repair search opens as soon as" in n for n in notices)

        assert await wait_for(pilot, told)
        screen.session.integrity = None  # the queued key then stops at the integrity consent
        screen.session.load()
        # the queued key runs once the files are read
        # (the sample app has no policy configured: the repair then says so, as g would)
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen) or any("no policy server configured" in n for n in notices))
        if isinstance(app.screen, ConfirmScreen):
            await pilot.press("escape")
            assert await wait_for(pilot, lambda: app.screen is screen)
