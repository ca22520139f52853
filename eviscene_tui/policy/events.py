"""Typed events produced by the policy client while a continuation streams.

Everything here is plain data (dataclasses, no I/O, no Textual) so the UI, the
headless ``stream`` command and the recorder consume the same objects.
"""

from __future__ import annotations

import dataclasses as dc
from dataclasses import asdict, dataclass
from typing import Any, Literal, Union

ErrorKind = Literal["connect", "http", "sse_error", "disconnect", "timeout", "malformed", "attestation", "cancelled", "request"]


@dataclass(frozen=True)
class TopLogprob:
    token: str
    logprob: float
    token_id: int | None = None


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's logprob entry (chat ``logprobs.content[i]``)."""

    token: str
    logprob: float
    token_id: int | None = None  # parsed from the ``"token_id:123"`` form when present
    top: tuple[TopLogprob, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "logprob": self.logprob,
            "token_id": self.token_id,
            "top": [{"token": t.token, "logprob": t.logprob, "token_id": t.token_id} for t in self.top],
        }


@dataclass(frozen=True)
class Attestation:
    """Result of ``validate_live_model`` against one replica.

    ``status`` is ``attested`` (all three checks passed), ``refused`` (a check
    failed; ``field`` names which) or ``unattested`` (no profile: an explicit
    ``--policy-url/--policy-model`` session).
    """

    status: Literal["attested", "refused", "unattested"]
    base_url: str
    model_id: str | None = None
    root: str | None = None
    max_model_len: int | None = None
    field: str | None = None
    message: str = ""
    expected: dict[str, Any] = dc.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("attested", "unattested")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Started:
    base_url: str
    model: str
    attested: bool
    at: float  # time.monotonic() when the request was sent


@dataclass(frozen=True)
class Attested:
    attestation: Attestation


@dataclass(frozen=True)
class PromptTokens:
    """Top-level ``prompt_token_ids`` from the role chunk."""

    token_ids: tuple[int, ...]


@dataclass(slots=True)
class Delta:
    """Text and/or token ids from one chunk.

    ``kind`` is ``reasoning``, ``content`` or ``tokens`` (a chunk that carried
    token ids but no text, e.g. while a parser held text back). A chunk's token
    ids and logprobs ride on the first Delta emitted for it.
    """

    kind: Literal["reasoning", "content", "tokens"]
    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(slots=True)
class ToolCallDelta:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class Finished:
    finish_reason: str | None
    stop_reason: int | str | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    raw: dict[str, Any] = dc.field(default_factory=dict)


@dataclass(frozen=True)
class ServedModel:
    """The model name the server answered with (a chunk's ``model``): sent once, and
    again whenever a later chunk names another one."""

    name: str


@dataclass(frozen=True)
class BadTokenIds:
    """A chunk's token ids held values that are not integers (not used as ids):
    how many, and a few of them as the server sent them."""

    count: int
    sample: tuple[str, ...] = ()
    where: str = "token_ids"


@dataclass(frozen=True)
class Done:
    """``data: [DONE]`` arrived: the stream ended normally."""


@dataclass(frozen=True)
class StreamError:
    kind: ErrorKind
    message: str
    status: int | None = None
    error_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "status": self.status, "error_type": self.error_type}


PolicyEvent = Union[Started, Attested, PromptTokens, Delta, ToolCallDelta, Finished, Usage, ServedModel, BadTokenIds, Done, StreamError]


def event_to_json(event: PolicyEvent) -> dict[str, Any]:
    """A JSON-able dict for ``stream --json`` lines (``type`` first)."""
    if isinstance(event, Delta):
        return {
            "type": "delta",
            "kind": event.kind,
            "text": event.text,
            "token_ids": list(event.token_ids),
            "logprobs": [lp.to_json() for lp in event.logprobs] if event.logprobs else None,
        }
    if isinstance(event, ToolCallDelta):
        return {"type": "tool_call", "index": event.index, "id": event.id, "name": event.name, "arguments": event.arguments}
    if isinstance(event, Attested):
        return {"type": "attestation", **event.attestation.to_json()}
    if isinstance(event, PromptTokens):
        return {"type": "prompt_tokens", "token_ids": list(event.token_ids)}
    if isinstance(event, Started):
        return {"type": "started", "base_url": event.base_url, "model": event.model, "attested": event.attested}
    if isinstance(event, Finished):
        return {"type": "finish", "finish_reason": event.finish_reason, "stop_reason": event.stop_reason}
    if isinstance(event, Usage):
        return {
            "type": "usage",
            "prompt_tokens": event.prompt_tokens,
            "completion_tokens": event.completion_tokens,
            "total_tokens": event.total_tokens,
        }
    if isinstance(event, ServedModel):
        return {"type": "served_model", "model": event.name}
    if isinstance(event, BadTokenIds):
        return {"type": "bad_token_ids", "count": event.count, "sample": list(event.sample), "where": event.where}
    if isinstance(event, Done):
        return {"type": "done"}
    if isinstance(event, StreamError):
        return {"type": "error", **event.to_json()}
    raise TypeError(f"not a policy event: {event!r}")  # pragma: no cover
