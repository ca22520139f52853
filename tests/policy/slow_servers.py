"""Hostile streaming servers on a real loopback socket (a plain asyncio HTTP/1.1
responder, not the fake vLLM): one that trickles the bytes of an event that never
ends, one that sends well-formed token events forever at a slow pace, one that sends
one endless SSE line, one that answers as another model (or with token ids that are
not integers). Each answers ``POST /v1/chat/completions`` with a chunked
``text/event-stream`` and anything else with 404.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson

Writer = Callable[[bytes], Awaitable[None]]


def token_event(i: int, *, model: str = "m", ids: list[object] | None = None, finish: str | None = None) -> bytes:
    chunk = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": model,
             "choices": [{"index": 0, "delta": {"content": f"t{i} "}, "token_ids": [1000 + i] if ids is None else ids,
                          "finish_reason": finish}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def answering_as(model: str, *, bad_ids: bool = False) -> "Behaviour":
    """A complete, well-formed stream whose chunks name ``model``; with ``bad_ids`` one
    chunk's token ids hold values that are not integers."""

    async def behaviour(write: Writer) -> None:
        await write(token_event(0, model=model))
        await write(token_event(1, model=model, ids=[1001, "1002", 3.5, None, True] if bad_ids else None))
        await write(token_event(2, model=model, finish="stop"))
        usage = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": model, "choices": [],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
        await write(b"data: " + orjson.dumps(usage) + b"\n\n")
        await write(b"data: [DONE]\n\n")
        await write(b"")  # the last chunk of the chunked body

    return behaviour


async def trickle(write: Writer, *, events_first: int = 3, pace: float = 0.02) -> None:
    """A few complete events (tokens flow), then the bytes of one event, one byte per
    write, that never ends."""
    for i in range(events_first):
        await write(token_event(i))
    partial = token_event(99)[:-2] + b" " * 10_000_000
    for b in partial:
        await write(bytes([b]))
        await asyncio.sleep(pace)


async def slow_events(write: Writer, *, pace: float = 0.02) -> None:
    """Well-formed token events forever (past any max_tokens), one per ``pace``."""
    i = 0
    while True:
        await write(token_event(i))
        i += 1
        await asyncio.sleep(pace)


async def endless_line(write: Writer) -> None:
    """``data: xxxxx…`` without ever a newline, as fast as the socket takes it."""
    await write(b"data: ")
    block = b"x" * (64 << 10)
    while True:
        await write(block)


Behaviour = Callable[[Writer], Awaitable[None]]


async def _serve(behaviour: Behaviour, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        if length:
            await reader.readexactly(length)
        if not head.startswith(b"POST /v1/chat/completions "):
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

        async def write(data: bytes) -> None:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()

        await behaviour(write)
        await reader.read()  # until the client closes: the body ended with its last chunk
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the client went away: what these servers are for
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@contextlib.asynccontextmanager
async def serving(behaviour: Behaviour) -> AsyncIterator[str]:
    """Serve ``behaviour`` on a loopback port; yields the ``/v1`` base URL."""
    tasks: set[asyncio.Task[None]] = set()

    def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(_serve(behaviour, reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
