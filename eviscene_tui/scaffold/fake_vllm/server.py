"""A vLLM-compatible fake server (Starlette) for demos and tests.

Two personalities (``vllm-protocol.md`` §7):

- ``v0.11`` (vLLM 0.11.2, the Qwen3-VL env): ``reasoning_content`` in deltas and
  messages, the 151k Qwen3-VL id family, the model emits ``<think>`` itself,
  held-back tool-parser chunks are *dropped* with their token ids (bug #27482),
  ``/tokenize`` counts one pad per image, ``/metrics`` exports both
  ``kv_cache_usage_perc`` and the deprecated ``gpu_cache_usage_perc``;
- ``nightly`` (the Qwen3.5 env): ``reasoning``, the 248k Qwen3.5 family, the
  template puts ``<think>\\n`` in the prompt so only ``</think>`` is generated,
  held-back chunks are sent as ``delta: {}`` with their ids.

Both use the nested error body ``{"error":{message,type,param,code}}`` (≥ 0.10.1);
``error_shape: "flat"`` in a scenario gives the < 0.10.1 shape. ``--api-key``
guards only ``/v1/*`` with ``401 {"error":"Unauthorized"}``.

Scenario keys (JSON object; all optional; examples in ``fake_vllm/scenarios/``):

=========================  ==================================================================
``reasoning``/``content``  scripted text; ``content_tokens``/``reasoning_tokens``: filler of N ids
``tool_calls``             ``[{"name": str, "arguments": {...}}]``
``delay_first_token``      seconds before the role chunk (queue + prefill)
``tokens_per_second``      pacing of generated ids (``null`` = as fast as possible)
``tokens_per_chunk``       ids per chunk (multi-token chunks)
``disconnect_after_tokens``  the server drops the connection after N ids
``error_after_tokens``     an error event then ``[DONE]`` after N ids (``error_message``,
                           ``error_type``, ``error_code``)
``malformed_after_tokens``  a malformed ``data:`` line after N ids, then the stream goes on
``stall_after_tokens``     stop sending after N ids for ``stall_seconds`` (default 3600)
``http_error``             400 (context too long) | 404 | 500 | 501 or ``{"status":…, "message":…}``
``wrong_root``             ``/v1/models`` reports this root
``served_max_model_len``   ``/v1/models`` reports this max_model_len
``duplicate_alias``        ``/v1/models`` lists the alias twice
``metrics_waiting``/``metrics_running``/``kv_cache_usage``  ``/metrics`` values
``health_status``          status code of ``/health`` (503 = dead engine)
``sse_style``              list of ``crlf``, ``cr``, ``nospace``, ``comments``
``error_shape``            ``nested`` (default) | ``flat``
``finish_delay``           seconds to wait before the final chunk
``thinking``               server default for ``enable_thinking`` (default: the profile's
                           ``thinking_enabled``, else true); a request's ``chat_template_kwargs`` wins
=========================  ==================================================================
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Send

from eviscene_tui.scaffold.fake_vllm.script import ChunkPlan, build_segments, plan_chunks, template_prompt_ids
from eviscene_tui.scaffold.tiny import decode, encode, tokenizer_config

PERSONALITIES = ("v0.11", "nightly")
VERSIONS = {"v0.11": "0.11.2", "nightly": "0.17.1rc1.dev42+g0123abcd"}

DEFAULT_SCENARIO: dict[str, Any] = {
    "reasoning": (
        "The claim says the photo shows the flood in the city on the date given. "
        "I should verify the source with a reverse image search before the verdict."
    ),
    "content": (
        "The hint says to open the oldest copy first, so I will not search the event itself yet. "
        "I will run a reverse image search to check where the photo first appeared, then compare "
        "the date of that first publication with the date in the claim before I judge."
    ),
    "tool_calls": [{"name": "reverse_image_search", "arguments": {"query": "flooded street photo source"}}],
    "tokens_per_second": 400,
    "tokens_per_chunk": 1,
}

DEFAULT_PROFILE: dict[str, Any] = {
    "schema_version": "ifv-qwen-serving-profile-v1",
    "profile_id": "ifv-qwen3.5-9b",
    "model_path": "/models/fake/Qwen3.5-9B",
    "engine_model_path": "/models/fake/Qwen3.5-9B",
    "context_length": 131072,
}


class JSONResp(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


@dataclass
class FakeRecorder:
    """What the server saw: tests assert on it."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    disconnects: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    aborts: list[str] = field(default_factory=list)  # scripted server-side drops
    running: int = 0

    def last_body(self, path: str = "/v1/chat/completions") -> dict[str, Any] | None:
        for r in reversed(self.requests):
            if r["path"] == path:
                return r["body"]
        return None


@dataclass
class FakeConfig:
    personality: str = "nightly"
    api_key: str | None = None
    profile: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PROFILE))
    scenario: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_SCENARIO))
    family: str | None = None  # default from personality
    started: float = field(default_factory=time.time)
    # tests: chat requests numbered ``hold_from`` and later (from 0) wait, before they are
    # answered, until ``hold`` is set (a request the test keeps in flight while it looks)
    hold: threading.Event | None = None
    hold_from: int = 0

    @property
    def token_family(self) -> str:
        return self.family or ("qwen2_5_vl" if self.personality == "v0.11" else "qwen3_5")

    @property
    def default_thinking(self) -> bool:
        """Like ``--default-chat-template-kwargs {"enable_thinking": ...}``: from the
        scenario's ``thinking``, else the profile's ``thinking_enabled``, else on."""
        v = self.scenario.get("thinking")
        if v is None:
            v = self.profile.get("thinking_enabled")
        return True if v is None else bool(v)

    @property
    def alias(self) -> str:
        return str(self.profile.get("profile_id") or "fake-model")

    @property
    def root(self) -> str:
        return str(self.scenario.get("wrong_root") or self.profile.get("engine_model_path") or self.profile.get("model_path") or "/models/fake")

    @property
    def max_model_len(self) -> int:
        v = self.scenario.get("served_max_model_len")
        return int(v if v is not None else self.profile.get("context_length") or 131072)


def load_scenario(path: str | Path | None) -> dict[str, Any]:
    if not path:
        return dict(DEFAULT_SCENARIO)
    data = orjson.loads(Path(path).read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"scenario {path} is not a JSON object")
    merged = dict(DEFAULT_SCENARIO)
    merged.update(data)
    return merged


def _error_body(cfg: FakeConfig, status: int, message: str, type_: str, param: str | None = None) -> dict[str, Any]:
    inner = {"message": message, "type": type_, "param": param, "code": status}
    if cfg.scenario.get("error_shape") == "flat":
        return {"object": "error", **inner}
    return {"error": inner}


_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError", 501: "NotImplementedError"}


def _sse(obj: Any, style: list[str]) -> bytes:
    """One server-sent event in the scenario's ``sse_style`` (line ends, spacing, comments)."""
    eol = b"\r\n" if "crlf" in style else (b"\r" if "cr" in style else b"\n")
    prefix = b"data:" if "nospace" in style else b"data: "
    payload = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    out = prefix + payload + eol + eol
    if "comments" in style:
        out = b": ping" + eol + out
    return out


class _ClosingStream(StreamingResponse):
    """A streaming response that closes its body generator when the stream ends or the
    client goes away. Starlette lets the send's error propagate and leaves the generator to
    be finalised by the garbage collector, so the recorder learned of a disconnect whenever
    a collection happened to run (seconds later on a loaded machine, or never in a test's
    wait); closing it here runs the generator's own ``finally`` at once."""

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            if isinstance(self.body_iterator, AsyncGenerator):
                await self.body_iterator.aclose()


async def _pace(rate: float | None, t0: float, sent: int, index: int) -> None:
    """Hold the stream to ``rate`` ids per second; yield to the loop every 64 chunks."""
    if rate:
        ahead = t0 + sent / rate - time.monotonic()
        if ahead > 0.002:
            await asyncio.sleep(ahead)
            return
    if index % 64 == 63:
        await asyncio.sleep(0)


async def _not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": "Not Found"}, status_code=404)


@dataclass
class _ChatPlan:
    """Everything one chat completion sends, decided before the first byte."""

    body: dict[str, Any]
    scen: dict[str, Any]
    family: str
    prompt_ids: list[int]
    chunks: list[ChunkPlan]
    total: int
    finish: str
    request_id: str
    reasoning_key: str
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def cid(self) -> str:
        return f"chatcmpl-{self.request_id}"

    @property
    def want_ids(self) -> bool:
        return bool(self.body.get("return_token_ids"))

    @property
    def style(self) -> list[str]:
        return list(self.scen.get("sse_style") or [])

    @property
    def usage(self) -> dict[str, int]:
        n = len(self.prompt_ids)
        return {"prompt_tokens": n, "total_tokens": n + self.total, "completion_tokens": self.total}

    def logprobs(self, ids: list[int]) -> dict[str, Any] | None:
        """Deterministic logprobs (and ``top_logprobs`` alternatives) for ``ids``, if asked."""
        if not self.body.get("logprobs"):
            return None
        top_k = int(self.body.get("top_logprobs") or 0)
        as_ids = bool(self.body.get("return_tokens_as_token_ids"))
        fam = self.family
        entries = []
        for tid in ids:
            tok = f"token_id:{tid}" if as_ids else decode([tid], fam)
            lp = -round(((tid * 2654435761) % 1000) / 400.0, 4)
            top = [
                {"token": f"token_id:{tid + j}" if as_ids else decode([tid + j], fam) if j == 0 else f"alt{j}", "logprob": lp - j * 0.5, "bytes": None}
                for j in range(top_k)
            ]
            entries.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": top})
        return {"content": entries}


@dataclass
class _Faults:
    """The scenario's scripted stream faults, each due once ``sent`` ids went out."""

    disconnect: int | None
    error: int | None
    malformed: int | None
    stall: int | None

    @classmethod
    def of(cls, scen: dict[str, Any]) -> _Faults:
        def at(key: str) -> int | None:
            value = scen.get(key)
            return None if value is None else int(value)

        return cls(at("disconnect_after_tokens"), at("error_after_tokens"), at("malformed_after_tokens"), at("stall_after_tokens"))

    def malformed_due(self, sent: int) -> bool:
        if self.malformed is not None and sent >= self.malformed:
            self.malformed = None  # once
            return True
        return False

    def stall_due(self, sent: int) -> bool:
        if self.stall is not None and sent >= self.stall:
            self.stall = None  # once
            return True
        return False


class _Endpoints:
    """The server's endpoints over one config and the recorder tests read."""

    def __init__(self, cfg: FakeConfig, rec: FakeRecorder) -> None:
        self.cfg = cfg
        self.rec = rec
        self.chats = 0  # chat requests planned so far

    async def _held(self) -> None:
        """Wait while the test holds this request (``FakeConfig.hold``)."""
        number, self.chats = self.chats, self.chats + 1
        hold = self.cfg.hold
        if hold is not None and number >= self.cfg.hold_from and not hold.is_set():
            await asyncio.to_thread(hold.wait)

    # ------------------------------------------------------------------ shared checks
    def err(self, status: int, message: str, param: str | None = None) -> Response:
        body = _error_body(self.cfg, status, message, _TYPES.get(status, "InternalServerError"), param)
        return JSONResp(body, status_code=status)

    def unauthorized(self, request: Request) -> Response | None:
        key = self.cfg.api_key
        if key and request.url.path.startswith("/v1/") and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResp({"error": "Unauthorized"}, status_code=401)
        return None

    async def read_body(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        """(the JSON object, None), or ({}, the 400 response to send)."""
        raw = await request.body()
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError as exc:
            return {}, self.err(400, f"Invalid JSON body: {exc.msg}")
        if not isinstance(body, dict):
            return {}, self.err(400, "Request body must be a JSON object")
        self.rec.requests.append({"path": request.url.path, "body": body, "at": time.time()})
        return body, None

    def forced_http_error(self) -> Response | None:
        cfg = self.cfg
        he = cfg.scenario.get("http_error")
        if not he:
            return None
        status = he.get("status") if isinstance(he, dict) else int(he)
        message = he.get("message") if isinstance(he, dict) else None
        if status == 400:
            return self.err(400, message or f"This model's maximum context length is {cfg.max_model_len} tokens. However, you requested {cfg.max_model_len + 1024} tokens in the messages. Please reduce the length of the messages.")
        if status == 404:
            return self.err(404, message or "The model `unknown` does not exist.", "model")
        return self.err(int(status or 500), message or "EngineCore encountered an issue. See stack trace for the root cause.")

    def check_model(self, body: dict[str, Any]) -> Response | None:
        model = body.get("model")
        if model is not None and model != self.cfg.alias:
            return self.err(404, f"The model `{model}` does not exist.", "model")
        return None

    async def generation_body(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        """The checks every generation endpoint makes, in order: auth, JSON body, model, forced error."""
        bad = self.unauthorized(request)
        if bad:
            return {}, bad
        body, bad = await self.read_body(request)
        if bad or body is None:
            return {}, bad
        return body, self.check_model(body) or self.forced_http_error()

    # ------------------------------------------------------------------ status endpoints
    async def health(self, request: Request) -> Response:
        status = int(self.cfg.scenario.get("health_status") or 200)
        return Response(b"", status_code=status)

    async def version(self, request: Request) -> Response:
        return JSONResp({"version": VERSIONS.get(self.cfg.personality, "0.0.0")})

    async def metrics(self, request: Request) -> Response:
        cfg, rec = self.cfg, self.rec
        m = cfg.alias
        forced_running = cfg.scenario.get("metrics_running")
        running = rec.running if forced_running is None else int(forced_running)
        waiting = int(cfg.scenario.get("metrics_waiting") or 0)
        forced_kv = cfg.scenario.get("kv_cache_usage")
        kv = float(forced_kv) if forced_kv is not None else min(1.0, 0.05 * running)
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f'vllm:num_requests_running{{engine="0",model_name="{m}"}} {float(running)}',
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f'vllm:num_requests_waiting{{engine="0",model_name="{m}"}} {float(waiting)}',
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="{m}"}} {kv}',
        ]
        if cfg.personality == "v0.11":
            lines += [
                "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:gpu_cache_usage_perc gauge",
                f'vllm:gpu_cache_usage_perc{{engine="0",model_name="{m}"}} {kv}',
            ]
        lines += [
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{m}"}} {float(len(rec.completed))}',
        ]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4; charset=utf-8")

    async def models(self, request: Request) -> Response:
        cfg = self.cfg
        self.rec.requests.append({"path": "/v1/models", "body": None, "at": time.time()})
        bad = self.unauthorized(request)
        if bad:
            return bad
        row = {
            "id": cfg.alias,
            "object": "model",
            "created": int(cfg.started),
            "owned_by": "vllm",
            "root": cfg.root,
            "parent": None,
            "max_model_len": cfg.max_model_len,
            "permission": [
                {
                    "id": "modelperm-fake0001", "object": "model_permission", "created": int(cfg.started),
                    "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                    "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                    "organization": "*", "group": None, "is_blocking": False,
                }
            ],
        }
        data = [row, dict(row)] if cfg.scenario.get("duplicate_alias") else [row]
        return JSONResp({"object": "list", "data": data})

    async def tokenizer_info(self, request: Request) -> Response:
        return JSONResp(tokenizer_config(self.cfg.token_family, context_length=self.cfg.max_model_len))

    async def tokenize(self, request: Request) -> Response:
        body, bad = await self.read_body(request)
        if bad:
            return bad
        cfg = self.cfg
        fam = cfg.token_family
        if "messages" in body:
            if body.get("add_generation_prompt", True) and body.get("continue_final_message"):
                return self.err(400, "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
            kwargs = body.get("chat_template_kwargs") or {}
            ids = template_prompt_ids(
                body["messages"], fam, tools=body.get("tools"),
                add_generation_prompt=bool(body.get("add_generation_prompt", True)),
                prompt_think=cfg.personality == "nightly",
                thinking=bool(kwargs.get("enable_thinking", True)),
                expand_images=False,  # /tokenize did not run the mm processor before 0.16 (§2.4)
            )
        elif "prompt" in body:
            ids = encode(str(body["prompt"]), fam)
        else:
            return self.err(400, "Either `prompt` or `messages` is required.")
        strs = None
        if body.get("return_token_strs"):
            strs = [decode([i], fam) for i in ids]
        return JSONResp({"count": len(ids), "max_model_len": cfg.max_model_len, "tokens": ids, "token_strs": strs})

    async def detokenize(self, request: Request) -> Response:
        body, bad = await self.read_body(request)
        if bad:
            return bad
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return self.err(400, "`tokens` must be a list of integers")
        return JSONResp({"prompt": decode(tokens, self.cfg.token_family)})

    # ------------------------------------------------------------------ chat completions
    async def chat(self, request: Request) -> Response:
        body, bad = await self.generation_body(request)
        if bad:
            return bad
        planned = self._plan_chat(body)
        if isinstance(planned, Response):
            return planned
        await self._held()
        if not body.get("stream"):
            return await self._chat_message(planned)
        return _ClosingStream(self._chat_stream(planned), media_type="text/event-stream")

    def _plan_chat(self, body: dict[str, Any]) -> _ChatPlan | Response:
        """The request checked (a 400 response when vLLM would refuse it) and its
        completion scripted: prompt ids as the template gives them, the chunks to send."""
        cfg = self.cfg
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self.err(400, "1 validation error: messages: Field required")
        if body.get("stream_options") is not None and not body.get("stream"):
            return self.err(400, "Stream options can only be defined when `stream=True`.")
        fam = cfg.token_family
        nightly = cfg.personality == "nightly"
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = bool(kwargs.get("enable_thinking", cfg.default_thinking))
        prompt_ids = template_prompt_ids(messages, fam, tools=body.get("tools"), prompt_think=nightly, thinking=thinking)
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        if len(prompt_ids) + (max_tokens or 0) > cfg.max_model_len or len(prompt_ids) >= cfg.max_model_len:
            return self.err(400, f"This model's maximum context length is {cfg.max_model_len} tokens. However, your request has {len(prompt_ids)} input tokens. Please reduce the length of the input messages.")
        scen = self._chat_scenario(body, thinking=thinking)
        request_id = str(body.get("request_id") or uuid.uuid4().hex[:16])
        segs = build_segments(scen, fam, prompt_think=nightly)
        chunks, total, finish = plan_chunks(
            segs, fam, tokens_per_chunk=int(scen.get("tokens_per_chunk") or 1),
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            drop_held_back=not nightly, request_id=request_id,
        )
        return _ChatPlan(body=body, scen=scen, family=fam, prompt_ids=prompt_ids, chunks=chunks, total=total, finish=finish,
                         request_id=request_id, reasoning_key="reasoning" if nightly else "reasoning_content")

    def _chat_scenario(self, body: dict[str, Any], *, thinking: bool) -> dict[str, Any]:
        """The scenario for this request: no reasoning with thinking off, no tool calls
        when the request offers no tools."""
        scen = dict(self.cfg.scenario)
        if not thinking:
            scen["reasoning"] = ""
            scen.pop("reasoning_tokens", None)
        if not body.get("tools"):
            scen["tool_calls"] = []
        return scen

    async def _chat_stream(self, p: _ChatPlan) -> AsyncIterator[bytes]:
        """The SSE stream: the role chunk, one chunk per planned chunk (with the scripted
        faults), the usage chunk when asked, ``[DONE]``; the recorder learns how it ended."""
        rec, style = self.rec, p.style
        rec.running += 1
        finished = False
        try:
            delay = float(p.scen.get("delay_first_token") or 0)
            if delay:
                await asyncio.sleep(delay)
            yield _sse(self._role_chunk(p), style)
            rate = float(p.scen["tokens_per_second"]) if p.scen.get("tokens_per_second") else None
            faults = _Faults.of(p.scen)
            t0 = time.monotonic()
            sent = 0
            for i, ch in enumerate(p.chunks):
                if faults.disconnect is not None and sent >= faults.disconnect:
                    raise ConnectionAbortedError("fake-vllm: scripted disconnect")
                if faults.error is not None and sent >= faults.error:
                    yield _sse(self._scripted_error(p.scen), style)
                    yield _sse(b"[DONE]", style)
                    finished = True
                    return
                if faults.malformed_due(sent):
                    yield _sse(b'{"id":"' + p.cid.encode() + b'","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tru', style)
                if faults.stall_due(sent):
                    await asyncio.sleep(float(p.scen.get("stall_seconds") or 3600))
                yield _sse(await self._delta_chunk(p, i, ch), style)
                sent += len(ch.token_ids)
                await _pace(rate, t0, sent, i)
            so = p.body.get("stream_options") or {}
            if so.get("include_usage", True) and p.body.get("stream_options") is not None:
                yield _sse({"id": p.cid, "object": "chat.completion.chunk", "created": p.created, "model": self.cfg.alias, "choices": [], "usage": p.usage}, style)
            yield _sse(b"[DONE]", style)
            finished = True
            rec.completed.append(p.request_id)
        except ConnectionAbortedError:
            rec.aborts.append(p.request_id)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            rec.disconnects.append(p.request_id)
            raise
        finally:
            rec.running -= 1
            if not finished and p.request_id not in rec.disconnects and p.request_id not in rec.aborts:
                rec.disconnects.append(p.request_id)

    def _role_chunk(self, p: _ChatPlan) -> dict[str, Any]:
        return {
            "id": p.cid, "object": "chat.completion.chunk", "created": p.created, "model": self.cfg.alias,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}],
            "prompt_token_ids": p.prompt_ids if p.want_ids else None,
        }

    def _scripted_error(self, scen: dict[str, Any]) -> dict[str, Any]:
        code = int(scen.get("error_code") or 500)
        message = str(scen.get("error_message") or "EngineCore encountered an issue during generation.")
        return _error_body(self.cfg, code, message, str(scen.get("error_type") or _TYPES.get(code, "InternalServerError")))

    async def _delta_chunk(self, p: _ChatPlan, index: int, ch: ChunkPlan) -> dict[str, Any]:
        """One ``chat.completion.chunk``; the last carries the finish reason (after the
        scenario's ``finish_delay``)."""
        delta: dict[str, Any] = {}
        if ch.reasoning:
            delta[p.reasoning_key] = ch.reasoning
        if ch.content:
            delta["content"] = ch.content
        if ch.tool_calls:
            delta["tool_calls"] = ch.tool_calls
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": p.logprobs(ch.token_ids), "finish_reason": None}
        if p.want_ids:
            choice["token_ids"] = ch.token_ids
        if index == len(p.chunks) - 1:
            if p.scen.get("finish_delay"):
                await asyncio.sleep(float(p.scen["finish_delay"]))
            choice["finish_reason"] = p.finish
            choice["stop_reason"] = None
        return {"id": p.cid, "object": "chat.completion.chunk", "created": p.created, "model": self.cfg.alias, "choices": [choice]}

    async def _chat_message(self, p: _ChatPlan) -> Response:
        """The non-streamed answer: the planned chunks joined into one message."""
        delay = float(p.scen.get("delay_first_token") or 0)
        if delay:
            await asyncio.sleep(delay)
        chunks = p.chunks
        ids = [i for c in chunks for i in c.token_ids]
        reasoning = "".join(c.reasoning for c in chunks)
        content = "".join(c.content for c in chunks)
        calls = _joined_tool_calls(chunks)
        message: dict[str, Any] = {"role": "assistant", "content": content or None, p.reasoning_key: reasoning or None}
        if calls or self.cfg.personality == "v0.11":
            message["tool_calls"] = [calls[k] for k in sorted(calls)]
        choice = {"index": 0, "message": message, "logprobs": p.logprobs(ids), "finish_reason": p.finish, "stop_reason": None, "token_ids": ids if p.want_ids else None}
        return JSONResp({
            "id": p.cid, "object": "chat.completion", "created": p.created, "model": self.cfg.alias, "choices": [choice],
            "usage": p.usage, "prompt_logprobs": None, "prompt_token_ids": p.prompt_ids if p.want_ids else None, "kv_transfer_params": None,
        })

    # ------------------------------------------------------------------ text completions
    async def completions(self, request: Request) -> Response:
        body, bad = await self.generation_body(request)
        if bad:
            return bad
        cfg = self.cfg
        fam = cfg.token_family
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt_ids = encode(prompt, fam)
        elif isinstance(prompt, list) and all(isinstance(x, int) for x in prompt):
            prompt_ids = list(prompt)
        else:
            return self.err(400, "`prompt` must be a string or a list of token ids")
        scen = {"content": cfg.scenario.get("content", ""), "content_tokens": cfg.scenario.get("content_tokens")}
        segs = build_segments(scen, fam, prompt_think=False)
        max_tokens = body.get("max_tokens", 16)
        chunks, total, finish = plan_chunks(segs, fam, tokens_per_chunk=int(cfg.scenario.get("tokens_per_chunk") or 1), max_tokens=max_tokens if isinstance(max_tokens, int) else None)
        want_ids = bool(body.get("return_token_ids"))
        cid, created = f"cmpl-{uuid.uuid4().hex[:16]}", int(time.time())
        usage = {"prompt_tokens": len(prompt_ids), "total_tokens": len(prompt_ids) + total, "completion_tokens": total}
        if not body.get("stream"):
            ids = [i for c in chunks for i in c.token_ids]
            return JSONResp({
                "id": cid, "object": "text_completion", "created": created, "model": cfg.alias,
                "choices": [{"index": 0, "text": "".join(c.content for c in chunks), "logprobs": None, "finish_reason": finish, "stop_reason": None,
                             "prompt_logprobs": None, "prompt_token_ids": prompt_ids if want_ids else None, "token_ids": ids if want_ids else None}],
                "usage": usage,
            })

        async def gen() -> AsyncIterator[bytes]:
            for i, ch in enumerate(chunks):
                yield _sse({
                    "id": cid, "object": "text_completion", "created": created, "model": cfg.alias,
                    "choices": [{"index": 0, "text": ch.content, "logprobs": None,
                                 "finish_reason": finish if i == len(chunks) - 1 else None, "stop_reason": None,
                                 "prompt_token_ids": (prompt_ids if want_ids else None) if i == 0 else None,
                                 "token_ids": ch.token_ids if want_ids else None}],
                    "usage": None,
                }, [])
            if body.get("stream_options") is not None:
                yield _sse({"id": cid, "object": "text_completion", "created": created, "model": cfg.alias, "choices": [], "usage": usage}, [])
            yield _sse(b"[DONE]", [])

        return _ClosingStream(gen(), media_type="text/event-stream")


def _joined_tool_calls(chunks: list[ChunkPlan]) -> dict[int, dict[str, Any]]:
    """The streamed tool-call fragments joined per call index (id, name, arguments)."""
    calls: dict[int, dict[str, Any]] = {}
    for c in chunks:
        for tc in c.tool_calls:
            cur = calls.setdefault(tc["index"], {"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
            if tc.get("id"):
                cur["id"] = tc["id"]
            if tc["function"].get("name"):
                cur["function"]["name"] = tc["function"]["name"]
            cur["function"]["arguments"] += tc["function"].get("arguments", "")
    return calls


def create_app(cfg: FakeConfig, recorder: FakeRecorder | None = None) -> Starlette:
    rec = recorder if recorder is not None else FakeRecorder()
    ep = _Endpoints(cfg, rec)
    routes = [
        Route("/health", ep.health, methods=["GET"]),
        Route("/ping", ep.health, methods=["GET", "POST"]),
        Route("/version", ep.version, methods=["GET"]),
        Route("/metrics", ep.metrics, methods=["GET"]),
        Route("/tokenizer_info", ep.tokenizer_info, methods=["GET"]),
        Route("/tokenize", ep.tokenize, methods=["POST"]),
        Route("/detokenize", ep.detokenize, methods=["POST"]),
        Route("/v1/models", ep.models, methods=["GET"]),
        Route("/v1/chat/completions", ep.chat, methods=["POST"]),
        Route("/v1/completions", ep.completions, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={404: _not_found})
    app.state.recorder = rec
    app.state.config = cfg
    return app
