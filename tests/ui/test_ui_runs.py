"""Runs screen: every sample case listed, filters, triage queue, search, sort."""

from __future__ import annotations

from ui_helpers import copy_samples, make_app, sample_root, screen_text, wait_checked, wait_for, wait_scan

from eviscene_tui.ui.widgets.runs_table import RunsTable


async def test_runs_screen_lists_every_case_with_columns(tmp_path_factory) -> None:
    root = sample_root(tmp_path_factory)
    app = make_app(root)
    # 180 columns: every column whole, the triage label and "why no site" included
    async with app.run_test(size=(180, 40)) as pilot:
        await wait_scan(pilot, app)
        keys = {r.key for r in app.store.rows()}
        assert "feedback-converged-3-rounds" in keys
        assert "search-no-recoverable-site" in keys
        assert not any(k.startswith("feedback-converged-3-rounds/rounds") for k in keys), "rounds are not cases"
        row = app.store.get("feedback-converged-3-rounds")
        assert (row.status, row.rounds, row.accepted) == ("converged", 3, 1)
        text = screen_text(app)
        for title in ("case", "status", "rnd", "att", "acc", "pnd", "localization", "category", "why no site", "label", "prb", "changed"):
            assert title in text
        assert "converged" in text


async def test_triage_filter_key_shows_only_triage_cases(tmp_path_factory, tmp_path) -> None:
    app = make_app(sample_root(tmp_path_factory), workdir=tmp_path / "work")  # the filter it sets is saved there
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        await pilot.press("t")
        await pilot.pause()
        table = app.screen.query_one(RunsTable)
        shown = [r.key for r in table.rows]
        assert "search-no-recoverable-site" in shown
        assert "search-paused-pending-verifier" in shown
        assert "feedback-converged-3-rounds" not in shown
        assert all(r.in_triage for r in table.rows)
        await pilot.press("n")
        await pilot.pause()
        assert [r.key for r in table.rows] == ["search-no-recoverable-site"]
        await pilot.press("a")
        await pilot.pause()
        assert len(table.rows) == len(app.store)


async def test_incremental_search_and_escape(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        await pilot.press("slash", "p", "a", "u", "s")
        table = app.screen.query_one(RunsTable)
        # the table is refreshed once per burst of store changes: await it, never a pause
        await wait_for(pilot, lambda: bool(table.rows) and all("paus" in r.haystack for r in table.rows))
        assert len(table.rows) < len(app.store)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(table.rows) == len(app.store))


async def test_search_matches_loaded_hint_text(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        row = next(r for r in app.store.rows() if r.hint_texts)
        word = max(row.hint_texts[0].split(), key=len).lower()
        app.store.set_search(word)
        await pilot.pause()
        assert row.key in [r.key for r in app.screen.query_one(RunsTable).rows]


async def test_sort_by_a_chosen_column_and_reverse(tmp_path_factory, tmp_path) -> None:
    from eviscene_tui.ui.screens.runs import SortChooser

    app = make_app(sample_root(tmp_path_factory), workdir=tmp_path / "work")  # the sort it sets is saved there
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        await pilot.press("s")
        assert await wait_for(pilot, lambda: isinstance(app.screen, SortChooser))
        for key in ("down", "down", "down"):  # case, case id, layout, status
            await pilot.press(key)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, SortChooser))
        assert app.store.sort_key == "status" and not app.store.sort_reverse
        table = app.screen.query_one(RunsTable)
        assert [r.status for r in table.rows] == sorted(r.status for r in table.rows)
        await pilot.press("S")
        await pilot.pause()
        assert app.store.sort_reverse
        assert [r.status for r in table.rows] == sorted((r.status for r in table.rows), reverse=True)
        await pilot.press("o")  # the next column
        await pilot.pause()
        assert app.store.sort_key == "rounds"


async def test_search_moves_the_cursor_to_the_first_match(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        table = app.screen.query_one(RunsTable)
        table.cursor = len(table.rows) - 1
        await pilot.press("slash", *"paused-")
        await pilot.pause()
        assert table.cursor == 0 and table.current_row.key.startswith("search-paused-")
        n = len(table.rows)
        assert f"match 1 of {n}" in screen_text(app)
        await pilot.press("enter", "down")
        await pilot.pause()
        assert f"match 2 of {n}" in screen_text(app)


async def test_first_rows_paint_in_batches(tmp_path_factory) -> None:
    from eviscene_tui.ui import messages as M

    seen: list[object] = []
    app = make_app(sample_root(tmp_path_factory), scanned=False)
    async with app.run_test(size=(120, 30), message_hook=seen.append) as pilot:
        await wait_scan(pilot, app)
        batches = [m for m in seen if isinstance(m, M.SummariesBatch) and m.initial]
        assert batches and sum(len(b.rows) for b in batches) == len(app.store)
        # the rows are posted as the walk finds them, before the scan says it has finished
        # (the order of one worker's messages, not a duration)
        finished = next(i for i, m in enumerate(seen) if isinstance(m, M.ScanFinished))
        assert seen.index(batches[0]) < finished
        assert all(seen.index(b) < finished for b in batches)
        assert app.probes.first_rows_at is not None  # measured for the bench


async def test_mouse_is_optional_but_works(tmp_path_factory) -> None:
    from eviscene_tui.ui.screens.case import CaseScreen

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        table = app.screen.query_one(RunsTable)
        x = 0
        for column, width in table.shown_columns:  # header: the "status" column
            if column.key == "status":
                break
            x += width + 1
        await pilot.click(RunsTable, offset=(x + 2, 0))
        await pilot.pause()
        assert app.store.sort_key == "status"
        await pilot.click(RunsTable, offset=(5, 2))
        await pilot.pause()
        assert table.cursor == 1
        await pilot.click(RunsTable, offset=(5, 2), times=2)
        assert await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen), 10)


async def test_empty_folder_says_so(tmp_path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 20)) as pilot:
        await wait_scan(pilot, app)
        assert await wait_for(pilot, lambda: "no PSD cases found" in screen_text(app))


async def test_problem_counts_equal_check_json(tmp_path_factory, tmp_path, capsysbinary) -> None:
    """The problem column and the triage queue show exactly what ``check --json`` reports.
    On a copy of the sample tree: the triage filter it sets is saved in the tree's work
    directory, where every later test on the shared tree would find it."""
    import orjson

    from eviscene_tui.cli import main

    root = copy_samples(tmp_path_factory, tmp_path)
    assert main(["check", "--json", str(root)]) == 1
    report = orjson.loads(capsysbinary.readouterr().out)
    expected = {c["path"]: len(c["problems"]) for c in report["cases"]}
    assert expected["damaged"] > 1 and expected["search-paused-execution-error"] >= 1  # the samples still carry the defects
    app = make_app(root, transient_grace=0.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_scan(pilot, app)
        await wait_checked(pilot, app)
        assert {r.key: r.problems for r in app.store.rows()} == expected
        assert all(r.checked for r in app.store.rows())
        table = app.screen.query_one(RunsTable)
        await pilot.press("x")
        assert await wait_for(pilot, lambda: app.store.filter_name == "problems" and {k for k, n in expected.items() if n} <= {r.key for r in table.rows})
        await pilot.press("t")
        assert await wait_for(pilot, lambda: app.store.filter_name == "triage" and {k for k, n in expected.items() if n} <= {r.key for r in table.rows})
        assert "11" in screen_text(app) or str(expected["damaged"]) in screen_text(app)


async def test_changed_case_is_checked_again(tmp_path_factory, tmp_path) -> None:
    """Tampering with an episode after the first pass raises the case's count (full check on change)."""
    from ui_helpers import copy_case

    root = tmp_path / "runs"
    copy_case(tmp_path_factory, "feedback-converged-3-rounds", root)
    app = make_app(root, transient_grace=0.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_scan(pilot, app)
        await wait_checked(pilot, app)
        row = app.store.get("feedback-converged-3-rounds")
        assert row is not None and row.checked and row.problems == 0
        episode = next((root / "feedback-converged-3-rounds" / "rounds").glob("round-*/episodes/*.json"))
        episode.write_bytes(episode.read_bytes().replace(b"}", b" }", 1))
        app.refresh_paths([str(episode)])
        assert await wait_for(pilot, lambda: app.store.get("feedback-converged-3-rounds").problems > 0, 20)
        assert app.store.get("feedback-converged-3-rounds").in_triage


async def test_repair_search_and_stale_search_are_shown(tmp_path_factory, tmp_path) -> None:
    """A case the bundled driver searches (``repair``) says so in the runs table and the case
    header; a search that says ``searching`` but has not been written to for hours is stale."""
    import os
    import time

    from ui_helpers import copy_case, open_case

    from eviscene_tui.gate.bundled import repair_root
    from eviscene_tui.journal.records import record_key
    from eviscene_tui.scaffold.samples.tree import Tree
    from eviscene_tui.state.rows import COLUMNS, cell_text
    from eviscene_tui.storage import default_workdir

    root = tmp_path / "runs"
    copy_case(tmp_path_factory, "feedback-converged-3-rounds", root)
    # the bundled driver's search of the case, in the app's default work directory
    tree = Tree()
    tree.bound("search-state.json", {"version": "ifv-psd-feedback-search-v1"}, {"status": "searching", "elapsed_seconds": 1.0, "rounds": []})
    sroot = repair_root(default_workdir(root), record_key(root / "feedback-converged-3-rounds").key)
    sroot.mkdir(parents=True)
    (sroot / "search-state.json").write_bytes(tree.files["search-state.json"])
    old = time.time() - 5 * 3600
    os.utime(sroot / "search-state.json", (old, old))
    status_column = next(c for c in COLUMNS if c.key == "status")
    app = make_app(root)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_scan(pilot, app)
        assert await wait_for(pilot, lambda: app.store.get("feedback-converged-3-rounds").supervised == "searching", 10)
        row = app.store.get("feedback-converged-3-rounds")
        text = cell_text(row, status_column)
        assert "repair: searching" in text and "stale: no writes for 5 h" in text
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        assert "repair: searching" in str(screen.query_one("#case-title").content)


async def test_integrity_pass_uses_worker_processes_inside_the_app(tmp_path, notices, monkeypatch) -> None:
    """Past PARALLEL_MIN_CASES the pass runs in spawned processes; inside the Textual app
    (whose stderr is a capture object) that must work and agree with ``check``. With the
    threshold and the pool's chunk lowered, a few dozen cases take both pooled paths the
    app has (the integrity pass over the first cases, and the rest read and checked in
    the pool as discovery finds them), in several chunks each."""
    from eviscene_tui.artifacts.report import build_check_report
    from eviscene_tui.scaffold.samples.synthetic import make_many_cases
    from eviscene_tui.state import scan
    from eviscene_tui.ui import app as app_module

    threshold = 40
    monkeypatch.setattr(app_module, "PARALLEL_MIN_CASES", threshold)
    monkeypatch.setattr(scan, "PARALLEL_MIN_CASES", threshold)
    monkeypatch.setattr(scan, "POOL_CHUNK", 10)
    root = tmp_path / "many"
    make_many_cases(root, threshold + 20)
    expected = {c["path"]: len(c["problems"]) for c in build_check_report(root, workers=1)["cases"]}
    app = make_app(root, transient_grace=0.0)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await wait_scan(pilot, app, timeout=120)
        await wait_checked(pilot, app, 240)
        errors = [n for n in notices if "Integrity check" in n]
        assert not errors, errors
        assert all(r.checked for r in app.store.rows())
        assert {r.key: r.problems for r in app.store.rows()} == expected
        import os

        assert app.probes.check_processes and os.getpid() not in app.probes.check_processes, "the pass ran in the app's own process"


async def test_the_integrity_pass_is_background_work(tmp_path_factory, monkeypatch, check_in_thread) -> None:
    """The runs screen's integrity pass (every case's bound inputs hashed) gives way to the
    operator: each case is checked inside ``pace.background()``, where a key or a capture
    opened with k goes first (here on the app's thread; in the check process as well)."""
    from eviscene_tui import pace
    from eviscene_tui.state import scan_work

    real = scan_work.checked_case
    seen: list[bool] = []

    def checked_case(*args, **kwargs):
        seen.append(pace.in_background())
        return real(*args, **kwargs)

    monkeypatch.setattr(scan_work, "checked_case", checked_case)
    app = make_app(sample_root(tmp_path_factory), scanned=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        assert await wait_for(pilot, lambda: app.probes.check_seconds is not None)
        assert seen and all(seen)


async def test_a_small_folders_integrity_pass_runs_in_the_check_process(tmp_path_factory) -> None:
    """Below PARALLEL_MIN_CASES the pass runs in the case screen's check process (niced,
    following the app's clock), never on the app's own interpreter lock."""
    import os

    app = make_app(sample_root(tmp_path_factory), scanned=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        assert await wait_for(pilot, lambda: app.probes.check_seconds is not None, 60)
        assert app.probes.check_processes and os.getpid() not in app.probes.check_processes
