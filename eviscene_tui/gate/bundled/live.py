"""The bundled driver's side of the live channel: one continuation's events, as vLLM sends them.

Every policy event of the stream goes to the sidecar's ``live.jsonl`` as a
``delta`` record holding the event in the ``stream --json`` shape (token ids,
text, logprobs when requested, tool calls, usage, finish reason), between a
``call_started`` record (the round, the hint, where the hint went) and a
``call_complete`` / ``call_failed`` one (ids, text, finish reason, timings). A
channel that cannot be written stops the live view, never the driver.
"""

from __future__ import annotations

from typing import Any

from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.bundled.continuation import ContinuationOutcome
from eviscene_tui.policy.events import PolicyEvent, event_to_json
from eviscene_tui.policy.request import TeacherRequest

STAGE = "psd_teacher_repair"


class LiveWriter:
    """The records of one policy call (``call``) of a gated round."""

    def __init__(self, channel: P.LiveChannel, call: str, *, round_index: int, hint_index: int, hint: str) -> None:
        self.channel, self.call = channel, call
        self.where = {"round": round_index, "hint": hint_index}
        self.hint = hint
        self.started = False

    def request(self, req: TeacherRequest) -> None:
        """The request is built: the call starts (where the hint went, how many messages)."""
        self.started = True
        self.channel.write("call_started", self.call, **self.where, stage=STAGE, streaming=True, messages=len(req.messages),
                           hint_text=self.hint, hint_placement=req.hint_placement, hint_where=req.hint_where())

    def event(self, ev: PolicyEvent) -> None:
        if not self.started:
            self.request_unknown()
        self.channel.write("delta", self.call, **self.where, event=event_to_json(ev))

    def request_unknown(self) -> None:
        self.started = True
        self.channel.write("call_started", self.call, **self.where, stage=STAGE, streaming=True, hint_text=self.hint)

    def finish(self, outcome: ContinuationOutcome) -> None:
        if not self.started:
            self.request_unknown()
        fields: dict[str, Any] = {**self.where, "status": outcome.status, "finish_reason": outcome.finish_reason,
                                  "prompt_token_ids": outcome.prompt_token_ids, "completion_token_ids": outcome.completion_token_ids,
                                  "usage": outcome.usage, "timings": outcome.timings, "text": outcome.content}
        if outcome.ok:
            self.channel.write("call_complete", self.call, **fields)
        else:
            self.channel.write("call_failed", self.call, **fields, error_type=outcome.error_type or outcome.status)
