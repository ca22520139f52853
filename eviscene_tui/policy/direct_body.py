"""Read a streamed HTTP/1.1 response body straight from the connection.

vLLM (uvicorn) sends one HTTP chunk per SSE event, so a 20,000-token stream is 20,000
chunks. httpx hands them over through httpcore and h11 one at a time, and that per-chunk
path is most of what consuming a fast stream costs in Python. For the streaming call
the client instead reads the connection's bytes itself, up to 64 KiB per read, and
undoes the chunked transfer coding for all the chunks of a read at once
(:class:`ChunkedDecoder`). The request is still made by ``httpx.AsyncClient``, which
sends it and parses the status line and headers as usual.

How the body is reached, with public interfaces only:

- the request carries httpx's ``trace`` extension; httpcore reports the connection's
  network stream when it connects (``connection.connect_tcp.complete`` /
  ``connection.start_tls.complete``);
- :class:`BodyTap` wraps that stream's ``read`` (an attribute of the stream object;
  httpcore calls ``stream.read``). When httpcore starts reading the response head
  (``http11.receive_response_headers.started``) the tap hands httpcore the bytes only
  up to the end of the final head block (1xx interim heads pass through) and holds the
  rest, so h11 never sees body bytes;
- the client then claims the held bytes and reads the rest itself. h11 never sees the
  end of the body, so httpcore closes the connection when the response is closed (the
  streaming client keeps no idle connections, so every stream has its own).

Whenever something does not fit (no connect event, not HTTP/1.1, not chunked, a
content encoding, an HTTP error status) the held bytes go to httpcore on its next read
and the ordinary httpx path is used; the result is the same, only slower.

No Textual import (services layer).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD_BYTES = 256 << 10
_MAX_LINE_BYTES = 4096
_STATUS = re.compile(rb"HTTP/\d\.\d (\d{3})")
# chunk-size [ BWS ; chunk-ext ] ; extensions are allowed and ignored
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")


class ChunkedError(ValueError):
    """The body is not valid chunked transfer coding."""


class ChunkedDecoder:
    """HTTP/1.1 chunked transfer decoding, any number of chunks per ``feed``.

    ``feed(data)`` returns the payload bytes decoded so far (possibly empty); ``done`` is
    set after the last chunk and the trailer section. Malformed input raises
    :class:`ChunkedError`. Bytes after the end are ignored.
    """

    __slots__ = ("_partial", "_left", "_crlf", "_trailers", "done")

    def __init__(self) -> None:
        self._partial = b""  # an incomplete size or trailer line
        self._left = 0  # payload bytes still to come in the current chunk
        self._crlf = 0  # bytes of the CRLF after a chunk's payload still to come (2, 1, 0)
        self._trailers = False  # after the last chunk: trailer lines until an empty line
        self.done = False

    def feed(self, data: bytes) -> bytes:
        if self.done or not data:
            return b""
        if self._partial:
            data = self._partial + data
            self._partial = b""
        out: list[bytes] = []
        pos, n = 0, len(data)
        size_line = _SIZE_LINE.fullmatch
        while pos < n:
            left = self._left
            if left:
                end = pos + left
                if end <= n:
                    out.append(data[pos:end])
                    pos, self._left, self._crlf = end, 0, 2
                else:
                    out.append(data[pos:])
                    self._left = end - n
                    break
                continue
            if self._crlf:
                if self._crlf == 2 and n - pos >= 2:
                    if data[pos] != 13 or data[pos + 1] != 10:
                        raise ChunkedError("a chunk's data is not followed by CRLF")
                    pos += 2
                    self._crlf = 0
                    continue
                expected = 13 if self._crlf == 2 else 10
                if data[pos] != expected:
                    raise ChunkedError("a chunk's data is not followed by CRLF")
                pos += 1
                self._crlf -= 1
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > _MAX_LINE_BYTES:
                    raise ChunkedError("a chunk-size or trailer line is too long")
                self._partial = data[pos:]
                break
            if self._trailers:
                if eol == pos:
                    self.done = True
                    break
                pos = eol + 2  # a trailer field: ignored
                continue
            if eol - pos > _MAX_LINE_BYTES:
                raise ChunkedError("a chunk-size line is too long")
            m = size_line(data, pos, eol)
            if m is None:
                raise ChunkedError(f"bad chunk-size line {data[pos:min(eol, pos + 40)]!r}")
            size = int(m.group(1), 16)
            pos = eol + 2
            if size == 0:
                self._trailers = True
            else:
                self._left = size
        return out[0] if len(out) == 1 else b"".join(out)


def _status_of(head: bytes) -> int | None:
    m = _STATUS.match(head)
    return int(m.group(1)) if m else None


class BodyTap:
    """Wraps a network stream's ``read`` to keep a response's body away from httpcore.

    Disarmed, it is a pass-through. Armed (when httpcore starts reading a response
    head), it cuts the bytes it passes at the end of the final head block and holds the
    rest: :meth:`claim` takes them for direct reading; unclaimed, they are handed to
    httpcore on its next read, as if nothing happened.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._read: Callable[[int, float | None], Awaitable[bytes]] = stream.read  # the stream's own bound method
        self._armed = False
        self._head = bytearray()  # the head block seen so far (to find its end)
        self._pending = b""  # bytes read from the network, not yet given to httpcore
        self.holding = False  # the bytes after a final response head are held (until claimed or read)
        stream.read = self.read  # httpcore calls ``self._network_stream.read(...)``

    def arm(self) -> None:
        self._armed = True
        self._head = bytearray()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """What httpcore's connection calls."""
        if self._pending:
            data, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
            self.holding = False  # not claimed: httpcore reads the body itself
        else:
            data = await self._read(max_bytes, timeout)
        if self._armed and data:
            data = self._cut_head(data)
        return data

    def _cut_head(self, data: bytes) -> bytes:
        before = len(self._head)
        self._head += data
        end = self._head.find(_HEAD_END, max(0, before - 3))
        if end < 0:
            if len(self._head) > _MAX_HEAD_BYTES:
                self._armed = False  # not a head we understand: pass everything through
            return data
        cut = end + 4 - before
        status = _status_of(bytes(self._head[:12]))
        self._head = bytearray()
        rest, data = data[cut:], data[:cut]
        if status is None:
            self._armed = False
            self._pending = rest + self._pending
        elif 100 <= status < 200 and status != 101:
            self._pending = rest + self._pending  # an interim head: the next head follows
        else:
            self._armed = False
            self._pending = rest + self._pending
            self.holding = True
        return data

    def claim(self) -> bytes:
        """The held body bytes; from now on the caller reads the body (:meth:`read_body`)."""
        data, self._pending = self._pending, b""
        self.holding = False
        return data

    async def read_body(self, max_bytes: int, timeout: float | None) -> bytes:
        """Read from the network stream directly (after :meth:`claim`); ``b""`` at EOF.
        Raises httpcore's ``ReadTimeout`` / ``ReadError`` like the stream does."""
        return await self._read(max_bytes, timeout)


class DirectBodyTrace:
    """The ``trace`` extension callback of one streaming request: taps the connection."""

    CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete", "connection.connect_unix_socket.complete")

    def __init__(self) -> None:
        self.tap: BodyTap | None = None

    async def __call__(self, name: str, info: dict[str, Any]) -> None:
        # never let the fast path break a request: any surprise leaves httpx's own path
        try:
            if name in self.CONNECTED:
                stream = info.get("return_value")
                # a TLS stream replaces the TCP one (it reads the socket itself)
                self.tap = BodyTap(stream) if stream is not None and callable(getattr(stream, "read", None)) else None
            elif name == "http11.receive_response_headers.started" and self.tap is not None:
                self.tap.arm()
        except Exception:  # noqa: BLE001 - e.g. a stream type whose read cannot be wrapped
            self.tap = None

    def claimable(self, response: Any) -> BodyTap | None:
        """The tap holding ``response``'s body when it can be read directly, else None."""
        tap = self.tap
        if tap is None or not tap.holding:
            return None
        if response.extensions.get("network_stream") is not tap.stream:
            return None
        if getattr(response, "http_version", "") != "HTTP/1.1":
            return None
        headers = response.headers
        if headers.get("transfer-encoding", "").strip().lower() != "chunked":
            return None
        if headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
            return None
        return tap


__all__ = ["BodyTap", "ChunkedDecoder", "ChunkedError", "DirectBodyTrace"]
