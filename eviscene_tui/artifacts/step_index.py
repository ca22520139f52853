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
there holds more ``[`` than ``]``. The scan counts brackets per range (``bytes.count``,
strings included): a range whose counts differ is parsed to decide - a step whose
strings hold unbalanced brackets parses as one object; a cut inside a step does not,
and the range then goes on to the next boundary (at most ``MAX_MERGES`` times). A range
whose counts agree is taken as it is; it is verified when it is parsed for its row (the
viewer parses every range once in the background), and a range that does not parse as
one object then sends the caller back to the whole-file parse, which reports precisely.

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

from eviscene_tui.artifacts.chunked_trace import _ARRAY_KEY, _FIRST_ELEMENT, _sentinel

BLOCK_BYTES = 4 << 20
MAX_PREFIX_BYTES = 64 << 20
MAX_MERGES = 256  # boundaries one step may swallow (nested objects starting with the step key)
MAX_TAIL_TRIES = 256  # places tried for the array's closing bracket
MAX_POPS = 1024  # ranges dropped again when the scan went on past the array's end
_BACK = 4096  # bytes kept before an unsearched position (whitespace inside a boundary)
_WS = frozenset(b" \t\r\n")
_OPEN, _CLOSE, _COMMA, _COLON = ord("{"), ord("}"), ord(","), ord(":")


class StepIndex:
    """Where each step of one trace file lies: ``starts[i]`` .. ``ends[i]`` (exclusive)
    in the (decompressed) bytes; ``skeleton`` is the document with ``all_steps`` empty
    and ``steps_at`` says where the array sits (``"state"`` or ``"top"``)."""

    __slots__ = ("starts", "ends", "verified", "skeleton", "steps_at", "size")

    def __init__(self, starts: array, ends: array, verified: bytearray, skeleton: dict[str, Any], steps_at: str, size: int) -> None:
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


class _Source:
    """Blocks read from ``fh`` (and copied to ``sink``), appended to one bytearray."""

    def __init__(self, fh: BinaryIO, block_bytes: int, sink: BinaryIO | None, max_bytes: int | None) -> None:
        self.fh = fh
        self.block_bytes = block_bytes
        self.sink = sink
        self.max_bytes = max_bytes
        self.total = 0
        self.eof = False

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

    def more(self, buf: bytearray) -> bool:
        if self.eof:
            return False
        data = self.fh.read(self.block_bytes)
        if not data:
            self.eof = True
            return False
        self.total += len(data)
        if self.max_bytes is not None and self.total > self.max_bytes:
            raise ValueError(f"more than {self.max_bytes} bytes")
        if self.sink is not None:
            self.sink.write(data)
        buf += data
        return True


def _is_object(view: memoryview) -> bool:
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


def index_steps(
    fh: BinaryIO, *, block_bytes: int = BLOCK_BYTES, sink: BinaryIO | None = None, max_bytes: int | None = None
) -> StepIndex | None:
    """Index the steps of the trace read from ``fh`` (at its start; a ``GzipFile`` works
    too), or ``None`` when it is not a trace this method handles exactly (the caller then
    parses the whole file). Reading more than ``max_bytes`` raises ``ValueError``."""
    src = _Source(fh, block_bytes, sink, max_bytes)
    buf = bytearray()
    base = 0  # absolute offset of buf[0]
    # ---- the prefix, up to the array's ``[``
    pos = 0
    match = None
    while match is None:
        match = _ARRAY_KEY.search(buf, max(0, pos - 512))
        if match is None:
            pos = len(buf)
            if pos > MAX_PREFIX_BYTES or not src.more(buf):
                return None
    prefix = bytes(buf[: match.end() - 1])
    after = match.end()
    while len(buf) - after < 4096 and src.more(buf):
        pass
    first = _FIRST_ELEMENT.match(buf, after)
    if first is None:
        return None  # the first element is not an object: not a step list this handles
    starts: array = array("q")
    ends: array = array("q")
    verified = bytearray()
    if first.group(1) is not None:  # an empty array
        while src.more(buf):
            pass
        found = _skeleton(prefix, memoryview(buf)[first.end() :])
        if found is None:
            return None
        return StepIndex(starts, ends, verified, found[0], found[1], src.total)
    needle = first.group(2)
    nlen = len(needle)
    cur = buf.index(b"{", after)  # absolute start of the range being scanned
    counted = cur  # brackets are counted up to here (absolute)
    depth = 0  # '[' minus ']' from cur to counted
    merges = 0
    search = cur + 1  # next absolute position to look for the needle from
    while True:
        rel = search - base
        deferred = None
        n = len(buf)
        while True:
            h = buf.find(needle, rel)
            if h == -1:
                break
            j = h + nlen
            while j < n and buf[j] in _WS:
                j += 1
            if j >= n:
                if not src.eof:
                    deferred = h  # the ':' may come in the next block
                    break
                rel = h + 1
                continue
            if buf[j] != _COLON:
                rel = h + 1
                continue
            k = h - 1
            while k >= 0 and buf[k] in _WS:
                k -= 1
            if k < 0 or buf[k] != _OPEN:
                rel = h + 1
                continue
            brace = k
            k -= 1
            while k >= 0 and buf[k] in _WS:
                k -= 1
            if k < 0 or buf[k] != _COMMA:
                rel = h + 1
                continue
            k -= 1
            while k >= 0 and buf[k] in _WS:
                k -= 1
            if k < 0 or buf[k] != _CLOSE or base + k + 1 < counted:
                rel = h + 1
                continue
            end = base + k + 1  # the range [cur, end) ends with this '}'
            a = counted - base
            depth += buf.count(b"[", a, k + 1) - buf.count(b"]", a, k + 1)
            counted = end
            # balanced brackets alone can be faked by a ']' inside a string before a nested
            # object that starts with the step key: a true step also balances its braces
            ok = depth == 0 and buf.count(b"{", cur - base, k + 1) == buf.count(b"}", cur - base, k + 1)
            if not ok:
                with memoryview(buf) as view:
                    ok = _is_object(view[cur - base : k + 1])
            if ok:
                starts.append(cur)
                ends.append(end)
                verified.append(0 if depth == 0 else 1)
                cur = counted = base + brace
                depth = 0
                merges = 0
            else:
                if starts and verified[-1] == 0 and starts[-1] >= 0:
                    # the previous cut was taken on counts alone: strings holding ']' and '}'
                    # can fake them, so that cut may lie inside the step this one ends.
                    # Bring its bytes back and parse it; undo it when it is not one object
                    older = src.reread(starts[-1], base) if starts[-1] < base else b""
                    if older is not None:
                        shift = len(older)
                        if shift:
                            buf[:0] = older
                            base -= shift
                            h += shift
                            k += shift
                            brace += shift
                            n += shift
                        with memoryview(buf) as view:
                            prev_ok = _is_object(view[starts[-1] - base : ends[-1] - base])
                        if not prev_ok:
                            cur = starts.pop()
                            ends.pop()
                            verified.pop()
                            with memoryview(buf) as view:
                                ok = _is_object(view[cur - base : k + 1])
                            if ok:
                                starts.append(cur)
                                ends.append(end)
                                verified.append(1)
                                cur = counted = base + brace
                                depth = 0
                                merges = 0
                                rel = h + 1
                                continue
                merges += 1  # a cut inside a step: the range goes on
                if merges > MAX_MERGES:
                    return None
            rel = h + 1
        search = base + (deferred if deferred is not None else max(rel, n - nlen + 1))
        safe = search - _BACK
        if safe > counted:
            a, z = counted - base, safe - base
            depth += buf.count(b"[", a, z) - buf.count(b"]", a, z)
            counted = safe
        keep = min(cur, search - _BACK) - base
        if keep > 0:
            del buf[:keep]
            base += keep
        if not src.more(buf):
            if src.eof and deferred is None:
                break
            if deferred is not None and src.eof:
                continue  # re-examine the deferred hit knowing there is no more input
    # ---- the last step, up to the array's ``]``. The scan may have gone on past it
    # (objects in what follows the array that start with KEY): ranges are then dropped
    # from the end, and their bytes read again, until the array's end is found.
    del buf[: cur - base]
    base = cur
    pops = 0
    found = _array_end(prefix, buf, len(buf))
    while found is None:
        if not starts or pops >= MAX_POPS:
            return None
        pops += 1
        start = starts.pop()
        ends.pop()
        verified.pop()
        older = src.reread(start, base)
        if older is None:
            return None
        joined = older + buf
        # usually the scan ran past the array and its end lies in the dropped range; but the
        # dropped start may instead have been a cut inside the last step, whose end follows
        found = _array_end(prefix, joined, len(older)) or _array_end(prefix, joined, len(joined))
        buf[:0] = older
        base = start
    end, skeleton, steps_at = found
    starts.append(base)
    ends.append(base + end)
    verified.append(1)
    return StepIndex(starts, ends, verified, skeleton, steps_at, src.total)


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
