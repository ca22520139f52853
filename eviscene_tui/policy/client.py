"""The policy client: attestation, replica choice, streaming, server status.

- one ``httpx.AsyncClient(trust_env=False)`` per client, short connect timeout,
  a read timeout that covers queueing + prefill, a *stall* timeout between complete
  SSE events once tokens flow (a byte is not progress), an overall deadline from the
  token budget, and a cap on one event's size (:class:`StreamProgress`, ``SSEDecoder``);
- the API key is sent as a bearer header and scrubbed from every message this
  module produces;
- cancel = leave the ``async with`` / cancel the task: the response is closed,
  and vLLM aborts the request server-side (protocol §1.6).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Any, Literal

import httpcore
import httpx
import orjson

from eviscene_tui.policy.direct_body import BodyTap, ChunkedDecoder, ChunkedError, DirectBodyTrace
from eviscene_tui.policy.events import (
    Attestation,
    Attested,
    PolicyEvent,
    Started,
    StreamError,
)
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import PolicyTarget, server_root
from eviscene_tui.probes import ClientProbes
from eviscene_tui.policy.sse import ChunkWatch, SSEDecoder, SSEOverflow, decode_batch, error_message_of


DIRECT_READ_BYTES = 64 << 10


def _resolved(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return path


def validate_live_model(target: PolicyTarget, models: Any, base_url: str) -> Attestation:
    """The driver's gate (run-format §5): one row with id == profile_id, same
    resolved root, same max_model_len. Names the first field that differs."""
    expected = {"id": target.profile_id, "root": target.expected_root, "max_model_len": target.context_length}
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return Attestation("refused", base_url, field="data", message="GET /models did not return a 'data' list", expected=expected)
    rows = [r for r in data if isinstance(r, dict) and r.get("id") == target.profile_id]
    if len(rows) != 1:
        ids = [r.get("id") for r in data if isinstance(r, dict)]
        what = "missing" if not rows else f"ambiguous ({len(rows)} rows)"
        return Attestation(
            "refused", base_url, field="id",
            message=f"live model alias {target.profile_id!r} {what}; the server lists {ids!r}", expected=expected,
        )
    row = rows[0]
    root, mml = row.get("root"), row.get("max_model_len")
    model_id = row.get("id") if isinstance(row.get("id"), str) else None
    served_root = root if isinstance(root, str) else None
    served_len = mml if isinstance(mml, int) else None

    def attestation(status: Literal["attested", "refused"], message: str, field: str | None = None) -> Attestation:
        return Attestation(status, base_url, field=field, message=message, model_id=model_id, root=served_root,
                           max_model_len=served_len, expected=expected)

    if not isinstance(root, str) or _resolved(root) != _resolved(target.expected_root or ""):
        return attestation(
            "refused", f"root differs: the server serves {root!r}, the profile froze {target.expected_root!r} (no longer the frozen checkpoint)",
            field="root",
        )
    if mml != target.context_length:
        return attestation(
            "refused", f"max_model_len differs: the server reports {mml!r}, the profile's context_length is {target.context_length!r}",
            field="max_model_len",
        )
    return attestation("attested", "serves the frozen checkpoint")


def parse_metrics(text: str) -> dict[str, float]:
    """The status-bar gauges from Prometheus text (sums over label sets)."""
    wanted = {
        "vllm:num_requests_running": "running",
        "vllm:num_requests_waiting": "waiting",
        "vllm:kv_cache_usage_perc": "kv_cache",
        "vllm:gpu_cache_usage_perc": "gpu_cache",
    }
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
        if name_end < 0:
            continue
        key = wanted.get(line[:name_end])
        if key is None:
            continue
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (IndexError, ValueError):
            continue
        if not math.isnan(value):
            out[key] = out.get(key, 0.0) + value
    if "kv_cache" not in out and "gpu_cache" in out:
        out["kv_cache"] = out["gpu_cache"]
    return out


@dataclass
class ServerStatus:
    base_url: str
    reachable: bool = False
    healthy: bool | None = None
    version: str | None = None
    alias: str | None = None
    root: str | None = None
    max_model_len: int | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None
    error: str | None = None
    at: float = field(default_factory=time.time)


#: the token budget a stream's deadline assumes when its request names no max_tokens and
#: the serving profile no context length
DEFAULT_TOKEN_BUDGET = 32768


class StreamProgress:
    """When a stream must have made progress, and why it failed when it did not.

    Progress is a complete SSE event, not a byte: a server that trickles the bytes of an
    event that never ends is stalled. Before the first event the read timeout applies
    (queueing and prefill), after it the stall timeout, counted from the last event. And
    the whole stream has a deadline from its token budget: the read timeout as the
    allowance for the first token, plus ``max_tokens`` (the request's, else the
    profile's context length) at the configured floor rate (``min_token_rate``), unless
    ``stream_deadline`` sets it."""

    __slots__ = ("config", "started", "last_event", "deadline", "budget", "_clock")

    def __init__(self, config: PolicyConfig, body: dict[str, Any], context_length: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self.started: float = clock()
        self.last_event: float | None = None
        asked = body.get("max_tokens")
        self.budget = asked if isinstance(asked, int) and asked > 0 else (context_length or DEFAULT_TOKEN_BUDGET)
        total = config.stream_deadline
        if total is None:
            total = config.read_timeout + self.budget / config.min_token_rate
        self.deadline: float = self.started + total

    def event(self) -> None:
        self.last_event = self._clock()

    def _quiet_until(self) -> float:
        c = self.config
        return self.last_event + c.stall_timeout if self.last_event is not None else self.started + c.read_timeout

    def due(self) -> float:
        """When the next complete event must have arrived (the clock's time)."""
        return min(self._quiet_until(), self.deadline)

    def remaining(self) -> float:
        return max(0.0, self.due() - self._clock())

    def failure(self, url: str) -> StreamError:
        """The error of a stream that missed :meth:`due`."""
        c = self.config
        if self.deadline <= self._quiet_until():
            how = (f"stream_deadline = {c.stream_deadline:g} s" if c.stream_deadline is not None else
                   f"{c.read_timeout:g} s for the first token + {self.budget} tokens at {c.min_token_rate:g} tokens/s")
            return StreamError("timeout", f"the stream ran past its deadline of {self.deadline - self.started:.0f} s ({how}); stopped")
        if self.last_event is not None:
            return StreamError("timeout", f"stalled: no complete event for {c.stall_timeout:g} s after tokens started flowing (bytes may still trickle in)")
        return StreamError("timeout", f"no complete event from {url} within the read timeout ({c.read_timeout:g} s)")


_TLS_CONTEXT: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context (certifi's CA bundle), built once per process:
    building it parses the whole CA bundle, and the app makes a client per stream
    and per status poll."""
    global _TLS_CONTEXT
    if _TLS_CONTEXT is None:
        _TLS_CONTEXT = httpx.create_ssl_context()
    return _TLS_CONTEXT


class PolicyClient:
    def __init__(self, target: PolicyTarget, config: PolicyConfig | None = None) -> None:
        self.target = target
        self.config = config or PolicyConfig()
        headers = {"Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        c = self.config
        timeout = httpx.Timeout(connect=c.connect_timeout, read=c.read_timeout, write=30.0, pool=c.connect_timeout)
        tls = _tls_context()
        self._http = httpx.AsyncClient(trust_env=False, verify=tls, headers=headers, timeout=timeout, follow_redirects=False)
        # streaming calls: a connection of their own each time (no idle keep-alive), so
        # the body can be read straight from it (see direct_body.py)
        self._stream_http = httpx.AsyncClient(
            trust_env=False, verify=tls, headers=headers, timeout=timeout, follow_redirects=False,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
        )
        self.probes = ClientProbes()  # which body reader the streams took (tests, bench)

    async def __aenter__(self) -> "PolicyClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._stream_http.aclose()

    def _scrub(self, text: str) -> str:
        return self.config.scrub(text)

    def _describe_exc(self, exc: BaseException, url: str) -> StreamError:
        name = type(exc).__name__
        detail = self._scrub(str(exc) or name)
        if isinstance(exc, httpx.ConnectTimeout):
            return StreamError("connect", f"timed out connecting to {url} after {self.config.connect_timeout:g} s")
        if isinstance(exc, httpx.ConnectError):
            return StreamError("connect", f"cannot connect to {url}: {detail} (is the server running?)")
        if isinstance(exc, (httpx.ReadTimeout, TimeoutError)):
            return StreamError("timeout", f"no data from {url} within the read timeout ({detail})")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return StreamError("disconnect", f"the server closed the connection mid-stream ({name}: {detail})")
        if isinstance(exc, httpx.HTTPError):
            return StreamError("connect", f"HTTP transport error talking to {url} ({name}: {detail})")
        return StreamError("connect", f"{name}: {detail}")

    # ------------------------------------------------------------------ attestation
    async def attest(self, base_url: str) -> Attestation:
        """``GET {base_url}/models`` and the driver's checks; never raises."""
        if not self.target.attested:
            return Attestation("unattested", base_url, model_id=self.target.model, message="unattested session (--policy-url/--policy-model): the served checkpoint is not verified")
        url = f"{base_url}/models"
        try:
            resp = await self._http.get(url, timeout=httpx.Timeout(self.config.connect_timeout, read=30.0))
        except Exception as exc:  # noqa: BLE001 - any transport failure refuses the call, with its message
            err = self._describe_exc(exc, url)
            return Attestation("refused", base_url, field="connection", message=f"attestation failed: {err.message}")
        if resp.status_code != 200:
            msg, _, _ = _error_from_body(resp.content)
            return Attestation("refused", base_url, field="http", message=self._scrub(f"attestation failed: GET /models returned HTTP {resp.status_code}: {msg}"))
        try:
            models = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            return Attestation("refused", base_url, field="data", message="attestation failed: GET /models did not return JSON")
        return validate_live_model(self.target, models, base_url)

    async def waiting_requests(self, base_url: str) -> float:
        try:
            resp = await self._http.get(f"{server_root(base_url)}/metrics", timeout=httpx.Timeout(self.config.connect_timeout, read=10.0))
            if resp.status_code == 200:
                return parse_metrics(resp.text).get("waiting", 0.0)
        except (httpx.HTTPError, OSError, ValueError):  # no load figure: this replica is ranked last
            pass
        return math.inf

    async def select_replica(self) -> tuple[str | None, Attestation, list[Attestation]]:
        """Attest every replica; pick the attested one with the fewest waiting requests.

        Returns (base_url or None, the chosen/first-failing attestation, all attestations)."""
        urls = list(self.target.base_urls)
        atts = list(await asyncio.gather(*(self.attest(u) for u in urls)))
        ok = [a for a in atts if a.ok]
        if not ok:
            return None, atts[0], atts
        if len(ok) == 1:
            return ok[0].base_url, ok[0], atts
        waits = await asyncio.gather(*(self.waiting_requests(a.base_url) for a in ok))
        best = min(range(len(ok)), key=lambda i: (waits[i], i))
        return ok[best].base_url, ok[best], atts

    # ------------------------------------------------------------------ streaming
    async def begin(self, body: dict[str, Any]) -> tuple[str | None, dict[str, Any], list[PolicyEvent]]:
        """Attest (every call) and choose the replica.

        Returns (base_url or None when refused, the body to send, the opening events:
        ``Attested`` then ``Started`` or a ``StreamError("attestation")``). Then stream
        with :meth:`stream_chat`; :meth:`continuation` does both."""
        base_url, att, atts = await self.select_replica()
        opening: list[PolicyEvent] = [Attested(att)]
        if base_url is None:
            detail = "; ".join(f"{a.base_url}: {a.message}" for a in atts) if len(atts) > 1 else att.message
            opening.append(StreamError("attestation", f"refused: {detail}"))
            return None, body, opening
        body = {**body, "model": self.target.model}
        opening.append(Started(base_url=base_url, model=self.target.model, attested=self.target.attested, at=time.monotonic()))
        return base_url, body, opening

    async def continuation(self, body: dict[str, Any]) -> AsyncGenerator[PolicyEvent, None]:
        """Attest (every call), then stream ``/chat/completions`` from the chosen replica."""
        base_url, body, opening = await self.begin(body)
        for ev in opening:
            yield ev
        if base_url is None:
            return
        async with aclosing(self.stream_chat(base_url, body)) as events:
            async for ev in events:
                yield ev

    async def stream_chat(self, base_url: str, body: dict[str, Any]) -> AsyncGenerator[PolicyEvent, None]:
        """POST a streaming chat request and yield typed events until ``[DONE]``,
        an error, or the end of the connection. Never raises for server faults
        (yields a StreamError instead); cancellation propagates (and closes the response).
        Consecutive plain text chunks that arrived in one network read come as one
        :class:`Delta` (all their text and token ids, in order): see :meth:`stream_chat_batches`."""
        async with aclosing(self.stream_chat_batches(base_url, body)) as batches:
            async for batch in batches:
                for ev in batch:
                    yield ev

    async def stream_chat_batches(self, base_url: str, body: dict[str, Any]) -> AsyncGenerator[list[PolicyEvent], None]:
        """:meth:`stream_chat` one network read at a time: yields lists of events.

        A reader task pulls the body's chunks (httpx hands over one per HTTP chunk, i.e.
        one per SSE event) into a list while they arrive without waiting; this generator
        wakes once the reader has to wait for the network and decodes everything received
        so far in one go (:func:`decode_batch`). A slow stream therefore still gets every
        chunk as soon as it arrives; a fast one pays the per-event Python cost once per read.
        The last event of the last batch is ``Done`` or a ``StreamError``."""
        url = f"{base_url}/chat/completions"
        payload = orjson.dumps(body)
        trace = DirectBodyTrace()
        progress = StreamProgress(self.config, body, self.target.context_length)
        try:
            async with self._stream_http.stream(
                "POST", url, content=payload, headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
                extensions={"trace": trace} if self.config.direct_body else None,
            ) as resp:
                if resp.status_code != 200:
                    yield [await self._http_error(resp)]
                    return
                tap = trace.claimable(resp)
                if tap is not None:
                    self.probes.direct_stream()
                batches = self._direct_batches(tap, url, progress) if tap is not None else self._httpx_batches(resp, progress)
                async with aclosing(batches) as events_of_reads:
                    async for events in events_of_reads:
                        yield events
        except TimeoutError:
            yield [progress.failure(url)]
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every stream failure reaches the caller as a StreamError
            yield [self._describe_exc(exc, url)]

    async def _http_error(self, resp: httpx.Response) -> StreamError:
        """The error event of a non-200 answer (its body's message, scrubbed of the API key)."""
        raw = await resp.aread()
        msg, typ, _ = _error_from_body(raw)
        return StreamError("http", self._scrub(f"HTTP {resp.status_code}: {msg}"), status=resp.status_code, error_type=typ)

    async def _httpx_batches(self, resp: httpx.Response, progress: StreamProgress) -> AsyncGenerator[list[PolicyEvent], None]:
        """The body read through httpx: a reader task pulls chunks while they arrive; each
        wake-up decodes everything received so far. Each wait for the network ends (a
        ``TimeoutError`` for the caller) when the next complete event is due
        (:class:`StreamProgress`)."""
        decoder = SSEDecoder(self.config.max_event_bytes)
        watch = ChunkWatch()
        loop = asyncio.get_running_loop()
        reader = _ChunkReader(_body_chunks(resp))
        task = asyncio.create_task(reader.run())
        try:
            due = loop.time() + progress.remaining()
            while True:
                # the deadline covers the wait only: a timeout that fired while the
                # consumer holds a batch (outside this generator) would cancel it instead
                async with asyncio.timeout_at(due):
                    await reader.wait()
                finished = reader.finished  # before take(): nothing arrives after it
                got = reader.take()
                events, ended, complete = _decode(decoder, got[0] if len(got) == 1 else b"".join(got), watch) if got else ([], False, False)
                if complete:
                    progress.event()
                    due = loop.time() + progress.remaining()
                if events:
                    yield events
                if ended:
                    return
                if finished:
                    break
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if reader.error is not None:
            raise reader.error
        events, ended, _ = _decode(decoder, None)
        if events:
            yield events
        if not ended:
            yield [StreamError("disconnect", "the stream ended without [DONE] (connection closed by the server)")]

    async def _direct_batches(self, tap: BodyTap, url: str, progress: StreamProgress) -> AsyncGenerator[list[PolicyEvent], None]:
        """The body read straight from the connection (``direct_body.py``): one batch of
        events per network read. Same events and errors as the httpx path: each read
        waits at most until the next complete event is due (:class:`StreamProgress`)."""
        chunked = ChunkedDecoder()
        decoder = SSEDecoder(self.config.max_event_bytes)
        watch = ChunkWatch()
        data = tap.claim()
        try:
            while True:
                payload = chunked.feed(data)
                if payload:
                    events, ended, complete = _decode(decoder, payload, watch)
                    if complete:
                        progress.event()
                    if events:
                        yield events
                    if ended:
                        return
                if chunked.done:
                    break
                wait = progress.remaining()
                if wait <= 0:
                    yield [progress.failure(url)]
                    return
                data = await tap.read_body(DIRECT_READ_BYTES, wait)
                if not data:
                    break  # EOF before the last chunk: the server went away
        except httpcore.TimeoutException:
            yield [progress.failure(url)]
            return
        except httpcore.NetworkError as exc:
            yield [StreamError("disconnect", f"the server closed the connection mid-stream ({type(exc).__name__}: {self._scrub(str(exc) or 'read failed')})")]
            return
        except ChunkedError as exc:
            yield [StreamError("malformed", f"the response body is not valid chunked encoding: {exc}")]
            return
        events, ended, _ = _decode(decoder, None)
        if events:
            yield events
        if ended:
            return
        if chunked.done:
            yield [StreamError("disconnect", "the stream ended without [DONE] (the server closed the response)")]
        else:
            yield [StreamError("disconnect", "the server closed the connection mid-stream (the body ended before its last chunk)")]

    # ------------------------------------------------------------------ tokenizer endpoints
    async def _json(self, method: str, url: str, body: Any = None) -> Any:
        """GET/POST JSON; raises ``PolicyHTTPError`` (message scrubbed) on any failure."""
        try:
            if method == "GET":
                resp = await self._http.get(url, timeout=httpx.Timeout(self.config.connect_timeout, read=60.0))
            else:
                resp = await self._http.post(url, content=orjson.dumps(body), headers={"Content-Type": "application/json"},
                                             timeout=httpx.Timeout(self.config.connect_timeout, read=60.0))
        except Exception as exc:  # noqa: BLE001 - re-raised as PolicyHTTPError with a readable message
            raise PolicyHTTPError(self._describe_exc(exc, url).message) from None
        if resp.status_code != 200:
            msg, _, _ = _error_from_body(resp.content)
            raise PolicyHTTPError(self._scrub(f"{url}: HTTP {resp.status_code}: {msg}"), status=resp.status_code)
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise PolicyHTTPError(f"{url}: the response is not JSON") from None

    async def detokenize(self, token_ids: list[int], base_url: str | None = None) -> str:
        """``POST /detokenize`` (no /v1 prefix) on the first replica (or ``base_url``)."""
        url = f"{server_root(base_url or self.target.base_urls[0])}/detokenize"
        data = await self._json("POST", url, {"model": self.target.model, "tokens": list(token_ids)})
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
            raise PolicyHTTPError(f"{url}: unexpected response shape")
        prompt: str = data["prompt"]
        return prompt

    async def tokenize(self, *, prompt: str | None = None, messages: list[Any] | None = None, base_url: str | None = None, **extra: Any) -> list[int]:
        """``POST /tokenize`` (text or chat form). Note: before vLLM 0.16 images are NOT expanded."""
        url = f"{server_root(base_url or self.target.base_urls[0])}/tokenize"
        body: dict[str, Any] = {"model": self.target.model, **extra}
        if messages is not None:
            body["messages"] = messages
        else:
            body["prompt"] = prompt or ""
        data = await self._json("POST", url, body)
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise PolicyHTTPError(f"{url}: unexpected response shape")
        return [t for t in tokens if isinstance(t, int)]

    async def tokenizer_info(self, base_url: str | None = None) -> dict[str, Any]:
        """``GET /tokenizer_info`` (needs ``--enable-tokenizer-info-endpoint``)."""
        url = f"{server_root(base_url or self.target.base_urls[0])}/tokenizer_info"
        data = await self._json("GET", url)
        if not isinstance(data, dict):
            raise PolicyHTTPError(f"{url}: unexpected response shape")
        return data

    # ------------------------------------------------------------------ status
    async def status(self, base_url: str) -> ServerStatus:
        """One poll of /health, /version, /v1/models and /metrics (for the status bar)."""
        st = ServerStatus(base_url=base_url)
        root = server_root(base_url)
        short = httpx.Timeout(self.config.connect_timeout, read=5.0)

        async def get(path: str) -> httpx.Response | None:
            try:
                return await self._http.get(path, timeout=short)
            except Exception as exc:  # noqa: BLE001 - shown in the status line
                st.error = self._describe_exc(exc, path).message
                return None

        health, version, models, metrics = await asyncio.gather(
            get(f"{root}/health"), get(f"{root}/version"), get(f"{base_url}/models"), get(f"{root}/metrics")
        )
        if health is not None:
            st.reachable = True
            st.healthy = health.status_code == 200
        if version is not None and version.status_code == 200:
            try:
                v = orjson.loads(version.content)
                st.version = str(v.get("version")) if isinstance(v, dict) else None
            except orjson.JSONDecodeError:
                pass
        if models is not None and models.status_code == 200:
            try:
                data = orjson.loads(models.content).get("data") or []
                row = next((r for r in data if isinstance(r, dict) and r.get("id") == self.target.model), data[0] if data else None)
                if isinstance(row, dict):
                    st.alias, st.root = row.get("id"), row.get("root")
                    st.max_model_len = row.get("max_model_len") if isinstance(row.get("max_model_len"), int) else None
            except (orjson.JSONDecodeError, AttributeError):
                pass
        elif models is not None and st.error is None:
            st.error = f"GET /models: HTTP {models.status_code}"
        if metrics is not None and metrics.status_code == 200:
            m = parse_metrics(metrics.text)
            st.running, st.waiting, st.kv_cache = m.get("running"), m.get("waiting"), m.get("kv_cache")
        return st

    async def poll_status(self, interval: float | None = None) -> AsyncGenerator[list[ServerStatus], None]:
        """Yield the status of every replica every ``interval`` seconds (forever)."""
        every = interval or self.config.status_interval
        while True:
            yield list(await asyncio.gather(*(self.status(u) for u in self.target.base_urls)))
            await asyncio.sleep(every)


def _decode(decoder: SSEDecoder, data: bytes | None, watch: ChunkWatch | None = None) -> tuple[list[PolicyEvent], bool, bool]:
    """The events in ``data`` (``None``: the body ended), whether the stream ended with
    them (``[DONE]`` or an error event), and whether any SSE event completed (progress).
    An event past the decoder's size limit ends the stream with a ``malformed`` error."""
    try:
        datas = decoder.feed(data) if data is not None else decoder.close()
    except SSEOverflow as exc:
        return [StreamError("malformed", f"{exc}: the server sent an endless line; stopped")], True, False
    if not datas:
        return [], False, False
    events, ended = decode_batch(datas, watch)
    return events, ended, True


def _body_chunks(resp: httpx.Response) -> AsyncIterable[bytes]:
    """The response body's bytes. An SSE response is normally not content-encoded: then
    reading its byte stream directly skips httpx's per-chunk decoder and chunker layers
    (aiter_bytes -> aiter_raw -> stream; one hop per token)."""
    encoding = resp.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return resp.aiter_bytes()
    if isinstance(resp.stream, httpx.AsyncByteStream):
        return resp.stream
    return resp.aiter_raw()  # pragma: no cover - an AsyncClient response always has an async stream


class _ChunkReader:
    """Pulls body chunks into a list in its own task; the consumer wakes when the
    reader has to wait for the network (or the body ended / failed)."""

    __slots__ = ("_chunks", "_items", "_event", "finished", "error")

    def __init__(self, chunks: Any) -> None:
        self._chunks = chunks
        self._items: list[bytes] = []
        self._event = asyncio.Event()
        self.finished = False
        self.error: Exception | None = None

    async def run(self) -> None:
        event = self._event
        try:
            async for raw in self._chunks:
                self._items.append(raw)
                if not event.is_set():
                    event.set()
        except asyncio.CancelledError:
            pass  # the consumer stopped reading (done, error, cancel): the response is closed next
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which maps it to a StreamError
            self.error = exc
        finally:
            self.finished = True
            event.set()

    async def wait(self) -> None:
        event = self._event
        if not event.is_set():
            await event.wait()
        event.clear()

    def take(self) -> list[bytes]:
        items = self._items
        if not items:
            return items
        self._items = []
        return items


class PolicyHTTPError(Exception):
    """A non-streaming policy-server call failed (message is safe to show: no secrets)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _error_from_body(raw: bytes) -> tuple[str, str | None, int | None]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw[:300].decode("utf-8", errors="replace").strip()
        return (text or "(empty body)"), None, None
    return error_message_of(obj)
