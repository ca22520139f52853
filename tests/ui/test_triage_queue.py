"""Triage as a review queue (issue 26) and records that follow the case (issue 20 §1):
labels made from one folder show from any other and after a move; two keys label a case
and open the next; one current label; the picker; the queue's progress, filter and
selection; the label column."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from conftest import screen_text
from ui_helpers import copy_case, open_case, palette_run, wait_for, wait_scan

from eviscene_tui.journal.records import record_key
from eviscene_tui.journal.review import add_triage_label, open_review_journal, review_state
from eviscene_tui.options import AppOptions
from eviscene_tui.settings import Settings, TriageSettings
from eviscene_tui.ui.app import EvisceneApp

NO_SITE = "search-no-recoverable-site"


def _app(root: Path, *, workdir: Path | None = None, settings: Settings | None = None) -> EvisceneApp:
    args = argparse.Namespace(theme=None, poll=False, operator="tester", workdir=str(workdir) if workdir else None, config=None)
    return EvisceneApp(AppOptions.from_args(root, args, settings=settings or Settings()), watch=False)


async def _label_of(root: Path, key: str, *, workdir: Path | None = None) -> str:
    app = _app(root, workdir=workdir)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        await wait_for(pilot, lambda: app.probes.labels_loads > 0)
        row = app.store.get(key)
        assert row is not None, f"{key} not listed from {root}"
        return row.label


def _tree(tmp_path_factory, base: Path) -> Path:
    tree = base / "exp" / "runs-A"
    for name in (NO_SITE, "single-generating"):
        copy_case(tmp_path_factory, name, tree)
    return tree


async def test_a_label_made_from_one_folder_shows_from_every_ancestor_and_after_a_move(tmp_path_factory, tmp_path):
    tree = _tree(tmp_path_factory, tmp_path)
    case = tree / NO_SITE
    app = _app(tree, settings=Settings(triage=TriageSettings(advance_after_label=False)))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_case(pilot, app, NO_SITE)
        await pilot.press("l")
        await pilot.press("2")  # localizer_miss, saved at once
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "localizer_miss")
        assert app.screen is screen
    journal = review_state(tmp_path / "exp" / "runs-A.eviscene-tui")
    assert set(journal.triage_by_case()) == {record_key(case).key}  # keyed by the record key, not the folder
    # opened on the case itself, on the tree, on the tree's parent: the same label
    assert await _label_of(case, NO_SITE) == "localizer_miss"
    assert await _label_of(tree, NO_SITE) == "localizer_miss"
    assert await _label_of(tmp_path / "exp", f"runs-A/{NO_SITE}") == "localizer_miss"
    # unrelated folders appear (a stray work directory above) and nothing moves
    (tmp_path / "exp.eviscene-tui").mkdir()
    assert await _label_of(tree, NO_SITE) == "localizer_miss"
    # the tree moved (rsync of exp/ elsewhere): the label follows it
    moved = tmp_path / "copy" / "exp-2"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "exp"), moved)
    assert await _label_of(moved / "runs-A", NO_SITE) == "localizer_miss"


async def test_a_workdir_elsewhere_is_found_again_through_the_registry(tmp_path_factory, tmp_path):
    tree = _tree(tmp_path_factory, tmp_path)
    elsewhere = tmp_path / "scratch" / "my-records"
    app = _app(tree, workdir=elsewhere, settings=Settings(triage=TriageSettings(advance_after_label=False)))
    async with app.run_test(size=(120, 30)) as pilot:
        await open_case(pilot, app, NO_SITE)
        await pilot.press("l", "5")  # unrecoverable
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "unrecoverable")
    assert not (tmp_path / "exp" / "runs-A.eviscene-tui").exists()
    assert await _label_of(tree / NO_SITE, NO_SITE) == "unrecoverable"  # no --workdir: found by the registry
    assert await _label_of(tmp_path / "exp", f"runs-A/{NO_SITE}") == "unrecoverable"


async def test_an_earlier_versions_work_directory_keeps_opening(tmp_path_factory, tmp_path):
    from eviscene_tui.journal import Journal, review_journal_path

    tree = _tree(tmp_path_factory, tmp_path)
    old = Journal(review_journal_path(tmp_path / "exp" / "runs-A.eviscene-tui"), operator="bob")
    old.append("triage_label", target={"case": NO_SITE}, data={"label": "unrecoverable"}, reason="no site")
    old.close()
    assert await _label_of(tree, NO_SITE) == "unrecoverable"
    assert await _label_of(tmp_path / "exp", f"runs-A/{NO_SITE}") == "unrecoverable"


def _queue(tmp_path: Path, n: int = 6) -> Path:
    from eviscene_tui.scaffold.samples.synthetic import make_many_cases

    root = tmp_path / "queue"
    make_many_cases(root, n, workers=1)
    return root


async def test_two_keys_label_a_case_and_open_the_next_of_the_queue(tmp_path):
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.screens.label import TriageLabelScreen

    root = _queue(tmp_path)
    app = _app(root)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        keys = [r.key for r in app.store.visible()]
        first = await open_case(pilot, app, keys[0])
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        await pilot.press("3")  # needs_relocalization: saved, and the next case opens
        # the next case is shown in the same case screen (read ahead, painted at once)
        await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen is first and app.screen.key == keys[1])
        await wait_for(pilot, lambda: app.store.get(keys[0]).label == "needs_relocalization")
        await wait_for(pilot, lambda: app.screen.view is not None and app.screen.trace_rows is not None and app.screen.integrity is not None)
        await wait_for(pilot, lambda: "queue: 1 of 6 labelled" in screen_text(app))  # the header says the queue's progress
        # everything on it is the new case's (nothing of the case before leaks in)
        assert app.screen.view.key == keys[1] and app.screen.bundle.root.name == Path(keys[1]).name
        assert app.screen.trace.path is not None and keys[1] in str(app.screen.trace.path)
        await pilot.press("l", "1")
        await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.key == keys[2])
        await wait_for(pilot, lambda: app.store.get(keys[1]).label == "agent_correct")
        # ] and [ walk the queue from the case screen
        await wait_for(pilot, lambda: app.screen.view is not None)
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.key == keys[1])
        await pilot.press("right_square_bracket", "right_square_bracket")
        await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.key == keys[3])
        await pilot.press("escape")
        await wait_for(pilot, lambda: "2 of 6 labelled" in screen_text(app))
        # only the unlabelled ones: the queue's progress still counts the whole queue
        await pilot.press("u")
        await wait_for(pilot, lambda: [r.key for r in app.store.visible()] == keys[2:])
        assert "2 of 6 labelled" in screen_text(app)


async def test_relabel_leaves_one_label_clear_and_undo(tmp_path_factory, tmp_path, notices):
    from eviscene_tui.ui.screens.label import TriageLabelScreen

    tree = _tree(tmp_path_factory, tmp_path)
    app = _app(tree, settings=Settings(triage=TriageSettings(advance_after_label=False)))
    work = tmp_path / "exp" / "runs-A.eviscene-tui"
    async with app.run_test(size=(120, 30)) as pilot:
        await open_case(pilot, app, NO_SITE)
        await pilot.press("l", "4")  # data_problem
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "data_problem")
        # the picker opens on the current label with its note; Tab to the note, ctrl+s saves
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        picker = app.screen
        options = picker.query_one("#label-options")
        assert options.get_option_at_index(options.highlighted).id == "data_problem"
        await pilot.press("down", "tab", *"blurred crop", "enter", *"second line", "ctrl+s")
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "unrecoverable")
        t = review_state(work).triage(record_key(tree / NO_SITE).key)
        assert t.label == "unrecoverable" and t.note == "blurred crop\nsecond line"
        assert len([d for d in review_state(work).decisions if d.active]) == 1  # one current label, not two
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        assert "blurred crop" in app.screen.note_text  # the previous note is kept
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, TriageLabelScreen))
        # undo brings the label before back; the palette clears
        await pilot.press("u")
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "data_problem")
        await palette_run(pilot, app, "clear triage", "clear triage label")
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "")
        await pilot.press("u")
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "data_problem")
    assert any("Saved: label cleared" in n for n in notices) and any(str(work) in n for n in notices)


async def test_esc_in_the_picker_with_a_typed_note_asks_first(tmp_path_factory, tmp_path):
    from eviscene_tui.ui.screens.confirm import ConfirmScreen
    from eviscene_tui.ui.screens.label import TriageLabelScreen

    tree = _tree(tmp_path_factory, tmp_path)
    app = _app(tree)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_case(pilot, app, NO_SITE)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        await pilot.press("tab", *"half a thought", "escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        assert app.screen.note_text == "half a thought"  # nothing lost
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: not isinstance(app.screen, (TriageLabelScreen, ConfirmScreen)))
        assert app.store.get(NO_SITE).label == ""


async def test_select_rows_and_label_them_at_once(tmp_path):
    from eviscene_tui.ui.screens.label import TriageLabelScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    root = _queue(tmp_path)
    app = _app(root)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        keys = [r.key for r in app.store.visible()]
        app.screen.query_one(RunsTable).focus()
        await pilot.press("space", "down", "space")  # the first and third
        assert app.store.selected == {keys[0], keys[2]}
        await wait_for(pilot, lambda: "2 selected" in screen_text(app))
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TriageLabelScreen))
        assert "2 selected cases" in screen_text(app)
        await pilot.press("5")
        await wait_for(pilot, lambda: app.store.get(keys[0]).label == app.store.get(keys[2]).label == "unrecoverable")
        assert app.store.get(keys[1]).label == "" and not app.store.selected


async def test_the_label_column_at_80_and_the_status_at_120(tmp_path_factory, tmp_path):
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    tree = _tree(tmp_path_factory, tmp_path)
    rk = record_key(tree / NO_SITE)
    j = open_review_journal(tmp_path / "exp" / "runs-A.eviscene-tui", operator="op")
    add_triage_label(j, rk.key, "needs_relocalization")
    j.close()
    app = _app(tree)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_scan(pilot, app)
        table = app.screen.query_one(RunsTable)
        await wait_for(pilot, lambda: app.store.get(NO_SITE).label == "needs_relocalization")
        assert "label" in [c.key for c, _w in table.shown_columns]
        await wait_for(pilot, lambda: "needs_relocalization" in screen_text(app))
        assert "writes to" in screen_text(app) and "runs-A.eviscene-tui" in screen_text(app)


async def test_reveal_lasts_for_the_session_and_the_view_across_restarts(tmp_path):
    root = _queue(tmp_path)
    app = _app(root)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, app)
        keys = [r.key for r in app.store.visible()]
        screen = await open_case(pilot, app, keys[0])
        await pilot.press("v")
        assert screen.revealed
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: app.screen.key == keys[1] and getattr(app.screen, "view", None) is not None)
        assert app.screen.revealed  # v does not reset on the next case
        await pilot.press("escape")
        screen = await open_case(pilot, app, keys[2])  # nor on a case opened from the table
        assert screen.revealed
        await pilot.press("escape")
        await pilot.press("n", "u", "s")  # no-site filter, unlabelled only, then sort by rounds
        from eviscene_tui.ui.screens.runs import SortChooser

        await wait_for(pilot, lambda: isinstance(app.screen, SortChooser))
        await pilot.press("down", "down", "down", "down", "enter")
        await wait_for(pilot, lambda: app.store.sort_key == "rounds")
        await wait_for(pilot, lambda: (app.options.workdir / "ui-state.json").is_file()
                       and b'"rounds"' in (app.options.workdir / "ui-state.json").read_bytes())
    again = _app(root)
    async with again.run_test(size=(120, 30)) as pilot:
        await wait_scan(pilot, again)
        assert (again.store.filter_name, again.store.unlabelled_only, again.store.sort_key) == ("nosite", True, "rounds")
        assert not again.reveal_privileged  # privileged material is masked again in a new session


async def test_group_by_label_and_sort_by_the_new_columns(tmp_path):
    from eviscene_tui.ui.screens.runs import GroupChooser
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    root = _queue(tmp_path)
    keys_labelled = []
    app = _app(root)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_scan(pilot, app)
        keys = [r.key for r in app.store.visible()]
        for key in keys[:2]:
            row = app.store.get(key)
            app.record_triage([row], "agent_correct", "")
            keys_labelled.append(key)
        await wait_for(pilot, lambda: all(app.store.get(k).label for k in keys_labelled))
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupChooser))
        await pilot.press("down", "enter")  # label
        await wait_for(pilot, lambda: app.store.group_by == "label")
        table = app.screen.query_one(RunsTable)
        await wait_for(pilot, lambda: len(table.groups) == 2)
        assert [title for _s, title, _n, _l in table.groups] == ["(unlabelled)", "agent_correct"]
        text = screen_text(app)
        assert "agent_correct \u00b7 2 cases \u00b7 2 labelled" in text
        await palette_run(pilot, app, "sort by why no site", "sort by why no site")
        assert app.store.sort_key == "no_site_reason"


async def test_searches_and_stream_records_show_from_every_ancestor(tmp_path_factory, tmp_path):
    """The bundled driver's search of a case (``repair``) and its stream records, written
    from one folder, are found when the case is opened through another."""
    import orjson

    from eviscene_tui.tokens.sources import enumerate_captures

    tree = _tree(tmp_path_factory, tmp_path)
    case = tree / NO_SITE
    rk = record_key(case)
    sroot = tmp_path / "exp" / "runs-A.eviscene-tui" / "repairs" / rk.key
    sroot.mkdir(parents=True)
    (sroot / "search-state.json").write_bytes(orjson.dumps({"identity": {}, "payload": {"status": "searching"}, "payload_sha256": ""}))
    record = Path(f"{case}.eviscene-tui") / "continuations" / "x.json"  # what `stream CASE` writes beside the case
    record.parent.mkdir(parents=True)
    record.write_bytes(orjson.dumps({"status": "complete", "case": {"case_root": str(case), "case_id": "c", "case_key": NO_SITE},
                                     "prompt_token_ids": [1, 2], "completion_token_ids": [3]}))
    for opened, key in ((case, NO_SITE), (tree, NO_SITE), (tmp_path / "exp", f"runs-A/{NO_SITE}")):
        app = _app(opened)
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_scan(pilot, app)
            await wait_for(pilot, lambda app=app, key=key: app.store.get(key) is not None and app.store.get(key).supervised == "searching")
        dirs = app.options.record_workdirs(case)
        refs = enumerate_captures(load_case_for(case), workdir=dirs)
        assert any(r.group == "recorded" and r.key.endswith("x.json") for r in refs), (opened, dirs)


def load_case_for(case: Path):
    from eviscene_tui.artifacts.case import load_case

    return load_case(case)


async def test_the_localization_tab_scrolls_at_once_and_the_why_is_reachable_at_80x24(tmp_path_factory, tmp_path):
    from textual.containers import VerticalScroll

    tree = _tree(tmp_path_factory, tmp_path)
    app = _app(tree)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_case(pilot, app, NO_SITE)
        await wait_for(pilot, lambda: bool(screen.query("#localization-scroll")) and app.focused is screen.query_one("#localization-scroll"))
        scroll = screen.query_one("#localization-scroll", VerticalScroll)
        assert "Why no recoverable site was found" in screen_text(app)
        await wait_for(pilot, lambda: screen.session.claim_results is not None)
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: scroll.scroll_y > 0)  # PgDn scrolls at once, no focus to move first
        await pilot.press("down")
        await wait_for(pilot, lambda: "not found in the trace" in screen_text(app))


async def test_the_integrity_tab_says_what_the_records_are_keyed_by(tmp_path_factory, tmp_path):
    tree = _tree(tmp_path_factory, tmp_path)
    case = tree / "single-generating"
    (case / "run-inputs.json").unlink()  # a run that recorded no identity (a crash before its first write)
    app = _app(tree)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_case(pilot, app, "single-generating")
        await pilot.press("5")
        await wait_for(pilot, lambda: "do not follow it when it is moved" in str(screen.query_one("#integrity-doc").content))
        assert "new records go to" in str(screen.query_one("#integrity-doc").content)
        await pilot.press("escape")
        screen = await open_case(pilot, app, NO_SITE)
        await pilot.press("5")
        doc = screen.query_one("#integrity-doc")
        await wait_for(pilot, lambda: "search-state.json identity" in str(doc.content))
        assert "the same from any folder and after a move" in str(doc.content)
