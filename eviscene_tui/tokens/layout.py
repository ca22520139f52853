"""Cell layout of a token sequence: image-pad runs collapse into one cell.

A *cell* is what the token view shows as one unit: an ordinary token, or a whole
run of ``<|image_pad|>`` / ``<|video_pad|>`` ids (``<|image_pad|> ×1024 · image #1``).
Mapping between cell indices and id offsets is O(log runs) via bisect, so the view
can address 1,000,000 ids without materialising a cell list. Textual-free.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from eviscene_tui.tokens.vision import VisionIds


@dataclass(frozen=True)
class PadRun:
    start: int
    length: int
    pad_id: int
    kind: str  # "image" | "video"
    number: int  # 1-based image (or video) number


def find_pad_runs(ids: Sequence[int], pad_ids: dict[int, str]) -> list[PadRun]:
    """Maximal runs of any of ``pad_ids`` (id -> kind), numbered per kind."""
    if not pad_ids:
        return []
    present = [p for p in pad_ids if p in ids]  # C-speed membership test first
    if not present:
        return []
    raw: list[tuple[int, int, int]] = []
    n = len(ids)
    for pad in present:
        pos = 0
        guess = 0  # images of one prompt often have one size: try the last run's length first
        index = ids.index if isinstance(ids, list) else None
        while pos < n:
            try:
                start = index(pad, pos) if index else _find(ids, pad, pos)
            except ValueError:
                break
            end = _run_end(ids, pad, start, guess) if isinstance(ids, list) else _run_end_slow(ids, pad, start)
            raw.append((start, end - start, pad))
            guess = end - start
            pos = end
    raw.sort()
    counters: dict[str, int] = {}
    runs = []
    for start, length, pad in raw:
        kind = pad_ids[pad]
        counters[kind] = counters.get(kind, 0) + 1
        runs.append(PadRun(start, length, pad, kind, counters[kind]))
    return runs


def _run_end(ids: list[int], pad: int, start: int, guess: int = 0) -> int:
    """End (exclusive) of the run of ``pad`` starting at ``start``: the ``guess``ed length
    checked with one slice comparison, else galloping slice comparisons (C-speed) instead
    of a Python loop over every pad id."""
    n = len(ids)
    if guess > 1 and start + guess <= n and (start + guess == n or ids[start + guess] != pad):
        if ids[start:start + guess] == [pad] * guess:
            return start + guess
    end = start + 1
    step = 1
    while end < n:  # gallop: double while the next ``step`` ids are all pads
        stop = min(n, end + step)
        if ids[end:stop] != [pad] * (stop - end):
            break
        end = stop
        step *= 2
    else:
        return end
    lo, hi = end, min(n, end + step)  # the first non-pad id lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ids[lo:mid] == [pad] * (mid - lo):
            lo = mid
        else:
            hi = mid
    return lo if ids[lo] != pad else lo + 1


def _run_end_slow(ids: Sequence[int], pad: int, start: int) -> int:
    end = start + 1
    while end < len(ids) and ids[end] == pad:
        end += 1
    return end


def _find(ids: Sequence[int], pad: int, pos: int) -> int:
    for i in range(pos, len(ids)):
        if ids[i] == pad:
            return i
    raise ValueError(pad)


class CellLayout:
    """Cells over ``ids`` with pad runs collapsed (``collapse=False`` keeps every id a cell)."""

    def __init__(self, ids: Sequence[int], vision: VisionIds | None, *, collapse: bool = True) -> None:
        self.ids = ids
        self.vision = vision
        pads: dict[int, str] = {}
        if vision is not None and collapse:
            pads[vision.image_pad] = "image"
            if vision.video_pad is not None:
                pads[vision.video_pad] = "video"
        self.runs: list[PadRun] = find_pad_runs(ids, pads)
        self._run_starts = [r.start for r in self.runs]
        self._run_cells: list[int] = []
        self._removed: list[int] = []  # cumulative ids hidden up to and including run k
        removed = 0
        for r in self.runs:
            self._run_cells.append(r.start - removed)
            removed += r.length - 1
            self._removed.append(removed)
        self.n_cells = len(ids) - removed

    def __len__(self) -> int:
        return self.n_cells

    def cell(self, c: int) -> tuple[int, int, PadRun | None]:
        """(id offset, id count, run or None) of cell ``c``."""
        k = bisect_right(self._run_cells, c) - 1
        if k >= 0 and self._run_cells[k] == c:
            r = self.runs[k]
            return r.start, r.length, r
        offset = c + (self._removed[k] if k >= 0 else 0)
        return offset, 1, None

    def cell_of_offset(self, offset: int) -> int:
        k = bisect_right(self._run_starts, offset) - 1
        if k >= 0:
            r = self.runs[k]
            if offset < r.start + r.length:
                return self._run_cells[k]
            return offset - self._removed[k]
        return offset

    def run_at(self, offset: int) -> PadRun | None:
        k = bisect_right(self._run_starts, offset) - 1
        if k >= 0:
            r = self.runs[k]
            if offset < r.start + r.length:
                return r
        return None


@dataclass(frozen=True)
class Row:
    kind: str  # "cells" | "run"
    cell_start: int
    cell_end: int  # exclusive
    segment: int


class RowLayout:
    """Rows over a :class:`CellLayout`: ``per_row`` cells a row, each pad run on a row of its
    own, and a row break at ``break_offsets`` (e.g. where the completion starts).

    All mappings are O(log segments); nothing is materialised per row or per cell.
    """

    def __init__(self, cells: CellLayout, per_row: int, *, break_offsets: Sequence[int] = ()) -> None:
        self.cells = cells
        self.per_row = max(1, per_row)
        breaks: set[int] = set()
        run_cells: set[int] = set()
        for r in cells.runs:
            c = cells.cell_of_offset(r.start)
            breaks.add(c)
            breaks.add(c + 1)
            run_cells.add(c)
        for off in break_offsets:
            if 0 <= off < len(cells.ids):
                breaks.add(cells.cell_of_offset(off))
        points = sorted(b for b in breaks if 0 < b < cells.n_cells)
        bounds = [0, *points, cells.n_cells]
        self._seg_cell_start: list[int] = []
        self._seg_kind: list[str] = []
        self._seg_row_start: list[int] = []
        rows = 0
        for a, b in zip(bounds, bounds[1:]):
            if b <= a:
                continue
            kind = "run" if a in run_cells else "cells"
            self._seg_cell_start.append(a)
            self._seg_kind.append(kind)
            self._seg_row_start.append(rows)
            rows += 1 if kind == "run" else -(-(b - a) // self.per_row)
        self._seg_cell_end = self._seg_cell_start[1:] + [cells.n_cells]
        self.n_rows = rows

    def __len__(self) -> int:
        return self.n_rows

    def row(self, r: int) -> Row:
        k = bisect_right(self._seg_row_start, r) - 1
        if k < 0 or r >= self.n_rows:
            raise IndexError(r)
        start = self._seg_cell_start[k]
        if self._seg_kind[k] == "run":
            return Row("run", start, start + 1, k)
        first = start + (r - self._seg_row_start[k]) * self.per_row
        return Row("cells", first, min(first + self.per_row, self._seg_cell_end[k]), k)

    def row_of_cell(self, c: int) -> int:
        k = bisect_right(self._seg_cell_start, c) - 1
        if k < 0:
            return 0
        if self._seg_kind[k] == "run":
            return self._seg_row_start[k]
        return self._seg_row_start[k] + (c - self._seg_cell_start[k]) // self.per_row
