"""Text search over a source trace's steps (the case screen's ``/``). No Textual import.

What is searched is what the trace view and the step detail show as text: stage, action
type, tool name, tool arguments, the tool result (whole, not the one-line preview),
thought and output. Not the policy input or the token captures: they are most of a big
trace's bytes and are inspected elsewhere (step detail, token inspector).

Matching is case-insensitive (both sides lowercased) substring matching; the query's
whitespace runs match any whitespace run, so a query typed from a wrapped line still
matches. No index and no text is kept: each new query scans the steps' fields (lowercased
copies of one field at a time, about 0.25 s for 190 MB of tool results), a query that
extends an earlier one scans only that one's matches, and a scan stops early when the
caller says it was cancelled (a newer query).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

_FIELDS = ("stage", "stage_name", "action_type", "tool_name", "tool_args", "tool_result", "thought", "output")
_WS = re.compile(r"\s+")


def _field_texts(raw: Any) -> Iterator[str]:
    """The searchable texts of one raw step, lowercased, one field at a time."""
    if not isinstance(raw, dict):
        raw = {"output": raw}
    for key in _FIELDS:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            try:
                value = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
            except (TypeError, orjson.JSONEncodeError):
                value = str(value)
        yield value.lower()


def normalise_query(query: str) -> str:
    return _WS.sub(" ", query.lower()).strip()


def _matcher(needle: str) -> Callable[[str], bool]:
    if " " not in needle:
        return lambda text: needle in text
    pattern = re.compile(r"\s+".join(re.escape(part) for part in needle.split(" ")))
    return lambda text: pattern.search(text) is not None


def _holds(raw: Any, match: Callable[[str], bool]) -> bool:
    return any(match(text) for text in _field_texts(raw))


def step_matches(raw: Any, query: str) -> bool:
    """Whether one raw step's text holds ``query``."""
    needle = normalise_query(query)
    return bool(needle) and _holds(raw, _matcher(needle))


@dataclass(frozen=True)
class SearchHit:
    """The step found (``None``: no match), its rank among the matching steps (1-based),
    and every matching step (the view marks them)."""

    index: int | None
    ordinal: int
    matches: tuple[int, ...]
    query: str

    @property
    def total(self) -> int:
        return len(self.matches)


class TraceSearch:
    """Searches one trace's steps; remembers the matches of the last few queries."""

    KEEP = 8

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        self._found: dict[str, list[int]] = {}

    def matches(self, query: str, *, cancelled: Callable[[], bool] | None = None) -> list[int] | None:
        """Indices of the steps holding ``query`` (empty query: none); ``None`` when
        ``cancelled()`` turned true during the scan."""
        needle = normalise_query(query)
        if not needle:
            return []
        if needle in self._found:
            return self._found[needle]
        steps = self.trace.raw_steps
        candidates: Any = range(len(steps))
        for earlier, found in self._found.items():
            if earlier in needle and len(found) < len(candidates):
                candidates = found  # every step holding the longer query holds this one
        match = _matcher(needle)
        out: list[int] = []
        for n, i in enumerate(candidates):
            if cancelled is not None and n % 32 == 0 and cancelled():
                return None
            if _holds(steps[i], match):
                out.append(i)
        if len(self._found) >= self.KEEP:
            self._found.pop(next(iter(self._found)))
        self._found[needle] = out
        return out

    def find(
        self, query: str, start: int, direction: int = 1, *, include_start: bool = False, cancelled: Callable[[], bool] | None = None
    ) -> SearchHit | None:
        """The next matching step after ``start`` (``include_start``: at or after) going
        ``direction`` (1 forward, -1 back), wrapping around; ``None`` if cancelled."""
        found = self.matches(query, cancelled=cancelled)
        if found is None:
            return None
        if not found:
            return SearchHit(None, 0, (), query)
        if direction >= 0:
            at = bisect.bisect_left(found, start) if include_start else bisect.bisect_right(found, start)
            k = at if at < len(found) else 0
        else:
            at = bisect.bisect_right(found, start) if include_start else bisect.bisect_left(found, start)
            k = at - 1 if at > 0 else len(found) - 1
        return SearchHit(found[k], k + 1, tuple(found), query)


__all__ = ["SearchHit", "TraceSearch", "normalise_query", "step_matches"]
