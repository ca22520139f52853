"""Parse a big trace file with orjson, piece by piece, to keep the memory peak low.

``orjson.loads`` on a whole trace holds three copies at its peak: the bytes, orjson's
intermediate document and the Python objects are alive at once (``make bench`` prints
the peak against the file's size). A trace is almost all
``state.all_steps``, so this module reads the file in blocks and parses that array a few
megabytes of steps at a time; the peak is the Python objects plus one chunk.

How the array is cut. In valid JSON the bytes ``}`` ``,`` ``{"KEY":`` (whitespace allowed
between) can only be structural: a ``"`` inside a string is always escaped, so the quote
before KEY cannot be part of a string. KEY is the first key of the first step; steps are
written by one serializer, so each step starts with it. Such a cut may still fall between
two nested objects inside a step that happen to start with the same key: then the chunk
``[`` + bytes + ``]`` does not parse and the cut moves to the next boundary (a bounded
number of times). A chunk that parses starts and ends at the array's own depth, so the
cuts stay in step. The last step, which has no boundary after it, is decoded with the
standard library's ``raw_decode``, which reports where it ends.

What is around the array (the "skeleton") is parsed with the array replaced by a unique
sentinel string; the result is used only if that sentinel sits exactly at
``state.all_steps`` (or a top-level ``all_steps``). Anything unusual - a different shape,
a step that is not an object, invalid JSON, gzip - returns ``None`` and the caller parses
the whole file the ordinary way, which reports problems precisely.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, BinaryIO

import orjson

CHUNK_BYTES = 3 << 20
BLOCK_BYTES = 1 << 20
MAX_PREFIX_BYTES = 64 << 20
MAX_RETRIES_PER_CHUNK = 16
_OVERLAP = 512  # bytes re-searched when a boundary may straddle two reads

_ARRAY_KEY = re.compile(rb'"all_steps"\s*:\s*\[')
_FIRST_ELEMENT = re.compile(rb'\s*(?:(\])|\{\s*("(?:[^"\\]|\\.)*")\s*:)')


class _Blocks:
    """A growing bytearray (:attr:`buf`) fed from a binary file, one block at a time;
    with ``sink`` every block read is also written there. Shared by the chunked parse
    and the step index (``step_index``)."""

    def __init__(self, fh: BinaryIO, block_bytes: int, max_bytes: int | None = None, sink: BinaryIO | None = None) -> None:
        self.fh = fh
        self.block_bytes = block_bytes
        self.max_bytes = max_bytes
        self.sink = sink
        self.total = 0
        self.buf = bytearray()
        self.eof = False

    def more(self) -> bool:
        """One more block appended to :attr:`buf`; False at the end of the file."""
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
        self.buf += data
        return True

    def fill(self, size: int) -> None:
        while len(self.buf) < size and self.more():
            pass

    def rest_text(self) -> str:
        """Everything left, decoded (the buffer is emptied; no bytes copy is made)."""
        while self.more():
            pass
        try:
            return self.buf.decode("utf-8")
        finally:
            del self.buf[:]


def _find_array(blocks: _Blocks) -> re.Match[bytes] | None:
    """Where ``"all_steps": [`` is in the blocks read (reading on as needed, at most
    ``MAX_PREFIX_BYTES``), or ``None``."""
    start = 0
    while True:
        match = _ARRAY_KEY.search(blocks.buf, max(0, start - _OVERLAP))
        if match is not None:
            return match
        start = len(blocks.buf)
        if start > MAX_PREFIX_BYTES or not blocks.more():
            return None


def _sentinel() -> tuple[str, bytes]:
    value = "\x00eviscene-chunked-" + os.urandom(12).hex()
    return value, orjson.dumps(value)


def parse_trace_chunked(
    fh: BinaryIO, *, chunk_bytes: int = CHUNK_BYTES, block_bytes: int = BLOCK_BYTES, max_bytes: int | None = None
) -> Any | None:
    """The trace document parsed from ``fh`` (positioned at its start; a ``GzipFile``
    works too), or ``None`` when it is not a trace object this method handles (callers
    then parse it whole). ``chunk_bytes`` is the least size of one orjson parse,
    ``block_bytes`` of one read; more than ``max_bytes`` read raises ``ValueError``.
    """
    blocks = _Blocks(fh, block_bytes, max_bytes)
    # ---- the prefix, up to and including the array's ``[``
    match = _find_array(blocks)
    if match is None:
        return None
    prefix = bytes(blocks.buf[: match.end() - 1])
    # keep one lead byte (the ``[``) before the first element: it is overwritten with
    # ``[`` for each chunk so the chunk parses as a list without copying it
    del blocks.buf[: match.end() - 1]

    blocks.fill(4096)
    first = _FIRST_ELEMENT.match(blocks.buf, 1)
    if first is None:
        return None  # an array whose first element is not an object: not a step list
    steps: list[Any] = []
    if first.group(1) is None:
        boundary = re.compile(rb"\}\s*,\s*\{\s*" + re.escape(first.group(2)) + rb"\s*:")
        if not _parse_steps(blocks, boundary, steps, chunk_bytes):
            return None
    suffix = _parse_tail(blocks, steps)
    if suffix is None:
        return None
    sentinel, sentinel_json = _sentinel()
    try:
        doc = orjson.loads(prefix + sentinel_json + suffix)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    state = doc.get("state")
    if isinstance(state, dict) and state.get("all_steps") == sentinel:
        state["all_steps"] = steps
        return doc
    if doc.get("all_steps") == sentinel:
        doc["all_steps"] = steps
        return doc
    return None


def _parse_steps(blocks: _Blocks, boundary: re.Pattern[bytes], steps: list[Any], chunk_bytes: int) -> bool:
    """Parse whole chunks of steps into ``steps`` until no boundary is left; the buffer is
    then the lead byte, the last step(s), ``]`` and the rest of the document."""
    buf = blocks.buf
    while True:
        blocks.fill(chunk_bytes + blocks.block_bytes)
        search_from = min(chunk_bytes, max(1, len(buf) - _OVERLAP))
        retries = 0
        while True:
            m = boundary.search(buf, search_from)
            if m is None:
                if blocks.more():
                    search_from = max(search_from, len(buf) - blocks.block_bytes - _OVERLAP)
                    continue
                return True  # no boundary left: the tail parser takes the rest
            comma = buf.index(b",", m.start() + 1)
            parsed = _parse_chunk(buf, comma)
            if parsed is not None:
                break
            retries += 1
            if retries > MAX_RETRIES_PER_CHUNK:
                return False
            search_from = m.end()
        steps.extend(parsed)
        # the comma becomes the next chunk's lead byte
        del buf[:comma]


def _parse_chunk(buf: bytearray, comma: int) -> list[Any] | None:
    """``buf[1:comma]`` parsed as a list, via the lead byte and the comma turned into
    brackets for the duration of the call."""
    lead = buf[0]
    buf[0] = 0x5B  # [
    buf[comma] = 0x5D  # ]
    try:
        with memoryview(buf) as view:
            value = orjson.loads(view[: comma + 1])
    except orjson.JSONDecodeError:
        value = None
    finally:
        buf[0] = lead
        buf[comma] = 0x2C  # ,
    return value if isinstance(value, list) else None


def _parse_tail(blocks: _Blocks, steps: list[Any]) -> bytes | None:
    """Decode the remaining steps one by one up to the array's ``]``; the bytes after it."""
    try:
        text = blocks.rest_text()
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    # after the lead byte: ``[`` (nothing parsed yet; ``]`` may follow) or a chunk's
    # ``,`` (a step must follow)
    may_close = text[:1] == "["
    pos = 1
    n = len(text)
    expect_value = True
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            return None
        ch = text[pos]
        if ch == "]":
            if expect_value and not may_close:
                return None
            return text[pos + 1 :].encode("utf-8")
        if not expect_value:
            if ch != ",":
                return None
            pos += 1
            expect_value, may_close = True, False
            continue
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        steps.append(value)
        expect_value = may_close = False


__all__ = ["CHUNK_BYTES", "parse_trace_chunked"]
