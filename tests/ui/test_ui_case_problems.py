"""Problems where the operator looks: the case header and the Integrity tab carry the
count of ``check``, each problem is marked on the object it concerns in the Rounds tab
(``!`` goes to it and shows its message), and t / g ask before building on a damaged case."""

from __future__ import annotations

from textual.widgets import TabbedContent
from ui_helpers import make_app, open_case, sample_root, screen_text, wait_checked, wait_for

from eviscene_tui.artifacts.report import build_check_report


def _check_count(root, key: str) -> int:
    report = build_check_report(root, workers=1)
    return next(len(c["problems"]) for c in report["cases"] if c["path"] == key)


async def test_header_and_tab_label_carry_the_problem_count(tmp_path_factory) -> None:
    root = sample_root(tmp_path_factory)
    expected = _check_count(root, "damaged")
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_case(pilot, app, "damaged")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        await pilot.pause()
        assert len(screen.problem_rows()) == expected  # each problem once, as check lists them
        title = str(screen.query_one("#case-title").content)
        assert title.lstrip().startswith(f"\u26a0 {expected} problems")  # first: it survives a narrow terminal
        label = str(screen.query_one(TabbedContent).get_tab("integrity").label)
        assert f"\u26a0 {expected}" in label
        await pilot.press("5")
        await pilot.pause()
        doc = str(screen.query_one("#integrity-doc").content)
        from eviscene_tui.state.case_view import PROVENANCE_TITLE

        problems_part, inputs_part = doc.split(PROVENANCE_TITLE)  # then where each input was found
        listed = [line for line in problems_part.splitlines() if line and not line.startswith(" ")]
        assert len(listed) == len(set(listed)) == expected
        assert "source trace:" in inputs_part and "outside the run root" in inputs_part


async def test_rounds_tab_marks_the_objects_problems_concern(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await open_case(pilot, app, "damaged")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        await pilot.press("3")
        await pilot.pause()
        doc = str(screen.query_one("#rounds-doc").content)
        lines = doc.splitlines()
        teacher = [ln for ln in lines if "teacher continuation:" in ln]
        # round 00: the episode file is missing; round 01: its hash does not match
        assert "episode file missing" in teacher[0] and "missing_artifact" in teacher[0]
        assert "file_hash_mismatch" in teacher[1]
        accepted = next(ln for ln in lines if "ACCEPTED" in ln)
        assert "\u26a0" in accepted and "schema_unknown" in accepted  # not shown as sound
        assert any("media:" in ln and "media_mismatch" in ln for ln in lines)
        marked = [m for m in screen.marks if m.line is not None]
        assert marked
        await pilot.press("exclamation_mark")
        await pilot.pause()
        assert screen.query_one(TabbedContent).active in ("rounds", "integrity")


async def test_stream_on_a_damaged_case_asks_first(tmp_path_factory) -> None:
    from eviscene_tui.ui.screens.confirm import ConfirmScreen

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_case(pilot, app, "damaged")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        for key in ("t", "g"):
            await pilot.press(key)
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5)
            assert "integrity problem" in screen_text(app)
            await pilot.press("n")
            assert await wait_for(pilot, lambda: app.screen is screen, 5)
        await pilot.press("t")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5)
        await pilot.press("y")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "StreamScreen", 10)


async def test_trace_status_numbers_steps_as_the_rows_do_and_rows_wrap(tmp_path_factory) -> None:
    """The status line names the cursor's step by the number its row shows (the index in
    state.all_steps, from 0), the same numbers "failure at N" uses."""
    from eviscene_tui.ui.widgets.trace_view import LINES_PER_STEP, TraceView

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 30)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        tv = screen.query_one(TraceView)
        await pilot.press("home")
        await pilot.pause()
        count = screen.trace_rows.step_count
        status = str(screen.query_one("#trace-status").content)
        assert f"step 0 (of 0\u2013{count - 1})" in status, status
        assert "\u25b6     0 " in "".join(seg.text for seg in tv.render_line(0))  # the cursor's row is labelled 0
        failure = screen.trace_rows.failure_index
        assert f"failure at {failure}" in status
        tv.cursor = failure
        assert await wait_for(pilot, lambda: f"step {failure} (of" in str(screen.query_one("#trace-status").content))
        assert tv.virtual_size.height == count * LINES_PER_STEP
        await pilot.press("w")
        await pilot.pause()
        assert tv.wrapped and tv.virtual_size.height > count * LINES_PER_STEP
        await pilot.press("w")
        await pilot.pause()
        assert not tv.wrapped


def test_place_problems_picks_the_most_specific_line() -> None:
    from eviscene_tui.state.case_view import CaseView, place_problems

    view = CaseView(key="k", title="k", status="converged", layout="feedback_search")
    view.round_anchors = {0: ("manifest.json", ""), 3: ("rounds/round-00/",), 5: ("rounds/round-00/episodes/hint-00-teacher.json",)}
    marks = place_problems(view, [
        ("missing_artifact", "rounds/round-00/episodes/hint-00-teacher.json", "m"),
        ("json_invalid", "rounds/round-00/manifest.json", "m"),
        ("leftover_tmp", "manifest.json.tmp", "m"),
    ])
    assert [m.line for m in marks] == [5, 3, 0]


async def test_slate_root_is_labelled_unsupported_everywhere_and_never_waits(tmp_path) -> None:
    from eviscene_tui.scaffold.samples.synthetic import make_slate_case
    from eviscene_tui.state.rows import COLUMNS, cell_text

    root = tmp_path / "runs"
    make_slate_case(root / "slate-search")
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_checked(pilot, app)
        row = app.store.get("slate-search")
        status = cell_text(row, next(c for c in COLUMNS if c.key == "status"))
        assert status.startswith("unsupported layout") and "slate" in status
        assert row.in_triage or row.problems > 0
        screen = await open_case(pilot, app, "slate-search")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        title = str(screen.query_one("#case-title").content)
        assert "unsupported layout" in title and "generating" not in title and "repairing" not in title
        codes = [code for code, _p, _m in screen.problem_rows()]
        assert codes.count("unsupported_layout") == 1
        await pilot.press("4")
        assert await wait_for(pilot, lambda: "waiting for the trace" not in str(screen.query_one("#compare-left").content), 10)
        await pilot.press("3")
        assert await wait_for(pilot, lambda: "slate rounds: 1" in str(screen.query_one("#rounds-doc").content))


async def test_a_capture_without_attempt_row_carries_its_mark(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_case(pilot, app, "search-paused-execution-error")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        await pilot.press("3")
        await pilot.pause()
        doc = str(screen.query_one("#rounds-doc").content)
        line = next(ln for ln in doc.splitlines() if "continuation hint-00" in ln)
        assert "token_capture_incomplete" in line
