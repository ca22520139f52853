"""Text search over a source trace's steps (the case screen's ``/``). No Textual import.

What is searched is what the trace view and the step detail show as text: stage, action
type, tool name, tool arguments, the tool result (whole, not the one-line preview),
thought and output. Not the policy input or the token captures: they are most of a big
trace's bytes and are inspected elsewhere (step detail, token inspector).

Matching is case-insensitive (``casefold``) substring matching; the query's whitespace
runs match any whitespace run, so a query typed from a wrapped line still matches. The
per-step texts are built once, on the first search (a worker calls this), and kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

_FIELDS = ("stage", "stage_name", "action_type", "tool_name", "tool_args", "tool_result", "thought", "output")
_WS = re.compile(r"\s+")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


def step_haystack(raw: Any) -> str:
    """The searchable text of one raw step, normalised (casefolded, whitespace collapsed)."""
    if isinstance(raw, dict):
        parts = [_text(raw.get(key)) for key in _FIELDS]
        text = "\n".join(p for p in parts if p)
    else:
        text = _text(raw)
    return _WS.sub(" ", text.casefold())


def normalise_query(query: str) -> str:
    return _WS.sub(" ", query.casefold()).strip()


@dataclass(frozen=True)
class SearchHit:
    """The step found (``None``: no match), its rank among the matching steps (1-based) and
    how many steps match."""

    index: int | None
    ordinal: int
    total: int
    query: str


class TraceSearch:
    """Searches one trace; the haystacks are built on first use."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        self._hay: list[str] | None = None
        self._last: tuple[str, list[int]] | None = None  # the matches of the last query

    @property
    def ready(self) -> bool:
        return self._hay is not None

    def build(self) -> None:
        if self._hay is None:
            self._hay = [step_haystack(raw) for raw in self.trace.raw_steps]

    def matches(self, query: str) -> list[int]:
        """Indices of the steps containing ``query`` (empty query: none)."""
        needle = normalise_query(query)
        if not needle:
            return []
        if self._last is not None and self._last[0] == needle:
            return self._last[1]
        self.build()
        assert self._hay is not None
        found = [i for i, hay in enumerate(self._hay) if needle in hay]
        self._last = (needle, found)
        return found

    def find(self, query: str, start: int, direction: int = 1, *, include_start: bool = False) -> SearchHit:
        """The next matching step after ``start`` (``include_start``: at or after) going
        ``direction`` (1 forward, -1 back), wrapping around the trace."""
        found = self.matches(query)
        if not found:
            return SearchHit(None, 0, 0, query)
        if direction >= 0:
            pick = next((i for i in found if i > start or (include_start and i == start)), found[0])
        else:
            pick = next((i for i in reversed(found) if i < start or (include_start and i == start)), found[-1])
        return SearchHit(pick, found.index(pick) + 1, len(found), query)


__all__ = ["SearchHit", "TraceSearch", "normalise_query", "step_haystack"]
