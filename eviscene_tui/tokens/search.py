"""Search in a token sequence: by id (``#123`` or ``123``) or by decoded text. Textual-free."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from eviscene_tui.tokens.decode import TokenDecoder


@dataclass(frozen=True)
class Query:
    kind: str  # "id" | "text"
    token_id: int | None = None
    text: str = ""


def parse_query(raw: str) -> Query | None:
    q = raw.strip() if raw.strip() else raw
    if not q:
        return None
    body = q[1:] if q.startswith("#") else q
    if body.isdigit() and (q.startswith("#") or q.isdigit()):
        return Query("id", token_id=int(body))
    if q.startswith('"') and q.endswith('"') and len(q) >= 2:
        q = q[1:-1]
    return Query("text", text=q)


def matching_ids(unique_ids: Iterable[int], decoder: TokenDecoder, text: str) -> set[int]:
    """Ids whose display piece contains ``text`` (case-insensitive); pending pieces never match."""
    needle = text.lower()
    out = set()
    for tid in unique_ids:
        piece = decoder.piece(tid)
        if piece is not None and needle in piece.lower():
            out.add(tid)
    return out


def find_offset(
    ids: Sequence[int],
    start: int,
    *,
    target: int | None = None,
    members: set[int] | None = None,
    forward: bool = True,
    wrap: bool = True,
) -> int | None:
    """Next (or previous) offset after ``start`` whose id is ``target`` / in ``members``."""
    n = len(ids)
    if n == 0 or (target is None and not members):
        return None
    if forward:
        ranges = [(start + 1, n)] + ([(0, min(start + 1, n))] if wrap else [])
        for a, b in ranges:
            if target is not None and isinstance(ids, list):
                try:
                    return ids.index(target, a, b)
                except ValueError:
                    continue
            for i in range(a, b):
                v = ids[i]
                if v == target or (members is not None and v in members):
                    return i
        return None
    ranges = [(start - 1, -1)] + ([(n - 1, max(start - 1, -1))] if wrap else [])
    for a, b in ranges:
        for i in range(a, b, -1):
            v = ids[i]
            if v == target or (members is not None and v in members):
                return i
    return None


def find_text(
    ids: Sequence[int],
    decoder: TokenDecoder,
    needle: str,
    start: int,
    *,
    forward: bool = True,
    wrap: bool = True,
    chunk: int = 8192,
    progress: Callable[[int, int], bool] | None = None,
) -> tuple[int, int] | None:
    """Next (or previous) occurrence of ``needle`` in the decoded pieces, across token
    boundaries, case-insensitive. Returns the (first, end-exclusive) token offsets of the
    match, whose first token is after (before) ``start``. Pieces are decoded chunk by chunk;
    after each chunk ``progress(ids scanned, ids in all)`` is called, and a False answer
    stops the search (None is returned)."""

    n = len(ids)
    low = needle.lower()
    if not low or n == 0:
        return None
    overlap = len(low) + 16  # tokens: enough for a match that starts at the end of a chunk

    def scan(a: int, b: int) -> tuple[int, int] | None:
        """Match whose first token lies in [a, b), the first (forward) or last (backward) one."""
        stop = min(n, b + overlap)
        pieces = [(decoder.piece(t) or "") for t in ids[a:stop]]
        text = "".join(pieces).lower()
        ends = list(accumulate(len(p) for p in pieces))
        hits = []
        pos = text.find(low)
        while pos >= 0:
            first = a + bisect_right(ends, pos)
            if first >= b:
                break
            last = a + bisect_right(ends, pos + len(low) - 1)
            hits.append((first, min(n, last + 1)))
            if forward:
                break
            pos = text.find(low, pos + 1)
        if not hits:
            return None
        return hits[0] if forward else hits[-1]

    scanned = 0

    def go_on(size: int) -> bool:
        nonlocal scanned
        scanned += size
        return progress is None or progress(min(scanned, n), n)

    if forward:
        spans = [(start + 1, n)] + ([(0, min(start + 1, n))] if wrap else [])
        for lo, hi in spans:
            a = lo
            while a < hi:
                got = scan(a, min(hi, a + chunk))
                if got is not None:
                    return got
                if not go_on(min(hi, a + chunk) - a):
                    return None
                a += chunk
        return None
    spans = [(0, max(0, start))] + ([(start, n)] if wrap else [])
    for lo, hi in spans:
        b = hi
        while b > lo:
            a = max(lo, b - chunk)
            got = scan(a, b)
            if got is not None:
                return got
            if not go_on(b - a):
                return None
            b = a
    return None
