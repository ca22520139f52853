"""The whole app on a case whose source trace is indexed (steps parsed on demand): the
failure step is painted from the index, rows are filled in the background, rows scrolled
to before the fill reaches them are built on demand, search and step detail read the
steps' byte ranges; and an open case follows files written into it during a burst.

The trace lies OUTSIDE the case root and the run records its absolute path, as the
driver does. The lazy threshold is lowered so a small trace takes the indexed path.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import orjson
import pytest
from textual import events
from textual.widgets import TabbedContent
from trace_fixtures import FAILURE, STEPS, write_case
from ui_helpers import make_app, screen_text, wait_for, wait_scan

from eviscene_tui import pace
from eviscene_tui.artifacts import trace as trace_module
from eviscene_tui.artifacts.jsonio import pretty_json_bytes
from eviscene_tui.ui import gc_hold
from eviscene_tui.state import case_check
from eviscene_tui.state.case_session import CaseSession
from eviscene_tui.ui.screens.case import CaseScreen
from eviscene_tui.ui.widgets.runs_table import RunsTable
from eviscene_tui.ui.widgets.trace_view import TraceView

@pytest.fixture
def indexed(monkeypatch):
    monkeypatch.setattr(trace_module, "LAZY_MIN_BYTES", 0)


async def _open(pilot, app, key: str) -> CaseScreen:
    await wait_scan(pilot, app)
    assert app.screen.query_one(RunsTable).select_key(key)
    await pilot.press("enter")
    assert await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.trace_rows is not None, 20)
    return app.screen


async def test_indexed_trace_opens_on_the_failure_step_fills_rows_and_searches(tmp_path: Path, indexed) -> None:
    write_case(tmp_path)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        assert screen.trace.lazy and screen.trace_rows.lazy
        tv = screen.query_one(TraceView)
        assert tv.cursor == FAILURE
        assert await wait_for(pilot, lambda: f"RESULT-{FAILURE} page" in screen_text(app), 10)
        # the background fill builds every row, and the policy steps become known
        assert await wait_for(pilot, lambda: screen.trace_rows.filled() == STEPS, 20)
        assert await wait_for(pilot, lambda: len(screen.trace_rows.policy_indices) == STEPS, 5)
        assert await wait_for(pilot, lambda: "reading steps" not in str(screen.query_one("#trace-status").content), 5)
        # once every row is built, full garbage collections are kept off the trace's parts
        assert await wait_for(pilot, lambda: gc_hold.holds() == 3 and gc.get_freeze_count() > 0, 10)  # opened, shown, then filled
        # search over the byte ranges / the corpus: a tool result far from the window
        await pilot.press("slash")
        await pilot.press(*"result-393")
        assert await wait_for(pilot, lambda: tv.cursor == 393, 10)
        assert "match 1 of 1" in str(screen.query_one("#trace-status").content)
        await pilot.press("escape")
        # step detail of a far step, read from its range
        tv.goto(7)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "StepDetailScreen", 10)
        assert await wait_for(pilot, lambda: "RESULT-7 page text" in screen_text(app), 5)
        # leaving the case gives its parts back to the collector
        while isinstance(app.screen, CaseScreen) or type(app.screen).__name__ == "StepDetailScreen":
            app.pop_screen()
            await pilot.pause()
        assert await wait_for(pilot, lambda: gc_hold.holds() == 0 and gc.get_freeze_count() == 0, 10)


async def test_the_other_tabs_are_mounted_after_the_failure_step_is_painted_and_a_key_goes_first(tmp_path: Path, indexed, monkeypatch) -> None:
    # their mount and first paint would share the frame the operator waits for, and hold
    # the UI thread when the operator presses a key as the failure step appears: End,
    # pressed in the frame that painted it, is answered before they are mounted
    write_case(tmp_path)
    order: list[str] = []
    real_mount, real_post, real_edge = CaseScreen._mount_panels, TraceView.post_message, TraceView.action_edge

    def mount_panels(self: CaseScreen) -> None:
        order.append("mount")
        real_mount(self)

    def post_message(self: TraceView, message):  # type: ignore[no-untyped-def]
        if isinstance(message, TraceView.FailureShown):
            order.append("failure painted")
            key = events.Key("end", None)
            key.set_sender(self.app)
            self.app.post_message(key)  # the operator's key, from the terminal
        return real_post(self, message)

    def action_edge(self: TraceView, end: int) -> None:
        order.append("end")
        real_edge(self, end)

    monkeypatch.setattr(CaseScreen, "_mount_panels", mount_panels)
    monkeypatch.setattr(TraceView, "post_message", post_message)
    monkeypatch.setattr(TraceView, "action_edge", action_edge)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        assert await wait_for(pilot, lambda: bool(screen.query("#integrity-doc")), 10)
        assert order[:3] == ["failure painted", "end", "mount"]
        tv = screen.query_one(TraceView)
        assert tv.cursor == STEPS - 1
        assert await wait_for(pilot, lambda: f"RESULT-{STEPS - 1} page" in screen_text(app), 5)
        # the bodies are painted once mounted, and the tab bar shows them
        assert await wait_for(pilot, lambda: "loading" not in str(screen.query_one("#loc-doc").content), 10)
        await pilot.press("5")
        assert await wait_for(pilot, lambda: screen.query_one(TabbedContent).active == "integrity", 5)


async def test_a_tab_opened_before_the_bodies_are_mounted_mounts_them_at_once(tmp_path: Path, indexed, monkeypatch) -> None:
    # the quiet wait after the failure step's paint never delays a tab the operator asks for
    monkeypatch.setattr(pace, "QUIET_AFTER_INPUT", 3600.0)
    write_case(tmp_path)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        tv = screen.query_one(TraceView)
        assert await wait_for(pilot, lambda: tv.probes.failure_painted_at is not None, 10)
        assert not screen.query("#loc-doc")  # still waiting for a quiet moment
        await pilot.press("2")
        assert await wait_for(pilot, lambda: bool(screen.query("#loc-doc")), 5)
        assert await wait_for(pilot, lambda: screen.query_one(TabbedContent).active == "localization", 5)
        assert await wait_for(pilot, lambda: "loading" not in str(screen.query_one("#loc-doc").content), 10)


async def test_step_detail_of_a_far_step_shows_what_the_whole_file_path_shows(tmp_path: Path, indexed) -> None:
    from textual.content import Content

    from eviscene_tui.state.case_view import step_detail_doc
    from eviscene_tui.ui.widgets.doc import doc_content
    from eviscene_tui.ui.widgets.doc_view import DocView

    case = write_case(tmp_path)
    trace_path = tmp_path / "inputs" / case.name / "trace.json"
    # a far step with a long page, several lines and wide characters
    doc = orjson.loads(trace_path.read_bytes())
    far = 3
    doc["state"]["all_steps"][far]["tool_result"] = "\n".join(f"line {k}: " + "archive 日本 word " * 400 for k in range(6))
    trace_path.write_bytes(orjson.dumps(doc))
    whole, _ = trace_module.load_trace(trace_path, lazy=False)
    assert whole is not None
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(pilot, app, case.name)
        assert screen.trace.lazy
        screen.query_one(TraceView).goto(far)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "StepDetailScreen", 10)
        view = app.screen.query_one(DocView)
        expected = doc_content(step_detail_doc(whole.step_detail(far), failure_index=FAILURE))
        assert isinstance(view.content, Content) and view.content == expected
        assert view.wrapped_lines == expected.wrap(view.scrollable_content_region.width)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is screen, 5)
        assert not screen.session.fill_gate.held or await wait_for(pilot, lambda: not screen.session.fill_gate.held, 5)


async def test_scrolling_past_the_filled_rows_parses_them_on_demand(tmp_path: Path, indexed, monkeypatch) -> None:
    # no background fill: only the window and what the view asks for get built
    monkeypatch.setattr(CaseSession, "_fill_step", lambda self, *a, **k: None)
    write_case(tmp_path)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        data = screen.trace_rows
        assert data.rows[STEPS - 1] is None and data.rows[FAILURE] is not None
        tv = screen.query_one(TraceView)
        asked: list[TraceView.RowsWanted] = []
        real_post = tv.post_message
        monkeypatch.setattr(tv, "post_message", lambda message: (asked.append(message) if isinstance(message, TraceView.RowsWanted) else None, real_post(message))[1])
        tv.action_edge(1)
        # the new screenful's rows are asked for at the jump, not when a frame paints their placeholders
        assert [(m.start <= STEPS - 1 < m.end) for m in asked] == [True]
        assert await wait_for(pilot, lambda: data.rows[STEPS - 1] is not None, 10)
        assert await wait_for(pilot, lambda: f"RESULT-{STEPS - 1} page" in screen_text(app), 5)
        assert any(row is None for row in data.rows)  # only what was on screen was built
        assert "reading steps" in str(screen.query_one("#trace-status").content)


async def test_gzip_trace_says_so_and_spools_in_the_work_dir(tmp_path: Path, indexed, monkeypatch) -> None:
    import gzip
    import os

    monkeypatch.setattr(trace_module, "LAZY_MIN_GZ_BYTES", 0)
    case = write_case(tmp_path)
    plain = tmp_path / "inputs" / "lazy-case" / "trace.json"
    gz = plain.with_name("trace.json.gz")
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    for name in ("run-inputs.json", "manifest.json"):
        (case / name).write_bytes((case / name).read_bytes().replace(str(plain.resolve()).encode(), str(gz.resolve()).encode()))
    before = sorted(os.listdir(gz.parent))
    app = make_app(tmp_path / "runs")
    loading: list[str] = []
    original = CaseSession._on_trace_loading

    def spy(self, event):  # the notice shown while the gzip trace is decompressed
        loading.append(event.text)
        original(self, event)

    monkeypatch.setattr(CaseSession, "_on_trace_loading", spy)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        assert any("gzip" in text and "slower" in text for text in loading)
        assert screen.trace.lazy and screen.trace.gzip
        assert "gzip" in str(screen.query_one("#trace-status").content)
        assert await wait_for(pilot, lambda: f"RESULT-{FAILURE} page" in screen_text(app), 10)
        assert (app.options.workdir / "spool").is_dir()
    assert sorted(os.listdir(gz.parent)) == before


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
async def test_open_case_follows_a_burst_of_writes(tmp_path: Path, indexed, poll: bool) -> None:
    """A driver appending to the open case without pausing: the case view is reloaded
    during the burst (not only after it), and the app keeps answering keys."""
    case = write_case(tmp_path)
    app = make_app(tmp_path / "runs", watch=True, poll=poll)
    stop = threading.Event()
    written: list[int] = []

    def driver() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            with open(case / "manifest.json", "wb") as fh:
                fh.write(pretty_json_bytes({
                    "schema_version": "ifv-psd-repair-driver-result-v1", "status": f"generating-{n}", "trace": None,
                    "runtime_archive": None, "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0,
                }))
            with open(case / "events.jsonl", "ab") as fh:
                fh.write(b'{"event": "tick", "n": %d}\n{"event": "torn' % n)
            written.append(n)
            stop.wait(0.04)

    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        assert await wait_for(pilot, app.watch_ready.is_set, 5)
        shown_before = screen.view
        thread = threading.Thread(target=driver, daemon=True)
        thread.start()
        try:
            # updated while the driver is still writing
            assert await wait_for(pilot, lambda: screen.view is not shown_before and "generating-" in str(screen.query_one("#case-title").content), 10)
            seen = str(screen.query_one("#case-title").content)
            assert await wait_for(pilot, lambda: str(screen.query_one("#case-title").content) != seen, 10)
            assert not stop.is_set()
            # keys are answered during the burst
            tv = screen.query_one(TraceView)
            start = tv.cursor
            await pilot.press("down")
            assert await wait_for(pilot, lambda: tv.cursor == start + 1, 5)
        finally:
            stop.set()
            thread.join(5)
        assert screen.query_one(TabbedContent).active == "trace"
        assert len(written) > 3


async def test_a_reload_with_the_same_problems_does_not_repaint_the_panels(tmp_path: Path, indexed) -> None:
    """The Integrity and Compare panels are repainted only when what they show changed
    (a driver's burst reloads the case with the same problems again and again); a new
    problem is still shown at once."""
    case = write_case(tmp_path)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        await pilot.press("5")
        doc = screen.query_one("#integrity-doc")
        compare = screen.query_one("#compare-left")
        assert await wait_for(pilot, lambda: screen.integrity is not None and screen.compare is not None and not screen.session.integrity_running, 20)
        painted, compared = doc.content, compare.content
        session = screen.session
        checks = session.load_count
        session.load()  # files unchanged: same view, same check result
        assert await wait_for(pilot, lambda: session.load_count > checks and not session.loading and not session.integrity_running
                              and not session.integrity_waiting, 20)
        await pilot.pause()
        assert doc.content is painted and compare.content is compared
        (case / "scratch.json.tmp").write_bytes(b"{}")  # a leftover temporary file: a new problem
        session.load()
        assert await wait_for(pilot, lambda: "scratch.json.tmp" in str(doc.content), 20)


async def test_the_background_fill_and_the_live_checks_give_way_to_keys(tmp_path: Path, indexed, monkeypatch, check_in_thread) -> None:
    """Work nobody waits for (the rows' fill, the case's integrity check where it runs on a
    thread of the app) runs as background work, whose loops yield to the operator's input;
    the UI thread never does."""
    write_case(tmp_path)
    app = make_app(tmp_path / "runs")
    yielded: list[bool] = []
    real = pace.yield_to_input

    def recording(max_wait: float = pace.MAX_WAIT) -> float:
        yielded.append(pace.in_background())
        return real(max_wait)

    monkeypatch.setattr(pace, "yield_to_input", recording)
    ran: dict[str, list[bool]] = {"fill": [], "check": []}
    original_fill, original_check = CaseSession.fill_rows, case_check.checked_case

    def fill_spy(self, *args):
        ran["fill"].append(pace.in_background())
        return original_fill(self, *args)

    def check_spy(*args, **kwargs):
        ran["check"].append(pace.in_background())
        return original_check(*args, **kwargs)

    monkeypatch.setattr(CaseSession, "fill_rows", fill_spy)
    monkeypatch.setattr(case_check, "checked_case", check_spy)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        assert await wait_for(pilot, lambda: screen.trace_rows.filled() == STEPS and screen.integrity is not None, 20)
        assert not pace.in_background()  # the UI thread
    assert ran["fill"] == [True] and ran["check"] and all(ran["check"])
    assert yielded.count(True) >= STEPS  # the fill gave way (when a key was recent) between its steps


async def test_a_case_opened_once_the_index_process_is_ready_is_indexed_there(tmp_path: Path, indexed, monkeypatch) -> None:
    # Enter sends the case to the index process before its screen is built; the load step
    # takes that index (the app's own thread scans nothing) and the screen is the same
    from eviscene_tui.state import index_process

    warmed = index_process.INDEXES.warm()
    if warmed is not None:
        assert warmed.result(timeout=120) > 0
    assert index_process.INDEXES.ready
    write_case(tmp_path)

    def no_scan_here(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the trace was scanned on the app's thread")

    monkeypatch.setattr(trace_module, "index_steps", no_scan_here)
    app = make_app(tmp_path / "runs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, app, "lazy-case")
        assert screen.trace.lazy and screen.query_one(TraceView).cursor == FAILURE
        assert await wait_for(pilot, lambda: f"RESULT-{FAILURE} page" in screen_text(app), 10)
        assert await wait_for(pilot, lambda: screen.trace_rows.filled() == STEPS, 20)
