"""Live continuation state, without Textual.

- :class:`LiveFeed`: the buffer between a stream's producer (a worker's
  ``on_event``) and the view that paints it. ``push`` is cheap (append to pending
  lists); the view's timer ``take``s what arrived since its last flush. The
  worker never touches a widget: it only pushes into this object.
- :class:`StreamSession`: the stream screen's state — the case and round (the
  title), the policy target and its servers' latest status (the policy line), the
  rebuilt request, the hint being edited, the current feed, the last outcome and
  the message — with ``subscribe`` / ``snapshot`` as the other sessions.
"""

from __future__ import annotations

from dataclasses import dataclass

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.events import Attested, Delta, PolicyEvent, ToolCallDelta
from eviscene_tui.policy.profile import PolicyTarget
from eviscene_tui.policy.request import TeacherRequest
from eviscene_tui.state.observable import Observable

STREAM_STATES = ("idle", "streaming", "complete", "cancelled", "failed")


class LiveFeed:
    """Events of one continuation: the accumulator plus the text not painted yet.

    ``accumulate``: add each pushed event to :attr:`acc` (when the producer does not
    keep its own accumulator in this object already)."""

    def __init__(self, acc: StreamAccumulator | None = None, *, accumulate: bool = False, badge: str | None = None) -> None:
        self.acc = acc if acc is not None else StreamAccumulator()
        self.accumulate = accumulate
        self.state = "streaming"
        self.badge = badge  # the latest attestation result (None: keep the view's session badge)
        self.pending: dict[str, list[str]] = {"reasoning": [], "content": []}
        self.tools_dirty = False
        self.dirty = True
        self.events = 0

    def push(self, ev: PolicyEvent) -> None:
        """Called for every event: buffer only (the view flushes at its own rate)."""
        self.events += 1
        if self.accumulate:
            self.acc.add(ev)
        if type(ev) is Delta:
            if ev.text and ev.kind in self.pending:
                self.pending[ev.kind].append(ev.text)
        elif isinstance(ev, ToolCallDelta):
            self.tools_dirty = True
        elif isinstance(ev, Attested):
            self.badge = ev.attestation.status
        self.dirty = True

    def take(self) -> tuple[dict[str, str], bool]:
        """The text that arrived per pane since the last call, and whether tool calls changed."""
        out = {kind: "".join(parts) for kind, parts in self.pending.items() if parts}
        self.pending = {"reasoning": [], "content": []}
        tools, self.tools_dirty = self.tools_dirty, False
        self.dirty = False
        return out, tools

    def finish(self, state: str) -> None:
        self.state = state
        self.dirty = True


@dataclass(frozen=True, slots=True)
class StreamTitle:
    """The title line: which case and round the continuation repairs."""

    case: str
    round: str  # the round index, or "current"


@dataclass(frozen=True, slots=True)
class PolicyLine:
    """The policy line: the target (``label`` None: no policy, ``error`` says why) and the
    servers' latest status (their base URLs until the first poll answers)."""

    label: str | None
    attested: bool
    model: str
    status: str
    error: str | None


@dataclass(frozen=True, slots=True)
class StreamSnapshot:
    target_label: str | None  # attested / unattested; None = no policy
    target_error: str | None
    title: StreamTitle
    policy: PolicyLine
    request_ready: bool
    request_error: str | None
    hint: str
    hint_edited: bool  # the hint is not the run's (typed here, or a saved draft)
    state: str  # one of STREAM_STATES
    last_status: str | None
    message: str
    severity: str


class StreamSession(Observable[StreamSnapshot]):
    """The stream screen's state; the screen subscribes and renders snapshots."""

    def __init__(self, *, hint: str | None = None, request: TeacherRequest | None = None) -> None:
        super().__init__()
        self.target: PolicyTarget | None = None
        self.target_error: str | None = None
        self.base_request = request
        self.given_request = request is not None
        self.request_error: str | None = None
        self.hint = hint or ""
        self.initial_hint = hint
        self.prefill = hint or ""  # what the box was filled with from the run (or the caller)
        self.typed = False  # the operator changed the hint on this screen
        self.feed: LiveFeed | None = None
        self.sent_request: TeacherRequest | None = None
        self.last_status: str | None = None
        self.message = ""
        self.severity = "info"
        self.case_label = "?"
        self.round_label = "current"
        self.server_status = ""  # the latest status poll's summary ("" until one answers)

    def _changed(self) -> None:
        self._notify(self.snapshot())

    def snapshot(self) -> StreamSnapshot:
        return StreamSnapshot(
            target_label=self.target.label if self.target is not None else None,
            target_error=self.target_error,
            title=StreamTitle(self.case_label, self.round_label),
            policy=self._policy_line(),
            request_ready=self.base_request is not None,
            request_error=self.request_error,
            hint=self.hint,
            hint_edited=self.hint != self.prefill,
            state=self.state,
            last_status=self.last_status,
            message=self.message,
            severity=self.severity,
        )

    def _policy_line(self) -> PolicyLine:
        t = self.target
        if t is None:
            return PolicyLine(None, False, "", "", self.target_error)
        return PolicyLine(t.label, t.attested, t.model, self.server_status or ", ".join(t.base_urls), self.target_error)

    # ------------------------------------------------------------------ state
    def set_case(self, case_label: str, round_index: int | None) -> None:
        """The case and round the screen continues (the title line)."""
        self.case_label = case_label
        self.round_label = str(round_index) if round_index is not None else "current"
        self._changed()

    def set_server_status(self, summary: str) -> None:
        """The latest status poll of the policy servers, summarised (the policy line)."""
        if summary != self.server_status:
            self.server_status = summary
            self._changed()

    @property
    def state(self) -> str:
        return self.feed.state if self.feed is not None else "idle"

    @property
    def streaming(self) -> bool:
        return self.feed is not None and self.feed.state == "streaming"

    def say(self, text: str, severity: str = "info") -> None:
        self.message, self.severity = text, severity
        self._changed()

    def set_target(self, target: PolicyTarget | None, error: str | None) -> None:
        self.target, self.target_error = target, error
        self._changed()

    def request_ready(self, request: TeacherRequest | None, error: str | None, *, run_hint: str | None = None) -> None:
        """The failure step's request was rebuilt (or not); ``run_hint`` is the hint the run used."""
        self.base_request, self.request_error = request, error
        if self.initial_hint is None and run_hint is not None:
            self.initial_hint = run_hint
        prefill = self.initial_hint or (request.hint if request is not None and self.given_request else None)
        if prefill:
            untouched = self.hint == self.prefill  # neither typed here nor a saved draft
            self.prefill = prefill
            if untouched:
                self.hint = prefill
        self._changed()

    def set_hint(self, text: str) -> None:
        """What the hint box holds now (the operator typed)."""
        if text != self.hint:
            self.hint = text
            self.typed = True
            self._changed()

    def restore_draft(self, text: str) -> bool:
        """A draft saved for this screen earlier: it becomes the hint, unless the operator
        has typed here since the screen opened (what they typed wins)."""
        if self.typed or text == self.hint:
            return False
        self.hint = text
        self._changed()
        return True

    def start(self, request: TeacherRequest) -> LiveFeed:
        """A new continuation of ``request``: a fresh feed (the producer adds to its accumulator itself)."""
        self.sent_request = request
        self.feed = LiveFeed()
        self._changed()
        return self.feed

    def ended(self, status: str) -> None:
        if self.feed is not None:
            self.feed.finish(status)
        self.last_status = status
        self._changed()
