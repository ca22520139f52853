"""RunsStore: filters, sort, incremental search, subscriptions (no Textual)."""

from __future__ import annotations

import sys

from eviscene_tui.state.rows import CaseRow, cell_text, COLUMNS
from eviscene_tui.state.runs import FILTERS, RunsStore


def rows() -> list[CaseRow]:
    return [
        CaseRow(key="a-converged", case_id="case-1", status="converged", rounds=3, attempts=3, accepted=1, mtime=30.0, hint_texts=("Reread the caption",)),
        CaseRow(key="b-nosite", status="no_further_grounded_hint", rounds=1, no_site=True, mtime=10.0),
        CaseRow(key="c-paused", status="paused_pending_verifier", rounds=2, attempts=1, pending=1, mtime=20.0),
        CaseRow(key="d-problems", status="generated", attempts=1, problems=2, mtime=5.0, hint_texts=("Check the date",)),
        CaseRow(key="e-running", status="searching", rounds=1, mtime=40.0),
        CaseRow(key="f-raw-nosite", status="no_recoverable_site", mtime=1.0),
    ]


def keys(store: RunsStore) -> list[str]:
    return [r.key for r in store.visible()]


def test_filters_select_expected_cases() -> None:
    store = RunsStore()
    store.upsert(rows())
    expected = {
        "all": ["a-converged", "b-nosite", "c-paused", "d-problems", "e-running", "f-raw-nosite"],
        "triage": ["b-nosite", "c-paused", "d-problems", "f-raw-nosite"],
        "nosite": ["b-nosite", "f-raw-nosite"],
        "converged": ["a-converged"],
        "running": ["e-running"],
        "paused": ["c-paused"],
        "pending": ["c-paused"],
        "problems": ["d-problems"],
    }
    for name, want in expected.items():
        store.set_filter(name)
        assert keys(store) == want, name
    assert set(expected) <= set(FILTERS)


def test_sort_by_every_column_and_reverse() -> None:
    store = RunsStore()
    store.upsert(rows())
    store.set_sort("mtime")
    assert keys(store)[0] == "f-raw-nosite" and keys(store)[-1] == "e-running"
    store.set_sort("mtime")  # same column again: reversed
    assert keys(store)[0] == "e-running"
    for column in COLUMNS:
        store.set_sort(column.key, reverse=False)
        assert len(store.visible()) == 6
    assert store.cycle_sort() == COLUMNS[0].key


def test_incremental_search_over_ids_and_hint_texts() -> None:
    store = RunsStore()
    store.upsert(rows())
    store.set_search("rer")
    assert keys(store) == ["a-converged"]
    store.set_search("reread the")
    assert keys(store) == ["a-converged"]
    store.set_search("date")
    assert keys(store) == ["d-problems"]
    store.set_search("case-1")
    assert keys(store) == ["a-converged"]
    store.set_search("")
    assert len(keys(store)) == 6


def test_search_is_narrowed_incrementally_and_reset_on_new_rows() -> None:
    store = RunsStore()
    store.upsert(rows())
    store.set_search("c")
    first = keys(store)
    store.set_search("c-")
    assert set(keys(store)) <= set(first)
    store.upsert([CaseRow(key="c-new", status="converged")])
    assert "c-new" in keys(store)


def test_subscribers_are_notified_and_can_unsubscribe() -> None:
    store = RunsStore()
    seen: list[str] = []
    stop = store.subscribe(seen.append)
    store.upsert(rows())
    store.set_filter("triage")
    stop()
    store.set_filter("all")
    assert seen == ["rows", "filter"]


def test_rows_sanitise_hostile_strings() -> None:
    row = CaseRow(key="x\x1b]0;PWN\x1b\\", case_id="[@click=app.quit]x[/]", status="converged\x1b[2J", hint_texts=("\u202eevil",))
    for column in COLUMNS:
        text = cell_text(row, column)
        assert "\x1b" not in text
        assert "\u202e" not in text
    assert "\u202e" not in row.haystack


def test_upsert_replaces_and_remove_drops() -> None:
    store = RunsStore()
    store.upsert(rows())
    store.upsert([CaseRow(key="a-converged", status="searching", rounds=4)])
    assert store.get("a-converged").rounds == 4
    assert len(store) == 6
    store.remove(["a-converged", "missing"])
    assert store.get("a-converged") is None and len(store) == 5


def test_state_package_does_not_import_textual() -> None:
    import subprocess

    code = (
        "import sys; import eviscene_tui.state.runs, eviscene_tui.state.rows, eviscene_tui.state.case_view, "
        "eviscene_tui.state.trace_rows, eviscene_tui.state.transient, eviscene_tui.state.scan; "
        "print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_counts_follow_upserts_and_removals() -> None:
    store = RunsStore()
    store.upsert(rows())
    counts = store.counts()
    assert counts["all"] == 6 and counts["triage"] == 4 and counts["nosite"] == 2
    store.upsert([CaseRow(key="c-paused", status="converged")])
    counts = store.counts()
    assert counts["paused"] == 0 and counts["converged"] == 2 and counts["all"] == 6
    store.remove(["a-converged"])
    assert store.counts()["converged"] == 1
    store.clear()
    assert store.counts()["all"] == 0


def _layout_rows() -> list[CaseRow]:
    prefix = "multi-case/repairs/psd-2026-11-cluster-a-shard-"
    return [
        CaseRow(key=prefix + "0001-flood", case_id="case-flood-valencia-0007", status="converged", localization_kind="semantic_task_verifier", category="incomplete_event_verification", problems=11, checked=True),
        CaseRow(key=prefix + "0002-rally", case_id="case-rally-tbilisi-0999", status="paused_execution_error", localization_kind="semantic_task_verifier", category="wrong_search_direction", checked=True),
    ]


def test_column_widths_fit_and_keep_the_problem_column() -> None:
    from eviscene_tui.state.rows import column_widths

    for width in (60, 80, 120, 200):
        layout = column_widths(_layout_rows(), width)
        keys = [c.key for c, _ in layout]
        assert {"key", "status", "problems"} <= set(keys), width
        assert sum(w for _, w in layout) + len(layout) - 1 <= width, width
    narrow = [c.key for c, _ in column_widths(_layout_rows(), 80)]
    wide = [c.key for c, _ in column_widths(_layout_rows(), 200)]
    assert "layout" not in narrow and "mtime" not in narrow  # least useful go first
    # every column with something in it is shown at 200 (these rows have no layout, no change
    # time and no case without a site: those droppable columns are empty, and not shown)
    assert wide == [c.key for c in COLUMNS if c.key not in ("layout", "mtime", "no_site_reason")]


def test_wide_table_shares_room_by_content() -> None:
    """At 200 columns the category and localization are whole, not cut at ~15 cells."""
    from eviscene_tui.state.rows import column_widths

    widths = {c.key: w for c, w in column_widths(_layout_rows(), 200)}
    assert widths["category"] >= len("incomplete_event_verification")
    assert widths["localization_kind"] >= len("semantic_task_verifier")
    assert widths["key"] >= len(_layout_rows()[0].key)


def test_long_names_keep_their_distinguishing_end() -> None:
    from eviscene_tui.state.rows import column_widths, shorten_middle

    rows = _layout_rows()
    width = dict((c.key, w) for c, w in column_widths(rows, 80))["key"]
    a, b = (shorten_middle(r.key, width) for r in rows)
    assert a != b and len(a) <= width and a.endswith("0001-flood") and "\u2026" in a
    assert shorten_middle("short", 10) == "short"


def test_a_view_state_with_values_of_the_wrong_type_keeps_the_defaults() -> None:
    """``ui-state.json`` can be edited or torn by hand: a list where a name was is ignored."""
    store = RunsStore()
    before = store.view_state()
    store.restore_view({"filter": ["all"], "sort": {"key": 1}})
    assert store.view_state() == before
    name = next(iter(FILTERS))
    store.restore_view({"filter": name, "sort": "key"})
    assert store.filter_name == name and store.sort_key == "key"
