"""Stream screen: view the exact hinted request, edit the hint, send it to the
attested policy server, watch the continuation live, cancel, see the summary.

    StreamScreen(case, options, *, round_index=None, hint_text=None, request=None)

State lives in a :class:`~eviscene_tui.state.stream_session.StreamSession`
(target, request, hint, the current feed, the last outcome, the message); the
screen subscribes and renders it. Workers do the I/O (request rebuild, HTTP,
record writes) and talk to the UI only through the session's ``LiveFeed`` (a
plain buffer the ``StreamView`` flushes at <= 30 Hz) and typed messages.
The hint box is a multi-line editor: ``e`` (or a click) enters it, Enter types a
newline, Esc leaves it (the text stays), ctrl+s sends what the box shows. The screen
opens with the continuation view focused, so a key meant for the screen (``q``, ``k``)
never lands in the hint. What the operator types is saved as a draft in the work
directory (:mod:`eviscene_tui.state.drafts`) and shown again, marked edited, when the
screen is opened on the same case and round later. Every attempt — complete, cancelled or failed (including
a request that could not be rebuilt or an attestation refusal) — is recorded in
the work directory; the screen keeps working after any fault.

The stats line's badge shows the session kind (ATTESTED profile / UNATTESTED
--policy-url session) from the start, then the latest call's attestation result
(ATTESTED / UNATTESTED / REFUSED). ``k`` (or ctrl+o, which also works while typing
the hint) opens the token inspector (``TokenScreen(case, options, capture=...)``) on
the current continuation (a snapshot while it streams) or the last one: teacher
prompt ids, completion ids, logprobs / top-k when requested, usage, and the
student-vs-teacher diff when the failure step's capture holds the student prompt.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static, TextArea
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from eviscene_tui.ui.actions import bindings
from eviscene_tui.artifacts.case import CaseBundle
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.events import StreamError
from eviscene_tui.policy.status_line import status_summary
from eviscene_tui.policy.config import PolicyConfig, policy_config
from eviscene_tui.policy.profile import NO_POLICY, PolicyTarget, ProfileError, resolve_policy_target
from eviscene_tui.policy.request import RequestUnavailable, TeacherRequest, chat_body, describe_request, with_hint
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.drafts import draft_path, read_draft, save_draft
from eviscene_tui.state.stream_session import LiveFeed, StreamSession, StreamSnapshot
from eviscene_tui.storage import WorkDir
from eviscene_tui.ui.widgets.untrusted_edit import UntrustedTextArea
from eviscene_tui.ui.widgets.stream_view import StreamView, TextPane
from eviscene_tui.ui.messages import DraftLoaded, LiveCaptureReady, RequestReady, StatusPolled, StreamEnded
from eviscene_tui.ui.widgets.key_footer import KeyFooter
from eviscene_tui.policy.capture import live_capture, LiveSnapshot
from eviscene_tui.policy.casefile import case_ref, rebuild_for_case, round_hint
from eviscene_tui.journal.records import note_records_in
from eviscene_tui.policy.session import record_failure, run_continuation
from eviscene_tui.tokens.sources import source_step_prompt_ids
from eviscene_tui.ui.screens.tokens import TokenScreen

def _save_draft_in_thread(app: App[Any], work_dir: WorkDir, path: str, text: str) -> None:
    """Save a draft (an app worker thread); a write that fails (a full disk) is said."""
    try:
        save_draft(work_dir, path, text)
    except OSError as exc:
        why = safe_text(f"the edited hint could not be saved as a draft ({path}): {exc}", single_line=True, limit=400)
        app.call_from_thread(app.notify, why, severity="error", markup=False)


def hint_title(*, edited: bool, editing: bool) -> str:
    """The hint box's border title: whose text it is, and how to edit and send it."""
    whose = "edited — sent as shown" if edited else "as the run recorded"
    keys = "Enter: new line · Esc: done · ctrl+s sends" if editing else "e: edit · ctrl+s sends"
    return f"repair hint · {whose} ({keys})"


ERROR_TITLES = {
    "connect": "Cannot reach the policy server",
    "http": "The policy server rejected the request",
    "sse_error": "The server reported an error mid-stream",
    "disconnect": "The connection dropped mid-stream",
    "timeout": "Timed out waiting for the policy server",
    "malformed": "Malformed data in the stream",
    "attestation": "Attestation refused: not sent",
    "request": "The failure step's request is unavailable",
    "cancelled": "Cancelled",
}


def explain_error(err: StreamError) -> str:
    title = ERROR_TITLES.get(err.kind, "Error")
    hint = ""
    if err.status == 401:
        hint = " — set EVISCENE_POLICY_API_KEY (or [policy] api_key in the config)"
    elif err.status == 404:
        hint = " — the served alias differs from the configured model"
    elif err.status == 400 and "context length" in err.message:
        hint = " — the prompt plus max_tokens exceeds the server's context length"
    return f"{title}: {err.message}{hint}"


class StreamScreen(Screen):
    # keys go to the screen, not the hint: the continuation's text pane holds the focus on open
    AUTO_FOCUS = "#pane-content"
    BINDINGS = bindings("stream")

    DEFAULT_CSS = """
    StreamScreen { layout: vertical; }
    StreamScreen #stream-title { height: 1; padding: 0 1; background: $panel; }
    StreamScreen #stream-policy { height: 1; padding: 0 1; }
    StreamScreen #request-pane { height: 1fr; }
    StreamScreen #request-pane.-hidden { display: none; }
    StreamScreen #hint { height: 6; }
    StreamScreen #stream-message { height: auto; max-height: 4; padding: 0 1; }
    StreamScreen StreamView { height: 2fr; }
    """

    def __init__(
        self,
        case: CaseBundle | None,
        options: AppOptions,
        *,
        round_index: int | None = None,
        hint_text: str | None = None,
        request: TeacherRequest | None = None,
        config: PolicyConfig | None = None,
    ) -> None:
        super().__init__()
        self.case = case
        self.options = options
        self.round_index = round_index
        self.config = config
        # the request is without hint when rebuilt here; as given otherwise
        self.session = StreamSession(hint=hint_text, request=request)
        self.stream_worker: Worker | None = None
        self._preview_timer: Timer | None = None
        self._shown: StreamSnapshot | None = None

    # the session's fields, as the screen's (tests and the token inspector read them)
    @property
    def target(self) -> PolicyTarget | None:
        return self.session.target

    @property
    def target_error(self) -> str | None:
        return self.session.target_error

    @property
    def base_request(self) -> TeacherRequest | None:
        return self.session.base_request

    @property
    def request_error(self) -> str | None:
        return self.session.request_error

    @property
    def sent_request(self) -> TeacherRequest | None:
        return self.session.sent_request

    @property
    def last_status(self) -> str | None:
        return self.session.last_status

    @last_status.setter
    def last_status(self, value: str | None) -> None:
        self.session.last_status = value

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Static("", id="stream-title", markup=False)
        yield Static("", id="stream-policy", markup=False)
        yield TextPane("request (images as placeholders)", id="request-pane")
        # the hint comes from the run: shown sanitised, sent as recorded unless edited
        hint = UntrustedTextArea(self.session.hint, id="hint", soft_wrap=True, tab_behavior="focus")
        hint.border_title = hint_title(edited=False, editing=False)
        yield hint
        yield Static("", id="stream-message", markup=False)
        yield StreamView(id="stream-view")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.session.subscribe(self._show)
        if self.config is None:
            self.config = policy_config(self.options.settings.policy)
        self._resolve_target()
        ref = self._case_ref()
        self.session.set_case(str(ref.get("case_id") or ref.get("case_key") or "?"), self.round_index)
        # the stats line was first painted (by StreamView.on_mount) before the target was known
        self.query_one(StreamView).set_badge(self.target.label if self.target else "no policy")
        if self.session.given_request:
            self._request_ready(self.base_request, None, None)
        else:
            self.query_one("#request-pane", TextPane).set_text("rebuilding the failure step's request…")
            self._load_request()
        if self.target is not None:
            self._poll_status()
        self._load_draft()

    def _show(self, snap: StreamSnapshot) -> None:
        prev, self._shown = self._shown, snap
        if prev is None or snap.title != prev.title:
            self._render_title(snap)
        if prev is None or snap.policy != prev.policy:
            self._render_policy(snap)
        if prev is None or (snap.message, snap.severity) != (prev.message, prev.severity):
            style = {"error": "$error", "warning": "$warning", "success": "$success"}.get(snap.severity, "$foreground")
            self.query_one("#stream-message", Static).update(Content.from_markup(f"[{style}]$t[/]", t=safe_text(snap.message, limit=2000)))
        hint = self.query_one("#hint", UntrustedTextArea)
        if snap.hint != hint.value:
            hint.set_untrusted(snap.hint)  # a prefill (the run's hint) or a draft; typing changes the session, not the reverse
        self._render_hint_title(snap.hint_edited)

    def _render_hint_title(self, edited: bool) -> None:
        hint = self.query_one("#hint", UntrustedTextArea)
        title = hint_title(edited=edited, editing=hint.has_focus)
        if hint.border_title != title:
            hint.border_title = title

    # ------------------------------------------------------------------ the hint and its draft
    def _draft_file(self) -> str:
        ref = self._case_ref()
        case = str(self.case.root) if self.case is not None else "no case"
        round_part = "current" if ref.get("round_index") is None else str(ref.get("round_index"))
        return str(draft_path(self.options.workdir, "stream-hint", case, round_part))

    @work(exclusive=True, group="hint-draft-read", exit_on_error=False, thread=True)
    def _load_draft(self) -> None:
        draft, error = read_draft(self._draft_file())
        self.post_message(DraftLoaded(draft.text if draft else None, draft.saved_at if draft else "", error))

    def on_draft_loaded(self, message: DraftLoaded) -> None:
        if message.error:
            self._message(message.error, "warning")
        if message.text is not None and self.session.restore_draft(message.text):
            self._message(f"your edited hint (saved {message.saved_at or 'earlier'}) is back in the box", "info")
            self._refresh_preview()

    def _save_draft(self) -> None:
        """Save what the box holds (an app worker: it completes even when the screen closes)."""
        if not self.session.typed:
            return
        try:
            work_dir = self.options.work()
        except Exception as exc:  # noqa: BLE001 - a refused work directory is said, not fatal
            self._message(f"the edited hint cannot be saved as a draft: {exc}", "error")
            return
        self.app.run_worker(partial(_save_draft_in_thread, self.app, work_dir, self._draft_file(), self.session.hint),
                            group="hint-drafts", thread=True, exit_on_error=False)

    def on_descendant_focus(self) -> None:
        self._render_hint_title(self.session.snapshot().hint_edited)

    def on_descendant_blur(self) -> None:
        self._render_hint_title(self.session.snapshot().hint_edited)

    def _focus_view(self) -> None:
        """Keys go to the screen, not the hint: the continuation's text pane holds the focus."""
        self.query_one("#pane-content", TextPane).focus()

    def action_edit_hint(self) -> None:
        hint = self.query_one("#hint", UntrustedTextArea)
        hint.focus()
        hint.move_cursor(hint.document.end)

    # ------------------------------------------------------------------ policy target / status
    def _resolve_target(self) -> None:
        o = self.options
        try:
            target = resolve_policy_target(profile=o.policy_profile, url=o.policy_url, model=o.policy_model)
        except ProfileError as exc:
            self.session.set_target(None, str(exc))
        else:
            self.session.set_target(target, NO_POLICY if target is None else None)

    def _render_title(self, snap: StreamSnapshot) -> None:
        title = Content.from_markup("[b]Teacher continuation[/]  case $case  round $round",
                                    case=safe_text(snap.title.case, single_line=True, limit=60), round=snap.title.round)
        self.query_one("#stream-title", Static).update(title)

    def _render_policy(self, snap: StreamSnapshot) -> None:
        w = self.query_one("#stream-policy", Static)
        p = snap.policy
        if p.label is None:
            w.update(Content.from_markup("[b $error]no policy[/] $msg", msg=safe_text(p.error or "", single_line=True)))
            return
        template = "[b $success]$label[/] $model  $status" if p.attested else "[b $warning]$label[/] $model  $status"
        w.update(Content.from_markup(
            template,
            label=p.label.upper(),
            model=safe_text(p.model, single_line=True, limit=60),
            status=safe_text(p.status, single_line=True, limit=300),
        ))

    @work(exclusive=True, group="policy-status", exit_on_error=False)
    async def _poll_status(self) -> None:
        assert self.target is not None and self.config is not None
        async with PolicyClient(self.target, self.config) as client:
            async for statuses in client.poll_status():
                self.post_message(StatusPolled(statuses))

    def on_status_polled(self, message: StatusPolled) -> None:
        self.session.set_server_status(status_summary(message.statuses))

    # ------------------------------------------------------------------ request
    def _case_ref(self) -> dict[str, Any]:
        if self.case is None:
            return {"case_id": None, "case_key": None, "round_index": self.round_index}

        return case_ref(self.case, self.round_index)

    @work(exclusive=True, group="policy-request", exit_on_error=False, thread=True)
    def _load_request(self) -> None:
        placement = self.config.hint_placement if self.config else "as_run"
        try:
            if self.case is None:
                raise RequestUnavailable("no case loaded")
            req = rebuild_for_case(self.case, round_index=self.round_index, hint=None, placement=placement)
            run_hint = round_hint(self.case, self.round_index) if self.session.initial_hint is None else None
            self.post_message(RequestReady(req, None, run_hint))
        except RequestUnavailable as exc:
            self.post_message(RequestReady(None, str(exc), None))
        except Exception as exc:  # noqa: BLE001 - a bad case must not crash the screen
            self.post_message(RequestReady(None, f"{type(exc).__name__}: {exc}", None))

    def on_request_ready(self, message: RequestReady) -> None:
        self._request_ready(message.request, message.error, message.run_hint)

    def _request_ready(self, request: TeacherRequest | None, error: str | None, run_hint: str | None) -> None:
        self.session.request_ready(request, error, run_hint=run_hint)
        if error:
            self._message(f"Request unavailable: {error}", "error")
        elif request is not None and request.problems:
            self._message("Notes: " + "; ".join(request.problems[:3]), "warning")
        self._refresh_preview()

    def current_request(self) -> TeacherRequest | None:
        base = self.session.base_request
        if base is None:
            return None
        hint = self.session.hint
        if self.session.given_request and hint.strip() == (base.hint or ""):
            return base
        return with_hint(base, hint, self.config.hint_placement if self.config else None)

    def _refresh_preview(self) -> None:
        pane = self.query_one("#request-pane", TextPane)
        req = self.current_request()
        if req is None:
            pane.set_text(f"(no request) {self.request_error or ''}")
            return
        model = self.target.model if self.target else "(no policy)"
        body = chat_body(req, self.config or PolicyConfig(), model=model)
        origin = req.origin()
        head = (f"# source: {origin['source']} {origin['context_request_id'] or ''} step {origin['source_step_index']}\n"
                f"# hint placement: {req.hint_rule()}\n# hint location: {req.hint_where()}\n")
        pane.set_text(head + describe_request(body, req.images))

    @on(TextArea.Changed, "#hint")
    def _hint_changed(self, event: TextArea.Changed) -> None:
        self.session.set_hint(self.query_one("#hint", UntrustedTextArea).value)
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(0.25, self._hint_settled)

    def _hint_settled(self) -> None:
        self._preview_timer = None
        self._refresh_preview()
        self._save_draft()

    # ------------------------------------------------------------------ streaming
    @property
    def streaming(self) -> bool:
        return self.stream_worker is not None and self.stream_worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    def _message(self, text: str, severity: str = "info") -> None:
        self.session.say(text, severity)

    def action_send(self) -> None:
        if self.streaming:
            self._message("A continuation is already streaming (ctrl+x cancels it)", "warning")
            return
        if self.target is None:
            self._message(self.target_error or NO_POLICY, "error")
            return
        view = self.query_one(StreamView)
        req = self.current_request()
        if req is None:
            self._record_request_failure(self.request_error or "the failure step's request could not be rebuilt")
            return
        feed = view.attach(self.session.start(req))  # the badge keeps the latest attestation result until this call's arrives
        self._message(f"sending to {self.target.model} ({self.target.label})…", "info")
        self.stream_worker = self._stream(req, feed, self._work(), self._case_ref())

    @work(exclusive=True, group="policy-stream", exit_on_error=False)
    async def _stream(self, request: TeacherRequest, feed: LiveFeed, work_dir: WorkDir | None, case_ref: dict[str, Any]) -> None:
        # only the feed (a plain buffer) is touched here; the view paints it on its timer

        assert self.target is not None and self.config is not None
        if work_dir is not None and case_ref.get("case_root"):
            # the record is found again from any folder (journal.records), a --workdir elsewhere too
            await asyncio.to_thread(note_records_in, work_dir.path, case_ref["case_root"])
        async with PolicyClient(self.target, self.config) as client:
            outcome = await run_continuation(client, request, work=work_dir, case_ref=case_ref, on_event=feed.push, accumulator=feed.acc)
        self.post_message(StreamEnded(outcome.status, feed.acc))

    def _work(self) -> WorkDir | None:
        try:
            return self.options.work()
        except Exception as exc:  # noqa: BLE001 - shown, not fatal
            self._message(f"records cannot be saved: {exc}", "error")
            return None

    def _record_request_failure(self, reason: str) -> None:
        assert self.target is not None
        out = record_failure(self.target, work=self._work(), kind="request", message=reason, case_ref=self._case_ref())
        view = self.query_one(StreamView)
        view.reset(out.accumulator)
        view.finish("failed")
        self.session.ended("failed")
        self._message(f"Request unavailable: {reason} — recorded as a failed attempt: {out.path or out.save_error}", "error")

    def action_cancel_stream(self) -> None:
        if not self.streaming:
            self._message("nothing is streaming", "info")
            return
        assert self.stream_worker is not None
        self.stream_worker.cancel()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self.stream_worker:
            return
        view = self.query_one(StreamView)
        if event.state == WorkerState.CANCELLED:
            view.finish("cancelled")
            self.session.ended("cancelled")
            self._summary("cancelled", view.acc)
        elif event.state == WorkerState.ERROR:
            view.finish("failed")
            self.session.ended("failed")
            self._message(f"internal error while streaming: {safe_text(event.worker.error, single_line=True, limit=300)}", "error")

    def on_stream_ended(self, message: StreamEnded) -> None:
        view = self.query_one(StreamView)
        view.finish(message.status)
        self.session.ended(message.status)
        self._summary(message.status, message.acc)

    def _summary(self, status: str, acc: StreamAccumulator) -> None:
        t = acc.timings()
        acct = acc.accounting()
        where = acc.record_path or acc.save_error or "(not saved)"
        if acc.error is not None and status == "failed":
            first = explain_error(acc.error)
            severity = "error"
        else:
            first = f"{status.upper()}: finish {acc.finish_reason or '—'}, {acc.token_count} tokens, ttft {t['ttft_s']} s, {t['tokens_per_s']} tok/s"
            severity = "success" if status == "complete" else "warning"
        served = acc.served_model()
        lines = [first, f"accounting: {acct['note']}"]
        if served["match"] is False:
            lines.append(f"served model: {served['note']}")
            severity = "error" if severity == "error" else "warning"
        if acc.bad_token_ids:
            lines.append(f"token ids: {acc.token_id_faults()['note']}")
        lines.append(f"record: {where}")
        self._message(safe_text("\n".join(str(x) for x in lines)), severity)

    # ------------------------------------------------------------------ token inspector
    def action_inspect_tokens(self) -> None:
        """Open the token inspector on the current (a snapshot) or last continuation."""

        view = self.query_one(StreamView)
        if view.state == "idle":
            self._message("no continuation yet: send one first (ctrl+s)", "info")
            return
        snap = LiveSnapshot.of(view.acc, status="streaming" if self.streaming else None)
        if snap.empty:
            self._message("this continuation has no token ids (it failed before the server sent any)", "warning")
            return
        step = self.sent_request.step_index if self.sent_request is not None else None
        self._build_live_capture(snap, step)

    @work(exclusive=True, group="policy-capture", exit_on_error=False, thread=True)
    def _build_live_capture(self, snap: LiveSnapshot, step_index: int | None) -> None:
        try:
            student = None
            note = None
            try:
                student = source_step_prompt_ids(self.case, step_index)
            except Exception as exc:  # noqa: BLE001 - a damaged trace only loses the diff
                note = f"student prompt unavailable: {type(exc).__name__}: {exc}"
            data = live_capture(snap, student_prompt_ids=student,
                                student_source=f"source step {step_index} policy_token_capture",
                                request=self.sent_request, config=self.config)
            if note:
                data.notes.append(note)
            self.post_message(LiveCaptureReady(data))
        except Exception as exc:  # noqa: BLE001 - shown as the capture's error
            self.post_message(LiveCaptureReady(None, f"{type(exc).__name__}: {exc}"))

    def on_live_capture_ready(self, message: LiveCaptureReady) -> None:
        if message.capture is None:
            self._message(f"cannot open the token inspector: {message.error}", "error")
            return
        if self.app.screen is not self:
            return  # the operator left meanwhile

        self.app.push_screen(TokenScreen(self.case, self.options, capture=message.capture))

    # ------------------------------------------------------------------ misc actions
    def action_toggle_request(self) -> None:
        self.query_one("#request-pane").toggle_class("-hidden")

    def action_back(self) -> None:
        hint = self.query_one("#hint", UntrustedTextArea)
        if hint.has_focus:  # Esc leaves the editor first; the text stays
            self._focus_view()
            return
        if self._preview_timer is not None:  # typed within the last moment: saved before leaving
            self._preview_timer.stop()
            self._hint_settled()
        if self.streaming and self.stream_worker is not None:
            self.stream_worker.cancel()
        self.app.pop_screen()

    def on_unmount(self) -> None:
        self.workers.cancel_node(self)  # a running stream is recorded as cancelled
