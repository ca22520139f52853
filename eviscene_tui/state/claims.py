"""What the localizer's explanation claims, checked against the source trace.

A localizer (a model) explains why it found, or did not find, a failure site; it can
blame things no step of the trace shows ("an external retrieval timeout" when no tool
ever timed out). :func:`explanation_claims` takes from a semantic localization:

- every quote: text in double quotes (straight or curly) in its explanations, and each
  candidate's ``observed_basis`` quote (with the step it names);
- every named event: a failure event of a known kind the explanation names (a timeout,
  a rate limit, a connection or server error, an exception, an empty result, ...), with
  the words a step would use for it.

:func:`check_claims` searches the trace's steps (``state.trace_search``: stage, action
type, tool name, arguments and result, thought, output) and says, per claim, the steps
that hold it; a claim held by no step is "not found in the trace". No Textual import.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eviscene_tui.safe_text import safe_text

if TYPE_CHECKING:
    from eviscene_tui.artifacts.models import SemanticLocalization
    from eviscene_tui.state.trace_search import TraceSearch

#: event kind -> the words the explanation and the trace use for it (lower case)
EVENTS: dict[str, tuple[str, ...]] = {
    "timeout": ("timeout", "timed out", "time out", "time-out", "deadline exceeded"),
    "rate limit": ("rate limit", "rate-limit", "rate limited", "too many requests", "429"),
    "connection error": ("connection error", "connection reset", "connection refused", "network error", "unreachable", "dns"),
    "server error": ("server error", "internal server error", "service unavailable", "bad gateway", "http 500", "http 502", "http 503"),
    "exception": ("exception", "traceback", "crash", "crashed"),
    "empty result": ("no results", "empty result", "returned nothing", "zero results", "no matches"),
    "access denied": ("permission denied", "access denied", "unauthorized", "forbidden", "paywall"),
    "tool failure": ("tool failure", "tool error", "tool failed", "failed to fetch", "fetch failed"),
}
_QUOTE = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]{6,300})[\"\u201c\u201d]")
MAX_CLAIMS = 24


@dataclass(frozen=True, slots=True)
class Claim:
    kind: str  # "quote" | "event"
    text: str  # the quote as written, or the event kind
    terms: tuple[str, ...]  # what a step holding it holds (any of them)
    source: str  # where the claim is made ("localizer explanation", "candidate 0 observed_basis", ...)
    step: int | None = None  # the step an observed_basis quote names


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claim: Claim
    steps: tuple[int, ...]  # the steps that hold it (empty: not found in the trace)

    @property
    def found(self) -> bool:
        return bool(self.steps)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _events_in(text: str, source: str) -> list[Claim]:
    low = text.lower()
    out = []
    for kind, words in EVENTS.items():
        if any(re.search(r"(?<![a-z0-9])" + re.escape(w) + r"(?![a-z0-9])", low) for w in words):
            out.append(Claim("event", kind, words, source))
    return out


def _quotes_in(text: str, source: str) -> list[Claim]:
    return [Claim("quote", m.group(1).strip(), (m.group(1).strip(),), source) for m in _QUOTE.finditer(text) if m.group(1).strip()]


def explanation_claims(sl: SemanticLocalization | None) -> list[Claim]:
    """The quotes and named events of a semantic localization (see the module doc)."""
    if sl is None:
        return []
    claims: list[Claim] = []
    texts = [(_text(sl.explanation), "localizer explanation")]
    texts += [(_text(c.explanation), f"candidate {i} explanation") for i, c in enumerate(sl.candidates)]
    for text, source in texts:
        if text:
            claims += _quotes_in(text, source) + _events_in(text, source)
    for i, cand in enumerate(sl.candidates):
        for basis in cand.observed_basis:
            quote = _text(basis.quote).strip()
            if quote:
                step = basis.step_index if basis.step_index is not None else cand.source_step_index
                claims.append(Claim("quote", quote, (quote,), f"candidate {i} observed_basis", step))
    unique: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    for claim in claims:
        ident = (claim.kind, claim.text.lower())
        if ident not in seen:
            seen.add(ident)
            unique.append(claim)
    return unique[:MAX_CLAIMS]


def check_claims(claims: list[Claim], search: TraceSearch, *, cancelled: Callable[[], bool] | None = None) -> list[ClaimResult] | None:
    """Each claim with the steps that hold it; None when ``cancelled`` turned true."""
    out = []
    for claim in claims:
        steps: set[int] = set()
        for term in claim.terms:
            found = search.matches(term, cancelled=cancelled)
            if found is None:
                return None
            steps.update(found)
        out.append(ClaimResult(claim, tuple(sorted(steps))))
    return out


def claims_summary(results: list[ClaimResult]) -> str:
    """One line, safe to show unrevealed (it quotes nothing)."""
    missing = sum(1 for r in results if not r.found)
    if not results:
        return "the localizer's explanation quotes nothing and names no failure event"
    if not missing:
        return f"every quote and named event of the localizer ({len(results)}) is found in the trace"
    return f"{missing} of {len(results)} quotes / named events of the localizer are not found in the trace"


def claim_line_parts(result: ClaimResult) -> tuple[str, str, str]:
    """(mark, what it is, where: the steps or "not found in the trace"), safe text."""
    claim = result.claim
    what = f"\u201c{safe_text(claim.text, single_line=True, limit=160)}\u201d" if claim.kind == "quote" else f"names a {claim.text}"
    if result.found:
        steps = ", ".join(map(str, result.steps[:8])) + ("\u2026" if len(result.steps) > 8 else "")
        where = f"in step {steps}" if len(result.steps) == 1 else f"in steps {steps}"
        if claim.step is not None and claim.step not in result.steps:
            where += f" (not the step it names, {claim.step})"
        return "\u2713", what, where
    return "\u2717", what, "not found in the trace"
