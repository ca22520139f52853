"""Line-API widgets in harness apps with synthetic data (no files)."""

from __future__ import annotations


from textual.app import App, ComposeResult

from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.trace_rows import StepRow, TraceRows
from eviscene_tui.ui.widgets.runs_table import RunsTable
from eviscene_tui.ui.widgets.trace_view import LINES_PER_STEP, TraceView


class TraceHarness(App):
    def __init__(self, data: TraceRows) -> None:
        super().__init__()
        self.data = data
        self.seen: list[int] = []

    def compose(self) -> ComposeResult:
        yield TraceView()

    def on_mount(self) -> None:
        self.query_one(TraceView).set_trace(self.data)
        self.query_one(TraceView).focus()

    def on_trace_view_step_highlighted(self, event: TraceView.StepHighlighted) -> None:
        self.seen.append(event.index)


def synthetic_trace(n: int, failure: int) -> TraceRows:
    rows: list[StepRow | None] = [
        StepRow(index=i, stage="unified_react", action_type="tool_call", tool=f"web_search(q{i})", result="x" * 300, text=f"thought {i}", is_policy=i % 3 == 0)
        for i in range(n)
    ]
    rows[n - 1] = None  # not built yet: painted as a placeholder
    return TraceRows(step_count=n, rows=rows, policy_indices=[i for i in range(n) if i % 3 == 0], failure_index=failure)


async def test_trace_view_virtualizes_100k_steps_and_centres_failure() -> None:
    app = TraceHarness(synthetic_trace(100_000, 77_777))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        tv = app.query_one(TraceView)
        assert tv.virtual_size.height == 100_000 * LINES_PER_STEP
        assert tv.cursor == 77_777
        top = tv.scroll_offset.y
        assert top <= 77_777 * LINES_PER_STEP < top + tv.scrollable_content_region.height
        await pilot.press("pagedown", "pagedown", "end")
        assert tv.cursor == 99_999
        lines = [tv.render_line(y) for y in range(tv.scrollable_content_region.height)]
        assert any("loading" in "".join(seg.text for seg in strip) for strip in lines)
        await pilot.press("home")
        assert tv.cursor == 0
        assert 77_777 in app.seen


class TableHarness(App):
    def compose(self) -> ComposeResult:
        yield RunsTable()


async def test_runs_table_with_10k_rows_paints_only_visible_lines() -> None:
    rows = [CaseRow(key=f"case-{i:05d}", status="converged" if i % 2 else "paused_pending_verifier", rounds=i % 5) for i in range(10_000)]
    app = TableHarness()
    async with app.run_test(size=(100, 20)) as pilot:
        table = app.query_one(RunsTable)
        table.set_rows(rows)
        table.focus()
        await pilot.pause()
        assert table.virtual_size.height == 10_001
        await pilot.press("end")
        assert table.current_row.key == "case-09999"
        assert table.scroll_offset.y >= 10_001 - table.scrollable_content_region.height
        header = "".join(seg.text for seg in table.render_line(0))
        assert "status" in header
        # rows replaced (e.g. a re-sort) keep the cursor on the same case
        table.set_rows(list(reversed(rows)))
        assert table.current_row.key == "case-09999"


def test_themes_dir_prefers_the_source_tree_then_the_installed_data_files(tmp_path) -> None:
    from eviscene_tui.ui.themes import DARK, THEMES_DIR, find_themes_dir

    assert (THEMES_DIR / f"{DARK}.toml").is_file() and (THEMES_DIR / f"{DARK}.tcss").is_file()
    source, installed = tmp_path / "src-themes", tmp_path / "share" / "eviscene-tui" / "themes"
    installed.mkdir(parents=True)
    (installed / f"{DARK}.toml").write_text('primary = "#123456"\n')
    assert find_themes_dir([source, installed]) == installed  # wheel install: no source tree
    source.mkdir()
    (source / f"{DARK}.toml").write_text('primary = "#654321"\n')
    assert find_themes_dir([source, installed]) == source
    assert find_themes_dir([tmp_path / "a", tmp_path / "b"]) == tmp_path / "a"


async def test_a_form_editor_prefilled_from_a_run_shows_it_sanitised_and_returns_it_as_recorded() -> None:
    """The gate's 'add a hint' dialog is pre-filled with the run's hint (or its locked hint):
    the editor shows control and bidi characters as placeholders, and the value
    submitted is the recorded text until the operator edits it."""
    from conftest import ScreenHarness, wait_until

    from eviscene_tui.ui.screens.dialogs import HintEditor
    from eviscene_tui.ui.widgets.untrusted_edit import UntrustedTextArea

    locked = "Check the date \x1b]0;title\x07 \u202edesrever\u202c\n"
    form = HintEditor("Add a hint", prefill=locked)
    async with ScreenHarness(form).run_test(size=(100, 30)) as pilot:
        box = await wait_until(lambda: form.query("#f-editor") and form.query_one("#f-editor", UntrustedTextArea), pilot=pilot)
        assert not any(c in box.text for c in ("\x1b", "\x07", "\u202e")) and "\u241b]0;title\u2407" in box.text
        assert form.values()["editor"] == locked
        await pilot.press(*"more")
        assert form.values()["editor"] == box.text and box.text.endswith("more")


def _reference_lines(rows: int, groups: list[tuple[int, str, int, int]]) -> tuple[list[int], list[int]]:
    starts = {start: n for n, (start, _t, _c, _l) in enumerate(groups)}
    lines: list[int] = []
    line_of: list[int] = []
    for i in range(rows):
        if i in starts:
            lines.append(-(starts[i] + 1))
        line_of.append(len(lines))
        lines.append(i)
    return lines, line_of


def test_runs_table_numbers_its_lines_as_one_line_per_row_and_group_header() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.integers(0, 40), st.lists(st.tuples(st.integers(-3, 45), st.just("g"), st.just(1), st.just(0)), max_size=8))
    def check(count: int, groups: list[tuple[int, str, int, int]]) -> None:
        table = RunsTable()
        table.rows = [CaseRow(key=f"c{i}") for i in range(count)]
        table.groups = groups
        table._number_lines()
        assert (table._lines, table._line_of) == _reference_lines(count, groups)

    check()


async def test_runs_table_repaints_only_what_changed_and_paints_what_a_full_repaint_paints() -> None:
    """The cursor's moves and rows arriving below the page repaint a line or two; every line
    on screen is then what a table painted afresh shows (the cursor's highlight moved, the
    column layout followed the new rows)."""
    rows = [CaseRow(key=f"case-{i:05d}", status="converged" if i % 3 else "searching", rounds=i % 7) for i in range(200)]
    app = TableHarness()
    async with app.run_test(size=(100, 20)) as pilot:
        table = app.query_one(RunsTable)
        table.set_rows(rows[:100])
        table.focus()
        await pilot.pause()
        table.set_rows(rows[:100])  # laid out again beside the scrollbar that appeared
        await pilot.pause()

        def painted() -> str:  # what is on screen (the lines not repainted as they were)
            return app.export_screenshot()

        async def afresh() -> str:  # every line painted again from the rows
            table._cache.clear()
            table.refresh()
            await pilot.pause()
            return app.export_screenshot()

        for key in ("down", "down", "down", "up"):
            await pilot.press(key)
            await pilot.pause()
            assert painted() == await afresh()
        # integrity results that change rows in place but not the layout ("…" -> "0")
        shown = painted()
        for row in rows[:5]:
            row.set_checked(0, (), False)
        table.set_rows(rows[:100])
        await pilot.pause()
        assert painted() != shown
        assert painted() == await afresh()
        # a batch below the page, then one whose long case name widens the case column
        table.set_rows(rows[:150])
        await pilot.pause()
        assert painted() == await afresh()
        table.set_rows([*rows[:150], CaseRow(key="a-" + "very-long-name-" * 4, status="converged")])
        await pilot.pause()
        assert painted() == await afresh()
        # integrity results change rows in place (their problem and status cells)
        shown = painted()
        for row in rows[5:10]:
            row.set_checked(3, ("E",), True)
        table.set_rows([*rows[:150], CaseRow(key="a-" + "very-long-name-" * 4, status="converged")])
        await pilot.pause()
        assert painted() != shown
        assert painted() == await afresh()
        # focus away and back: the cursor's row follows it
        table.blur()
        await pilot.pause()
        assert painted() == await afresh()
