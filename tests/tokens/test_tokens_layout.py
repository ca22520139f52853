"""Image-pad collapse (both families), cell/row mapping, search."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.decode import LocalTokenizerDecoder
from eviscene_tui.tokens.layout import CellLayout, RowLayout, find_pad_runs
from eviscene_tui.tokens.search import find_offset, matching_ids, parse_query
from eviscene_tui.tokens.vision import from_family, guess_from_ids


def _prompt(family: str, runs: list[int]) -> list[int]:
    S = lambda n: tiny.special_id(n, family)  # noqa: E731 - a one-line alias
    ids = [S("<|im_start|>")] + tiny.encode("user\n", family)
    for n in runs:
        ids += [S("<|vision_start|>")] + [S("<|image_pad|>")] * n + [S("<|vision_end|>")]
    ids += tiny.encode("Is this real?", family) + [S("<|im_end|>")]
    return ids


@pytest.mark.parametrize("family", ["qwen3_5", "qwen2_5_vl"])
def test_collapse_both_families(family: str):
    ids = _prompt(family, [1024, 16])
    vision = from_family(family, "test")
    cells = CellLayout(ids, vision)
    assert [(r.length, r.number, r.kind) for r in cells.runs] == [(1024, 1, "image"), (16, 2, "image")]
    assert cells.n_cells == len(ids) - 1023 - 15
    # the run is one cell framed by vision_start / vision_end
    c = cells.cell_of_offset(cells.runs[0].start + 500)
    off, n, run = cells.cell(c)
    assert (off, n, run) == (cells.runs[0].start, 1024, cells.runs[0])
    assert ids[cells.cell(c - 1)[0]] == vision.vision_start
    assert ids[cells.cell(c + 1)[0]] == vision.vision_end
    # guessed family from the framing matches
    assert guess_from_ids(ids).family == family
    # the other family's table finds nothing
    other = "qwen2_5_vl" if family == "qwen3_5" else "qwen3_5"
    assert CellLayout(ids, from_family(other, "x")).runs == []


def test_label_of_run_via_tokenizer():
    from eviscene_tui.ui.widgets.token_view import run_label

    ids = _prompt("qwen3_5", [1024])
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="mem")
    cells = CellLayout(ids, dec.vision)
    assert run_label(cells.runs[0], dec.special_name(cells.runs[0].pad_id)) == "<|image_pad|> ×1024 · image #1"


def test_video_runs_numbered_separately():
    v = from_family("qwen3_5", "t")
    ids = [1, v.vision_start, v.image_pad, v.image_pad, v.vision_end, v.vision_start, v.video_pad, v.video_pad, v.video_pad, v.vision_end]
    runs = find_pad_runs(ids, {v.image_pad: "image", v.video_pad: "video"})
    assert [(r.kind, r.number, r.length) for r in runs] == [("image", 1, 2), ("video", 1, 3)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 248056, 248053, 248054]), max_size=300), st.integers(1, 9), st.integers(0, 300))
def test_cell_and_row_mapping_roundtrip(ids, per_row, brk):
    cells = CellLayout(ids, from_family("qwen3_5", "t"))
    rows = RowLayout(cells, per_row, break_offsets=[brk])
    seen = 0
    for r in range(len(rows)):
        row = rows.row(r)
        assert row.cell_start == seen and row.cell_end > row.cell_start
        assert row.cell_end - row.cell_start <= per_row
        for c in range(row.cell_start, row.cell_end):
            assert rows.row_of_cell(c) == r
            off, n, run = cells.cell(c)
            assert cells.cell_of_offset(off) == c and cells.cell_of_offset(off + n - 1) == c
            if run is not None:
                assert row.kind == "run" and all(ids[i] == 248056 for i in range(off, off + n))
        seen = row.cell_end
    assert seen == cells.n_cells
    # every id offset is covered exactly once
    covered = sum(cells.cell(c)[1] for c in range(cells.n_cells))
    assert covered == len(ids)


def test_row_break_at_completion_start():
    ids = list(range(100, 125))
    cells = CellLayout(ids, None)
    rows = RowLayout(cells, 10, break_offsets=[13])
    assert [(rows.row(r).cell_start, rows.row(r).cell_end) for r in range(len(rows))] == [(0, 10), (10, 13), (13, 23), (23, 25)]


def test_search_helpers():
    assert parse_query("#151655").token_id == 151655
    assert parse_query("42").kind == "id"
    assert parse_query("search").kind == "text"
    assert parse_query('"42"').kind == "text"
    ids = [5, 6, 7, 5, 8, 5]
    assert find_offset(ids, 0, target=5) == 3
    assert find_offset(ids, 3, target=5) == 5
    assert find_offset(ids, 5, target=5) == 0  # wraps
    assert find_offset(ids, 5, target=5, wrap=False) is None
    assert find_offset(ids, 3, target=5, forward=False) == 0
    assert find_offset(ids, 0, members={7, 8}) == 2
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="mem")
    tids = tiny.encode("The search result and the caption")
    m = matching_ids(set(tids), dec, "SEARCH")
    assert m == {tiny.encode(" search")[0]}


def test_find_text_across_token_boundaries():
    from eviscene_tui.tokens.search import find_text

    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="mem")
    text = "We should search the caption. The caption says flood."
    ids = tiny.encode(text) * 3
    span = find_text(ids, dec, "SEARCH THE CAP", -1)
    assert span is not None
    assert "search the cap" in tiny.decode(ids[span[0]:span[1]]).lower()
    first = span[0]
    nxt = find_text(ids, dec, "search the cap", first)
    assert nxt[0] > first
    prev = find_text(ids, dec, "search the cap", nxt[0], forward=False)
    assert prev == span
    # small chunks: a match straddling a chunk boundary is still found exactly once
    all_hits = []
    pos = -1
    for _ in range(3):
        got = find_text(ids, dec, "caption. the", pos, chunk=3, wrap=False)
        all_hits.append(got)
        pos = got[0]
    assert find_text(ids, dec, "caption. the", pos, chunk=3, wrap=False) is None
    assert len({h[0] for h in all_hits}) == 3
    assert find_text(ids, dec, "zebra", 0) is None
