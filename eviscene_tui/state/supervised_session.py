"""The supervised screen's live state, without Textual.

A :class:`SupervisedSession` owns one open :class:`~eviscene_tui.supervised.SupervisedSearch`
plus what the screen shows around it: which operation is running, the last message,
what the detail pane shows. :meth:`SupervisedSession.snapshot` is an immutable
:class:`SupervisedSnapshot`, one frozen part per panel, so a screen re-renders
only the panels whose part changed (frozen dataclasses compare by value).

The search's operations do file and network I/O: the screen's workers run them
and hand the outcome back (:meth:`finished`, :meth:`failed`); the session only
changes its own fields and notifies its subscribers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from eviscene_tui.artifacts.trace import SourceTrace
from eviscene_tui.policy.events import Delta, Finished, PolicyEvent, ToolCallDelta, Usage
from eviscene_tui.supervised import records as R
from eviscene_tui.supervised.search import RoundDraft, SupervisedSearch
from eviscene_tui.supervised.stages import PartialOutput

GATES = ("site", "hints", "continuation", "verdict")
BETWEEN = "between rounds"
ENDED = "none (search ended)"  # the title's gate once the search reached a terminal status


def _ended(search: SupervisedSearch) -> bool:
    """The search reached a terminal status (not an operator stop, which resumes)."""
    return search.stopped and not search.stopped_by_operator
CARD_TITLES = {"site": "Site", "hints": "Hints", "continuation": "Continuation", "verdict": "Verdict", BETWEEN: "Next round"}


@dataclass(frozen=True, slots=True)
class TrafficLine:
    """The one-line message under the title (``severity``: info, ok, warning, error)."""

    text: str
    severity: str = "info"


@dataclass(frozen=True, slots=True)
class TitlePart:
    label: str
    round: int
    status: str
    gate: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class SitePart:
    step_index: Any
    stage: str
    kind: str
    category: str
    step_id: str
    preview: str
    relocalization_requested: bool
    upcoming: bool  # between rounds: the site the next round starts from


@dataclass(frozen=True, slots=True)
class ProposalRow:
    index: int
    text: str
    status: str  # pending | approved | rejected
    passed: bool
    errors: tuple[str, ...]
    provider: str
    sha: str


@dataclass(frozen=True, slots=True)
class ContinuationPart:
    approved: str | None
    last_run: str | None  # "complete", "cancelled", "failed (http)", …
    # what the last cancelled or failed run streamed, as stream events (kept in the round's journal)
    partial: tuple[PolicyEvent, ...] = ()
    partial_tokens: int = 0
    ended: str | None = None  # the stream view's end state for ``partial``: cancelled | failed


@dataclass(frozen=True, slots=True)
class VerdictPart:
    attempt_id: str
    completion_ids: int
    stop_reason: str
    episode_sha: str
    # what the teacher did at the site, read from the recorded episode (what is judged)
    action: str
    thought: str
    output: str
    # the recorded continuation as stream events, so the stream view shows what was recorded
    events: tuple[PolicyEvent, ...] = ()
    # (ttft_s, tokens_per_s) measured while it streamed, as the app recorded them in the
    # teacher step; None when the record has none (a search recorded before they were kept)
    timings: tuple[float | None, float | None] | None = None


@dataclass(frozen=True, slots=True)
class NextPart:
    kind: str  # in_progress | stopped | ended | feedback | error
    text: str


@dataclass(frozen=True, slots=True)
class SupervisedSnapshot:
    opened: bool
    title: TitlePart | None
    gate: str | None  # site | hints | continuation | verdict | "between rounds"; None until opened
    site: SitePart | None
    proposals: tuple[ProposalRow, ...]
    continuation: ContinuationPart
    verdict: VerdictPart | None
    next: NextPart | None
    detail: str
    message: TrafficLine
    busy: str | None

    def panels(self) -> dict[str, Any]:
        """The parts the operator reads in the panels (everything but the transient message line)."""
        return {
            "title": self.title,
            "site": self.site,
            "proposals": self.proposals,
            "continuation": self.continuation,
            "verdict": self.verdict,
            "next": self.next,
            "detail": self.detail,
        }


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _open_draft(search: SupervisedSearch) -> RoundDraft | None:
    d = search.draft
    return d if d is not None and d.stage != "closed" else None


class SupervisedSession:
    """One supervised search as the screen shows it; subscribe to hear of changes."""

    def __init__(self) -> None:
        self.search: SupervisedSearch | None = None
        self.busy: str | None = None
        self.message = TrafficLine("opening the supervised search…")
        self.last_error: str | None = None
        self._gate_at_begin: str | None = None
        self._detail: tuple[str | None, str] | None = None  # (gate it was asked at, text): prompt or journal
        self._subscribers: list[Callable[[SupervisedSnapshot], None]] = []

    # ------------------------------------------------------------------ subscription
    def subscribe(self, callback: Callable[[SupervisedSnapshot], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def changed(self) -> None:
        snap = self.snapshot()
        for callback in list(self._subscribers):
            callback(snap)

    # ------------------------------------------------------------------ lifecycle
    def opened(self, search: SupervisedSearch, note: str = "") -> None:
        self.search = search
        if search.read_only:
            self.message = TrafficLine(search.read_only_reason or "read-only", "warning")
        elif search.torn_tail_warning:
            self.message = TrafficLine(search.torn_tail_warning + " (ctrl+k)", "warning")
        else:
            self.message = TrafficLine(note or f"supervised root: {search.root}", "ok")
        self.changed()

    def close(self) -> None:
        if self.search is not None:
            search, self.search = self.search, None
            search.close()

    def say(self, text: str, severity: str = "info") -> None:
        self.message = TrafficLine(text, severity)
        if severity == "error":
            self.last_error = text
        self.changed()

    # ------------------------------------------------------------------ operations
    def begin(self, label: str) -> bool:
        """Claim the session for one operation; False (and a message saying why) when not now."""
        s = self.search
        if s is None:
            self.say("the supervised search is not open", "warning")
            return False
        if s.read_only:
            self.say(s.read_only_reason or "read-only", "warning")
            return False
        if self.busy is not None:
            self.say(f"busy: wait for {self.busy} to finish", "warning")
            return False
        self.busy = label
        self._gate_at_begin = self._gate()
        self.say(f"{label}…")
        return True

    def finished(self, label: str, *, saved: bool, detail: str = "") -> None:
        self.busy = None
        text = f"{label}: saved" if saved else f"{label}: done"
        if detail:
            text += f" — {detail}"
        gate = self._gate()
        s = self.search
        if s is not None and gate == BETWEEN and _ended(s):
            # converged or out of budget: no next round to point at
            text += f" · the search has ended ({s.status_label}): no further round"
        elif gate != self._gate_at_begin and gate is not None:
            # the keyboard stays where it is: say where the next decision is taken
            text += f" · next: the {CARD_TITLES.get(gate, gate)} card (g moves the keys there)"
        self.say(text, "ok")

    def failed(self, label: str, message: str) -> None:
        self.busy = None
        self.say(f"{label} failed: {message}", "error")

    def cancelled(self, label: str) -> None:
        self.busy = None
        self.say(f"{label} cancelled", "warning")

    def show_detail(self, text: str) -> None:
        """Show ``text`` (the proposer prompt, the journal) in the detail pane until the gate changes."""
        self._detail = (self._gate(), text)
        self.changed()

    # ------------------------------------------------------------------ snapshot
    @property
    def gate(self) -> str | None:
        """The open round's gate, ``BETWEEN`` rounds, or None while no search is open."""
        return self._gate()

    def _gate(self) -> str | None:
        s = self.search
        if s is None:
            return None
        d = _open_draft(s)
        return d.stage if d is not None else BETWEEN

    def snapshot(self) -> SupervisedSnapshot:
        s = self.search
        if s is None:
            return SupervisedSnapshot(False, None, None, None, (), ContinuationPart(None, None), None, None, "", self.message, self.busy)
        d = _open_draft(s)
        gate = d.stage if d is not None else BETWEEN
        title = TitlePart(
            label=s.inputs.label,
            round=d.index if d is not None else len(s.history),
            status=s.status_label,
            gate=ENDED if gate == BETWEEN and _ended(s) else gate,
            read_only=s.read_only,
        )
        detail = self._detail[1] if self._detail is not None and self._detail[0] == gate else self._feedback_text(s, d)
        return SupervisedSnapshot(
            opened=True,
            title=title,
            gate=gate,
            site=self._site(s, d),
            proposals=self._proposals(d),
            continuation=self._continuation(d),
            verdict=self._verdict(d),
            next=self._next(s, d),
            detail=detail,
            message=self.message,
            busy=self.busy,
        )

    @staticmethod
    def _site(s: SupervisedSearch, d: RoundDraft | None) -> SitePart:
        if d is not None:
            site, upcoming, needs = d.site, False, d.relocalization_requested and d.stage == "site"
        else:
            site, needs = s.next_site()
            upcoming = True
        steps = R.trace_steps_of(s.inputs.trace)
        step: Any = None
        try:
            step = steps[int(site["source_step_index"])]
        except (KeyError, IndexError, TypeError, ValueError):
            step = None
        preview = ""
        if isinstance(step, dict):
            preview = _text(step.get("thought") or step.get("output") or step.get("tool_name"))
        return SitePart(
            step_index=site.get("source_step_index"),
            stage=_text(site.get("stage")),
            kind=_text(site.get("localization_kind")),
            category=_text(site.get("semantic_category") or "—"),
            step_id=_text(site.get("step_id")),
            preview=preview,
            relocalization_requested=bool(needs),
            upcoming=upcoming,
        )

    @staticmethod
    def _proposals(d: RoundDraft | None) -> tuple[ProposalRow, ...]:
        if d is None:
            return ()
        return tuple(
            ProposalRow(
                index=p.index,
                text=p.text,
                status=p.status,
                passed=p.passed,
                errors=tuple(str(e) for e in (p.audit.get("errors") or [])),
                provider=p.provider,
                sha=p.hint_sha256[:10],
            )
            for p in d.proposals
        )

    @staticmethod
    def _continuation(d: RoundDraft | None) -> ContinuationPart:
        if d is None or d.approved is None:
            return ContinuationPart(None, None)
        last = None
        if d.outcome is not None:
            last = d.outcome.status
            if d.outcome.status == "failed" and d.outcome.error_type:
                last += f" ({d.outcome.error_type})"
        p = d.partial
        if p is None or p.empty or d.outcome is None or d.outcome.ok:
            return ContinuationPart(d.approved.text, last)
        ended = "cancelled" if d.outcome.status == "cancelled" else "failed"
        return ContinuationPart(d.approved.text, last, _partial_events(p), len(p.completion_token_ids), ended)

    @staticmethod
    def _verdict(d: RoundDraft | None) -> VerdictPart | None:
        if d is None or d.record is None or d.stage != "verdict":
            return None
        rec = d.record
        cont = _v if isinstance(_v := rec.get("continuation"), dict) else {}
        step = _teacher_step(d.episode)
        action = ""
        if step.get("tool_name"):
            args = step.get("tool_args")
            action = f"{step['tool_name']} {orjson.dumps(args).decode() if args is not None else ''}".strip()
        elif step:
            action = _text(step.get("action_type"))
        return VerdictPart(
            attempt_id=_text(rec.get("attempt_id")),
            completion_ids=len(rec.get("completion_ids") or []),
            stop_reason=_text(cont.get("stop_reason")),
            episode_sha=_text(cont.get("hinted_teacher_episode_trace_sha256"))[:12],
            action=action,
            thought=_text(step.get("thought")),
            output=_text(step.get("output")),
            events=_recorded_events(step, rec.get("completion_ids")),
            timings=_recorded_timings(step),
        )

    @staticmethod
    def _next(s: SupervisedSearch, d: RoundDraft | None) -> NextPart:
        if d is not None:
            return NextPart("in_progress", "round in progress")
        if s.stopped_by_operator:
            return NextPart("stopped", "stopped by operator")
        if s.stopped:
            return NextPart("ended", s.status_label)  # the final status
        try:
            fb = s.preview_feedback()
        except (KeyError, TypeError, ValueError) as exc:
            return NextPart("error", f"cannot compute the feedback: {exc}")
        anchor = fb.get("anchor_feedback") or {}
        return NextPart(
            "feedback",
            f"needs_relocalization: {str(fb.get('needs_relocalization')).lower()}\n"
            f"locked_hint: {fb.get('locked_hint') or '—'}\n"
            f"excluded_hints: {len(fb.get('excluded_hints') or [])}  previous_rounds: {len(fb.get('previous_rounds') or [])}\n"
            f"anchor_feedback: step {anchor.get('selected_source_step', '—')}, "
            f"earliest error {anchor.get('earliest_error_step', '—')}, checker {anchor.get('checker', {})}",
        )

    @staticmethod
    def _feedback_text(s: SupervisedSearch, d: RoundDraft | None) -> str:
        """The detail pane by default: the feedback object of the open round (as written in
        its request file) or the one the next round would get."""
        if d is not None:
            head, fb = f"{d.name} feedback (driver rules):", d.feedback
        else:
            try:
                fb = s.preview_feedback()
            except (KeyError, TypeError, ValueError) as exc:
                return f"cannot compute the next round's feedback: {exc}"
            head = "next round feedback (driver rules):"
        return head + "\n" + orjson.dumps(fb, option=orjson.OPT_INDENT_2).decode()

    # ------------------------------------------------------------------ what dialogs show
    def trace_listing(self) -> list[tuple[int, bool, str]]:
        """(step index, is a policy step, one-line summary) for each step of the source trace."""
        return trace_listing(self.search.inputs.trace) if self.search is not None else []

    def locked_hint(self) -> str | None:
        """The open round's locked hint (a new hint must start with it, then a newline)."""
        d = _open_draft(self.search) if self.search is not None else None
        if d is None:
            return None
        locked = d.feedback.get("locked_hint") if isinstance(d.feedback, dict) else None
        return locked if isinstance(locked, str) and locked else None


def _partial_events(p: PartialOutput) -> tuple[PolicyEvent, ...]:
    """A cut-short run's output as the events a stream of it gives (the stream view replays them)."""
    events: list[PolicyEvent] = [Delta("reasoning", p.reasoning), Delta("content", p.content, token_ids=tuple(p.completion_token_ids))]
    for i, call in enumerate(p.tool_calls):
        events.append(ToolCallDelta(i, id=call.get("id"), name=call.get("name"), arguments=str(call.get("arguments") or "")))
    return tuple(events)


def _recorded_events(step: dict[str, Any], completion_ids: Any) -> tuple[PolicyEvent, ...]:
    """A recorded teacher step as the events a live stream of it would have given."""
    if not step:
        return ()
    ids = tuple(i for i in completion_ids if isinstance(i, int)) if isinstance(completion_ids, list) else ()
    events: list[PolicyEvent] = [
        Delta("reasoning", _text(step.get("thought"))),
        Delta("content", _text(step.get("output")), token_ids=ids),
    ]
    raw_meta = step.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    raw_action = meta.get("policy_action")
    action: dict[str, Any] = raw_action if isinstance(raw_action, dict) else {}
    for i, call in enumerate(action.get("tool_calls") or []):
        if isinstance(call, dict):
            args = call.get("arguments")
            events.append(ToolCallDelta(i, id=_text(call.get("id")) or None, name=_text(call.get("name")) or None,
                                        arguments=args if isinstance(args, str) else orjson.dumps(args).decode()))
    # the recorded usage and finish reason, as the stream's closing events gave them
    raw_tokens = step.get("tokens")
    tokens: dict[str, Any] = raw_tokens if isinstance(raw_tokens, dict) else {}
    prompt, completion = _count(tokens.get("prompt")), _count(tokens.get("completion"))
    if prompt is not None or completion is not None:
        events.append(Usage(prompt, completion, (prompt or 0) + (completion or 0)))
    finish = meta.get("finish_reason")
    if isinstance(finish, str) and finish:
        events.append(Finished(finish))
    return tuple(events)


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _recorded_timings(step: dict[str, Any]) -> tuple[float | None, float | None] | None:
    """(ttft_s, tokens_per_s) from the teacher step's ``metadata.stream_timings`` (written by
    the app from what it measured while the continuation streamed), or None."""
    raw_meta = step.get("metadata")
    timings = raw_meta.get("stream_timings") if isinstance(raw_meta, dict) else None
    if not isinstance(timings, dict):
        return None

    def number(key: str) -> float | None:
        v = timings.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None

    return number("ttft_s"), number("tokens_per_s")


def _teacher_step(episode: Any) -> dict[str, Any]:
    """The first teacher step of a recorded episode (the continuation at the site), or {}."""
    for step in R.trace_steps_of(episode if isinstance(episode, dict) else {}):
        meta = step.get("metadata") if isinstance(step, dict) else None
        if isinstance(step, dict) and isinstance(meta, dict) and meta.get("psd_role") == "teacher":
            return step
    return {}


def trace_listing(trace: dict[str, Any] | None, limit: int = 2000) -> list[tuple[int, bool, str]]:
    """(step index, is a policy step, one-line summary) for the first ``limit`` steps of the
    raw trace document ``trace`` (none without one)."""
    return [_listing_row(i, step) for i, step in enumerate(R.trace_steps_of(trace if isinstance(trace, dict) else {})[:limit])]


def source_trace_listing(trace: SourceTrace, limit: int = 2000) -> list[tuple[int, bool, str]]:
    """:func:`trace_listing` of a loaded source trace; an indexed one is read step by
    step from its byte ranges without the token captures' lists (the same rows)."""
    if not trace.lazy:
        return trace_listing(trace.raw, limit)
    if trace.state.get("all_steps") is not trace.raw_steps:
        return []  # the steps are not at ``state.all_steps``: not a trace a search starts from
    return [_listing_row(i, trace.light_step(i)) for i in range(min(limit, trace.step_count))]


def _listing_row(i: int, step: Any) -> tuple[int, bool, str]:
    st = step if isinstance(step, dict) else {}
    what = st.get("tool_name") or st.get("action_type") or ""
    said = st.get("thought") or st.get("output") or ""
    return i, R.is_policy_step(st), f"{R.step_stage(st)} {what} {said}".strip()
