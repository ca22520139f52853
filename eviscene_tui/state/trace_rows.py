"""Display rows of a source trace (two lines per step), built off the UI thread.

Everything in a :class:`StepRow` is sanitised and truncated; the trace widget
only paints these strings. No Textual import here.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eviscene_tui.safe_text import safe_text

if TYPE_CHECKING:
    from eviscene_tui.artifacts.trace import StepBrief

PREVIEW = 400  # characters kept per preview (the widget crops to the screen width)


@dataclass(frozen=True, slots=True)
class StepRow:
    index: int
    stage: str = ""
    action_type: str = ""
    tool: str = ""  # tool name + compact args
    result: str = ""  # one-line result preview
    text: str = ""  # thought / output preview
    is_policy: bool = False
    is_rejection: bool = False
    is_teacher: bool = False


@dataclass
class TraceRows:
    """All rows of one trace plus its navigation indices."""

    step_count: int
    rows: list[StepRow | None]
    policy_indices: list[int] = field(default_factory=list)
    failure_index: int | None = None
    path: str = ""
    size_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    lazy: bool = False  # the steps are parsed from an index of byte ranges, rows filled as they are
    gzip: bool = False  # the trace is gzip: its first open decompressed it (slower)
    index_seconds: float | None = None  # how long the byte scan of an indexed trace took

    def filled(self) -> int:
        """How many rows are built (by identity: ``count(None)`` compares every built row
        with None through the dataclass's ``__eq__``, and the status line asks on every update)."""
        rows = self.rows
        return len(rows) - sum(1 for row in rows if row is None)

    def missing_between(self, start: int, end: int) -> list[int]:
        """The indices in ``start..end`` whose rows are not built yet."""
        rows = self.rows
        return [i for i in range(max(0, start), min(end, len(rows))) if rows[i] is None]

    def refresh_policy_indices(self) -> None:
        """Policy indices from the rows built so far (an indexed trace learns them as its
        rows are filled)."""
        self.policy_indices = [i for i, row in enumerate(self.rows) if row is not None and row.is_policy]

    def next_policy(self, current: int, direction: int) -> int | None:
        """The next (direction=1) or previous (-1) policy step after ``current``."""
        indices = self.policy_indices
        if not indices:
            return None
        if direction > 0:
            pos = bisect.bisect_right(indices, current)
            return indices[pos] if pos < len(indices) else None
        pos = bisect.bisect_left(indices, current) - 1
        return indices[pos] if pos >= 0 else None


def row_from_brief(brief: StepBrief) -> StepRow:
    """A :class:`StepRow` from the artifact layer's ``StepBrief`` (raw previews)."""
    tool_name = safe_text(brief.tool_name or "", single_line=True, limit=60)
    args = safe_text(brief.args_preview or "", single_line=True, limit=200)
    tool = f"{tool_name}({args})" if tool_name and args else (tool_name or args)
    text = safe_text(brief.text_preview or "", single_line=True, limit=PREVIEW)
    if not brief.is_object:
        text = "(not a JSON object) " + text
    capture = brief.token_capture_status
    if capture and capture != "complete":
        text = f"[capture {safe_text(capture, single_line=True, limit=20)}] " + text
    return StepRow(
        index=brief.index,
        stage=safe_text(brief.stage or "", single_line=True, limit=40),
        action_type=safe_text(brief.action_type or "", single_line=True, limit=30),
        tool=tool,
        result=safe_text(brief.result_preview or "", single_line=True, limit=PREVIEW),
        text=text,
        is_policy=bool(brief.is_policy_step),
        is_rejection=bool(brief.is_protocol_rejection),
        is_teacher=brief.psd_role == "teacher",
    )


class FillGate:
    """Pauses a background fill while the UI waits for something (rows on screen, a
    step's detail): each waiter holds the gate and releases it; the fill's
    :meth:`wait` returns once no one holds it, or after ``timeout`` seconds whatever
    happens (a holder that never releases only slows the fill down)."""

    def __init__(self) -> None:
        self._holders = 0
        self._changed = threading.Condition()

    def hold(self) -> None:
        with self._changed:
            self._holders += 1

    def release(self) -> None:
        with self._changed:
            self._holders = max(0, self._holders - 1)
            if not self._holders:
                self._changed.notify_all()

    @property
    def held(self) -> bool:
        return self._holders > 0

    def wait(self, timeout: float) -> bool:
        """True when no one holds the gate (at once or within ``timeout``)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._holders, timeout)
