"""The proposal client: the supervised search's one call per round to the hint constructor.

It wraps the HTTP call of ``hints.py`` with the search's settings and turns its
transport faults into :class:`~eviscene_tui.supervised.stages.SearchError` (the
message the operator reads). It writes nothing: the search caches the reply in
``proposer-response.json`` (:meth:`ProposalClient.cache_identity` /
:meth:`ProposalClient.cache_payload`) before it parses the hints, and a cached
reply is read back with :func:`hints_from_cache`.
"""

from __future__ import annotations

from typing import Any

from eviscene_tui.gate.bundled.hints import HintFetchError, ProposerReply, fetch_hints, parse_hints, prompt_identity
from eviscene_tui.gate.bundled.stages import SearchError, SearchSettings

NOT_CONFIGURED = "no hint constructor configured (--hint-url and --hint-model); type a hint instead"


class ProposalClient:
    """An OpenAI-compatible hint constructor at ``base_url`` serving ``model``."""

    def __init__(self, base_url: str, model: str, *, count: int, timeout: float = 120.0) -> None:
        self.base_url = base_url
        self.model = model
        self.count = count
        self.timeout = timeout

    @classmethod
    def configured(
        cls, settings: SearchSettings, *, base_url: str | None = None, model: str | None = None, timeout: float = 120.0
    ) -> ProposalClient:
        """The client for ``settings`` (explicit values win); :class:`SearchError` when none is configured."""
        url = base_url or settings.hint_url
        mdl = model or settings.hint_model
        if not url or not mdl:
            raise SearchError(NOT_CONFIGURED)
        return cls(url, mdl, count=settings.hint_count, timeout=timeout)

    async def ask(self, messages: list[dict[str, Any]]) -> ProposerReply:
        """POST the prompt; the reply's ``error`` says when its hints could not be parsed."""
        try:
            return await fetch_hints(self.base_url, self.model, messages, limit=self.count, timeout=self.timeout)
        except HintFetchError as exc:
            raise SearchError(str(exc)) from None

    def cache_identity(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return prompt_identity(messages, self.model, self.base_url)

    @staticmethod
    def cache_payload(reply: ProposerReply) -> dict[str, Any]:
        usage = reply.usage
        return {
            "text": reply.text,
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "response_sha256": reply.raw_sha256,
        }


def hints_from_cache(payload: Any, *, limit: int) -> list[str]:
    """The hints of a cached ``proposer-response.json`` payload (:class:`HintFetchError` when unparseable)."""
    text = payload.get("text") if isinstance(payload, dict) else None
    return parse_hints(str(text or ""), limit=limit)
