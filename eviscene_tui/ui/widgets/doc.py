"""Render state-layer documents (lines of ``Seg``) as Textual ``Content``.

Segment text is already sanitised by the state layer; it is inserted as plain
text (``Content.assemble``), never parsed as markup. Privileged segments are
masked unless ``revealed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from textual.content import Content

from eviscene_tui.safe_text import shown_as_is
from eviscene_tui.state.case_view import Line, Seg

STYLES: dict[str, str] = {
    "": "",
    "title": "bold $primary",
    "key": "bold",
    "value": "",
    "ok": "$success",
    "bad": "$error",
    "warn": "$warning",
    "dim": "dim",
    "hint": "italic $secondary",
    "quote": "italic",
    "mark": "bold $warning",
    "accent": "bold $accent",
    "del": "strike $error",
    "ins": "underline bold $success",
    "ok-badge": "bold reverse $success",
    "warn-badge": "bold reverse $warning",
    "bad-badge": "bold reverse $error",
}
MASK = "\u2592\u2592 privileged: hidden (press v to reveal) \u2592\u2592"
MASK_STYLE = "italic $warning"


def seg_parts(seg: Seg, revealed: bool) -> tuple[str, str]:
    if seg.privileged and not revealed:
        return MASK, MASK_STYLE
    style = STYLES.get(seg.style, "")
    if seg.privileged:
        style = (style + " on $error 15%").strip()
    return seg.text, style


def line_content(line: Line, revealed: bool = False) -> Content:
    parts = [seg_parts(seg, revealed) for seg in line]
    # Textual's strip of control codes changes no text shown as itself
    return Content.assemble(*parts, strip_control_codes=not all(shown_as_is(text) for text, _style in parts))


def _mask_only(line: Line) -> bool:
    has_private = False
    for seg in line:
        if seg.privileged:
            has_private = True
        elif seg.text.strip():
            return False
    return has_private


def doc_content(lines: Iterable[Line], revealed: bool = False) -> Content:
    """All lines as one Content; when masked, a run of privileged-only lines shows
    as a single mask line (no hint of the hidden text's shape beyond that)."""
    lines = list(lines)
    parts: list[tuple[str, str]] = []
    shown = 0
    for line in _shown_lines(lines, revealed):
        if shown:
            parts.append(("\n", ""))
        shown += 1
        parts.extend(part for part in (seg_parts(seg, revealed) for seg in line) if part[0])
    if all(shown_as_is(text) for text, _style in parts):
        # one Content assembled from every segment, without Textual's strip of control codes
        # (a character-by-character translate of the whole text, the better part of a big
        # step's detail), which changes no text that is shown as itself
        return Content.assemble(*parts, strip_control_codes=False)
    return Content("\n").join(line_content(line, revealed) for line in _shown_lines(lines, revealed))


def _shown_lines(lines: Iterable[Line], revealed: bool) -> Iterator[Line]:
    previous_masked = False
    for line in lines:
        masked = not revealed and _mask_only(line)
        if masked and previous_masked:
            continue
        previous_masked = masked
        yield line
