"""A gate's live channel as the app reads it (Textual-free).

:class:`LiveTail` reads only what was appended to ``<sidecar>/live.jsonl`` since the
last read (a torn last line waits for the next read; a replaced file starts over).
:class:`LiveCalls` folds the records into the policy calls of the search, each with
its stream events (the ``delta`` records' events, back as typed policy events), so
the stream view shows a live continuation exactly as it shows one the app streams.

A fast stream is thousands of ``delta`` records a second, one token each. The tail's
worker thread does the per-record work: :class:`LiveBatcher` reads, parses and folds
them (:func:`fold_records`: a run of one call's text deltas becomes one
:class:`~eviscene_tui.policy.events.Delta`, its texts, token ids and logprobs joined)
and hands them over in batches at a bounded rate, so the UI thread handles a few
events per batch, never one per token.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Literal, Union

import orjson

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
DeltaKind = Literal["reasoning", "content", "tokens"]
DELTA_KINDS: dict[str, DeltaKind] = {"reasoning": "reasoning", "content": "content", "tokens": "tokens"}
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
        records, used = P.parse_live(data, deltas=self.deltas, loads=_loads)
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


def _loads(line: bytes) -> Any:
    """One record: orjson's parse (several times the standard library's, and the tail parses
    every token's record), the standard library's for what orjson refuses and a driver's
    ``json.dumps`` may write (``NaN``, ``Infinity``, integers past 64 bits)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _delta_kind(value: Any) -> DeltaKind:
    """A delta's pane; anything but a known kind is content."""
    return DELTA_KINDS.get(value, "content") if isinstance(value, str) else "content"


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
        return Delta(_delta_kind(doc.get("kind")), str(doc.get("text") or ""),
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


@dataclass(frozen=True, slots=True)
class CallEvents:
    """A run of one call's stream events, folded from consecutive ``delta`` records
    (``records`` of them; ``round``, ``hint`` and ``t`` are the first one's)."""

    call: str
    round: int | None
    hint: int | None
    t: float
    events: tuple[PolicyEvent, ...]
    records: int


#: what the tail hands the UI: a call's own record (``call_started``, ``call_complete``,
#: ``call_failed``, ``live_unavailable``) as read, or a run of its stream events
LiveEntry = Union[dict[str, Any], CallEvents]


class _Run:
    """The :class:`CallEvents` being folded: consecutive text deltas of one kind are
    joined into one :class:`Delta` (the accumulator and the panes take the joined text,
    ids and logprobs exactly as they take the pieces one by one)."""

    __slots__ = ("call", "round", "hint", "t", "events", "records", "kind", "texts", "ids", "logprobs")

    def __init__(self, rec: dict[str, Any]) -> None:
        self.call: str = rec["call"]
        self.round, self.hint, self.t = _n(rec.get("round")), _n(rec.get("hint")), (_f(rec.get("t")) or 0.0)
        self.events: list[PolicyEvent] = []
        self.records = 0
        self.kind: DeltaKind | None = None
        self.texts: list[str] = []
        self.ids: list[int] = []
        self.logprobs: list[TokenLogprob] = []

    def delta(self, doc: dict[str, Any]) -> None:
        kind = _delta_kind(doc.get("kind"))
        if kind != self.kind:
            self._close()
            self.kind = kind
        self.texts.append(str(doc.get("text") or ""))
        ids = doc.get("token_ids")
        if type(ids) is list:
            self.ids.extend(v for v in ids if type(v) is int)
        if doc.get("logprobs"):
            self.logprobs.extend(_logprobs(doc["logprobs"]))

    def event(self, ev: PolicyEvent) -> None:
        self._close()
        self.events.append(ev)

    def _close(self) -> None:
        if self.kind is not None:
            self.events.append(Delta(self.kind, "".join(self.texts), tuple(self.ids), tuple(self.logprobs)))
            self.kind, self.texts, self.ids, self.logprobs = None, [], [], []

    def done(self) -> CallEvents:
        self._close()
        return CallEvents(self.call, self.round, self.hint, self.t, tuple(self.events), self.records)


class RecordFolder:
    """Folds records as they are read, each run of one call's consecutive ``delta``
    records into one :class:`CallEvents` (the order of everything kept), until
    :meth:`take`. A record's parsed dicts are dropped as soon as it is folded: what is
    held between reads is the runs' text, ids and events, not thousands of dicts for the
    garbage collector to walk."""

    def __init__(self) -> None:
        self._out: list[LiveEntry] = []
        self._run: _Run | None = None

    def __bool__(self) -> bool:
        return bool(self._out) or self._run is not None

    def add(self, records: list[dict[str, Any]]) -> None:
        out, run = self._out, self._run
        offset = time.monotonic() - time.time()
        for rec in records:
            if rec["type"] != "delta":
                if run is not None:
                    out.append(run.done())
                    run = None
                out.append(rec)
                continue
            if run is None or run.call != rec["call"]:
                if run is not None:
                    out.append(run.done())
                run = _Run(rec)
            run.records += 1
            doc = rec.get("event")
            if type(doc) is dict and doc.get("type") == "delta":
                run.delta(doc)
            else:
                ev = event_of(doc, (_f(rec.get("t")) or 0.0) + offset)
                if ev is not None:
                    run.event(ev)
        self._run = run

    def take(self) -> list[LiveEntry]:
        """Everything folded since the last take (an open run is closed: the next record
        of its call starts another)."""
        out = self._out
        if self._run is not None:
            out.append(self._run.done())
        self._out, self._run = [], None
        return out


def fold_records(records: list[dict[str, Any]]) -> list[LiveEntry]:
    """``records`` folded at once (:class:`RecordFolder`). Per-record work, meant for the
    tail's thread: :meth:`LiveCalls.add` then takes a few events per run."""
    folder = RecordFolder()
    folder.add(records)
    return folder.take()


class LiveBatcher:
    """A live channel read as it grows, handed over in batches: :meth:`poll` reads and
    folds what was appended (:class:`RecordFolder`), and at most once every ``min_gap``
    seconds returns everything folded since the last batch. File I/O and the per-record
    work, for a worker thread; a batch is due at once when the one before is ``min_gap``
    old, so a slow stream's token is handed over as soon as it is read."""

    def __init__(self, path: Path, *, min_gap: float) -> None:
        self.tail = LiveTail(path)
        self.min_gap = min_gap
        self._folder = RecordFolder()
        self._reset = False
        self._last = float("-inf")

    def poll(self, now: float) -> tuple[list[LiveEntry], bool] | None:
        """(entries, reset) when a batch is due (``reset``: the channel was replaced, the
        entries are the new file's), else None. ``now``: a monotonic time."""
        records, reset = self.tail.read()
        if reset:
            self._folder, self._reset = RecordFolder(), True
        self._folder.add(records)
        if not (self._folder or self._reset) or now - self._last < self.min_gap:
            return None
        batch = self._folder.take(), self._reset
        self._reset, self._last = False, now
        return batch


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

    def add(self, records: Sequence[LiveEntry]) -> list[tuple[LiveCall, list[PolicyEvent], bool]]:
        """Fold ``records`` (the channel's records, or what :func:`fold_records` made of
        them); per call touched: (call, its new events, whether it started here)."""
        touched: dict[str, tuple[LiveCall, list[PolicyEvent], bool]] = {}
        offset = time.monotonic() - time.time()
        for rec in records:
            if isinstance(rec, CallEvents):
                self._add_events(rec, touched)
                continue
            name, kind = rec["call"], rec["type"]
            if kind == "live_unavailable":
                self.unavailable = str(rec.get("message") or "live view unavailable")
                continue
            call = self.calls.get(name)
            fresh = False
            if call is None or kind == "call_started":
                messages = rec.get("messages")
                call = LiveCall(name, _n(rec.get("round")), _n(rec.get("hint")), str(rec.get("stage") or ""), bool(rec.get("streaming")),
                                (_f(rec.get("t")) or 0.0), str(rec.get("hint_text") or ""), str(rec.get("hint_where") or ""),
                                str(rec.get("lifecycle_kind") or ""), messages if type(messages) is int else None)
                if name not in self.calls:
                    self.order.append(name)
                self.calls[name] = call
                fresh = True
            entry = touched.get(name) or (call, [], fresh)
            if kind == "delta":
                ev = event_of(rec.get("event"), (_f(rec.get("t")) or 0.0) + offset)
                if ev is not None:
                    call.events.append(ev)
                    entry[1].append(ev)
            elif kind in ("call_complete", "call_failed"):
                call.status = "complete" if kind == "call_complete" else "failed"
                call.end = rec
            touched[name] = (entry[0], entry[1], entry[2] or fresh)
        return list(touched.values())

    def _add_events(self, run: CallEvents, touched: dict[str, tuple[LiveCall, list[PolicyEvent], bool]]) -> None:
        call = self.calls.get(run.call)
        fresh = call is None
        if call is None:  # its call_started was not read (a broken line): known from its deltas, as a record-by-record fold does
            call = self.calls[run.call] = LiveCall(run.call, run.round, run.hint, "", False, run.t)
            self.order.append(run.call)
        call.events.extend(run.events)
        entry = touched.get(run.call) or (call, [], fresh)
        entry[1].extend(run.events)
        touched[run.call] = (entry[0], entry[1], entry[2] or fresh)


def read_policy_calls(gate_dir: Path) -> LiveCalls:
    """The policy calls of a gate's live channel, read whole (its streamed deltas skipped):
    what ``gate-status`` lists. File I/O; a missing or unreadable channel has no calls."""
    calls = LiveCalls()
    calls.add(LiveTail(gate_dir / P.LIVE_FILE, deltas=False).read_all())
    return calls
