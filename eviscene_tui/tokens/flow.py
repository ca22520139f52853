"""Flowing-text layout of a token sequence: decoded text wrapped as text, lazily.

The cells of a :class:`~eviscene_tui.tokens.layout.CellLayout` (a token, or a whole run of
image pads) are cut into *segments* from the ids alone: a segment starts at each
``<|im_start|>`` (a chat message starts a line anyway), at each ``break`` cell (e.g. where
the completion starts), and every ``chunk`` cells inside very long messages. A segment is
wrapped to the view's width only when it is shown (or the cursor lands in it); until then its
line count is an estimate from the average piece width. Line counts live in a Fenwick tree,
so line -> segment and segment -> first line are O(log segments), and an estimate replaced
by the exact count is one point update. Nothing here decodes an id that is not shown.

Textual-free (uses ``rich.cells`` for terminal cell widths only).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len, get_character_cell_size

from eviscene_tui.tokens.layout import CellLayout

#: what a cell looks like: (text, kind); kind None is decoded text (may hold "\n" and "\t"),
#: any other kind ("special", "image", "pending") is a chip that never splits
CellText = Callable[[int], "tuple[str, str | None]"]

NEWLINE_MARK = "↵"
TAB_MARK = "→"
#: chips shown as bare ids (no tokenizer, or a piece not fetched yet): a space separates each
#: from what precedes it, so ``#8678 #198 #39459`` never runs together
SEPARATED = frozenset({"id", "pending"})


@dataclass(frozen=True, slots=True)
class Frag:
    cell: int
    text: str
    kind: str | None  # None: text, "nl": the mark of a newline, "sep": the space before an id chip, or a chip kind


def _carry_word(line: list[Frag]) -> list[Frag] | None:
    """Cut ``line`` after its last space (in place) and return the fragments after it (the
    start of the word that does not fit), or None when the line holds no space in text."""
    for i in range(len(line) - 1, -1, -1):
        frag = line[i]
        if frag.kind is not None:
            return None  # a chip or a newline mark: no word continues across it
        cut = frag.text.rfind(" ")
        if cut >= 0:
            tail = line[i + 1 :]
            head_text, word = frag.text[: cut + 1], frag.text[cut + 1 :]
            del line[i:]
            line.append(Frag(frag.cell, head_text, None))
            return ([Frag(frag.cell, word, None)] if word else []) + tail
    return None


class _Fenwick:
    """Prefix sums with point updates over non-negative ints."""

    def __init__(self, values: Sequence[int]) -> None:
        n = len(values)
        tree = [0] * (n + 1)
        for i, v in enumerate(values, 1):
            tree[i] += v
            j = i + (i & -i)
            if j <= n:
                tree[j] += tree[i]
        self.n = n
        self.tree = tree
        self.values = list(values)
        self.total = sum(values)

    def prefix(self, i: int) -> int:
        """Sum of values[0:i]."""
        s = 0
        tree = self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    def set(self, i: int, value: int) -> int:
        delta = value - self.values[i]
        if delta:
            self.values[i] = value
            self.total += delta
            j = i + 1
            while j <= self.n:
                self.tree[j] += delta
                j += j & -j
        return delta

    def find(self, y: int) -> int:
        """The index i with prefix(i) <= y < prefix(i + 1) (y clamped into range)."""
        pos = 0
        rem = y
        step = 1 << self.n.bit_length()
        while step:
            nxt = pos + step
            if nxt <= self.n and self.tree[nxt] <= rem:
                pos = nxt
                rem -= self.tree[nxt]
            step >>= 1
        return min(pos, self.n - 1)


def _split_cells(text: str, room: int) -> tuple[str, str]:
    """``text`` cut after at most ``room`` terminal cells."""
    if text.isascii():
        return text[:room], text[room:]
    used = 0
    for i, ch in enumerate(text):
        w = get_character_cell_size(ch)
        if used + w > room:
            return text[:i], text[i:]  # may be "" (a wide character at the end of a line)
        used += w
    return text, ""


class FlowLayout:
    """Wrapped lines over ``cells`` at ``width`` terminal cells a line."""

    def __init__(
        self,
        cells: CellLayout,
        width: int,
        text_of: CellText,
        *,
        line_starts: Sequence[int] = (),
        break_cells: Sequence[int] = (),
        chunk: int = 512,
        cache_segments: int = 512,
    ) -> None:
        self.cells = cells
        self.width = max(8, width)
        self.text_of = text_of
        self.chunk = max(16, chunk)
        n = cells.n_cells
        natural = sorted({0, *(c for c in line_starts if 0 < c < n), *(c for c in break_cells if 0 < c < n)})
        starts: list[int] = []
        for a, b in zip(natural, [*natural[1:], n]):
            starts.extend(range(a, b, self.chunk))
        if not starts:
            starts = [0]
        self.seg_starts = starts
        self.seg_ends = [*starts[1:], n]
        self.avg = self._average_width(n)
        self.lines = _Fenwick([self._estimate(i) for i in range(len(starts))])
        self.exact: list[bool] = [False] * len(starts)
        self._wrapped: OrderedDict[int, list[list[Frag]]] = OrderedDict()
        self._cache_segments = cache_segments
        self.generation = 0  # bumped whenever a line count changes

    # ------------------------------------------------------------------ estimates
    def _average_width(self, n: int, samples: int = 256) -> float:
        if n == 0:
            return 4.0
        step = max(1, n // samples)
        total = 0
        count = 0
        for c in range(0, n, step):
            text, kind = self.text_of(c)
            total += cell_len(text) + (0 if kind is None else 1)
            count += 1
        return max(1.0, total / max(1, count))

    def _estimate(self, seg: int) -> int:
        cells = self.seg_ends[seg] - self.seg_starts[seg]
        return max(1, math.ceil(cells * self.avg / self.width))

    # ------------------------------------------------------------------ wrapping
    def wrap(self, seg: int) -> list[list[Frag]]:
        got = self._wrapped.get(seg)
        if got is not None:
            self._wrapped.move_to_end(seg)
            return got
        lines = self._wrap(self.seg_starts[seg], self.seg_ends[seg])
        self._wrapped[seg] = lines
        if len(self._wrapped) > self._cache_segments:
            self._wrapped.popitem(last=False)
        self.exact[seg] = True
        if self.lines.set(seg, len(lines)):
            self.generation += 1
        return lines

    def _wrap(self, start: int, end: int) -> list[list[Frag]]:
        filler = _LineFiller(self.width - 1)  # the last column is kept for a newline's mark
        text_of = self.text_of
        for c in range(start, end):
            text, kind = text_of(c)
            if kind is not None:  # a chip: never split
                filler.chip(c, text, kind)
            elif "\n" in text:
                filler.lines_of(c, text)
            else:
                filler.piece(c, text)
        return filler.done()

    def wrap_lines(self, first: int, last: int) -> bool:
        """Wrap exactly every segment that lines ``first``..``last`` (inclusive) fall in;
        True when a line count changed (the lines after those segments moved)."""
        generation = self.generation
        y = max(0, first)
        while y <= last and y < self.lines.total:
            seg = self.lines.find(y)
            self.wrap(seg)
            y = self.lines.prefix(seg) + self.lines.values[seg]
        return generation != self.generation

    def invalidate(self) -> None:
        """Pieces changed (e.g. fetched from a server): wrap again when shown."""
        self._wrapped.clear()
        self.generation += 1

    # ------------------------------------------------------------------ mapping

    def __len__(self) -> int:
        return self.lines.total

    def segment_of_line(self, y: int) -> tuple[int, int]:
        """(segment, line within it) of line ``y``, with the segment wrapped exactly."""
        y = max(0, min(y, self.lines.total - 1))
        seg = self.lines.find(y)
        lines = self.wrap(seg)
        k = y - self.lines.prefix(seg)
        return seg, max(0, min(k, len(lines) - 1))

    def line(self, y: int) -> list[Frag]:
        if y < 0 or y >= self.lines.total:
            return []
        seg, k = self.segment_of_line(y)
        lines = self.wrap(seg)
        return lines[k] if k < len(lines) else []

    def segment_of_cell(self, cell: int) -> int:
        return max(0, bisect_right(self.seg_starts, cell) - 1)

    def line_of_cell(self, cell: int) -> int:
        """The line where ``cell`` starts (its segment wrapped exactly)."""
        seg = self.segment_of_cell(cell)
        lines = self.wrap(seg)
        base = self.lines.prefix(seg)
        for k, line in enumerate(lines):
            if line and line[-1].cell >= cell:
                return base + k
        return base + len(lines) - 1

    def cell_at(self, y: int, col: int) -> int | None:
        """The cell shown at column ``col`` of line ``y`` (the last one before it)."""
        frags = self.line(y)
        if not frags:
            return None
        x = 0
        for f in frags:
            x += cell_len(f.text)
            if x > col:
                return f.cell
        return frags[-1].cell

    def column_of_cell(self, y: int, cell: int) -> int:
        x = 0
        for f in self.line(y):
            if f.cell == cell:
                return x
            x += cell_len(f.text)
        return 0


def id_positions(ids: Sequence[int], token_id: int) -> list[int]:
    """Every offset of ``token_id`` in ``ids`` (C-speed ``list.index`` steps)."""
    out: list[int] = []
    if not isinstance(ids, list):
        return [i for i, v in enumerate(ids) if v == token_id]
    if token_id not in ids:
        return out
    pos = 0
    index = ids.index
    try:
        while True:
            pos = index(token_id, pos)
            out.append(pos)
            pos += 1
    except ValueError:
        return out


class _LineFiller:
    """Fills lines of ``width`` columns with fragments, breaking between words where a
    word allows it (the wrapping of one segment by :meth:`FlowLayout._wrap`)."""

    __slots__ = ("width", "lines", "cur", "col")

    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[list[Frag]] = []
        self.cur: list[Frag] = []
        self.col = 0

    def _break(self, carried: list[Frag] | None = None) -> None:
        """End the current line; the next starts with ``carried`` (a word moved down)."""
        self.lines.append(self.cur)
        self.cur = carried or []
        self.col = sum(cell_len(f.text) for f in self.cur) if carried else 0

    def chip(self, c: int, text: str, kind: str) -> None:
        """A labelled token (special, image run, a bare id): on one line, cut with … when
        wider. A bare id is set off from what precedes it by a space (not at a line's start)."""
        w = cell_len(text)
        sep = kind in SEPARATED and self.col > 0 and not (self.cur and self.cur[-1].text[-1:].isspace())
        if self.col and self.col + w + sep > self.width:
            self._break()
            sep = False
        if w > self.width:
            text = _split_cells(text, self.width - 1)[0] + "…"
            w = cell_len(text)
        if sep:
            self.cur.append(Frag(c, " ", "sep"))
            self.col += 1
        self.cur.append(Frag(c, text, kind))
        self.col += w

    def lines_of(self, c: int, text: str) -> None:
        """Text of cell ``c`` that holds newlines: each ends its line with a mark."""
        for i, part in enumerate(text.split("\n")):
            if i:
                self.cur.append(Frag(c, NEWLINE_MARK, "nl"))
                self._break()
            self.piece(c, part)

    def piece(self, c: int, part: str) -> None:
        """Text of cell ``c`` (no newline in it), split over as many lines as it needs."""
        if "\t" in part:
            part = part.replace("\t", TAB_MARK)
        width = self.width
        if part.isascii() and 0 < len(part) <= width - self.col:  # the common case: it fits
            self.cur.append(Frag(c, part, None))
            self.col += len(part)
            return
        while part:
            room = width - self.col
            if room <= 0:
                cur = self.cur
                self._break(_carry_word(cur) if not part[0].isspace() and cur and cur[-1].kind is None and not cur[-1].text[-1:].isspace() else None)
                room = width - self.col
                if room <= 0:  # one word fills the line: it is cut
                    self._break()
                    room = width
            take, rest = _split_cells(part, room)
            if rest and not rest[0].isspace() and take and not take[-1].isspace():
                # the line ends inside a word: break after the word's preceding space,
                # in this piece or (moving the word's start down) in the line's earlier pieces
                cut = max(take.rfind(" "), take.rfind("\t"))
                if cut >= 0:
                    take, rest = take[: cut + 1], take[cut + 1 :] + rest
                elif self.col and (carried := _carry_word(self.cur)) is not None:
                    self._break(carried)
                    continue
            if not take:
                if self.col:
                    self._break()
                    continue
                take, rest = part[0], part[1:]  # wider than a line: shown anyway
            part = rest
            self.cur.append(Frag(c, take, None))
            self.col += cell_len(take) if not take.isascii() else len(take)

    def done(self) -> list[list[Frag]]:
        if self.cur or not self.lines:
            self.lines.append(self.cur)
        return self.lines
