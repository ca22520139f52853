"""Case screen key paths: failure step focused on open, navigation, quotes,
reveal toggle, step detail, go to step, no-site explanation, other screens."""

from __future__ import annotations

from ui_helpers import make_app, open_case, sample_root, screen_text, wait_for

from textual.widgets import OptionList, TabbedContent

from eviscene_tui.ui.widgets.doc import MASK
from eviscene_tui.ui.widgets.trace_view import LINES_PER_STEP, TraceView


async def test_open_case_focuses_failure_step(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        failure = screen.view.failure_index
        assert failure is not None
        tv = screen.query_one(TraceView)
        assert tv.has_focus
        assert tv.cursor == failure
        assert screen.trace_rows.failure_index == failure
        top = tv.scroll_offset.y
        assert top <= failure * LINES_PER_STEP < top + tv.scrollable_content_region.height
        assert "FAILURE" in screen_text(app)


async def test_policy_navigation_goto_and_failure_key(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        tv = screen.query_one(TraceView)
        failure = screen.view.failure_index
        policy = screen.trace_rows.policy_indices
        await pilot.press("n")
        await pilot.pause()
        later = [i for i in policy if i > failure]
        assert tv.cursor == (later[0] if later else failure)
        await pilot.press("home")
        await pilot.pause()
        assert tv.cursor == 0
        await pilot.press("colon")
        await pilot.pause()
        await pilot.press(*str(screen.trace_rows.step_count - 1), "enter")
        await pilot.pause()
        assert tv.cursor == screen.trace_rows.step_count - 1
        await pilot.press("p")
        await pilot.pause()
        earlier = [i for i in policy if i < screen.trace_rows.step_count - 1]
        assert tv.cursor == earlier[-1]
        await pilot.press("f")
        await pilot.pause()
        assert tv.cursor == failure


async def test_step_detail_shows_tool_result_and_capture(tmp_path_factory) -> None:
    from eviscene_tui.ui.screens.step_detail import StepDetailScreen

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, StepDetailScreen))
        text = screen_text(app)
        assert f"Step {screen.view.failure_index}" in text
        assert "FAILURE SITE" in text
        doc = str(app.screen.query_one("#detail-doc").content)
        assert "token capture" in doc and "tool_result" in doc and "policy_input" in doc
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_quote_jumps_to_its_step(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        quotes = screen.view.quotes
        assert quotes
        tv = screen.query_one(TraceView)
        await pilot.press("home")
        await pilot.pause()
        assert tv.cursor == 0 or quotes[0].step_index == 0
        await pilot.press("2")
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "localization"
        # the tab's scroll view has the keys (down / PgDn scroll it); the quotes are one Tab on
        assert screen.query_one("#localization-scroll").has_focus
        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.query_one("#quotes", OptionList).has_focus)
        await pilot.press("home", "enter")
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "trace"
        assert tv.cursor == quotes[0].step_index
        assert tv.has_focus


async def test_reveal_toggle_masks_privileged_material(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 60)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        await pilot.press("3")
        await pilot.pause()
        privileged = [seg.text for line in screen.view.rounds for seg in line if seg.privileged and seg.text.strip() not in ("", "-")]
        assert privileged
        secret = max(privileged, key=len)
        assert len(secret) > 20
        doc = str(screen.query_one("#rounds-doc").content)
        assert MASK in doc and secret not in doc
        assert "privileged material hidden" in screen_text(app)
        await pilot.press("v")
        await pilot.pause()
        doc = str(screen.query_one("#rounds-doc").content)
        assert secret in doc and MASK not in doc
        assert "PRIVILEGED MATERIAL SHOWN" in screen_text(app)
        await pilot.press("v")
        await pilot.pause()
        assert secret not in str(screen.query_one("#rounds-doc").content)


async def test_no_site_case_explains_and_points_at_closest_step(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 50)) as pilot:
        screen = await open_case(pilot, app, "search-no-recoverable-site")
        assert screen.view.no_site
        # opens on the explanation
        assert await wait_for(pilot, lambda: screen.query_one(TabbedContent).active == "localization", 5)
        # the panels are mounted and painted just after the tab opens
        assert await wait_for(pilot, lambda: "Why no recoverable site was found" in str(screen.query("#loc-doc").first().content if screen.query("#loc-doc") else ""), 5)
        loc = str(screen.query_one("#loc-doc").content)
        assert "semantic localization" in loc
        closest = screen.view.closest_step
        assert closest is not None
        assert await wait_for(pilot, lambda: screen.trace_rows is not None, 5)
        await pilot.press("f")
        assert await wait_for(pilot, lambda: screen.query_one(TraceView).cursor == closest, 5)


async def test_rounds_tab_shows_states_and_pending(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_case(pilot, app, "search-paused-pending-verifier")
        await pilot.press("3")
        await pilot.pause()
        doc = str(screen.query_one("#rounds-doc").content)
        assert "PENDING verification (not rejected)" in doc
        assert "Round 00" in doc
        assert "REJECTED" not in doc.split("PENDING")[0].split("Round")[-1], "the pending attempt is not shown as rejected"


async def test_integrity_tab_lists_problems_with_paths(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_case(pilot, app, "damaged")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        await pilot.press("5")
        await pilot.pause()
        doc = str(screen.query_one("#integrity-doc").content)
        assert screen.integrity
        code, path, _ = screen.integrity[0]
        assert code in doc and path in doc


async def test_keys_open_stream_and_token_screens_and_g_asks_for_a_policy(tmp_path_factory, notices) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)  # a sound case opens them at once
        await pilot.press("g")  # the bundled driver needs a policy server: said, nothing started
        assert await wait_for(pilot, lambda: any("repair: no policy server configured" in n for n in notices))
        assert app.screen is screen
        for key, name in (("t", "StreamScreen"), ("k", "TokenScreen")):
            await pilot.press(key)
            await wait_for(pilot, lambda name=name: type(app.screen).__name__ == name)
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen)
            assert app.screen is screen


async def test_a_late_focus_on_the_trace_does_not_switch_a_no_site_case_back(tmp_path_factory) -> None:
    """Focus requests are delivered later than they are made: the trace view's focus
    asked for at mount could land after a no-site case had opened its localization
    tab, and the tab switched back to the trace (1 run in 3 on a loaded machine).
    Here the late focus is made on purpose: the shown tab holds, focus returns to it."""
    from conftest import wait_until

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 50)) as pilot:
        screen = await open_case(pilot, app, "search-no-recoverable-site")
        tabs = screen.query_one(TabbedContent)
        await wait_until(lambda: tabs.active == "localization" and bool(screen.query("#localization-scroll")), pilot=pilot)
        quotes = screen.query_one("#localization-scroll")  # the tab's scroll view takes the keys
        await wait_until(lambda: app.focused is quotes, pilot=pilot, what="focus in the localization tab")
        seen: list[object] = []

        def focused_changed(widget: object) -> None:
            seen.append(widget)

        screen.watch(screen, "focused", focused_changed, init=False)
        tv = screen.query_one(TraceView)
        tv.focus()
        await wait_until(lambda: tv in seen and app.focused is quotes, pilot=pilot, timeout=10, what="focus back in the shown tab")
        assert tabs.active == "localization"


async def test_triage_label_is_recorded_outside_the_root_and_filterable(tmp_path_factory, tmp_path) -> None:
    import argparse

    from eviscene_tui.journal.records import record_key
    from eviscene_tui.journal.review import review_state
    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    from eviscene_tui.ui.screens.label import TriageLabelScreen
    from eviscene_tui.ui.screens.runs import RunsScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    root = tmp_path / "runs"
    from eviscene_tui.scaffold.samples import copy_case as copy_sample

    copy_sample(sample_root(tmp_path_factory), "search-no-recoverable-site", root)
    work = tmp_path / "work"
    options = AppOptions.from_args(root, argparse.Namespace(workdir=str(work), operator="tester", theme=None, poll=False, config=None), settings=Settings())
    app = EvisceneApp(options, watch=False)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await open_case(pilot, app, "search-no-recoverable-site")
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        await pilot.press("tab", *"no site at all", "shift+tab", "5")  # a note, then unrecoverable
        assert await wait_for(pilot, lambda: app.store.get("search-no-recoverable-site").label == "unrecoverable", 10)
        # the only case of the queue: it stays open (there is no next case)
        assert await wait_for(pilot, lambda: not isinstance(app.screen, TriageLabelScreen))
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("L")
        await pilot.pause()
        assert [r.key for r in app.screen.query_one(RunsTable).rows] == ["search-no-recoverable-site"]
    key = record_key(root / "search-no-recoverable-site").key
    assert review_state(work).triage_by_case() == {key: {"unrecoverable"}}
    assert review_state(work).triage(key).note == "no site at all"
    assert not any(p.name.endswith(".jsonl") and "journal" in str(p) for p in root.rglob("*"))


async def test_search_in_the_trace_by_keyboard(tmp_path_factory) -> None:
    from textual.widgets import Input

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        tv = screen.query_one(TraceView)
        await pilot.press("home")
        await pilot.pause()
        await pilot.press("slash")
        box = screen.query_one("#trace-search", Input)
        assert box.display and box.has_focus
        # whole tool results are searched (not just the one-line preview), case-insensitively
        await pilot.press(*"PAIPORTA")
        # the answer for the whole query: on a loaded machine typing can pause long enough for
        # a search of its first letters to answer first (its status names those letters)
        ok = await wait_for(pilot, lambda: "\u201cPAIPORTA\u201d" in screen_text(app))
        assert ok, (box.value, screen.session.search_status, screen_text(app)[-400:])
        assert tv.cursor == 2  # the first step whose text holds it (step 3 mentions it too)
        assert "match 1 of 2 steps" in screen_text(app)
        # a query matching several steps: down / Enter go forward, up back, wrapping around
        box.value = ""
        await pilot.press(*"web_search")
        assert await wait_for(pilot, lambda: "of 2 steps for \u201cweb_search\u201d" in screen_text(app))
        first = tv.cursor
        assert first in (1, 3)
        assert tv.marks == {1, 3}  # every match is marked in the gutter
        assert screen_text(app).count("\u25cf") == 2
        await pilot.press("down")
        assert await wait_for(pilot, lambda: tv.cursor != first)
        assert {first, tv.cursor} == {1, 3}
        await pilot.press("up")
        assert await wait_for(pilot, lambda: tv.cursor == first)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: tv.cursor != first)
        box.value = "nothing like this anywhere"
        assert await wait_for(pilot, lambda: "no step contains" in screen_text(app))
        # Esc closes the search box and stays on the case (it does not go back)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and not box.display and tv.has_focus
        assert not tv.marks and "\u25cf" not in screen_text(app) and "steps for" not in screen_text(app)


async def test_a_store_change_while_the_screen_is_taken_down_is_dropped(tmp_path_factory) -> None:
    """A screen's widgets are removed before its own unmount closes its session: a runs-table
    change that arrives between the two (a watched folder's new case while the app quits, or
    the screen is popped) has nothing to repaint, and must not fail."""
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        await screen.query_one(TraceView).remove()
        row = app.store.get("feedback-converged-3-rounds")
        assert row is not None
        app.store.upsert([row])  # the session publishes to the screen, whose trace view is gone
        await pilot.pause()
        assert app.is_running and app._exception is None
