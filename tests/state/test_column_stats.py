"""The runs table's column widths kept up to date as rows arrive (``ColumnStats``, the
store's ``visible_stats``) equal the full recompute over the visible rows, whatever the
sequence of batches, re-reads, removals, integrity results, filters and searches."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.state.rows import COLUMNS, CaseRow, ColumnStats, empty_columns, longest_cells
from eviscene_tui.state.runs import FILTERS, RunsStore

KEYS = [f"case-{i}" for i in range(12)]
STATUSES = ["converged", "searching", "paused_pending_verifier", "no_recoverable_site", "unsupported", "attempt_budget_exhausted"]

rows = st.builds(
    CaseRow,
    key=st.sampled_from(KEYS),
    case_id=st.sampled_from(["", "id-a", "a-much-longer-case-identifier"]),
    status=st.sampled_from(STATUSES),
    rounds=st.integers(0, 2000),
    pending=st.integers(0, 30),
    category=st.sampled_from(["", "retrieval", "tool_use_error_handling"]),
    no_site_reason=st.sampled_from(["", "no_candidates", "no_candidates; localizer_failed"]),
    label=st.sampled_from(["", "bug", "needs-a-second-look"]),
    problems=st.integers(0, 3),
    gate=st.sampled_from(["", "awaiting operator", "driver gone"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), rows), max_size=40))
def test_column_stats_equal_the_recompute(ops) -> None:
    stats = ColumnStats()
    held: dict[str, CaseRow] = {}
    for add, row in ops:
        if add:
            stats.add(row)
            held[row.key] = row
        else:
            stats.discard(row.key)
            held.pop(row.key, None)
        assert stats.longest() == longest_cells(list(held.values()))
        assert len(stats) == len(held)
    assert ColumnStats(held.values()).longest() == longest_cells(list(held.values()))


def test_longest_of_no_rows_is_zero_and_no_column_is_empty() -> None:
    assert ColumnStats().longest() == [0] * len(COLUMNS)
    assert empty_columns([], [0] * len(COLUMNS)) == set()


operations = st.one_of(
    st.tuples(st.just("upsert"), st.lists(rows, max_size=6)),
    st.tuples(st.just("remove"), st.lists(st.sampled_from(KEYS), max_size=3)),
    st.tuples(st.just("check"), st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 12), st.booleans()), max_size=4)),
    st.tuples(st.just("filter"), st.sampled_from(sorted(FILTERS))),
    st.tuples(st.just("search"), st.sampled_from(["", "case-1", "id", "bug", "zzz", "a b"])),
    st.tuples(st.just("unlabelled"), st.booleans()),
    st.tuples(st.just("look"), st.none()),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operations, max_size=25))
def test_store_visible_stats_follow_every_change(ops) -> None:
    store = RunsStore()
    for op, arg in ops:
        if op == "upsert":
            store.upsert(arg)
        elif op == "remove":
            store.remove(arg)
        elif op == "check":
            store.apply_checks([(key, tuple(("E", f"/p/{i}") for i in range(n)), (("W", "/p/w"),) if fresh else ())
                                for key, n, fresh in arg])
        elif op == "filter":
            store.set_filter(arg)
        elif op == "search":
            store.set_search(arg)
        elif op == "unlabelled":
            store.set_unlabelled_only(arg)
        else:
            # counted now: later changes are applied to it, not recounted
            store.visible_stats()
        visible = store.visible()
        assert store.visible_stats().longest() == longest_cells(visible)
        assert store.queue_progress() == (sum(1 for r in store._queue_rows() if r.label), len(store._queue_rows()))
