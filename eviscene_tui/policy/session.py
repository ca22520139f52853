"""One hinted teacher continuation, end to end: attest, stream, fold, record.

    outcome = await run_continuation(client, request, work=work, case_ref={...}, on_event=cb)

``on_event`` is called synchronously for every event (keep it cheap: the UI
appends to a buffer and flushes on a timer). Plain text chunks that arrived in one
network read come folded into one ``Delta`` (all their text and token ids, in
order). Cancelling the task closes the HTTP
stream (vLLM aborts the request) and the record is saved with status
``cancelled`` before the CancelledError propagates. A request that cannot be
built (e.g. missing archived image) is recorded as a failed attempt without
contacting the server: use :func:`record_failure`.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.events import ErrorKind, PolicyEvent, StreamError
from eviscene_tui.policy.profile import PolicyTarget
from eviscene_tui.policy.recording import build_record, save_record
from eviscene_tui.policy.request import TeacherRequest, chat_body
from eviscene_tui.storage import WorkDir


@dataclass
class ContinuationOutcome:
    status: str  # complete | cancelled | failed
    accumulator: StreamAccumulator
    record: dict[str, Any]
    path: Path | None
    save_error: str | None = None


def _save(work: WorkDir | None, record: dict[str, Any], stem: str | None) -> tuple[Path | None, str | None]:
    if work is None:
        return None, None
    try:
        return save_record(work, record, stem=stem), None
    except Exception as exc:  # noqa: BLE001 - a full disk must not crash the app; the caller shows it
        return None, f"could not save the continuation record: {type(exc).__name__}: {exc}"


async def run_continuation(
    client: PolicyClient,
    request: TeacherRequest,
    *,
    work: WorkDir | None,
    case_ref: dict[str, Any] | None = None,
    on_event: Callable[[PolicyEvent], None] | None = None,
    accumulator: StreamAccumulator | None = None,
) -> ContinuationOutcome:
    acc = accumulator if accumulator is not None else StreamAccumulator()
    body = chat_body(request, client.config, model=client.target.model)
    stem = (case_ref or {}).get("case_id") or (case_ref or {}).get("case_key")
    secret = client.config.api_key
    try:
        # client.continuation() = begin() + stream_chat(); iterating the batches (one list
        # of events per network read) directly saves an async-generator hop per event
        base_url, sent_body, opening = await client.begin(body)
        for ev in opening:
            _emit(acc, on_event, ev)
        if base_url is not None:
            await _fold_stream(client, base_url, sent_body, acc, on_event)
    except asyncio.CancelledError:
        acc.cancelled = True
        acc.t_end = acc.t_end or time.monotonic()
        record = build_record(acc, target=client.target, request=request, body=body, case_ref=case_ref, status="cancelled", secret=secret)
        acc.record_path, acc.save_error = _save(work, record, stem)
        raise
    except Exception as exc:  # noqa: BLE001 - a bug or an unexpected transport failure: still a recorded failed attempt
        _emit(acc, on_event, StreamError("connect", client.config.scrub(f"{type(exc).__name__}: {exc}")))
    if acc.error is None and acc.done and acc.finish_reason is None:
        _emit(acc, on_event, StreamError("malformed", "the stream ended ([DONE]) without a finish_reason"))
    record = build_record(acc, target=client.target, request=request, body=body, case_ref=case_ref, secret=secret)
    path, save_error = _save(work, record, stem)
    acc.record_path, acc.save_error = path, save_error
    return ContinuationOutcome(acc.status, acc, record, path, save_error)


def _emit(acc: StreamAccumulator, on_event: Callable[[PolicyEvent], None] | None, ev: PolicyEvent) -> None:
    acc.add(ev)
    if on_event is not None:
        on_event(ev)


async def _fold_stream(client: PolicyClient, base_url: str, body: dict[str, Any], acc: StreamAccumulator,
                       on_event: Callable[[PolicyEvent], None] | None) -> None:
    """Fold the streamed batches into ``acc`` (and hand each event to ``on_event``) until
    the stream ends or fails. aclosing: leaving the loop (break, error, cancel) closes the
    HTTP response now, not whenever the generator is garbage-collected."""
    add, clock = acc.add, time.monotonic
    last_yield = clock()
    async with aclosing(client.stream_chat_batches(base_url, body)) as batches:
        async for batch in batches:
            for ev in batch:
                add(ev)
                if on_event is not None:
                    on_event(ev)
            if type(batch[-1]) is StreamError:
                break
            # a big batch can take a while to fold: give the event loop
            # (the UI, a cancel key) a turn at least every 10 ms
            now = clock()
            if now - last_yield > 0.01:
                last_yield = now
                await asyncio.sleep(0)


def record_failure(
    target: PolicyTarget,
    *,
    work: WorkDir | None,
    kind: ErrorKind,
    message: str,
    request: TeacherRequest | None = None,
    case_ref: dict[str, Any] | None = None,
) -> ContinuationOutcome:
    """Record an attempt that failed before anything was sent (e.g. the request could not be rebuilt)."""
    acc = StreamAccumulator()
    acc.add(StreamError(kind, message))
    record = build_record(acc, target=target, request=request, body=None, case_ref=case_ref)
    stem = (case_ref or {}).get("case_id") or (case_ref or {}).get("case_key")
    path, save_error = _save(work, record, stem)
    return ContinuationOutcome("failed", acc, record, path, save_error)
