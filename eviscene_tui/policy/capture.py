"""A token capture of a live (or just finished) continuation, for the token inspector.

    snap = LiveSnapshot.of(acc, status="streaming")       # cheap copy, on the UI thread
    data = live_capture(snap, student_prompt_ids=ids)      # in a worker: logprobs, diff

The capture holds the streamed prompt ids (the hinted *teacher* prompt) followed by the
completion ids, the logprobs / top-k when the request asked for them, and ``usage`` for
the accounting checks. When the student prompt is known (the failure step's
``policy_token_capture.prompt_token_ids``, see
:func:`eviscene_tui.tokens.sources.source_step_prompt_ids`) the capture also carries the
student-vs-teacher diff, so the inspector highlights exactly where the hint went and can
show both prompts side by side. Textual-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.events import TokenLogprob
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.request import TeacherRequest, chat_body
from eviscene_tui.tokens.capture import Check, CaptureData, from_stream
from eviscene_tui.tokens.diff import prompt_diff

# ``TokenScreen`` offers the student prompt side by side for keys ending in this suffix
LIVE_TEACHER_KEY = "live:teacher_prompt_ids"
LIVE_KEY = "live"


@dataclass(frozen=True, repr=False)
class LiveSnapshot:
    """An immutable copy of what a continuation has streamed so far."""

    def __repr__(self) -> str:
        # short: a worker's description is built from its arguments' reprs
        n = len(self.prompt_token_ids) if self.prompt_token_ids is not None else None
        return f"LiveSnapshot(status={self.status!r}, prompt_ids={n}, completion_ids={len(self.completion_token_ids)})"

    prompt_token_ids: tuple[int, ...] | None
    completion_token_ids: tuple[int, ...]
    logprobs: tuple[TokenLogprob, ...]
    usage: dict[str, Any] | None
    status: str
    model: str | None = None
    base_url: str | None = None
    attestation: str | None = None

    @classmethod
    def of(cls, acc: StreamAccumulator, *, status: str | None = None) -> "LiveSnapshot":
        usage = None
        if acc.usage is not None:
            usage = {"prompt_tokens": acc.usage.prompt_tokens, "completion_tokens": acc.usage.completion_tokens,
                     "total_tokens": acc.usage.total_tokens}
        return cls(
            prompt_token_ids=tuple(acc.prompt_token_ids) if acc.prompt_token_ids is not None else None,
            completion_token_ids=tuple(acc.completion_token_ids),
            logprobs=tuple(acc.logprobs),
            usage=usage,
            status=status or acc.status,
            model=acc.model,
            base_url=acc.base_url,
            attestation=acc.attestation.status if acc.attestation is not None else None,
        )

    @property
    def empty(self) -> bool:
        return not self.prompt_token_ids and not self.completion_token_ids


def live_capture(
    snap: LiveSnapshot,
    *,
    student_prompt_ids: list[int] | None = None,
    student_source: str = "the source step's policy_token_capture",
    label: str | None = None,
    request: TeacherRequest | None = None,
    config: PolicyConfig | None = None,
) -> CaptureData:
    """The inspector's capture for ``snap`` (teacher prompt ids, then completion ids).

    With the ``request`` that was sent (and the ``config`` it was sent with), the capture
    knows its hint (the inspector finds the hint's span from its text) and whether
    logprobs were asked for."""
    lps = [lp.to_json() for lp in snap.logprobs] if snap.logprobs else None
    teacher = list(snap.prompt_token_ids) if snap.prompt_token_ids is not None else None
    with_diff = teacher is not None and student_prompt_ids is not None
    what = label or f"live continuation ({snap.status})"
    data = from_stream(
        teacher,
        snap.completion_token_ids,
        logprobs=lps,
        usage=snap.usage,
        status=snap.status,
        key=LIVE_TEACHER_KEY if with_diff else LIVE_KEY,
        label=what,
    )
    if snap.status == "streaming":
        data.notes.append("still streaming: a snapshot of the ids received so far (reopen for more)")
    if snap.attestation is not None:
        data.notes.append(f"attestation: {snap.attestation}" + (f" ({snap.model} at {snap.base_url})" if snap.model else ""))
    if teacher is None:
        data.notes.append("the server sent no prompt_token_ids: the teacher prompt is unknown")
    if request is not None:
        data.round_index = request.round_index
        body = chat_body(request, config or PolicyConfig(), model="")
        data.logprobs_requested = body.get("logprobs") is True
        if request.hint and teacher is not None:
            data.hint_text = request.hint
            data.hint_prompt_len = len(teacher)
    if with_diff:
        assert teacher is not None and student_prompt_ids is not None
        data.student_ids = list(student_prompt_ids)
        data.teacher_ids = teacher
        data.prompt_diff = d = prompt_diff(student_prompt_ids, teacher)
        if data.hint_text is None:
            data.highlight = d.inserted if d.inserted[1] > d.inserted[0] else None
        if d.identical:
            data.checks.append(Check("warn", f"teacher prompt ids = student prompt ids ({student_source}): the hint changed nothing"))
        else:
            a, b = d.inserted
            data.checks.append(Check("info", f"teacher prompt ids {a:,}–{b - 1:,} differ from the student prompt ({student_source})"
                                     if b > a else f"teacher prompt differs from the student prompt ({student_source})"))
    elif teacher is not None:
        data.notes.append("student prompt unknown (no source step capture): no student/teacher diff")
    return data
