"""Where a hint sits in a teacher prompt, found from the hint's own text. Textual-free.

A teacher prompt is the failure step's prompt with a hint inserted. Diffing it against the
student prompt only says where the two *differ*: when the teacher prompt was rebuilt by a
server that renders tools or earlier turns differently, the difference starts long before
the hint. So the span is found from the hint itself: the prompt's pieces are decoded to
bytes, the hint's UTF-8 bytes are looked up in them (exactly, then with whitespace runs
collapsed), and the byte range is mapped back to id offsets.

Then the prompt is compared with a reference (the archived hinted prompt of the same hint,
or else the unhinted student prompt) to say whether it differs *beyond the hint*, and where
the first such difference is. One :class:`HintSpan` per capture: the side panel, the
highlight and the jump key all read it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from itertools import accumulate

from eviscene_tui.tokens.diff import prompt_diff

# a pure insertion may carry this many ids around the hint (the framing a driver puts
# around a hint: "<|im_start|>user\nHint: " ... "<|im_end|>\n") and still be "only the hint"
FRAMING_IDS = 48

PieceBytes = Callable[[int], "bytes | None"]


@dataclass(frozen=True)
class Difference:
    """The first id where a prompt differs from its reference, outside the hint."""

    reference: str  # what was compared, for people ("the archived hinted prompt of round 2 (655 ids)")
    offset: int  # in the prompt
    ref_offset: int  # in the reference
    prompt_ids: tuple[int, ...]  # a few ids from ``offset`` on (to decode for display)
    ref_ids: tuple[int, ...]


@dataclass(frozen=True)
class HintSpan:
    """The hint's span in a prompt (id offsets, end exclusive) and how it was decided."""

    start: int | None
    end: int | None
    basis: str  # "hint text" | "prompt difference" | "none"
    message: str  # one line for the status / panel
    reference: str | None = None  # what the prompt was compared with
    same_beyond_hint: bool | None = None  # True: the prompt equals the reference apart from the hint
    difference: Difference | None = None
    notes: tuple[str, ...] = ()
    texts: dict[str, str] = field(default_factory=dict, compare=False)  # decoded display texts, filled by the caller

    @property
    def found(self) -> bool:
        return self.start is not None and self.end is not None and self.end > self.start

    @property
    def range(self) -> tuple[int, int] | None:
        return (self.start, self.end) if self.found else None  # type: ignore[return-value]  # found implies both ends are set


_WS = re.compile(rb"\s+")


def _collapse(data: bytes) -> tuple[bytes, list[int]]:
    """``data`` with every whitespace run as one space, and each output byte's input index."""
    out = bytearray()
    where: list[int] = []
    pos = 0
    for m in _WS.finditer(data):
        out += data[pos:m.start()]
        where.extend(range(pos, m.start()))
        out += b" "
        where.append(m.start())
        pos = m.end()
    out += data[pos:]
    where.extend(range(pos, len(data)))
    return bytes(out), where


def _all(haystack: bytes, needle: bytes) -> list[int]:
    out = []
    pos = haystack.find(needle)
    while pos >= 0:
        out.append(pos)
        pos = haystack.find(needle, pos + 1)
    return out


def locate_text(
    ids: Sequence[int],
    piece_bytes: PieceBytes,
    text: str,
    *,
    prefer: tuple[int, int] | None = None,
) -> tuple[int, int] | None:
    """Id offsets (first, end exclusive) of the ids whose bytes hold ``text`` (stripped).

    Exact bytes first, then with whitespace runs collapsed on both sides. With several
    occurrences, the one overlapping ``prefer`` (e.g. where two prompts differ), else the
    last one (a hint is inserted after the context it refers to)."""
    needle = text.strip().encode("utf-8")
    if not needle or not ids:
        return None
    pieces = [piece_bytes(t) or b"" for t in ids]
    ends = list(accumulate(len(p) for p in pieces))
    joined = b"".join(pieces)
    hits = [(p, p + len(needle)) for p in _all(joined, needle)]
    if not hits:
        flat, where = _collapse(joined)
        flat_needle = _WS.sub(b" ", needle)
        for p in _all(flat, flat_needle):
            last = p + len(flat_needle) - 1
            hits.append((where[p], where[last] + 1))
    if not hits:
        return None

    def span(hit: tuple[int, int]) -> tuple[int, int]:
        a, b = hit
        return bisect_right(ends, a), bisect_right(ends, b - 1) + 1

    spans = [span(h) for h in hits]
    if prefer is not None:
        lo, hi = prefer
        inside = [s for s in spans if s[0] < hi and s[1] > lo]
        if inside:
            return inside[-1]
    return spans[-1]


def _context(ids: Sequence[int], at: int, n: int = 12) -> tuple[int, ...]:
    return tuple(ids[at:at + n])


def compare_beyond(
    prompt: Sequence[int],
    span: tuple[int, int] | None,
    reference: Sequence[int],
    *,
    reference_label: str,
    reference_hinted: bool,
    max_window: int = 20_000,
) -> tuple[bool, Difference | None]:
    """Does ``prompt`` equal ``reference`` apart from the hint? (same, first difference).

    ``reference_hinted``: the reference holds the same hint (an archived hinted prompt), so
    the two must be equal id for id. Otherwise the reference is the unhinted prompt: where
    the two differ is aligned (longest-match), and every change other than the one holding
    the hint (with at most :data:`FRAMING_IDS` ids of framing on each side and as many
    reference ids replaced; small insertions of framing next to it are allowed) is a
    difference beyond the hint; the first one is returned."""
    d = prompt_diff(reference, prompt)
    if d.identical:
        return True, None

    def at(i: int, j: int) -> Difference:
        return Difference(reference_label, i, j, _context(prompt, i), _context(reference, j))

    if reference_hinted or span is None:
        return False, at(d.prefix, d.prefix)
    a, b = span
    lo, hi = d.inserted
    rlo, rhi = d.removed
    if hi - lo > max_window or rhi - rlo > max_window:
        return (False, at(lo, rlo)) if lo < a - FRAMING_IDS else (False, at(hi - 1, max(rlo, rhi - 1)))
    ops = SequenceMatcher(None, list(reference[rlo:rhi]), list(prompt[lo:hi]), autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        j1, j2, i1, i2 = j1 + lo, j2 + lo, i1 + rlo, i2 + rlo
        if j1 < b and j2 > a:  # the change that holds the hint
            if a - j1 > FRAMING_IDS:
                return False, at(j1, i1)
            if j2 - b > FRAMING_IDS or i2 - i1 > FRAMING_IDS:
                return False, at(b, min(i2, i1 + max(0, b - j1)))
            continue
        if tag == "insert" and j2 - j1 <= FRAMING_IDS and j1 >= a - FRAMING_IDS and j2 <= b + FRAMING_IDS:
            continue  # a piece of the hint's framing, split off by the alignment
        return False, at(j1, i1)
    return True, None


def hint_span(
    prompt: Sequence[int],
    piece_bytes: PieceBytes | None,
    hint: str | None,
    *,
    student: Sequence[int] | None = None,
    archived_hinted: Sequence[int] | None = None,
    archived_label: str = "the archived hinted prompt",
    student_label: str = "the student prompt",
    prompt_label: str = "the teacher prompt",
    decoder_label: str = "",
) -> HintSpan:
    """The hint's span in ``prompt`` (teacher prompt ids only, no completion).

    ``student``: the unhinted prompt; ``archived_hinted``: an archived prompt holding the same
    hint (for a rebuilt, live prompt). The span comes from the hint text when it is found;
    otherwise from the student/teacher difference, which the message says."""
    diff = prompt_diff(student, prompt) if student is not None else None
    prefer = diff.inserted if diff is not None and not diff.identical else None
    notes: list[str] = []
    span: tuple[int, int] | None = None
    basis = "none"
    if hint and hint.strip() and piece_bytes is not None:
        span = locate_text(prompt, piece_bytes, hint, prefer=prefer)
        if span is not None:
            basis = "hint text"
        else:
            notes.append("the hint's text was not found in the decoded prompt" + (f" ({decoder_label})" if decoder_label else ""))
    elif not (hint and hint.strip()):
        notes.append("no hint text known for this capture")
    else:
        notes.append("no decoder: the hint's text cannot be looked up")
    if span is None and diff is not None and not diff.identical:
        lo, hi = diff.inserted
        if hi > lo:
            span, basis = (lo, hi), "prompt difference"
    # beyond the hint: against the archived hinted prompt when there is one, else the student
    same: bool | None = None
    difference: Difference | None = None
    reference: str | None = None
    if archived_hinted is not None:
        reference = f"{archived_label} ({len(archived_hinted):,} ids)"
        same, difference = compare_beyond(prompt, span, archived_hinted, reference_label=reference, reference_hinted=True)
    elif student is not None and basis == "hint text":
        reference = f"{student_label} ({len(student):,} ids)"
        same, difference = compare_beyond(prompt, span, student, reference_label=reference, reference_hinted=False)
    if span is None:
        message = "no hint span in this capture" if basis == "none" else "hint span unknown"
        if student is not None and diff is not None and diff.identical:
            message = f"no hint span: {prompt_label} equals {student_label}"
    else:
        a, b = span
        how = "found from the hint text" if basis == "hint text" else "where the prompts differ (hint text not located)"
        message = f"hint span: ids {a:,}–{b - 1:,} ({b - a:,} tokens), {how}"
    return HintSpan(
        start=span[0] if span else None,
        end=span[1] if span else None,
        basis=basis,
        message=message,
        reference=reference,
        same_beyond_hint=same,
        difference=difference,
        notes=tuple(notes),
    )
