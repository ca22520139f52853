"""Fold typed stream events into the continuation's state (text parts, ids, timings).

Textual-free; used by the recorder, the headless command and the stream view.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from eviscene_tui.policy.events import (
    Attestation,
    Attested,
    BadTokenIds,
    Delta,
    Done,
    Finished,
    PolicyEvent,
    PromptTokens,
    ServedModel,
    Started,
    StreamError,
    TokenLogprob,
    ToolCallDelta,
    Usage,
)


@dataclass
class ToolCallState:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "name": self.name, "arguments": "".join(self.arguments)}


@dataclass
class StreamAccumulator:
    reasoning: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    tool_calls: dict[int, ToolCallState] = field(default_factory=dict)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    error: StreamError | None = None
    attestation: Attestation | None = None
    base_url: str | None = None
    model: str | None = None
    done: bool = False
    cancelled: bool = False
    t_created: float = field(default_factory=time.monotonic)
    t_sent: float | None = None
    t_first: float | None = None
    t_end: float | None = None
    record_path: Any = None  # set by the session once the record is saved
    save_error: str | None = None
    served_models: list[str] = field(default_factory=list)  # the names the server answered with, in order
    bad_token_ids: int = 0  # token-id values that were not integers (never used as ids)
    bad_token_samples: list[str] = field(default_factory=list)

    def add(self, ev: PolicyEvent) -> None:
        if type(ev) is Delta:  # the per-token hot path
            if self.t_first is None and (ev.text or ev.token_ids):
                self.t_first = time.monotonic()
            kind = ev.kind
            if kind == "content":
                self.content.append(ev.text)
            elif kind == "reasoning":
                self.reasoning.append(ev.text)
            if ev.token_ids:
                self.completion_token_ids.extend(ev.token_ids)
            if ev.logprobs:
                self.logprobs.extend(ev.logprobs)
            return
        self._add_event(ev)

    def _add_event(self, ev: PolicyEvent) -> None:
        """Every event but a plain :class:`Delta` (one per stream, or one per tool-call chunk)."""
        if isinstance(ev, ToolCallDelta):
            self._add_tool_call(ev)
            return
        if isinstance(ev, PromptTokens):
            if self.prompt_token_ids is None:
                self.prompt_token_ids = list(ev.token_ids)
            return
        if isinstance(ev, Finished):
            self.finish_reason, self.stop_reason = ev.finish_reason, ev.stop_reason
            return
        if isinstance(ev, (Done, StreamError)):
            self._add_end(ev)
            return
        if isinstance(ev, (Usage, Attested, Started)):
            self._add_info(ev)
            return
        if isinstance(ev, ServedModel):
            if ev.name not in self.served_models:
                self.served_models.append(ev.name)
            return
        if isinstance(ev, BadTokenIds):
            self.bad_token_ids += ev.count
            self.bad_token_samples.extend(ev.sample[: max(0, 5 - len(self.bad_token_samples))])

    def _add_end(self, ev: Done | StreamError) -> None:
        """The stream ended: ``[DONE]``, or the first error (a later one does not replace it)."""
        if isinstance(ev, Done):
            self.done = True
            self.t_end = time.monotonic()
            return
        if self.error is None:
            self.error = ev
        self.t_end = self.t_end or time.monotonic()

    def _add_tool_call(self, ev: ToolCallDelta) -> None:
        if self.t_first is None:
            self.t_first = time.monotonic()
        tc = self.tool_calls.get(ev.index)
        if tc is None:
            tc = self.tool_calls[ev.index] = ToolCallState(ev.index)
        if ev.id:
            tc.id = ev.id
        if ev.name:
            tc.name = ev.name
        if ev.arguments:
            tc.arguments.append(ev.arguments)

    def _add_info(self, ev: Usage | Attested | Started) -> None:
        """What the stream says about itself: the usage chunk, the attestation, the request sent."""
        if isinstance(ev, Usage):
            self.usage = ev
        elif isinstance(ev, Attested):
            self.attestation = ev.attestation
        else:
            self.t_sent, self.base_url, self.model = ev.at, ev.base_url, ev.model

    # ------------------------------------------------------------------ derived
    @property
    def status(self) -> str:
        if self.cancelled:
            return "cancelled"
        if self.error is not None or not self.done or self.finish_reason is None:
            return "failed"
        return "complete"

    @property
    def token_count(self) -> int:
        return len(self.completion_token_ids)

    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    def content_text(self) -> str:
        return "".join(self.content)

    def tool_calls_json(self) -> list[dict[str, Any]]:
        return [self.tool_calls[k].to_json() for k in sorted(self.tool_calls)]

    def accounting(self) -> dict[str, Any]:
        """Summed streamed ids vs ``usage`` (flagged, never repaired)."""
        summed = len(self.completion_token_ids)
        usage_c = self.usage.completion_tokens if self.usage else None
        usage_p = self.usage.prompt_tokens if self.usage else None
        prompt_n = len(self.prompt_token_ids) if self.prompt_token_ids is not None else None
        match = None if usage_c is None else summed == usage_c
        prompt_match = None if usage_p is None or prompt_n is None else prompt_n == usage_p
        if usage_c is None:
            note = "no usage chunk: accounting cannot be checked"
        elif match:
            note = f"ok: {summed} streamed token ids == usage.completion_tokens"
        else:
            note = (f"MISMATCH: {summed} streamed token ids but usage.completion_tokens = {usage_c} "
                    f"({usage_c - summed:+d}); ids may have been dropped by the server (vLLM 0.11 parser bug) — not repaired")
        return {
            "completion_token_ids": summed,
            "usage_completion_tokens": usage_c,
            "match": match,
            "prompt_token_ids": prompt_n,
            "usage_prompt_tokens": usage_p,
            "prompt_match": prompt_match,
            "note": note,
        }

    def served_model(self) -> dict[str, Any]:
        """The model name(s) the server answered with against the one asked for (the
        attested profile's alias, or ``--policy-model``): a mismatch is flagged, not hidden."""
        asked = self.model or (self.attestation.model_id if self.attestation else None)
        served = self.served_models
        if not served:
            match, note = None, "the server named no model in its chunks"
        elif served == [asked]:
            match, note = True, f"ok: the server answered as {asked!r}"
        else:
            match = False
            note = f"MISMATCH: asked for {asked!r}, the server answered as {', '.join(repr(m) for m in served)}"
        return {"asked": asked, "served": served[0] if served else None, "all_served": list(served), "match": match, "note": note}

    def token_id_faults(self) -> dict[str, Any]:
        """Token-id values that were not integers: counted and shown, never used."""
        n = self.bad_token_ids
        note = "ok: every token id is an integer" if not n else f"{n} token id value(s) were not integers and were not used (e.g. {', '.join(self.bad_token_samples)})"
        return {"count": n, "sample": list(self.bad_token_samples), "note": note}

    def timings(self) -> dict[str, Any]:
        end = self.t_end or time.monotonic()
        ttft = (self.t_first - self.t_sent) if (self.t_first and self.t_sent) else None
        gen = (end - self.t_first) if self.t_first else None
        n = len(self.completion_token_ids)
        tps = (n / gen) if gen and gen > 0 and n else None
        return {
            "ttft_s": round(ttft, 4) if ttft is not None else None,
            "wall_s": round(end - (self.t_sent or self.t_created), 4),
            "tokens_per_s": round(tps, 1) if tps is not None else None,
        }
