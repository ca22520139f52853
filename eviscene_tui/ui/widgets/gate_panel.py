"""The operator gate of a driver search as a widget: the pending gate as a card,
the round the driver is running (followed live from its files) and the history.

Decision keys live only on the card (:class:`GateCard`) and only while it holds
focus: ``a`` approve (round or hint), ``r`` relocalize (pick the step in the
source trace), ``s`` stop, ``x`` reject the hint. :class:`GatePanel` is used by
the gate screen and, compact, on the case screen of a gated search. Workers read
the sidecar every half second (:class:`~eviscene_tui.state.gate.GateSession`)
and take decisions; they post typed messages, and only the handlers touch widgets.
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
from textual.widgets import Static

from eviscene_tui.safe_text import safe_text
from eviscene_tui.gate.sidecar import GateRequest
from eviscene_tui.state.gate import GateSession, GateSnapshot, resume_refusal
from eviscene_tui.ui.actions import bindings
from eviscene_tui.ui.screens.dialogs import ReasonPrompt, StepPicker
from eviscene_tui.ui.messages import GateDecisionDone, GateDecisionRequested, GateResumed, GateSnapshotLoaded

POLL_SECONDS = 0.5


def _s(value: object, limit: int | None = 240) -> str:
    """One safe line of a run value; an absent value (JSON null) reads "—", never "null"."""
    if value is None:
        return "\u2014"
    return safe_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str), single_line=True, limit=limit)


# ---------------------------------------------------------------------- rendering (pure)
def render_header(snap: GateSnapshot) -> Text:
    st = snap.status
    d = st.driver
    text = Text()
    text.append("Gated search ", style="bold")
    text.append(_s(str(st.root)))
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
    for problem in st.problems:
        text.append("\nproblem: ", style="bold red")
        text.append(_s(problem))
    if snap.message:
        text.append("\n")
        text.append(_s(snap.message))
    return text


def render_card(snap: GateSnapshot) -> Text:
    card = snap.card
    text = Text()
    if card is None:
        text.append("No gate pending.", style="bold")
        if not resume_refusal(snap):
            why = "The search is paused" if snap.search_status.startswith("paused_") else "The driver is gone"
            text.append(f"  {why}; R resumes the search under the gate.")
        return text
    if card.kind == "round":
        fb = card.feedback
        text.append(f"ROUND GATE · round {card.round}", style="bold reverse")
        text.append("   a approve · r relocalize · s stop\n\n")
        text.append("Feedback the round will get\n", style="bold")
        text.append(f"  needs_relocalization: {fb.get('needs_relocalization')}\n")
        text.append(f"  locked_hint: {_s(fb.get('locked_hint') or '—')}\n")
        text.append(f"  excluded_hints: {len(fb.get('excluded_hints') or [])}\n")
        anchor = fb.get("anchor_feedback") or {}
        text.append(f"  anchor: selected step {_s(anchor.get('selected_source_step'))}, earliest error step {_s(anchor.get('earliest_error_step'))}\n")
        site = card.doc.get("current_site")
        text.append(f"  current site: step {_s(site)}\n")
        text.append("\nChanged since the last round\n", style="bold")
        for change in snap.changes:
            text.append(f"  • {change}\n")
    else:
        hint: dict[str, Any] = card.hint if isinstance(card.hint, dict) else {}
        text.append(f"HINT GATE · round {card.round} · hint {card.hint_index}", style="bold reverse")
        text.append("   a approve · x reject\n\n")
        text.append(_s(hint.get("text") or "", None) + "\n\n")
        text.append(f"  level {_s(hint.get('level'))} · proposal {_s(hint.get('proposal_id'), 60)}\n")
        raw_audit = hint.get("audit")
        audit: dict[str, Any] = raw_audit if isinstance(raw_audit, dict) else {}
        passed = audit.get("passed")
        text.append("  proposer audit: ")
        text.append("passed" if passed is True else f"FAILED {_s(audit.get('errors'))}", style="green" if passed is True else "red")
        text.append("\n  driver rule (revision_rejection): ")
        rule = hint.get("revision_rejection")
        if rule is None:
            text.append("unavailable", style="italic")
        elif rule:
            text.append(f"rejects it: {_s(rule)}", style="red")
        else:
            text.append("admits it", style="green")
        text.append("\n")
        if snap.progress is not None and snap.progress.round == card.round and snap.progress.audits:
            text.append(f"  audit rows so far: {', '.join(snap.progress.audits)}\n")
    return text


def dialog_context(card: GateRequest) -> Text:
    """What a decision dialog acts on: the hint (text, level, proposal, audit) of a hint
    gate, or the feedback round N will get (site, lock, exclusions, the last round)."""
    text = Text()
    if card.kind == "hint":
        hint: dict[str, Any] = card.hint if isinstance(card.hint, dict) else {}
        text.append(f"hint {card.hint_index} of round {card.round}: ", style="bold")
        text.append(_s(hint.get("text") or "", 600) + "\n")
        raw_audit = hint.get("audit")
        audit: dict[str, Any] = raw_audit if isinstance(raw_audit, dict) else {}
        text.append(f"level {_s(hint.get('level'))} · proposal {_s(hint.get('proposal_id'), 60)} · proposer audit "
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
    history = snap.history
    text.append("History\n", style="bold")
    if not history:
        text.append("  (no earlier round)\n")
    for row in history:
        if not isinstance(row, dict):
            continue
        reasons = row.get("rejected_proposal_reasons") or []
        text.append(f"  round {row.get('round')}: {_s(row.get('status') or '?')}" + (f", rejected: {', '.join(_s(r) for r in reasons)}" if reasons else "") + "\n")
        for attempt in row.get("attempts") or []:
            checker = attempt.get("checker") or {}
            failed = [k for k, v in checker.items() if v is False]
            text.append(f"    step {_s(attempt.get('selected_source_step'))} · {_s(attempt.get('verdict'))}")
            text.append(" · checks failed: " + (", ".join(failed) if failed else "none"))
            text.append("\n      hint: " + _s(attempt.get("hint") or "", 160) + "\n")
    text.append("\nDecisions\n", style="bold")
    for decision in snap.status.decisions[-8:]:
        text.append("  " + _s(decision.describe()) + (f" — {_s(decision.reason)}" if decision.reason else "") + "\n")
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


# ---------------------------------------------------------------------- the card
class GateCard(Static, can_focus=True):
    """The pending gate; its decision keys are live only while it has focus."""

    DEFAULT_CSS = """
    GateCard { border: round $primary; padding: 0 1; height: auto; }
    GateCard:focus { border: round $accent; }
    """
    BINDINGS = bindings("gate.card")

    kind: str | None = None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the keys of the pending gate's kind are shown and run; with no gate
        pending every decision key is hidden (nothing to decide)."""
        if action != "decide":
            return True
        wanted = parameters[0] if parameters else None
        if self.kind == "round":
            return wanted in ("approve", "relocalize", "stop")
        if self.kind == "hint":
            return wanted in ("approve", "reject-hint")
        return False

    def action_decide(self, action: str) -> None:
        if self.kind == "round" and action == "approve":
            action = "approve-round"
        elif self.kind == "hint" and action == "approve":
            action = "approve-hint"
        self.post_message(GateDecisionRequested(action))


class GatePanel(Vertical):
    """The gate of one search: header, card, the running round and (unless
    ``compact``) the history. Its workers read the sidecar every half second and
    take decisions; the handlers here update the widgets."""

    DEFAULT_CSS = """
    GatePanel { height: auto; }
    GatePanel .gate-text { padding: 0 1; height: auto; }
    GatePanel.-compact { max-height: 50%; }
    """

    def __init__(self, session: GateSession, *, compact: bool = False, id: str | None = None) -> None:
        super().__init__(id=id, classes="-compact" if compact else "")
        self.session = session
        self.compact = compact
        self._unsubscribe = session.subscribe(self._render_snapshot)
        self._resumed: list[subprocess.Popen] = []  # drivers started with R: reaped when they exit

    def compose(self) -> ComposeResult:
        yield Static(Text("reading the gate…"), id="gate-header", classes="gate-text")
        yield GateCard(Text(""), id="gate-card")
        yield Static(Text(""), id="gate-progress", classes="gate-text")
        if not self.compact:
            yield Static(Text(""), id="gate-history", classes="gate-text")

    def on_mount(self) -> None:
        self._poll()
        self.set_interval(POLL_SECONDS, self._poll)

    def on_unmount(self) -> None:
        self._unsubscribe()

    # ------------------------------------------------------------ reading
    def _poll(self) -> None:
        self._resumed = [proc for proc in self._resumed if proc.poll() is None]
        self.run_worker(self._load, thread=True, exclusive=True, group="gate-load", exit_on_error=False)

    def _load(self) -> None:
        self.post_message(GateSnapshotLoaded(self.session.load()))

    @on(GateSnapshotLoaded)
    def _loaded(self, message: GateSnapshotLoaded) -> None:
        self.session.apply(message.snapshot)

    def _render_snapshot(self, snap: GateSnapshot) -> None:
        card = self.query_one(GateCard)
        card.kind = snap.card.kind if snap.card is not None else None
        with self.app.batch_update():
            self.query_one("#gate-header", Static).update(render_header(snap))
            card.update(render_card(snap))
            self.query_one("#gate-progress", Static).update(render_progress(snap))
            if not self.compact:
                self.query_one("#gate-history", Static).update(render_history(snap))
        self.screen.refresh_bindings()

    # ------------------------------------------------------------ deciding
    @on(GateDecisionRequested)
    def _requested(self, message: GateDecisionRequested) -> None:
        message.stop()
        snap = self.session.snapshot()
        if snap is None or snap.card is None:
            self.notify("no gate pending", markup=False)
            return
        action = message.action
        card = snap.card  # the decision is for the card shown now, even if the gate moves on meanwhile
        if action == "relocalize":
            current = card.doc.get("current_site")

            def picked_step(picked: dict[str, Any] | None) -> None:
                if picked is not None:
                    self._take(card, action, picked["step"], str(picked.get("note") or "").strip())

            self.app.push_screen(StepPicker(snap.steps, current if isinstance(current, int) else None, dialog_context(card)),
                                 callback=picked_step)
        elif action in ("stop", "reject-hint"):
            if action == "stop":
                title = "Stop the search before round %d" % card.round
            else:
                title = "Reject hint %s of round %d" % ("?" if card.hint_index is None else card.hint_index, card.round)

            def given_reason(values: dict[str, Any] | None) -> None:
                if values is not None:
                    self._take(card, action, None, str(values.get("reason") or "").strip())

            self.app.push_screen(ReasonPrompt(title, dialog_context(card), required=action == "reject-hint"), callback=given_reason)
        else:
            self._take(card, action, None, "")

    def _take(self, card: GateRequest, action: str, step: int | None, reason: str) -> None:
        self.run_worker(partial(self._decide_worker, card, action, step, reason), thread=True, group="gate-decide", exit_on_error=False)

    def _decide_worker(self, card: GateRequest, action: str, step: int | None, reason: str) -> None:
        self.post_message(GateDecisionDone(self.session.decide(action, step=step, reason=reason, card=card)))

    @on(GateDecisionDone)
    def _decided(self, message: GateDecisionDone) -> None:
        result = message.result
        self.notify(safe_text(result.message, single_line=True), severity="information" if result.taken else "warning", markup=False)
        for note in result.notes:
            self.notify(safe_text(note, single_line=True), severity="warning", markup=False)
        self._poll()

    # ------------------------------------------------------------ resuming
    def resume(self) -> None:
        argv = self.session.resume_argv()
        if argv is None:
            self.notify("the driver is running, or the gate does not know how it was started", severity="warning", markup=False)
            return
        self.run_worker(partial(self._resume_worker, argv), thread=True, group="gate-resume", exit_on_error=False)

    def _resume_worker(self, argv: list[str]) -> None:
        gate_dir = self.session.snapshot().status.gate_dir  # type: ignore[union-attr]  # resume is offered only with a known status
        log = gate_dir / f"driver-resume-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.log"
        try:
            with open(log, "ab") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            self.post_message(GateResumed(f"cannot start the driver: {exc}", False))
            return
        self.post_message(GateResumed(f"driver resumed under the gate (pid {proc.pid}; log {log})", True, proc))

    @on(GateResumed)
    def _on_resumed(self, message: GateResumed) -> None:
        if message.ok:
            self.session.clear_message()  # the last decision's outcome is history once the driver runs again
        if message.process is not None:
            self._resumed.append(message.process)
        self.notify(safe_text(message.message, single_line=True), severity="information" if message.ok else "error", markup=False)
        self._poll()
