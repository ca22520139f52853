"""The flowing-text layout: lazy wrapping, estimates replaced by exact counts, mappings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from eviscene_tui.tokens.flow import NEWLINE_MARK, TAB_MARK, FlowLayout, id_positions
from eviscene_tui.tokens.layout import CellLayout

piece = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=12),
    st.sampled_from(["\n", " ", "\t", "a\nb", "漢字", "\n\n"]),
)


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(
        st.one_of(st.tuples(piece, st.none()), st.tuples(st.sampled_from(["<|im_start|>", "[<|image_pad|> ×1024 · image #1]"]), st.just("special"))),
        min_size=1, max_size=300,
    ),
    width=st.integers(min_value=8, max_value=60),
    chunk=st.integers(min_value=16, max_value=64),
    starts=st.lists(st.integers(min_value=0, max_value=299), max_size=5),
)
def test_wrapping_keeps_every_character_within_the_width(texts, width, chunk, starts):
    ids = list(range(len(texts)))
    cells = CellLayout(ids, None)
    layout = FlowLayout(cells, width, lambda c: texts[c], line_starts=starts, chunk=chunk)
    seen: dict[int, list[str]] = {}
    y = 0
    while y < len(layout):  # walking the lines wraps each segment (the total may change on the way)
        frags = layout.line(y)
        assert sum(cell_len(f.text) for f in frags) <= width
        for f in frags:
            seen.setdefault(f.cell, []).append(f.text)
        y += 1
    assert all(layout.exact)
    assert layout.lines.total == sum(len(layout.wrap(s)) for s in range(len(layout.seg_starts)))
    for c, (text, kind) in enumerate(texts):
        got = "".join(seen.get(c, []))
        if kind is None:
            assert got == text.replace("\n", NEWLINE_MARK).replace("\t", TAB_MARK)
        else:
            assert got  # a chip is always shown, at worst cut with an ellipsis
        # the cursor's line holds the cell's first fragment
        if c in seen:
            assert any(f.cell == c for f in layout.line(layout.line_of_cell(c)))


def test_lazy_estimates_become_exact_only_where_shown():
    texts = [("word ", None)] * 10_000
    cells = CellLayout(list(range(10_000)), None)
    calls: list[int] = []

    def text_of(c):
        calls.append(c)
        return texts[c]

    layout = FlowLayout(cells, 40, text_of, chunk=500)
    sampled = len(calls)
    assert sampled <= 300  # the width estimate samples, it does not decode everything
    assert not any(layout.exact)
    y = layout.line_of_cell(9_990)
    assert layout.exact[-1] and sum(layout.exact) == 1
    assert 9_990 in {f.cell for f in layout.line(y)}
    assert len(calls) - sampled <= 500  # one segment wrapped
    # a newline always ends a line; a chip never splits
    cells = CellLayout(list(range(3)), None)
    layout = FlowLayout(cells, 10, lambda c: [("ab\ncd", None), ("<|im_start|>", "special"), ("x", None)][c])
    layout.wrap(0)
    lines = [[f.text for f in layout.line(y)] for y in range(len(layout))]
    assert lines[0] == ["ab", NEWLINE_MARK] and lines[1] == ["cd"] and lines[2][0].endswith("…")


@settings(max_examples=60, deadline=None)
@given(
    widths=st.lists(st.integers(0, 40), min_size=20, max_size=120),
    width=st.integers(8, 30),
    order=st.randoms(use_true_random=False),
)
def test_lines_stay_in_place_whatever_order_segments_are_wrapped_in(widths: list[int], width: int, order) -> None:
    """Line counts start as estimates and become exact as segments are wrapped, in whatever
    order the view asks for them (a jump to the end, then the top, then the middle): every
    line y then shows what the text wrapped from the top shows at y, and every cell's line
    holds that cell."""
    texts = ["w" * n + " " if n % 7 else "\n" for n in widths]  # short and long pieces, some newlines

    def make() -> FlowLayout:
        cells = CellLayout(list(range(len(texts))), None)
        return FlowLayout(cells, width, lambda c: (texts[c], None), line_starts=[i + 1 for i, t in enumerate(texts) if t == "\n"], chunk=16)

    reference = make()
    expected = [[(f.cell, f.text) for f in line] for seg in range(len(reference.seg_starts)) for line in reference.wrap(seg)]
    layout = make()
    segments = list(range(len(layout.seg_starts)))
    order.shuffle(segments)
    for seg in segments:
        layout.segment_of_line(layout.line_of_cell(layout.seg_starts[seg]))  # wraps it, moving the lines after it
    assert len(layout) == len(expected)
    assert [[(f.cell, f.text) for f in layout.line(y)] for y in range(len(layout))] == expected
    for cell in range(len(texts)):
        if texts[cell].strip():
            assert cell in {f.cell for f in layout.line(layout.line_of_cell(cell))}
    assert layout.line(len(layout)) == [] and layout.line(-1) == []


def test_id_positions():
    assert id_positions([1, 2, 1, 3, 1], 1) == [0, 2, 4] and id_positions([1, 2], 9) == []
    assert id_positions((5, 1, 5), 5) == [0, 2]


def test_text_wraps_at_word_boundaries_across_token_pieces() -> None:
    """Tokens split words anywhere ("compare its date with t" | "he claimed"): a line
    ends after a space, the word that does not fit starts the next line, and only a
    word longer than a line is cut."""
    sentence = "Hint: Open the oldest reverse-image match and compare its date with the claimed event. "
    pieces = ["Hint", ":", " Open", " the", " old", "est", " reverse", "-image", " match", " and", " compare",
              " its", " date", " with", " t", "he", " claimed", " event", ". "] * 3 + ["x" * 70]
    cells = CellLayout(list(range(len(pieces))), None)
    for width in (17, 24, 31, 40):
        layout = FlowLayout(cells, width, lambda c: (pieces[c], None))
        lines, y = [], 0
        while y < len(layout):  # walking wraps each segment exactly (the total may change on the way)
            lines.append("".join(f.text for f in layout.line(y)))
            y += 1
        assert "".join(lines) == sentence * 3 + "x" * 70  # nothing lost or doubled
        for line, nxt in zip(lines, lines[1:]):
            assert cell_len(line) <= width
            if not nxt.startswith("x"):
                assert line.endswith(" ") or nxt.startswith(" "), (width, line, nxt)  # every break is at a space


def test_wrap_lines_makes_a_line_range_exact_and_says_when_lines_moved() -> None:
    # short lines the estimate cannot see: every piece ends with a newline
    texts = [("ab\n", None)] * 4_000
    cells = CellLayout(list(range(4_000)), None)
    layout = FlowLayout(cells, 40, lambda c: texts[c], chunk=100)
    estimated = len(layout)
    assert layout.wrap_lines(100, 120)  # the estimate was short: the lines after moved
    covering = {layout.lines.find(y) for y in range(100, 121)}
    assert all(layout.exact[seg] for seg in covering)
    assert sum(layout.exact) == len(covering)  # nothing else was wrapped
    assert len(layout) > estimated
    again = {layout.lines.find(y) for y in range(100, 121)}
    assert layout.wrap_lines(100, 120) == (again != covering)  # exact already: nothing moves unless new segments came in view
    assert not layout.wrap_lines(0, -1)  # an empty range wraps nothing


def test_bare_ids_are_set_apart_and_never_split():
    """Without a tokenizer each id is a chip ``#N``: a space sets it apart from what comes
    before it (not at a line's start), and no id is ever cut across two lines."""
    import re

    ids = [8678, 198, 39459, 7, 248046, 12, 100000] * 60
    cells = CellLayout(ids, None)
    for width in (8, 13, 21, 40):
        layout = FlowLayout(cells, width, lambda c: (f"#{ids[c]}", "id"))
        shown: list[int] = []
        y = 0
        while y < len(layout):  # walking the lines wraps each segment (the total may change on the way)
            frags = layout.line(y)
            y += 1
            text = "".join(f.text for f in frags)
            assert cell_len(text) <= width and not text.startswith(" ")
            assert re.fullmatch(r"#\d+( #\d+)*", text), text  # whole ids, one space apart
            shown += [int(t[1:]) for t in text.split(" ")]
        assert shown == ids
