"""Server-sent-events framing and vLLM chat-chunk decoding.

Framing follows ``vllm-protocol.md`` §1.1 but is lenient the way the reference
asks: lines end in ``\\n``, ``\\r\\n`` or ``\\r``; ``data:`` with or without the
space; ``:`` comment lines ignored; ``event:``/``id:``/``retry:`` ignored; an
event is dispatched at the blank line (several ``data:`` lines are joined with
``\\n``); ``[DONE]`` ends the stream.

:class:`SSEDecoder` is incremental (feed bytes as they arrive) and does not
care how the transport split them. :func:`chunk_events` turns one decoded chat
chunk (a dict) into typed events.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from eviscene_tui.policy.events import (
    BadTokenIds,
    Delta,
    Done,
    Finished,
    PolicyEvent,
    PromptTokens,
    ServedModel,
    StreamError,
    TokenLogprob,
    ToolCallDelta,
    TopLogprob,
    Usage,
)

DONE = object()  # sentinel payload for ``data: [DONE]``

#: the most one SSE event (its unfinished line plus its data lines so far) may hold: a
#: vLLM chunk is a few KB, the first one (every prompt token id) up to a few MB
MAX_EVENT_BYTES = 16 << 20


class SSEOverflow(ValueError):
    """An event grew past the decoder's limit without ending (an endless line)."""


class SSEDecoder:
    """Incremental SSE decoder: ``feed(bytes)`` yields each event's data string.

    An event that grows past ``max_event_bytes`` without its blank line raises
    :class:`SSEOverflow` (a server sending one endless line would otherwise hold all of
    it in memory)."""

    __slots__ = ("_buf", "_data", "_pending_cr", "_held", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._pending_cr = False
        self._held = 0  # bytes of the event being collected (its data lines)
        self.max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> list[bytes | object]:
        """Feed transport bytes; returns the data of every event completed by them."""
        out = self._feed(chunk)
        if len(self._buf) + self._held > self.max_event_bytes:
            size = len(self._buf) + self._held
            self._buf, self._data, self._held = b"", [], 0
            raise SSEOverflow(f"an SSE event grew past {self.max_event_bytes >> 20} MiB ({size} bytes) without ending")
        return out

    def _feed(self, chunk: bytes) -> list[bytes | object]:
        if not chunk:
            return []
        # fast path: the transport delivered exactly one whole ``data: …\n\n`` event (vLLM's usual write)
        if (
            not self._buf and not self._data and not self._pending_cr
            and chunk[:6] == b"data: " and chunk[-2:] == b"\n\n" and chunk.count(b"\n") == 2 and b"\r" not in chunk
        ):
            data = chunk[6:-2]
            return [DONE if data == b"[DONE]" else data]
        if not self._data and not self._pending_cr:
            buf = self._buf + chunk if self._buf else chunk
            if b"\r" not in buf:
                return self._feed_blocks(buf)
        if self._pending_cr:
            # a "\r" ended the previous chunk: a following "\n" belongs to it
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
            self._pending_cr = False
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                self._pending_cr = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()  # the unfinished tail
        out: list[bytes | object] = []
        line_fn = self._line
        for line in lines:
            item = line_fn(line)
            if item is not None:
                out.append(item)
        return out

    def _feed_blocks(self, buf: bytes) -> list[bytes | object]:
        """Bulk path (no CR anywhere, no event half-collected): split on the blank lines
        once per network read; a block that is one ``data: …`` line is taken as is, any
        other block (comments, several lines, ``data:`` without the space) goes line by line."""
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()  # the unfinished tail (may hold whole lines of the next event)
        out: list[bytes | object] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                data = block[6:]
                if data == b"[DONE]" or (len(data) < 16 and data.strip() == b"[DONE]"):
                    out.append(DONE)
                else:
                    out.append(data)
                continue
            self._event_lines(block, out)
        return out

    def close(self) -> list[bytes | object]:
        """End of the byte stream: dispatch whatever is left (a server may omit the last blank line)."""
        out: list[bytes | object] = []
        rest, self._buf = self._buf, b""
        self._event_lines(rest, out)
        return out

    def _event_lines(self, block: bytes, out: list[bytes | object]) -> None:
        """The lines of one event (``block``, may be empty) then its ending blank line."""
        if block:
            for line in block.split(b"\n"):
                item = self._line(line)
                if item is not None:
                    out.append(item)
        item = self._line(b"")
        if item is not None:
            out.append(item)

    def _line(self, line: bytes) -> bytes | object | None:
        if not line:
            if not self._data:
                return None
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            self._data = []
            self._held = 0
            if data.strip() == b"[DONE]":
                return DONE
            return data
        if line[:1] == b":":
            return None  # comment / keep-alive
        if line.startswith(b"data:"):
            value = line[5:]
            if value[:1] == b" ":
                value = value[1:]
            self._data.append(value)
            self._held += len(value)
            return None
        # event:, id:, retry: and unknown fields are ignored (SSE spec)
        return None


def _int_list(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))


def _bad_ids(value: Any, where: str) -> BadTokenIds | None:
    """The values of a token-id list that are not integers (counted, never used)."""
    if not isinstance(value, list):
        return None
    bad = [v for v in value if not isinstance(v, int) or isinstance(v, bool)]
    if not bad:
        return None
    return BadTokenIds(len(bad), tuple(_json_text(v)[:40] for v in bad[:5]), where)


def _token_id_from(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith("token_id:"):
        try:
            return int(token[9:])
        except ValueError:
            return None
    return None


def parse_logprobs(obj: Any) -> tuple[TokenLogprob, ...]:
    """Chat ``logprobs`` (``{"content":[...]}``); missing/null -> ()."""
    if not isinstance(obj, dict):
        return ()
    content = obj.get("content")
    if not isinstance(content, list):
        return ()
    out = []
    for entry in content:
        if not isinstance(entry, dict):
            continue
        token = entry.get("token")
        top = []
        for t in entry.get("top_logprobs") or ():
            if isinstance(t, dict):
                tok = t.get("token")
                top.append(TopLogprob(token=str(tok), logprob=_float(t.get("logprob")), token_id=_token_id_from(tok)))
        out.append(TokenLogprob(token=str(token), logprob=_float(entry.get("logprob")), token_id=_token_id_from(token), top=tuple(top)))
    return tuple(out)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # e.g. an integer beyond 64 bits (only from a caller's object, never from orjson.loads)
        return repr(value)


def error_message_of(obj: Any) -> tuple[str, str | None, int | None]:
    """(message, type, code) from a nested ``{"error":{...}}``, a flat (< 0.10.1)
    error object, or the 401 ``{"error":"Unauthorized"}`` string form."""
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, str):
            return err, None, None
        if isinstance(err, dict):
            msg = err.get("message")
            code = err.get("code")
            return (
                str(msg) if msg is not None else _json_text(err),
                str(err["type"]) if err.get("type") is not None else None,
                code if isinstance(code, int) else None,
            )
        if "detail" in obj:
            return str(obj["detail"]), None, None
    return str(obj), None, None


def chunk_events(obj: Any, *, fast: bool = True) -> list[PolicyEvent]:
    """Typed events for one decoded chunk. Only choice index 0 is followed (n=1)."""
    if not isinstance(obj, dict):
        return [StreamError("malformed", f"SSE data is not a JSON object: {type(obj).__name__}")]
    if "error" in obj and not obj.get("choices"):
        msg, typ, code = error_message_of(obj)
        return [StreamError("sse_error", msg, status=code, error_type=typ)]
    if fast:
        quick = _fast_chunk(obj)
        if quick is not None:
            return quick
    events: list[PolicyEvent] = []
    prompt_ids = obj.get("prompt_token_ids")
    if isinstance(prompt_ids, list):
        events.append(PromptTokens(_int_list(prompt_ids)))
        bad = _bad_ids(prompt_ids, "prompt_token_ids")
        if bad is not None:
            events.append(bad)
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        return [StreamError("malformed", "chunk 'choices' is not a list")]
    for choice in choices or ():
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            events.append(StreamError("malformed", "chunk 'delta' is not an object"))
            continue
        raw_ids = choice.get("token_ids")
        ids = _int_list(raw_ids)
        bad = _bad_ids(raw_ids, "token_ids")
        if bad is not None:
            events.append(bad)
        lps = parse_logprobs(choice.get("logprobs"))
        carried = False
        reasoning = delta.get("reasoning")
        if reasoning is None:
            reasoning = delta.get("reasoning_content")
        texts: tuple[tuple[Literal["reasoning", "content"], Any], ...] = (("reasoning", reasoning), ("content", delta.get("content")))
        for kind, text in texts:
            if isinstance(text, str) and text:
                if not carried:
                    events.append(Delta(kind, text, ids, lps))
                    carried = True
                else:
                    events.append(Delta(kind, text))
        tool_calls = delta.get("tool_calls")
        for tc in tool_calls if isinstance(tool_calls, list) else ():
            if not isinstance(tc, dict):
                continue
            fn = f if isinstance(f := tc.get("function"), dict) else {}
            args = fn.get("arguments")
            events.append(
                ToolCallDelta(
                    index=tc.get("index", 0) if isinstance(tc.get("index", 0), int) else 0,
                    id=tc.get("id") if isinstance(tc.get("id"), str) else None,
                    name=fn.get("name") if isinstance(fn.get("name"), str) else None,
                    arguments=args if isinstance(args, str) else "",
                )
            )
        if not carried and (ids or lps):
            events.append(Delta("tokens", "", ids, lps))
        fr = choice.get("finish_reason")
        if fr is not None:
            sr = choice.get("stop_reason")
            events.append(Finished(str(fr), sr if isinstance(sr, (int, str)) and not isinstance(sr, bool) else None))
    usage = obj.get("usage")
    if isinstance(usage, dict) and not choices:
        events.append(
            Usage(
                prompt_tokens=usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None,
                completion_tokens=usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None,
                total_tokens=usage.get("total_tokens") if isinstance(usage.get("total_tokens"), int) else None,
                raw=usage,
            )
        )
    return events


def _fast_chunk(obj: dict[str, Any]) -> list[PolicyEvent] | None:
    """The common case as events: one plain text :class:`Delta` (see :func:`_fast_text`).
    Anything else returns None and takes the general path (:func:`chunk_events`)."""
    fast = _fast_text(obj)
    if fast is None:
        return None
    kind, text, ids = fast
    return [Delta(kind, text, tuple(ids))]


def decode_data(data: bytes) -> list[PolicyEvent]:
    """Parse one event's data (JSON) into typed events; bad JSON -> a malformed error."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        preview = data[:120].decode("utf-8", errors="replace")
        return [StreamError("malformed", f"malformed SSE data line ({exc.msg}): {preview!r}")]
    # hot path (one call per token): a plain text delta, decoded without the general checks
    if type(obj) is dict and "error" not in obj:
        events = _fast_chunk(obj)
        if events is not None:
            return events
        return chunk_events(obj, fast=False)
    return chunk_events(obj)


def _fast_text(obj: Any) -> tuple[Literal["reasoning", "content"], str, list[int] | tuple[()]] | None:
    """(kind, text, token ids) for the common chunk, decoded with few checks: one choice,
    index 0, a text delta (content or reasoning), plain token ids, no logprobs / tool
    calls / finish / usage / prompt ids. Anything else returns None."""
    if type(obj) is not dict or "error" in obj:
        return None
    choices = obj.get("choices")
    if type(choices) is not list or len(choices) != 1 or obj.get("prompt_token_ids") is not None:
        return None
    ch = choices[0]
    if type(ch) is not dict:
        return None
    get = ch.get
    if get("finish_reason") is not None or get("logprobs") is not None or get("index", 0) != 0:
        return None
    delta = get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    ids = get("token_ids")
    if ids is None:
        ids = ()
    elif type(ids) is list:
        for v in ids:
            if type(v) is not int:
                return None
    else:
        return None
    text = delta.get("content")
    if text is not None:
        if type(text) is str and text:
            return "content", text, ids
        return None
    text = delta.get("reasoning")
    if text is None:
        text = delta.get("reasoning_content")
    if type(text) is str and text:
        return "reasoning", text, ids
    return None


class ChunkWatch:
    """What one stream's chunks say about the stream itself: the model name the server
    answers with (a :class:`ServedModel` event when it is first seen or changes)."""

    __slots__ = ("model",)

    def __init__(self) -> None:
        self.model: str | None = None

    def see(self, obj: Any, events: list[PolicyEvent]) -> None:
        model = obj.get("model") if type(obj) is dict else None
        if model != self.model and isinstance(model, str):
            self.model = model
            events.append(ServedModel(model))


def decode_batch(datas: list[bytes | object], watch: ChunkWatch | None = None) -> tuple[list[PolicyEvent], bool]:
    """Events for the data of several SSE events (one network read's worth).

    Consecutive plain text chunks of the same kind (no logprobs, tool calls, finish,
    usage, prompt ids) are folded into one :class:`Delta` carrying all their text and
    token ids in order; everything else decodes as in :func:`decode_data`. Returns
    (events, ended): ended is True after ``[DONE]`` (a :class:`Done` is appended) or a
    :class:`StreamError` (the last event); later data is not decoded."""
    events: list[PolicyEvent] = []
    kind: Literal["reasoning", "content"] | None = None
    texts: list[str] = []
    ids: list[int] = []
    loads = orjson.loads
    for data in datas:
        if data is DONE:
            if kind is not None:
                events.append(Delta(kind, "".join(texts), tuple(ids)))
            events.append(Done())
            return events, True
        try:
            obj = loads(data)  # type: ignore[arg-type]  # DONE was handled above: data is bytes here
        except orjson.JSONDecodeError:
            obj = None
            fast = None
        else:
            fast = _fast_text(obj)
            named = obj.get("model") if watch is not None and type(obj) is dict else None
            if watch is not None and isinstance(named, str) and named != watch.model:
                if kind is not None:  # the name goes before the text that follows it
                    events.append(Delta(kind, "".join(texts), tuple(ids)))
                    kind = None
                watch.see(obj, events)
        if fast is not None:
            k, text, tids = fast
            if k != kind:
                if kind is not None:
                    events.append(Delta(kind, "".join(texts), tuple(ids)))
                kind, texts, ids = k, [], []
            texts.append(text)
            if tids:
                ids += tids
            continue
        if kind is not None:
            events.append(Delta(kind, "".join(texts), tuple(ids)))
            kind = None
        more = decode_data(data) if obj is None else chunk_events(obj, fast=False) if type(obj) is dict and "error" not in obj else chunk_events(obj)  # type: ignore[arg-type]  # obj is None only when data is bytes
        for ev in more:
            events.append(ev)
            if type(ev) is StreamError:
                return events, True
    if kind is not None:
        events.append(Delta(kind, "".join(texts), tuple(ids)))
    return events, False
