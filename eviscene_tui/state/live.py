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

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None

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
        records, used = P.parse_live(data)
        self.offset += used
        return records, reset


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
    events: list[PolicyEvent] = field(default_factory=list)
    status: str = "running"  # running | complete | failed
    end: dict[str, Any] = field(default_factory=dict)  # the call_complete / call_failed record


class LiveCalls:
    """The calls of a channel, folded from its records in order."""

    def __init__(self) -> None:
        self.calls: dict[str, LiveCall] = {}
        self.order: list[str] = []

    @property
    def latest(self) -> LiveCall | None:
        return self.calls[self.order[-1]] if self.order else None

    def add(self, records: list[dict[str, Any]]) -> list[tuple[LiveCall, list[PolicyEvent], bool]]:
        """Fold ``records``; per call touched: (call, its new events, whether it started here)."""
        touched: dict[str, tuple[LiveCall, list[PolicyEvent], bool]] = {}
        offset = time.monotonic() - time.time()
        for rec in records:
            name, kind = rec["call"], rec["type"]
            call = self.calls.get(name)
            fresh = False
            if call is None or kind == "call_started":
                call = LiveCall(name, _n(rec.get("round")), _n(rec.get("hint")), str(rec.get("stage") or ""), bool(rec.get("streaming")),
                                float(rec.get("t") or 0.0), str(rec.get("hint_text") or ""), str(rec.get("hint_where") or ""))
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
