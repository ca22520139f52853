"""A gate's live channel as the app reads it (Textual-free).

:class:`LiveTail` reads only what was appended to ``<sidecar>/live.jsonl`` since the
last read (a torn last line waits for the next read; a replaced file starts over).
:class:`LiveCalls` folds the records into the policy calls of the search, each with
its stream events (the ``delta`` records' events, back as typed policy events), so
the stream view shows a live continuation exactly as it shows one the app streams.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.gate import protocol as P
from eviscene_tui.policy.events import (
    Attestation,
    Attested,
    Delta,
    Done,
    ErrorKind,
    Finished,
    PolicyEvent,
    PromptTokens,
    Started,
    StreamError,
    TokenLogprob,
    TopLogprob,
    ToolCallDelta,
    Usage,
)

READ_LIMIT = 8 << 20  # at most this much of the channel per read (the rest next time)
ERROR_KINDS: tuple[ErrorKind, ...] = ("connect", "http", "sse_error", "disconnect", "timeout", "malformed", "attestation", "cancelled",
                                      "request")


class LiveTail:
    """The records appended to a live channel since the last :meth:`read`."""

    def __init__(self, path: Path, *, deltas: bool = True) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.deltas = deltas  # False: streamed delta records are skipped (a summary of the calls)

    def read(self) -> tuple[list[dict[str, Any]], bool]:
        """(new records, reset): ``reset`` when the file was replaced or truncated (start over)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return [], False
        try:
            st = os.fstat(fd)
            if not (st.st_mode & 0o170000 == 0o100000):  # a regular file only (a FIFO is never read)
                return [], False
            reset = self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset)
            if reset or self.inode is None:
                self.offset, self.inode = 0, st.st_ino
            if st.st_size <= self.offset:
                return [], reset
            data = os.pread(fd, min(st.st_size - self.offset, READ_LIMIT), self.offset)
        finally:
            os.close(fd)
        records, used = P.parse_live(data, deltas=self.deltas)
        self.offset += used
        return records, reset

    def read_all(self) -> list[dict[str, Any]]:
        """Every complete record from where the tail is to the end of the file."""
        out: list[dict[str, Any]] = []
        while True:
            records, _reset = self.read()
            if not records:
                return out
            out.extend(records)


def _int_list(value: Any) -> tuple[int, ...]:
    return tuple(v for v in value if type(v) is int) if isinstance(value, list) else ()


def _logprobs(value: Any) -> tuple[TokenLogprob, ...]:
    out = []
    for lp in value if isinstance(value, list) else []:
        if not isinstance(lp, dict) or not isinstance(lp.get("logprob"), (int, float)):
            continue
        top = tuple(TopLogprob(str(t.get("token") or ""), float(t.get("logprob") or 0.0), t.get("token_id") if type(t.get("token_id")) is int else None)
                    for t in lp.get("top") or [] if isinstance(t, dict))
        out.append(TokenLogprob(str(lp.get("token") or ""), float(lp["logprob"]), lp.get("token_id") if type(lp.get("token_id")) is int else None, top))
    return tuple(out)


def _n(value: Any) -> int | None:
    return value if type(value) is int else None


def event_of(doc: Any, at: float) -> PolicyEvent | None:
    """The policy event a ``delta`` record carries (``stream --json`` shape), or None.
    ``at``: this process's monotonic time for the record's wall-clock time."""
    if not isinstance(doc, dict):
        return None
    kind = doc.get("type")
    if kind == "delta":
        dk = doc.get("kind")
        return Delta(dk if dk in ("reasoning", "content", "tokens") else "content", str(doc.get("text") or ""),
                     _int_list(doc.get("token_ids")), _logprobs(doc.get("logprobs")))
    if kind == "tool_call":
        return ToolCallDelta(_n(doc.get("index")) or 0, doc.get("id") if isinstance(doc.get("id"), str) else None,
                             doc.get("name") if isinstance(doc.get("name"), str) else None, str(doc.get("arguments") or ""))
    if kind == "prompt_tokens":
        return PromptTokens(_int_list(doc.get("token_ids")))
    if kind == "started":
        return Started(str(doc.get("base_url") or ""), str(doc.get("model") or ""), bool(doc.get("attested")), at)
    if kind == "finish":
        reason = doc.get("stop_reason")
        return Finished(doc.get("finish_reason") if isinstance(doc.get("finish_reason"), str) else None,
                        reason if isinstance(reason, (int, str)) else None)
    if kind == "usage":
        return Usage(_n(doc.get("prompt_tokens")), _n(doc.get("completion_tokens")), _n(doc.get("total_tokens")))
    if kind == "done":
        return Done()
    if kind == "attestation":
        status = doc.get("status")
        return Attested(Attestation(status if status in ("attested", "refused", "unattested") else "refused", str(doc.get("base_url") or ""),
                                    message=str(doc.get("message") or "")))
    if kind == "error":
        ek = doc.get("kind")
        return StreamError(ek if ek in ERROR_KINDS else "malformed", str(doc.get("message") or ""), _n(doc.get("status")))
    return None


def _f(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class LiveCall:
    """One policy call of the channel: who made it, its events so far, how it ended."""

    call: str
    round: int | None
    hint: int | None
    stage: str
    streaming: bool
    started_at: float
    hint_text: str = ""
    hint_where: str = ""
    lifecycle_kind: str = ""
    messages: int | None = None
    events: list[PolicyEvent] = field(default_factory=list)
    status: str = "running"  # running | complete | failed (protocol.CallStatus)
    end: dict[str, Any] = field(default_factory=dict)  # the call_complete / call_failed record

    @property
    def finished_at(self) -> float | None:
        return _f(self.end.get("t")) if self.end else None

    @property
    def prompt_ids(self) -> tuple[int, ...] | None:
        value = self.end.get("prompt_token_ids")
        return _int_list(value) if isinstance(value, list) else None

    @property
    def completion_ids(self) -> tuple[int, ...] | None:
        value = self.end.get("completion_token_ids")
        return _int_list(value) if isinstance(value, list) else None

    def _count(self, key: str, ids: tuple[int, ...] | None) -> int | None:
        if ids:
            return len(ids)
        raw = self.end.get("usage")
        usage: dict[str, Any] = raw if isinstance(raw, dict) else {}
        for value in (self.end.get(key), usage.get(key)):
            if type(value) is int:
                return value
        return len(ids) if ids is not None else None

    @property
    def prompt_tokens(self) -> int | None:
        return self._count("prompt_tokens", self.prompt_ids)

    @property
    def completion_tokens(self) -> int | None:
        return self._count("completion_tokens", self.completion_ids)

    @property
    def finish_reason(self) -> str | None:
        return _s(self.end.get("finish_reason"))

    @property
    def request_id(self) -> str | None:
        return _s(self.end.get("request_id"))

    @property
    def error_type(self) -> str | None:
        return _s(self.end.get("error_type"))

    @property
    def duration_ms(self) -> float | None:
        """The driver's own ``llm_duration_ms``, else the time between the call's records."""
        own = _f(self.end.get("llm_duration_ms"))
        if own is not None:
            return own
        wall = _f(self.end.get("wall_ms"))
        if wall is not None:
            return wall
        done = self.finished_at
        return (done - self.started_at) * 1000.0 if done is not None and self.started_at else None

    @property
    def tool_calls(self) -> tuple[str, ...]:
        value = self.end.get("tool_calls")
        return tuple(str(v) for v in value if isinstance(v, str)) if isinstance(value, list) else ()

    @property
    def has_capture(self) -> bool:
        """A completed call whose ids the token inspector can show."""
        return self.status == "complete" and bool(self.prompt_ids or self.completion_ids)

    def as_row(self) -> dict[str, Any]:
        """The call as ``gate-status --json`` lists it (``policy_calls``)."""
        done = self.finished_at
        return {"round": self.round, "hint": self.hint, "stage": self.stage, "status": self.status,
                "started_at": P.utc_iso(self.started_at) if self.started_at else None,
                "finished_at": P.utc_iso(done) if done is not None else None,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "finish_reason": self.finish_reason, "request_id": self.request_id}


class LiveCalls:
    """The calls of a channel, folded from its records in order (``unavailable``: why
    the driver's live view cannot be given, when it said so)."""

    def __init__(self) -> None:
        self.calls: dict[str, LiveCall] = {}
        self.order: list[str] = []
        self.unavailable: str | None = None

    @property
    def latest(self) -> LiveCall | None:
        return self.calls[self.order[-1]] if self.order else None

    @property
    def latest_streaming(self) -> LiveCall | None:
        """The newest call that streams (the stream view's), if any."""
        for name in reversed(self.order):
            if self.calls[name].streaming:
                return self.calls[name]
        return None

    def in_order(self) -> list[LiveCall]:
        return [self.calls[name] for name in self.order]

    def add(self, records: list[dict[str, Any]]) -> list[tuple[LiveCall, list[PolicyEvent], bool]]:
        """Fold ``records``; per call touched: (call, its new events, whether it started here)."""
        touched: dict[str, tuple[LiveCall, list[PolicyEvent], bool]] = {}
        offset = time.monotonic() - time.time()
        for rec in records:
            name, kind = rec["call"], rec["type"]
            if kind == "live_unavailable":
                self.unavailable = str(rec.get("message") or "live view unavailable")
                continue
            call = self.calls.get(name)
            fresh = False
            if call is None or kind == "call_started":
                messages = rec.get("messages")
                call = LiveCall(name, _n(rec.get("round")), _n(rec.get("hint")), str(rec.get("stage") or ""), bool(rec.get("streaming")),
                                float(rec.get("t") or 0.0), str(rec.get("hint_text") or ""), str(rec.get("hint_where") or ""),
                                str(rec.get("lifecycle_kind") or ""), messages if type(messages) is int else None)
                if name not in self.calls:
                    self.order.append(name)
                self.calls[name] = call
                fresh = True
            entry = touched.get(name) or (call, [], fresh)
            if kind == "delta":
                ev = event_of(rec.get("event"), float(rec.get("t") or 0.0) + offset)
                if ev is not None:
                    call.events.append(ev)
                    entry[1].append(ev)
            elif kind in ("call_complete", "call_failed"):
                call.status = "complete" if kind == "call_complete" else "failed"
                call.end = rec
            touched[name] = (entry[0], entry[1], entry[2] or fresh)
        return list(touched.values())


def read_policy_calls(gate_dir: Path) -> LiveCalls:
    """The policy calls of a gate's live channel, read whole (its streamed deltas skipped):
    what ``gate-status`` lists. File I/O; a missing or unreadable channel has no calls."""
    calls = LiveCalls()
    calls.add(LiveTail(gate_dir / P.LIVE_FILE, deltas=False).read_all())
    return calls
