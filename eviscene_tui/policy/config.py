"""The policy client's settings (:class:`PolicyConfig`), built from the ``[policy]``
table of the user's settings plus explicit overrides (command-line flags)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eviscene_tui.settings import HINT_PLACEMENTS, PolicySettings


@dataclass(frozen=True)
class PolicyConfig:
    """Client settings. ``api_key`` is never shown, logged or written (``repr`` hides it)."""

    connect_timeout: float = 5.0
    read_timeout: float = 600.0  # covers queueing + prefill (first token)
    stall_timeout: float = 120.0  # max time between complete SSE events once tokens flow
    min_token_rate: float = 2.0  # the deadline's floor rate: read_timeout + max_tokens / this
    stream_deadline: float | None = None  # an explicit overall deadline (seconds) instead
    max_event_bytes: int = 16 << 20  # one SSE event (line) larger than this ends the stream
    temperature: float = 0.7
    max_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    return_tokens_as_token_ids: bool = False
    hint_placement: str = "as_run"
    status_interval: float = 3.0
    direct_body: bool = True  # read stream bodies straight from the connection (policy/direct_body.py)
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.hint_placement not in HINT_PLACEMENTS:
            raise ValueError(f"hint_placement must be one of {', '.join(HINT_PLACEMENTS)}, not {self.hint_placement!r}")

    def scrub(self, text: str) -> str:
        return scrub_secret(text, self.api_key)


def scrub_secret(text: str, secret: str | None) -> str:
    if secret and text:
        text = text.replace(secret, "***")
    return text


def policy_config(settings: PolicySettings | None = None, **overrides: Any) -> PolicyConfig:
    """The client settings: the ``[policy]`` table (already validated, the API key from
    ``$EVISCENE_POLICY_API_KEY`` folded in by ``load_settings``), then the overrides that
    are not None. A bad override raises ``ValueError``."""
    values: dict[str, Any] = (settings or PolicySettings()).model_dump()
    values.update({k: v for k, v in overrides.items() if v is not None})
    return PolicyConfig(**values)
