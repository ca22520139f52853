"""The operator gate of a search as a widget: the pending gate as a card, the
running continuation (live, from the gate's channel), the round the driver runs
(followed from its files) and the history.

The card renders the gate its driver DECLARED: the decisions the gate offers,
whichever driver runs (the real EviScene driver under ``eviscene-tui gate``, the
bundled driver of ``eviscene-tui repair``). Its keys name verbs (``a`` approve /
accept, ``r`` relocalize, ``s`` stop, ``x`` reject, ``n`` add a hint, ``c`` cancel the
stream); a key is live only when the pending gate offers a decision of that verb,
and only while the card holds focus. :class:`GatePanel` is used by the gate screen
and, compact, on the case screen of a gated search. Workers read the sidecar every
half second, tail the live channel every few milliseconds and take decisions; they
post typed messages, and only the handlers touch widgets.
"""

from __future__ import annotations

import json
import subprocess
import time
from functools import partial
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.sidecar import GateRequest
from eviscene_tui.options import AppOptions
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.gate import CallEntry, GateSession, GateSnapshot, ToolEvent, call_capture, resume_refusal
from eviscene_tui.state.live import LiveBatcher, LiveCall
from eviscene_tui.state.stream_session import LiveFeed
from eviscene_tui.tokens.sources import source_step_prompt_ids
from eviscene_tui.ui.actions import BY_ID, bindings
from eviscene_tui.ui.messages import (
    GateCallCapture,
    GateCallRequested,
    GateDecisionDone,
    GateDecisionRequested,
    GateResumed,
    GateSnapshotLoaded,
    LiveRecords,
)
from eviscene_tui.ui.screens.dialogs import HintEditor, ReasonPrompt, StepPicker, VerdictForm
from eviscene_tui.ui.screens.tokens import TokenScreen
from eviscene_tui.ui.widgets.stream_view import MAX_FLUSH_HZ, StreamView

POLL_SECONDS = 0.5
# after the operator decides or resumes, the gate is re-read this often for a few seconds: the
# driver takes a decision within its own poll (0.1 s) and its next card often follows at once,
# which the operator should not wait a whole POLL_SECONDS tick to see
QUICK_POLL_SECONDS = 0.05
QUICK_POLL_WINDOW_SECONDS = 3.0
CALL_CLOCK_SECONDS = 1.0  # a running call's "running for N s" is redrawn this often
LIVE_POLL_SECONDS = 0.008  # the live channel is looked at this often (an fstat when nothing came)
VERB_ACTION_IDS = {verb: f"gate.{verb}" for verb in P.VERBS}  # the card key of each verb (ui/actions.py)


def _s(value: object, limit: int | None = 240) -> str:
    """One safe line of a run value; an absent value (JSON null) reads "—", never "null"."""
    if value is None:
        return "\u2014"
    return safe_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str), single_line=True, limit=limit)


def checker_line(checker: Any) -> str:
    """Checker values in words (``anchor_matches false``), never a Python repr."""
    if not isinstance(checker, dict) or not checker:
        return "none"
    return ", ".join(f"{_s(k, 40)} {'true' if v is True else 'false' if v is False else _s(v, 20)}" for k, v in checker.items())


def offered_keys(card: GateRequest) -> str:
    """The card's key line: each decision the gate offers, with its key."""
    parts = []
    for offer in card.offers:
        spec = P.spec_of(offer["action"])
        if spec is None:
            continue
        key = BY_ID[VERB_ACTION_IDS[spec.verb]].key
        parts.append(f"{key} {offer['action']}")
    return " · ".join(parts)


# ---------------------------------------------------------------------- rendering (pure)
def render_header(snap: GateSnapshot) -> Text:
    st = snap.status
    d = st.driver
    text = Text()
    text.append("Gated search ", style="bold")
    text.append(_s(str(st.root)))
    if st.session.get("driver") == "bundled":
        text.append("  (bundled driver: eviscene-tui repair)", style="dim")
    text.append("\n")
    if not d.present:
        text.append("driver: no heartbeat yet", style="italic")
    elif d.alive:
        text.append(f"driver: pid {d.pid} on {_s(d.host or '?')}, alive ({_s(d.state or '')})", style="green")
    elif d.state == "exited":
        text.append(f"driver: exited (exit code {d.exit_code})", style="yellow")
    else:
        text.append(f"driver GONE: pid {d.pid} on {_s(d.host or '?')}, last seen {_s(d.last_seen or '?')}", style="bold red")
    if snap.search_status:
        text.append(f"   search: {snap.search_label}")
    if snap.resume_note:
        text.append("\n")
        text.append(_s(snap.resume_note, None), style="bold yellow")
    for problem in st.problems + snap.journal_problems:
        text.append("\nproblem: ", style="bold red")
        text.append(_s(problem))
    if snap.message:
        text.append("\n")
        text.append(_s(snap.message))
    return text


def _round_card(snap: GateSnapshot, card: GateRequest, text: Text) -> None:
    fb = card.feedback
    text.append("What the round will get\n", style="bold")
    text.append(f"  needs_relocalization: {_s(fb.get('needs_relocalization'))} · locked hint: {_s(fb.get('locked_hint') or None, 160)}"
                f" · excluded hints: {len(fb.get('excluded_hints') or [])}\n")
    anchor = fb.get("anchor_feedback") or {}
    text.append(f"  anchor: selected step {_s(anchor.get('selected_source_step'))}, earliest error step "
                f"{_s(anchor.get('earliest_error_step'))}, checker {checker_line(anchor.get('checker'))}\n")
    text.append(f"  current site: step {_s(card.doc.get('current_site'))}\n")
    reloc = card.offer_of(P.RELOCALIZE)
    if reloc is not None:
        preview = P.effective_feedback(fb, P.RELOCALIZE, None, card.doc.get("current_site") if type(card.doc.get("current_site")) is int else None)
        text.append(f"  relocalized, it gets: needs_relocalization true, anchor step {_s(preview['anchor_feedback'].get('selected_source_step'))}"
                    " (+ the step you pick)" + (f"; {_s(reloc.get('why'), 160)}" if reloc.get("why") else "") + "\n")
    if snap.pinned is not None:
        text.append(f"  {_s(snap.pinned, 300)}\n", style="bold yellow")
    text.append("\nChanged since the last round\n", style="bold")
    for change in snap.changes:
        text.append(f"  • {change}\n")


def _site_lines(site: Any, text: Text) -> None:
    if not isinstance(site, dict):
        return
    text.append(f"  at step {_s(site.get('source_step_index'))} ({_s(site.get('stage'))}) the agent did: ", style="bold")
    what = site.get("tool_name") or site.get("action_type")
    text.append(f"{_s(what, 60)} {_s(site.get('tool_args'), 120) if site.get('tool_args') else ''}\n")
    if site.get("thought"):
        text.append(f"    thought: {_s(site.get('thought'), 300)}\n")
    if site.get("output"):
        text.append(f"    output: {_s(site.get('output'), 300)}\n")


def _trace_site_line(snap: GateSnapshot, card: GateRequest, text: Text) -> None:
    """A driver that does not say where its hint applies (the real driver): the round's
    localized step, read from its files, and what the agent did there, from the trace."""
    p = snap.progress
    step = p.localization_step if p is not None and p.round == card.round else None
    brief = next((s for s in snap.steps if s.index == step), None)
    if brief is not None:
        text.append(f"  at step {step} ({_s(brief.stage, 40)}) the agent did: ", style="bold")
        text.append(f"{_s(brief.label, 200)}\n")


def _hint_card(snap: GateSnapshot, card: GateRequest, text: Text) -> None:
    hint = card.hint
    if isinstance(card.doc.get("site"), dict):
        _site_lines(card.doc.get("site"), text)
    else:
        _trace_site_line(snap, card, text)
    if hint is None:
        text.append("\nNo hint to decide yet", style="bold")
        who = card.doc.get("hint_constructor")
        text.append(" (no hint constructor: add one)" if not who else " (the hint constructor proposed none left)")
        text.append("\n")
    else:
        text.append("\n" + _s(hint.get("text") or "", None) + "\n\n")
        if hint.get("note"):
            text.append(f"  {_s(hint.get('note'), 200)}\n", style="italic")
        text.append(f"  level {_s(hint.get('level'))} · by {_s(hint.get('provider'), 40)} {_s(hint.get('model'), 40)}"
                    f" · proposal {_s(hint.get('proposal_id'), 60)}\n")
        raw_audit = hint.get("audit")
        audit: dict[str, Any] = raw_audit if isinstance(raw_audit, dict) else {}
        passed = audit.get("passed")
        text.append("  audit: ")
        text.append("passed" if passed is True else f"FAILED {', '.join(_s(e, 40) for e in audit.get('errors') or [])}",
                    style="green" if passed is True else "red")
        rule = hint.get("revision_rejection")
        text.append("  · driver rule (revision_rejection): ")
        if rule is None:
            text.append("unavailable", style="italic")
        elif rule:
            text.append(f"rejects it: {_s(rule)}", style="red")
        else:
            text.append("admits it", style="green")
        text.append("\n")
    rejected = card.doc.get("rejected_before")
    if isinstance(rejected, list) and rejected:
        text.append(f"  rejected before this gate: {', '.join(_s(r, 40) for r in rejected)}\n")
    if card.doc.get("notice"):
        text.append(f"  {_s(card.doc.get('notice'), 300)}\n", style="yellow")
    if snap.progress is not None and snap.progress.round == card.round and snap.progress.audits:
        text.append(f"  audit rows so far: {', '.join(snap.progress.audits)}\n")


def _attempt_card(card: GateRequest, text: Text) -> None:
    hint = card.hint or {}
    text.append(f"hint: {_s(hint.get('text') or '', 300)}\n")
    if card.streaming:
        text.append("the continuation is streaming (below); c cancels it\n", style="italic")
        return
    attempt = card.attempt or {}
    text.append(f"  teacher: {_s(attempt.get('tool_name') or attempt.get('action_type'), 60)} {_s(attempt.get('tool_args'), 160)}\n")
    if attempt.get("thought"):
        text.append(f"  thought: {_s(attempt.get('thought'), 400)}\n")
    if attempt.get("output"):
        text.append(f"  output: {_s(attempt.get('output'), 400)}\n")
    raw_timings = attempt.get("timings")
    timings: dict[str, Any] = raw_timings if isinstance(raw_timings, dict) else {}
    text.append(f"  {_s(attempt.get('completion_tokens'))} completion tokens · finish {_s(attempt.get('finish_reason'))}"
                f" · stop {_s(attempt.get('stop_reason'))} · ttft {_s(timings.get('ttft_s'))} s · {_s(timings.get('tokens_per_s'))} tok/s\n")


def render_card(snap: GateSnapshot) -> Text:
    card = snap.card
    text = Text()
    if card is None:
        text.append("No gate pending.", style="bold")
        if not resume_refusal(snap):
            why = "The search is paused" if snap.search_status.startswith("paused_") else "The driver is gone"
            text.append(f"  {why}; R resumes the search under the gate.")
        return text
    what = f"round {card.round}" + (f" · {card.kind} {card.hint_index}" if card.kind != "round" else "")
    text.append(f"{card.kind.upper()} GATE · {what}", style="bold reverse")
    text.append(f"   {offered_keys(card)}\n\n")
    if card.kind == "round":
        _round_card(snap, card, text)
    elif card.kind == "hint":
        _hint_card(snap, card, text)
    else:
        _attempt_card(card, text)
    return text


def dialog_context(card: GateRequest) -> Text:
    """What a decision dialog acts on: the hint of a hint or attempt gate, or the feedback
    round N will get (site, lock, exclusions, the last round)."""
    text = Text()
    if card.kind != "round":
        hint: dict[str, Any] = card.hint or {}
        text.append(f"{card.kind} {card.hint_index} of round {card.round}: ", style="bold")
        text.append(_s(hint.get("text") or "(no hint yet)", 600) + "\n")
        raw_audit = hint.get("audit")
        audit: dict[str, Any] = raw_audit if isinstance(raw_audit, dict) else {}
        if hint:
            text.append(f"level {_s(hint.get('level'))} · proposal {_s(hint.get('proposal_id'), 60)} · audit "
                        + ("passed" if audit.get("passed") is True else "FAILED"))
        return text
    fb = card.feedback
    text.append(f"round {card.round} will get: ", style="bold")
    text.append(f"current site step {_s(card.doc.get('current_site'))} · needs_relocalization {_s(fb.get('needs_relocalization'))}"
                f" · locked hint {_s(fb.get('locked_hint') or None, 120)} · {len(fb.get('excluded_hints') or [])} excluded hint(s)")
    rounds = fb.get("previous_rounds") or []
    last = rounds[-1] if rounds and isinstance(rounds[-1], dict) else None
    if last is not None:
        reasons = last.get("rejected_proposal_reasons") or []
        text.append(f"\nlast round: {_s(last.get('status') or '?')}, {len(last.get('attempts') or [])} attempt(s)"
                    + (f", rejected: {', '.join(_s(r) for r in reasons)}" if reasons else ""))
    return text


def render_history(snap: GateSnapshot) -> Text:
    text = Text()
    text.append("History\n", style="bold")
    if not snap.history:
        text.append("  (no earlier round)\n")
    for row in snap.history:
        reasons = row.get("rejected_proposal_reasons") or []
        text.append(f"  round {row.get('round')}: {_s(row.get('status') or '?')}" + (f", rejected: {', '.join(_s(r) for r in reasons)}" if reasons else "") + "\n")
        for attempt in row.get("attempts") or []:
            checker = attempt.get("checker") or {}
            failed = [k for k, v in checker.items() if v is False]
            text.append(f"    step {_s(attempt.get('selected_source_step'))} · {_s(attempt.get('verdict'))}")
            text.append(" · checks failed: " + (", ".join(_s(f, 40) for f in failed) if failed else "none"))
            text.append("\n      hint: " + _s(attempt.get("hint") or "", 160) + "\n")
    text.append("\nDecisions\n", style="bold")
    for decision in snap.status.decisions[-8:]:
        mark = snap.step_notes.get(decision.decision_id, "")
        broken = decision.decision_id in snap.untrusted
        text.append("  " + ("! " if broken else "") + _s(decision.describe()) + (f" — {_s(decision.reason)}" if decision.reason else ""),
                    style="bold red" if broken else "")
        if mark:
            text.append(f"  [{_s(mark)}]", style="bold yellow")
        text.append("\n")
    return text


def render_progress(snap: GateSnapshot) -> Text:
    p = snap.progress
    text = Text()
    text.append("Running round (live from the driver's files)\n", style="bold")
    if p is None:
        text.append("  no round started yet\n")
        return text
    text.append(f"  round {p.round}: localization step {_s(p.localization_step)}")
    text.append(f" · status {p.status or '—'}")
    if p.verdict:
        text.append(f" · verdict {p.verdict}", style="green" if p.verdict == "accepted" else "yellow")
    text.append("\n")
    for hint in p.proposals:
        text.append(f"  proposal: {hint}\n")
    if p.audits:
        text.append(f"  audits: {', '.join(p.audits)}\n")
    text.append(f"  teacher episode events: {p.events}" + (f" (last: {p.last_event})" if p.last_event else ""))
    if p.torn_tail:
        text.append(" · a line is being written", style="italic")
    text.append("\n")
    for line in p.recent_events:
        text.append(f"    {line}\n", style="dim")
    for line in p.teacher_steps:
        text.append(f"  teacher step: {line}\n")
    for problem in p.problems:
        text.append(f"  {problem}\n", style="yellow")
    return text


def render_live_title(call: LiveCall | None) -> Text:
    text = Text()
    if call is None:
        text.append("Live continuation: none yet", style="dim")
        return text
    where = f"round {call.round}" + (f" · hint {call.hint}" if call.hint is not None else "")
    text.append(f"Live continuation · {where} · {_s(call.stage, 40)} · {call.status}", style="bold")
    if call.hint_where:
        text.append(f"\n  hint span: {_s(call.hint_where, 120)}")
    if call.hint_text:
        text.append(f"\n  hint: {_s(call.hint_text, 200)}")
    return text


def call_prompt(entry: CallEntry, now: float) -> Text:
    """One policy call of the running round: its stage, then "running for N s", or its
    tokens, finish reason and duration (or the failure's type)."""
    call = entry.call
    text = Text()
    if call is None:
        return text
    text.append(_s(call.stage or "policy call", 40), style="bold")
    if call.lifecycle_kind and call.lifecycle_kind != call.stage:
        text.append(f" ({_s(call.lifecycle_kind, 40)})", style="dim")
    if call.hint is not None:
        text.append(f" · hint {call.hint}")
    if call.status == "running":
        text.append(f" · running for {max(0, int(now - call.started_at))} s", style="yellow")
        return text
    if call.status == "failed":
        text.append(f" · failed: {_s(call.error_type or 'error', 60)}", style="red")
        return text
    prompt, completion, duration = call.prompt_tokens, call.completion_tokens, call.duration_ms
    text.append(f" · {prompt if prompt is not None else '?'} prompt + {completion if completion is not None else '?'} completion tokens"
                f" · finish {_s(call.finish_reason or '?', 30)}" + (f" · {duration / 1000:.2f} s" if duration is not None else ""), style="green")
    if call.tool_calls:
        text.append(" → " + ", ".join(_s(t, 40) for t in call.tool_calls))
    if call.request_id:
        text.append(f"  [{_s(call.request_id, 40)}]", style="dim")
    if entry.first_teacher and call.hint_text:
        text.append(" · hint in its prompt", style="dim")
    return text


def tool_prompt(tool: ToolEvent) -> Text:
    text = Text()
    text.append(f"    tool call: {_s(tool.tool, 60)}", style="cyan")
    if tool.event_type == "tool_result_reused":
        text.append(" (result reused)", style="dim")
    return text


def render_calls_title(session: GateSession, entries: list[CallEntry]) -> Text:
    text = Text()
    calls = [e.call for e in entries if e.call is not None]
    text.append("Policy calls of the running round", style="bold")
    if calls:
        text.append(f" · {len(calls)} ({sum(c.status == 'running' for c in calls)} running) · Enter on a completed call: its tokens",
                    style="dim")
    elif not entries:
        text.append(" · none yet", style="dim")
    if session.live.unavailable:
        text.append("\n  " + _s(session.live.unavailable, 300), style="bold yellow")
    return text


class CallList(OptionList):
    """The running round's policy calls, as they start and return, with the tool calls
    between them (those lines cannot be picked). Enter opens the token inspector on a
    completed call's capture."""

    # no border, focused or not (OptionList:focus would give it one): a border that comes
    # and goes with the focus re-lays out the whole screen on every tab through the list;
    # the focus shows in its tint and its highlighted call
    DEFAULT_CSS = """
    CallList { height: auto; max-height: 14; border: none; padding: 0 1; }
    CallList:focus { border: none; }
    """
    BINDINGS = bindings("gate.calls")

    def action_open_call(self) -> None:
        option = self.highlighted_option
        if option is not None and option.id is not None:
            self.post_message(GateCallRequested(option.id))


# ---------------------------------------------------------------------- the card
class GateCard(Static, can_focus=True):
    """The pending gate; its decision keys are live only while it has focus, and only
    for the decisions it offers."""

    DEFAULT_CSS = """
    GateCard { border: round $primary; padding: 0 1; height: auto; }
    GateCard:focus { border: round $accent; }
    """
    BINDINGS = bindings("gate.card")

    request: GateRequest | None = None

    def action_for(self, verb: str) -> str | None:
        """The decision of ``verb`` the pending gate offers (None: the key does nothing here)."""
        for offer in self.request.offers if self.request is not None else []:
            spec = P.spec_of(offer["action"])
            if spec is not None and spec.verb == verb:
                return spec.action
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the keys of the decisions the pending gate offers are shown and run."""
        if action != "decide":
            return True
        return self.action_for(str(parameters[0]) if parameters else "") is not None

    def action_decide(self, verb: str) -> None:
        action = self.action_for(verb)
        if action is not None:
            self.post_message(GateDecisionRequested(action))


class GatePanel(Vertical):
    """The gate of one search: header, card, the live continuation and (unless
    ``compact``) the running round and the history."""

    DEFAULT_CSS = """
    GatePanel { height: auto; }
    GatePanel .gate-text { padding: 0 1; height: auto; }
    GatePanel.-compact { max-height: 50%; }
    GatePanel #gate-stream { height: 16; }
    """

    def __init__(self, session: GateSession, *, compact: bool = False, options: AppOptions | None = None, id: str | None = None) -> None:
        super().__init__(id=id, classes="-compact" if compact else "")
        self.session = session
        self.compact = compact
        # the app's options (the token inspector's decoder); a screen without them reads the root alone
        self.options = options or AppOptions(root=session.root, workdir=session.root.parent / (session.root.name + ".eviscene-tui"))
        self._unsubscribe = session.subscribe(self._render_snapshot)
        self._resumed: list[subprocess.Popen[bytes]] = []  # drivers started with R: reaped when they exit
        self._call_keys: list[str] = []
        self._call_plain: dict[str, str] = {}
        self._entries: dict[str, CallEntry] = {}
        self._feed: LiveFeed | None = None
        self._feed_call: str | None = None
        self._live_title: tuple[str, str] | None = None
        self._load_worker: Worker[None] | None = None
        self._quick_until = 0.0  # monotonic time the quick re-reads after a decision end
        self._quick_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("reading the gate…"), id="gate-header", classes="gate-text")
        yield GateCard(Text(""), id="gate-card")
        if not self.compact:
            yield Static(render_live_title(None), id="gate-live-title", classes="gate-text")
            yield StreamView(id="gate-stream")
            yield Static(Text(""), id="gate-progress", classes="gate-text")
            yield Static(render_calls_title(self.session, []), id="gate-calls-title", classes="gate-text")
            yield CallList(id="gate-calls")
            yield Static(Text(""), id="gate-history", classes="gate-text")

    def on_mount(self) -> None:
        self._poll()
        self.set_interval(POLL_SECONDS, self._poll_unless_reading)
        if not self.compact:
            self.set_interval(CALL_CLOCK_SECONDS, self._call_clock)
            self.run_worker(self._tail, thread=True, exclusive=True, group="gate-live", exit_on_error=False)

    def on_unmount(self) -> None:
        self._unsubscribe()

    # ------------------------------------------------------------ reading
    def _poll(self) -> None:
        self._resumed = [proc for proc in self._resumed if proc.poll() is None]
        self._load_worker = self.run_worker(self._load, thread=True, exclusive=True, group="gate-load", exit_on_error=False)

    def _poll_quickly(self) -> None:
        """Re-read now, then every QUICK_POLL_SECONDS for QUICK_POLL_WINDOW_SECONDS."""
        self._quick_until = time.monotonic() + QUICK_POLL_WINDOW_SECONDS
        if self._quick_timer is None:
            self._quick_timer = self.set_interval(QUICK_POLL_SECONDS, self._quick_poll)
        self._poll()

    def _quick_poll(self) -> None:
        if time.monotonic() >= self._quick_until:
            if self._quick_timer is not None:
                self._quick_timer.stop()
                self._quick_timer = None
            return
        self._poll_unless_reading()

    def _poll_unless_reading(self) -> None:
        """A timer's re-read: skipped while the last read still runs (a slow gate folder
        never piles up reads, from either timer)."""
        worker = self._load_worker
        if worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
            return
        self._poll()

    def _load(self) -> None:
        self.post_message(GateSnapshotLoaded(self.session.load()))

    def _tail(self) -> None:
        """The live channel, read as it grows (a worker thread): read, parsed and folded
        here, posted in batches no more often than the stream view paints."""
        worker = get_current_worker()
        batcher = LiveBatcher(self.session.gate_dir_path / P.LIVE_FILE, min_gap=1 / MAX_FLUSH_HZ)
        while not worker.is_cancelled:
            batch = batcher.poll(time.monotonic())
            if batch is not None:
                self.post_message(LiveRecords(*batch))
            time.sleep(LIVE_POLL_SECONDS)

    @on(GateSnapshotLoaded)
    def _loaded(self, message: GateSnapshotLoaded) -> None:
        self.session.apply(message.snapshot)

    def _render_snapshot(self, snap: GateSnapshot) -> None:
        card = self.query_one(GateCard)
        card.request = snap.card
        with self.app.batch_update():
            self.query_one("#gate-header", Static).update(render_header(snap))
            card.update(render_card(snap))
            if not self.compact:
                self.query_one("#gate-progress", Static).update(render_progress(snap))
                self.query_one("#gate-history", Static).update(render_history(snap))
                self._refresh_calls()
        self.screen.refresh_bindings()

    # ------------------------------------------------------------ the running round's policy calls
    def _refresh_calls(self) -> None:
        """Redraw the call list from the session: new calls are appended, changed ones
        redrawn in place (the highlighted call stays highlighted)."""
        entries = self.session.call_entries()
        view = self.query_one("#gate-calls", CallList)
        now = time.time()
        keys = [e.key for e in entries]
        prompts = [call_prompt(e, now) if e.call is not None else tool_prompt(e.tool) if e.tool is not None else Text("") for e in entries]
        self._entries = dict(zip(keys, entries))
        known = len(self._call_keys)
        if keys[:known] == self._call_keys:
            for key, prompt in zip(keys[:known], prompts[:known]):
                if self._call_plain.get(key) != prompt.plain:
                    view.replace_option_prompt(key, prompt)
            if len(keys) > known:
                view.add_options([Option(p, id=k, disabled=self._entries[k].call is None) for k, p in zip(keys[known:], prompts[known:])])
        else:  # another round, or the channel started over
            highlighted = view.highlighted_option.id if view.highlighted_option is not None else None
            view.clear_options()
            view.add_options([Option(p, id=k, disabled=self._entries[k].call is None) for k, p in zip(keys, prompts)])
            if highlighted in self._entries:
                view.highlighted = keys.index(highlighted)
        self._call_keys = keys
        self._call_plain = {k: p.plain for k, p in zip(keys, prompts)}
        self.query_one("#gate-calls-title", Static).update(render_calls_title(self.session, entries))

    def _call_clock(self) -> None:
        if any(e.call is not None and e.call.status == "running" for e in self._entries.values()):
            self._refresh_calls()

    @on(GateCallRequested)
    def _call_requested(self, message: GateCallRequested) -> None:
        message.stop()
        entry = self._entries.get(message.key)
        call = entry.call if entry is not None else None
        if entry is None or call is None:
            return
        if call.status == "running":
            self.notify("this call is still running: its tokens come when it returns", markup=False)
            return
        if not call.has_capture:
            why = f"it failed ({call.error_type or 'error'})" if call.status == "failed" else "its record holds no token ids"
            self.notify(safe_text(f"no tokens to show: {why}", single_line=True), severity="warning", markup=False)
            return
        snap = self.session.snapshot()
        step = snap.progress.localization_step if snap is not None and snap.progress is not None else None
        self.run_worker(partial(self._capture_worker, entry, step), thread=True, exclusive=True, group="gate-call-capture",
                        exit_on_error=False)

    def _capture_worker(self, entry: CallEntry, step: int | None) -> None:
        """The call's capture and the search root as a case (its serving profile decodes the
        ids; its failure step's prompt is the student side of the hint's diff)."""
        try:
            case = load_case(self.session.root, path_map=self.options.path_map)
            student = None
            if entry.first_teacher:
                try:
                    student = source_step_prompt_ids(case, step)
                except Exception:  # noqa: BLE001 - a damaged trace only loses the diff
                    student = None
            self.post_message(GateCallCapture(call_capture(entry, student), case))
        except Exception as exc:  # noqa: BLE001 - said on the screen
            self.post_message(GateCallCapture(None, None, f"{type(exc).__name__}: {exc}"))

    @on(GateCallCapture)
    def _call_capture(self, message: GateCallCapture) -> None:
        message.stop()
        if message.capture is None:
            self.notify(safe_text(f"cannot open the token inspector: {message.error or 'no token ids'}", single_line=True),
                        severity="error", markup=False)
            return
        self.app.push_screen(TokenScreen(message.case, self.options, capture=message.capture))

    @on(LiveRecords)
    def _live_records(self, message: LiveRecords) -> None:
        message.stop()
        view = self.query_one("#gate-stream", StreamView)
        for call, events, fresh in self.session.take_live(message.records, message.reset):
            if not call.streaming:
                continue  # a call the driver does not stream (the real driver's): listed with the calls, not streamed
            if fresh or self._feed is None or self._feed_call != call.call:
                self._feed = view.attach(LiveFeed(accumulate=True))
                self._feed_call = call.call
            for ev in events:
                self._feed.push(ev)
            if call.status != "running":
                timings = call.end.get("timings") if isinstance(call.end.get("timings"), dict) else None
                view.finish("complete" if call.status == "complete" else "cancelled" if call.end.get("status") == "cancelled" else "failed",
                            timings=timings)
        latest = self.session.live.latest_streaming
        title = (latest.call, latest.status) if latest is not None else None
        if title != self._live_title:  # the title changes with the call, not with each batch of tokens
            self._live_title = title
            self.query_one("#gate-live-title", Static).update(render_live_title(latest))
        if message.records:
            view.flush_soon()
        if message.reset or any(isinstance(r, dict) for r in message.records):  # a call started or ended
            self._refresh_calls()

    # ------------------------------------------------------------ deciding
    @on(GateDecisionRequested)
    def _requested(self, message: GateDecisionRequested) -> None:
        message.stop()
        snap = self.session.snapshot()
        if snap is None or snap.card is None or snap.card.offer_of(message.action) is None:
            self.notify("the pending gate does not offer that decision", markup=False)
            return
        card = snap.card  # the decision is for the card shown now, even if the gate moves on meanwhile
        dialog = self._dialog(snap, card, message.action)
        if dialog is None:
            self._take(card, message.action, {})
            return

        def given(values: dict[str, Any] | None) -> None:
            if values is not None:
                self._take(card, message.action, values)

        self.app.push_screen(dialog, callback=given)

    def _dialog(self, snap: GateSnapshot, card: GateRequest, action: str) -> Any:
        """The dialog a decision needs, from what its kind takes (protocol ``ActionSpec``):
        a step -> the step picker, a text -> the hint editor, checker values -> the verdict
        form, a reason -> the reason prompt; nothing to ask -> None (taken at once)."""
        spec = P.spec_of(action)
        if spec is None:
            return None
        context = dialog_context(card)
        where = f"round {card.round}" + (f", {card.kind} {card.hint_index}" if card.kind != "round" else "")
        title = f"{spec.label[0].upper()}{spec.label[1:]} ({where})"
        if spec.step:
            offer = card.offer_of(action) or {}
            current = card.doc.get("current_site")
            steps = offer.get("steps")
            allowed = tuple(s for s in steps if type(s) is int) if isinstance(steps, list) else None
            if snap.pinned is not None:
                context.append("\n" + _s(snap.pinned, 300), style="bold yellow")
            return StepPicker(snap.steps, current if isinstance(current, int) else None, context, allowed=allowed,
                              step_required=bool(offer.get("step_required")))
        if spec.text != "no":
            hint = card.hint or {}
            prefill = str(hint.get("text") or card.feedback.get("locked_hint") or "")
            return HintEditor(f"{title}: type one, or edit the one shown", context, prefill=prefill)
        if spec.checker:
            return VerdictForm(title, context, checker=P.CHECK_NAMES, required=spec.reason == "required")
        if spec.reason != "no":
            return ReasonPrompt(title, context, required=spec.reason == "required")
        return None

    def _take(self, card: GateRequest, action: str, values: dict[str, Any]) -> None:
        self.run_worker(partial(self._decide_worker, card, action, values), thread=True, group="gate-decide", exit_on_error=False)

    def _decide_worker(self, card: GateRequest, action: str, values: dict[str, Any]) -> None:
        reason = str(values.get("reason") or values.get("note") or "").strip()
        step = values.get("step") if type(values.get("step")) is int else None
        checker = values.get("checker") if isinstance(values.get("checker"), dict) else None
        result = self.session.decide(action, step=step, reason=reason, text=str(values.get("editor") or ""), checker=checker, card=card)
        self.post_message(GateDecisionDone(result))

    @on(GateDecisionDone)
    def _decided(self, message: GateDecisionDone) -> None:
        result = message.result
        self.notify(safe_text(result.message, single_line=True), severity="information" if result.taken else "warning", markup=False)
        for note in result.notes:
            self.notify(safe_text(note, single_line=True), severity="warning", markup=False)
        self._poll_quickly()

    # ------------------------------------------------------------ resuming
    def resume(self) -> None:
        argv = self.session.resume_argv()
        if argv is None:
            self.notify("the driver is running, or the gate does not know how it was started", severity="warning", markup=False)
            return
        self.run_worker(partial(self._resume_worker, argv), thread=True, group="gate-resume", exit_on_error=False)

    def _resume_worker(self, argv: list[str]) -> None:
        started = self.session.resume_driver(argv)
        self.post_message(GateResumed(started.message, started.process is not None, started.process))

    @on(GateResumed)
    def _on_resumed(self, message: GateResumed) -> None:
        if message.ok:
            self.session.clear_message()  # the last decision's outcome is history once the driver runs again
        if message.process is not None:
            self._resumed.append(message.process)
        self.notify(safe_text(message.message, single_line=True), severity="information" if message.ok else "error", markup=False)
        self._poll_quickly()
