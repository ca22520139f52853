"""Text search over a source trace's steps (the case screen's ``/``). No Textual import.

What is searched is what the trace view and the step detail show as text: stage, action
type, tool name, tool arguments, the tool result (whole, not the one-line preview),
thought and output. Not the policy input or the token captures: they are most of a big
trace's bytes and are inspected elsewhere (step detail, token inspector).

Matching is case-insensitive (both sides lowercased) substring matching; the query's
whitespace runs match any whitespace run, so a query typed from a wrapped line still
matches. No index and no text is kept: each new query scans the steps' fields (lowercased
copies of one field at a time, so memory stays flat however big the trace), a query that
extends an earlier one scans only that one's matches, and a scan stops early when the
caller says it was cancelled (a newer query).

An indexed trace (steps parsed on demand) is searched through each step's JSON bytes
first: a step is parsed, and its fields matched as above, only when its lowercased bytes
hold every run of the query that JSON writes literally (ASCII printable characters other
than space, double quote, slash and backslash), or when the bytes hold something that
decodes to such a character differently (a backslash-u escape of ASCII) or lowercases to one (U+0130 and
U+212A, the only non-ASCII characters whose lowercase holds ASCII). So the answer is the
same as a parse of every step. A byte scan reads the whole step (token captures too),
about five times the text a parse-free search looks at; so the viewer, which parses every
step once in the background to build its rows, also hands each step to a
:class:`SearchCorpus`: the step's searchable text, lowercased (what a search of an
in-memory trace lowercases on every query; about a fifth of a realistic trace), which
later queries scan instead of the bytes.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from eviscene_tui import pace

if TYPE_CHECKING:
    from eviscene_tui.artifacts.trace import SourceTrace

_FIELDS = ("stage", "stage_name", "action_type", "tool_name", "tool_args", "tool_result", "thought", "output")
_WS = re.compile(r"\s+")
_LITERAL_RUN = re.compile(r"[!#-.0-\[\]-~]+")  # ASCII printable but space, '"', '/', '\\'
LOWERS_TO_ASCII = ("\u0130", "\u212a")  # the non-ASCII characters whose lower() holds ASCII
_LOWERS_TO_ASCII_UTF8 = tuple(c.encode("utf-8") for c in LOWERS_TO_ASCII)
_ESCAPE_GUARD = re.compile(rb"\\u(?:00[0-7][0-9a-fA-F]|0130|212[aA])")


def literal_parts(needle: str) -> list[bytes]:
    """The runs of a (normalised) query that a step's JSON bytes must hold literally."""
    return [part.encode("ascii") for part in _LITERAL_RUN.findall(needle)]


def bytes_may_hold(data: bytes, parts: list[bytes]) -> bool:
    """Whether a step whose JSON bytes are ``data`` may hold the query (False: it cannot)."""
    if not parts:
        return True
    low = data.lower()
    if all(part in low for part in parts):
        return True
    if b"\\u" in data and _ESCAPE_GUARD.search(data) is not None:
        return True
    return any(marker in data for marker in _LOWERS_TO_ASCII_UTF8)


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


_SEP = "\x00"  # between one step's field texts in the corpus (a query holding it is not served from it)


class SearchCorpus:
    """The searchable text of the steps handed to it, lowercased, one string per step
    (its fields joined by a NUL, which no whitespace run and no query without a NUL can
    cross); thread-safe: the background fill adds while a search reads."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, index: int, raw: Any) -> None:
        if raw is None:
            return  # a range that did not parse: searched the slow way
        text = _SEP.join(_field_texts(raw))
        with self._lock:
            if index not in self._texts:
                self._texts[index] = text

    def __contains__(self, index: int) -> bool:
        return index in self._texts

    def __len__(self) -> int:
        return len(self._texts)

    def holds(self, index: int, match: Callable[[str], bool]) -> bool | None:
        """Whether step ``index``'s text matches (None: the step is not in the corpus)."""
        text = self._texts.get(index)
        return None if text is None else match(text)


def normalise_query(query: str) -> str:
    return _WS.sub(" ", query.lower()).strip()


def _matcher(needle: str) -> Callable[[str], bool]:
    if " " not in needle:
        return lambda text: needle in text
    pattern = re.compile(r"\s+".join(re.escape(part) for part in needle.split(" ")))
    return lambda text: pattern.search(text) is not None


def _holds(raw: Any, match: Callable[[str], bool]) -> bool:
    return any(match(text) for text in _field_texts(raw))


def _bytes_hold(data: bytes | None, parts: list[bytes], match: Callable[[str], bool]) -> bool | None:
    """Whether a step whose JSON bytes are ``data`` holds the query; ``None`` when the
    bytes cannot say (unreadable, or not one object: searched as the trace shows it)."""
    if data is None:
        return None
    if not bytes_may_hold(data, parts):
        return False
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return None if raw is None else _holds(raw, match)


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

    def __init__(self, trace: SourceTrace, corpus: SearchCorpus | None = None) -> None:
        self.trace = trace
        self.corpus = corpus
        self._found: dict[str, list[int]] = {}

    def matches(self, query: str, *, cancelled: Callable[[], bool] | None = None) -> list[int] | None:
        """Indices of the steps holding ``query`` (empty query: none); ``None`` when
        ``cancelled()`` turned true during the scan."""
        needle = normalise_query(query)
        if not needle:
            return []
        if needle in self._found:
            return self._found[needle]
        candidates: Sequence[int] = range(len(self.trace.raw_steps))
        for earlier, found in self._found.items():
            if earlier in needle and len(found) < len(candidates):
                candidates = found  # every step holding the longer query holds this one
        holds = self._step_test(needle)
        out: list[int] = []
        for n, i in enumerate(candidates):
            if n % 32 == 0:
                if cancelled is not None and cancelled():
                    return None
                pace.yield_to_input()  # the claims' searches are background work: a key goes first
            if holds(i):
                out.append(i)
        if len(self._found) >= self.KEEP:
            self._found.pop(next(iter(self._found)))
        self._found[needle] = out
        return out

    def _step_test(self, needle: str) -> Callable[[int], bool]:
        """Whether step ``i`` holds ``needle``: from the corpus when it has the step, else
        from the step's bytes (an indexed trace; parsed only when they may hold it), else
        from the step as the trace holds it."""
        steps = self.trace.raw_steps
        match = _matcher(needle)
        step_bytes = self.trace.step_bytes if self.trace.lazy else None
        parts = literal_parts(needle)
        corpus = self.corpus if _SEP not in needle else None

        def holds(i: int) -> bool:
            if corpus is not None:
                held = corpus.holds(i, match)
                if held is not None:
                    return held
            if step_bytes is not None:
                held = _bytes_hold(step_bytes(i), parts, match)
                if held is not None:
                    return held
            return _holds(steps[i], match)

        return holds

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


__all__ = ["SearchCorpus", "SearchHit", "TraceSearch", "bytes_may_hold", "literal_parts", "normalise_query", "step_matches"]
