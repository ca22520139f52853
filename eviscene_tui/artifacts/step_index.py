"""The byte range of every step of a trace, found by scanning the bytes, not parsing them.

A 200 MB source trace is almost all ``state.all_steps``. Parsing it whole takes seconds
and builds millions of Python ints (the token captures); a viewer needs one step to
paint. :func:`index_steps` reads the file once, block by block, and records where each
element of the ``all_steps`` array starts and ends; a step is parsed later, alone, from
its range (``os.pread``), and dropped again.

Where a step starts. In valid JSON the bytes ``}`` ``,`` ``{"KEY":`` (whitespace allowed
between) are structural: a ``"`` inside a string is always escaped, and the byte before
the quote of KEY is ``{`` or whitespace, never ``\\``; KEY is the first key of the first
step (one serializer writes every step, so each starts with it). The scan finds KEY with
``bytes.find`` and checks the bytes around it.

Such a boundary may still sit between two nested objects inside a step that happen to
start with KEY; that only happens inside an array nested in the step, so the range cut
there holds more ``[`` than ``]``. The scan counts brackets per range (one
``bytes.translate`` pass keeps only brackets and braces, strings included): a range whose
counts differ is parsed to decide - a step whose strings hold unbalanced brackets parses
as one object; a cut inside a step does not,
and the range then goes on to the next boundary (at most ``MAX_MERGES`` times). A range
whose counts agree is taken as it is; it is verified when it is parsed for its row (the
viewer parses every range once in the background), and a range that does not parse as
one object then sends the caller back to the whole-file parse, which reports precisely.

Speed. ``bytes.find`` of a short needle of common JSON bytes (quotes, letters) and a
``translate`` pass run far below memory speed; a single byte is found at memory speed
(``memchr``). So the needle is found by its byte rarest in the first MiB (in page text
the quote, in token ids a letter) and checked around it, and a range whose brackets are
rare (page text) has the next range's found one by one; dense ones (token ids, top-k
rows) are still counted by one ``translate`` pass.

What is around the array (the "skeleton") is parsed with the array replaced by a unique
sentinel string and used only if that sentinel sits exactly at ``state.all_steps`` (or a
top-level ``all_steps``). Anything unusual - another shape, a first element that is not
an object, a truncated file, invalid JSON around the array - returns ``None`` and the
caller parses the whole file the ordinary way.

With ``sink`` every block read is also written there: a gzip trace is indexed while it
is decompressed once, into a temporary copy (in the app's work directory) that the
ranges then refer to.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import io
import os
from array import array
from typing import Any, BinaryIO

import orjson

from eviscene_tui.artifacts.chunked_trace import _FIRST_ELEMENT, _Blocks, _find_array, _sentinel

#: bytes read at a time: a block the size of a core's L2 cache is read, searched and counted
#: while it is still in the cache (4 MiB blocks: the text-heavy trace's scan 80 -> 58 ms)
BLOCK_BYTES = 512 << 10
MAX_MERGES = 256  # boundaries one step may swallow (nested objects starting with the step key)
MAX_TAIL_TRIES = 256  # places tried for the array's closing bracket
MAX_POPS = 1024  # ranges dropped again when the scan went on past the array's end
_BACK = 4096  # bytes kept before an unsearched position (whitespace inside a boundary)
_WS = frozenset(b" \t\r\n")
_OPEN, _CLOSE, _COMMA, _COLON = ord("{"), ord("}"), ord(","), ord(":")
_NOT_MARKS = bytes(c for c in range(256) if c not in b"[]{}")  # deleted: all but brackets and braces
ANCHOR_MIN_BYTES = 65536  # a first block this big chooses the needle's rarest byte (smaller: the whole needle)
ANCHOR_MAX_SHARE = 64  # ... when it is at most one in this many bytes
ANCHOR_SAMPLE_BYTES = 1 << 20  # the bytes counted to choose it
_MARKS = (b"[", b"]", b"{", b"}")
#: a range with fewer marks than one in this many bytes has the next range's found one by one
_SPARSE_RATIO = 2048
_SPARSE_MAX = 4096  # marks of one kind found one by one before a range is counted by translate
_DEFER = (-1, -1)  # a boundary check that needs the next block (compared by identity)


class StepIndex:
    """Where each step of one trace file lies: ``starts[i]`` .. ``ends[i]`` (exclusive)
    in the (decompressed) bytes; ``skeleton`` is the document with ``all_steps`` empty
    and ``steps_at`` says where the array sits (``"state"`` or ``"top"``)."""

    __slots__ = ("starts", "ends", "verified", "skeleton", "steps_at", "size")

    def __init__(
        self, starts: array[int], ends: array[int], verified: bytearray, skeleton: dict[str, Any], steps_at: str, size: int
    ) -> None:
        self.starts = starts
        self.ends = ends
        self.verified = verified  # 1: the range was parsed during the scan (one object)
        self.skeleton = skeleton
        self.steps_at = steps_at
        self.size = size

    def __len__(self) -> int:
        return len(self.starts)

    def span(self, index: int) -> tuple[int, int]:
        return self.starts[index], self.ends[index]


class _Source(_Blocks):
    """The blocks of the trace (copied to ``sink``), and bytes read before read again."""

    def reread(self, start: int, end: int) -> bytes | None:
        """Bytes ``start..end`` read before (from the sink, else by seeking ``fh``)."""
        try:
            if self.sink is not None:
                self.sink.flush()
                try:
                    return read_range(self.sink.fileno(), start, end)
                except (AttributeError, io.UnsupportedOperation):
                    getvalue = getattr(self.sink, "getvalue", None)
                    return bytes(getvalue()[start:end]) if getvalue is not None else None
            if not self.fh.seekable():
                return None
            at = self.fh.tell()
            self.fh.seek(start)
            data = self.fh.read(end - start)
            self.fh.seek(at)
            return data if len(data) == end - start else None
        except OSError:
            return None


def _is_object(view: memoryview | bytes | bytearray) -> bool:
    try:
        return isinstance(orjson.loads(view), dict)
    except orjson.JSONDecodeError:
        return False


def _skeleton(prefix: bytes, suffix: bytes | bytearray | memoryview) -> tuple[dict[str, Any], str] | None:
    sentinel, sentinel_json = _sentinel()
    try:
        doc = orjson.loads(b"".join((prefix, sentinel_json, suffix)))
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    state = doc.get("state")
    if isinstance(state, dict) and state.get("all_steps") == sentinel:
        state["all_steps"] = []
        return doc, "state"
    if doc.get("all_steps") == sentinel:
        doc["all_steps"] = []
        return doc, "top"
    return None


def _back(buf: bytearray, k: int) -> int:
    """The last non-whitespace position at or before ``k`` (-1: none)."""
    while k >= 0 and buf[k] in _WS:
        k -= 1
    return k


def index_steps(
    fh: BinaryIO, *, block_bytes: int = BLOCK_BYTES, sink: BinaryIO | None = None, max_bytes: int | None = None
) -> StepIndex | None:
    """Index the steps of the trace read from ``fh`` (at its start; a ``GzipFile`` works
    too), or ``None`` when it is not a trace this method handles exactly (the caller then
    parses the whole file). Reading more than ``max_bytes`` raises ``ValueError``."""
    src = _Source(fh, block_bytes, max_bytes, sink)
    match = _find_array(src)
    if match is None:
        return None
    buf = src.buf
    prefix = bytes(buf[: match.end() - 1])
    after = match.end()
    while len(buf) - after < 4096 and src.more():
        pass
    first = _FIRST_ELEMENT.match(buf, after)
    if first is None:
        return None  # the first element is not an object: not a step list this handles
    if first.group(1) is not None:  # an empty array
        while src.more():
            pass
        found = _skeleton(prefix, memoryview(buf)[first.end() :])
        if found is None:
            return None
        return StepIndex(array("q"), array("q"), bytearray(), found[0], found[1], src.total)
    scan = _Scan(src, first.group(2), buf.index(b"{", after))
    return scan.finish(prefix) if scan.run() else None


class _Scan:
    """The scan of the array's bytes for step boundaries (see the module's docstring).

    Positions are absolute (in the file) unless named relative; ``buf`` holds the bytes
    from ``base`` on. ``cur`` is where the range being scanned starts; boundaries whose ``}``
    lies before ``counted`` were looked at already; ``depth`` is '[' minus ']' over the
    range at its last cut."""

    def __init__(self, src: _Source, needle: bytes, cur: int) -> None:
        self.src = src
        self.buf = src.buf
        self.needle = needle
        self.base = 0
        self.cur = self.counted = cur
        self.depth = 0
        self.merges = 0
        self.starts: array[int] = array("q")
        self.ends: array[int] = array("q")
        self.verified = bytearray()
        self.anchor = b""
        self.anchor_at = -1
        self.sparse = False  # brackets are rare in the steps: counted by finding each one
        self._choose_anchor()

    def run(self) -> bool:
        """Every step but the last cut off; False when a range swallowed more than
        ``MAX_MERGES`` boundaries."""
        src, buf, nlen = self.src, self.buf, len(self.needle)
        search = self.cur + 1  # next absolute position to look for the needle from
        while True:
            scanned = self._cuts(search - self.base)
            if scanned is None:
                return False
            rel, deferred = scanned
            search = self.base + (deferred if deferred is not None else max(rel, len(buf) - nlen + 1))
            safe = search - _BACK
            if safe > self.counted:
                self.counted = safe
            keep = min(self.cur, safe) - self.base
            if keep > 0:
                del buf[:keep]
                self.base += keep
            if not src.more() and deferred is None:
                return True  # (a deferred hit is looked at again, knowing the input ended)

    def _find(self, rel: int) -> int:
        """The next needle in the buffer at or after ``rel`` (-1: none). ``bytes.find`` of
        a short needle made of common JSON bytes (quotes, letters) runs far below memory
        speed; a single byte is found at memory speed (``memchr``), so the needle's rarest
        byte (counted in the first block) is found first and the needle checked around it."""
        buf, needle, at = self.buf, self.needle, self.anchor_at
        if at < 0:
            return buf.find(needle, rel)
        anchor = self.anchor
        k = buf.find(anchor, rel + at)
        while k != -1:
            h = k - at
            if buf.startswith(needle, h):
                return h
            k = buf.find(anchor, k + 1)
        return -1

    def _choose_anchor(self) -> None:
        """The needle's byte least frequent in the bytes read so far (``anchor_at`` -1:
        search for the whole needle, when no byte of it is rare)."""
        buf, needle = self.buf, self.needle
        size = min(len(buf), ANCHOR_SAMPLE_BYTES)
        if size < ANCHOR_MIN_BYTES:
            return
        counts = {b: buf.count(bytes([b]), 0, size) for b in set(needle)}
        rarest = min(counts, key=lambda b: (counts[b], b))
        if counts[rarest] * ANCHOR_MAX_SHARE > size:  # that common: the whole-needle search is as fast
            return
        self.anchor = bytes([rarest])
        self.anchor_at = needle.index(rarest)

    def _cuts(self, rel: int) -> tuple[int, int | None] | None:
        """Look at each needle in the buffer from ``rel`` on; where the search stopped
        and the hit deferred to the next block (None), or None when it failed."""
        while True:
            h = self._find(rel)
            if h == -1:
                return rel, None
            found = self._boundary(h)
            if found is _DEFER:
                return rel, h
            if found is not None:
                shift = self._cut(self.base + found[0], self.base + found[1])
                if shift is None:
                    return None
                h += shift
            rel = h + 1

    def _boundary(self, h: int) -> tuple[int, int] | None:
        """For a needle at ``h``: the (relative) ``{`` and ``}`` of a boundary
        ``} , {KEY:`` whose ``}`` lies past the counted bytes, ``_DEFER`` when the ``:``
        may be in the next block, else None."""
        buf = self.buf
        n = len(buf)
        j = h + len(self.needle)
        while j < n and buf[j] in _WS:
            j += 1
        if j >= n:
            return _DEFER if not self.src.eof else None
        if buf[j] != _COLON:
            return None
        brace = _back(buf, h - 1)
        if brace < 0 or buf[brace] != _OPEN:
            return None
        k = _back(buf, brace - 1)
        if k < 0 or buf[k] != _COMMA:
            return None
        k = _back(buf, k - 1)
        if k < 0 or buf[k] != _CLOSE or self.base + k + 1 < self.counted:
            return None
        return brace, k

    def _parses(self, start: int, end: int) -> bool:
        with memoryview(self.buf) as view:
            return _is_object(view[start - self.base : end - self.base])

    def _cut(self, brace: int, close: int) -> int | None:
        """A boundary whose ``}`` is at ``close`` and next ``{`` at ``brace``: the range
        ends there when it is one step, else it goes on. How far the buffer moved (bytes
        read again in front of it), or None past ``MAX_MERGES``."""
        base, end = self.base, close + 1
        self.counted = end
        # the range's brackets and braces (strings included)
        opened, closed, braces, unbraces = self._marks(self.cur - base, end - base)
        self.depth = opened - closed
        # balanced brackets alone can be faked by a ']' inside a string before a nested
        # object that starts with the step key: a true step also balances its braces
        ok = self.depth == 0 and braces == unbraces
        if ok or self._parses(self.cur, end):
            self._take(end, brace, verified=self.depth != 0)
            return 0
        taken, shift = self._undo_previous(end, brace)
        if taken:
            return shift
        self.merges += 1  # a cut inside a step: the range goes on
        return shift if self.merges <= MAX_MERGES else None

    def _marks(self, lo: int, hi: int) -> tuple[int, int, int, int]:
        """How many ``[`` ``]`` ``{`` ``}`` bytes ``buf[lo:hi]`` holds. Where they are dense
        (token ids, top-k rows) one ``translate`` pass keeps only them; where they are rare
        (page text) each is found at memory speed. The next range is counted the way the
        density of this one says."""
        buf = self.buf
        if self.sparse:
            counts = []
            for mark in _MARKS:
                n, k = 0, buf.find(mark, lo, hi)
                while k != -1:
                    n += 1
                    if n > _SPARSE_MAX:
                        self.sparse = False
                        return self._marks(lo, hi)
                    k = buf.find(mark, k + 1, hi)
                counts.append(n)
            opened, closed, braces, unbraces = counts
        else:
            marks = buf[lo:hi].translate(None, _NOT_MARKS)
            opened, closed = marks.count(b"["), marks.count(b"]")
            braces, unbraces = marks.count(b"{"), marks.count(b"}")
            self.sparse = len(marks) * _SPARSE_RATIO < hi - lo
        return opened, closed, braces, unbraces

    def _take(self, end: int, brace: int, *, verified: bool) -> None:
        self.starts.append(self.cur)
        self.ends.append(end)
        self.verified.append(1 if verified else 0)
        self.cur = self.counted = brace
        self.depth = 0
        self.merges = 0

    def _undo_previous(self, end: int, brace: int) -> tuple[bool, int]:
        """The previous cut was taken on counts alone: strings holding ']' and '}' can
        fake them, so it may lie inside the step this range ends. Its bytes are brought
        back and parsed; when it is not one object it is undone (the range starts at its
        start), and the range is cut here if that is one step. Whether the cut here was
        taken, and how far the buffer moved (bytes read again in front of it)."""
        if not self.starts or self.verified[-1] != 0 or self.starts[-1] < 0:
            return False, 0
        start = self.starts[-1]
        shift = 0
        if start < self.base:
            older = self.src.reread(start, self.base)
            if older is None:
                return False, 0
            shift = len(older)
            self.buf[:0] = older
            self.base -= shift
        if self._parses(start, self.ends[-1]):
            return False, shift
        self.starts.pop()
        self.ends.pop()
        self.verified.pop()
        self.cur = start
        if not self._parses(start, end):
            return False, shift
        self._take(end, brace, verified=True)
        return True, shift

    def finish(self, prefix: bytes) -> StepIndex | None:
        """The last step, up to the array's ``]``. The scan may have gone on past it
        (objects in what follows the array that start with KEY): ranges are then dropped
        from the end, and their bytes read again, until the array's end is found."""
        buf = self.buf
        del buf[: self.cur - self.base]
        base = self.cur
        pops = 0
        found = _array_end(prefix, buf, len(buf))
        while found is None:
            if not self.starts or pops >= MAX_POPS:
                return None
            pops += 1
            start = self.starts.pop()
            self.ends.pop()
            self.verified.pop()
            older = self.src.reread(start, base)
            if older is None:
                return None
            joined = older + buf
            # usually the scan ran past the array and its end lies in the dropped range; but
            # the dropped start may instead have been a cut inside the last step, whose end follows
            found = _array_end(prefix, joined, len(older)) or _array_end(prefix, joined, len(joined))
            buf[:0] = older
            base = start
        end, skeleton, steps_at = found
        self.starts.append(base)
        self.ends.append(base + end)
        self.verified.append(1)
        return StepIndex(self.starts, self.ends, self.verified, skeleton, steps_at, self.src.total)


def _array_end(prefix: bytes, tail: bytes | bytearray, limit: int) -> tuple[int, dict[str, Any], str] | None:
    """Where the step that starts ``tail`` ends (exclusive) when the array's ``]`` follows
    it, searched among the ``]`` before ``limit``, from the last: the skeleton around
    the array must parse with the sentinel in place and the step as one object (only
    the true end passes both), with the skeleton and where the array sits."""
    q = limit
    tries = 0
    with memoryview(tail) as view:
        while tries < MAX_TAIL_TRIES:
            q = tail.rfind(b"]", 0, q)
            if q <= 0:
                return None
            k = q - 1
            while k > 0 and tail[k] in _WS:
                k -= 1
            if tail[k] != _CLOSE:
                continue
            tries += 1
            found = _skeleton(prefix, view[q + 1 :])
            if found is None or not _is_object(view[: k + 1]):
                continue
            return k + 1, found[0], found[1]
    return None


def read_range(fd: int, start: int, end: int) -> bytes:
    """``end - start`` bytes at ``start`` of an open file (short reads retried)."""
    size = end - start
    data = os.pread(fd, size, start)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, start + got)
        if not more:
            raise OSError(f"the file ends at byte {start + got}, before the step's end at byte {end}")
        parts.append(more)
        got += len(more)
    return b"".join(parts)


__all__ = ["BLOCK_BYTES", "StepIndex", "index_steps", "read_range"]
