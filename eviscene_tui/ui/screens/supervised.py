"""Supervised search screen: the operator-gated round, one card per gate.

    SupervisedScreen(case, options, *, runner=None, settings=None, budgets=None)

Cards (left), each focusable; its decision keys work only while it (or a child)
has focus:

- **Site**: the current failure site. ``a`` accept, ``r`` relocalize (step + note).
- **Hints**: proposals with their audits (✓ / ✗ code). ``f`` fetch from the hint
  constructor, ``n`` type a hint (TextArea editor), ``a`` approve the highlighted
  hint, ``x`` reject it (reason), ``p`` show the exact proposer prompt, ``e`` end the
  round without an attempt (note).
- **Continuation**: ``c`` run the approved hint's teacher continuation (streamed in
  engineer C's StreamView on the right), ``ctrl+x`` cancel.
- **Verdict**: ``a`` approve the attempt, ``x`` reject (reason + optional checker
  values), ``r`` relocalize (step + note).
- **Next round**: the next round's feedback object (driver rules) is shown on the
  right; ``s`` start the round, ``t`` stop here.

``j`` (anywhere) shows the decision journal: chain check, every decision with its
status, and **STALE** where an evidence file changed since the decision.

Workers do every file and network operation (the service writes the supervised
root and its journal) and post typed messages; the screen says "saved" only
after the journal append returned (write + fsync). Run data is shown through
``safe_text`` and ``Content`` markup variables, never f-string markup.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, OptionList, Select, Static, TextArea
from textual.widgets.option_list import Option

from eviscene_tui.safe_text import safe_text
from eviscene_tui.supervised.feedback import CHECK_NAMES
from eviscene_tui.ui.messages import JournalView, NeedSite, OpDone, OpFailed, SearchOpened
from eviscene_tui.ui.widgets.key_footer import KeyFooter

try:  # engineer C's widgets; the screen still works (text summary) without them
    from eviscene_tui.ui.widgets.stream_view import StreamView, TextPane
except Exception:  # pragma: no cover - C's module missing
    StreamView = None  # type: ignore[assignment]
    TextPane = None  # type: ignore[assignment]


def _s(value: Any, limit: int | None = 200) -> str:
    return safe_text("" if value is None else str(value), single_line=True, limit=limit)


# ============================================================================ modal form
class FormScreen(ModalScreen[dict | None]):
    """A small form: text fields, an optional multi-line editor and checker selects.

    ``ctrl+s`` submits, ``escape`` cancels; dismisses with the values (or None)."""

    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]
    DEFAULT_CSS = """
    FormScreen { align: center middle; }
    FormScreen #form { width: 90; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    FormScreen TextArea { height: 8; }
    FormScreen .checker-row { height: 3; }
    FormScreen .checker-row Static { width: 28; padding: 1 0; }
    FormScreen .checker-row Select { width: 20; }
    FormScreen #form-error { color: $error; height: auto; }
    """

    def __init__(self, title: str, fields: list[tuple[str, str, str]], *, editor: str | None = None, editor_text: str = "", checker: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.fields = fields
        self.editor = editor
        self.editor_text = editor_text
        self.checker = checker

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="form"):
            yield Static(Content.from_markup("[b]$t[/]  (ctrl+s submit, esc cancel)", t=self.title_text))
            for name, label, placeholder in self.fields:
                yield Static(label, markup=False)
                yield Input(placeholder=placeholder, id=f"f-{name}")
            if self.editor:
                yield Static(self.editor, markup=False)
                yield TextArea(self.editor_text, id="f-editor", soft_wrap=True)
            if self.checker:
                yield Static("checker values (unset = not judged)", markup=False)
                for name in CHECK_NAMES:
                    with Horizontal(classes="checker-row"):
                        yield Static(name, markup=False)
                        yield Select([("unset", "unset"), ("true", "true"), ("false", "false")], value="unset", allow_blank=False, id=f"c-{name}")
            yield Static("", id="form-error", markup=False)
            with Horizontal():
                yield Button("Submit", id="form-ok", variant="primary")
                yield Button("Cancel", id="form-cancel")

    def on_mount(self) -> None:
        first = self.query("Input, TextArea").first()
        if first is not None:
            first.focus()

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: self.query_one(f"#f-{name}", Input).value for name, _, _ in self.fields}
        if self.editor:
            out["editor"] = self.query_one("#f-editor", TextArea).text
        if self.checker:
            checker = {}
            for name in CHECK_NAMES:
                v = self.query_one(f"#c-{name}", Select).value
                if v in ("true", "false"):
                    checker[name] = v == "true"
            out["checker"] = checker
        return out

    def action_submit(self) -> None:
        self.dismiss(self.values())

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#form-ok")
    def _ok(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#form-cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Input.Submitted)
    def _enter(self) -> None:
        if not self.editor and not self.checker:
            self.action_submit()


# ============================================================================ cards
class Card(Vertical, can_focus=True):
    DEFAULT_CSS = """
    Card { height: auto; border: round $panel; padding: 0 1; margin-bottom: 1; }
    Card:focus-within { border: round $accent; }
    Card.-inactive { opacity: 60%; }
    Card .card-body { height: auto; }
    """

    def __init__(self, title: str, *, id: str) -> None:
        super().__init__(id=id)
        self.border_title = title

    def compose(self) -> ComposeResult:
        yield Static("", classes="card-body", markup=False)

    def set_body(self, content: Content | str) -> None:
        self.query_one(".card-body", Static).update(content)

    @property
    def owner(self) -> "SupervisedScreen":
        return self.screen  # type: ignore[return-value]


class SiteCard(Card):
    BINDINGS = [
        Binding("a", "accept", "Accept site"),
        Binding("r", "relocalize", "Relocalize"),
    ]

    def action_accept(self) -> None:
        self.owner.op_accept_site()

    def action_relocalize(self) -> None:
        self.owner.ask_relocalize()


class HintsCard(Card):
    BINDINGS = [
        Binding("f", "fetch", "Fetch hints"),
        Binding("n", "new", "Type hint"),
        Binding("a", "approve", "Approve hint"),
        Binding("x", "reject", "Reject hint"),
        Binding("p", "prompt", "Prompt"),
        Binding("e", "end", "End round"),
    ]

    def compose(self) -> ComposeResult:
        yield Static("", classes="card-body", markup=False)
        yield OptionList(id="proposals")

    def highlighted(self) -> int | None:
        return self.query_one(OptionList).highlighted

    def on_focus(self) -> None:
        # the card's keys work from the list too (bindings bubble up): give arrows to the list
        ol = self.query_one(OptionList)
        if ol.option_count:
            ol.focus()

    def action_fetch(self) -> None:
        self.owner.op_fetch()

    def action_new(self) -> None:
        self.owner.ask_new_hint()

    def action_approve(self) -> None:
        self.owner.op_approve_hint(self.highlighted())

    def action_reject(self) -> None:
        self.owner.ask_reject_hint(self.highlighted())

    def action_prompt(self) -> None:
        self.owner.show_prompt()

    def action_end(self) -> None:
        self.owner.ask_end_round()


class ContinuationCard(Card):
    BINDINGS = [
        Binding("c", "run", "Run continuation"),
        Binding("ctrl+x", "cancel", "Cancel stream"),
    ]

    def action_run(self) -> None:
        self.owner.op_run_continuation()

    def action_cancel(self) -> None:
        self.owner.cancel_stream()


class VerdictCard(Card):
    BINDINGS = [
        Binding("a", "approve", "Approve attempt"),
        Binding("x", "reject", "Reject attempt"),
        Binding("r", "relocalize", "Relocalize"),
    ]

    def action_approve(self) -> None:
        self.owner.ask_approve_attempt()

    def action_reject(self) -> None:
        self.owner.ask_reject_attempt()

    def action_relocalize(self) -> None:
        self.owner.ask_relocalize()


class NextCard(Card):
    BINDINGS = [
        Binding("s", "start", "Start round"),
        Binding("t", "stop", "Stop here"),
    ]

    def action_start(self) -> None:
        self.owner.op_begin_round()

    def action_stop(self) -> None:
        self.owner.op_stop()


# ============================================================================ screen
class SupervisedScreen(Screen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="supervised.back"),
        Binding("j", "journal", "Journal", id="supervised.journal", tooltip="Show the decision journal (chain check, stale decisions)"),
        Binding("ctrl+t", "ack_torn", "Ack torn tail", id="supervised.ack_torn", show=False,
                tooltip="Acknowledge torn bytes at the end of the journal (they stay in the file)"),
    ]

    DEFAULT_CSS = """
    SupervisedScreen { layout: vertical; }
    SupervisedScreen #sup-title { height: 1; padding: 0 1; background: $panel; }
    SupervisedScreen #sup-message { height: auto; max-height: 3; padding: 0 1; }
    SupervisedScreen #sup-body { height: 1fr; }
    SupervisedScreen #sup-cards { width: 1fr; }
    SupervisedScreen #sup-right { width: 1fr; }
    SupervisedScreen #proposals { height: auto; max-height: 10; }
    SupervisedScreen #sup-detail { height: 1fr; }
    SupervisedScreen #sup-stream { height: 1fr; }
    """

    def __init__(self, case: Any, options: Any, *, runner: Any = None, settings: Any = None, budgets: Any = None) -> None:
        super().__init__()
        self.case = case
        self.options = options
        self.runner = runner
        self.settings = settings
        self.budgets = budgets
        self.search: Any = None
        self.busy = False
        self.stream_worker: Any = None
        self.last_message = ""

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Static("", id="sup-title", markup=False)
        yield Static("opening the supervised search…", id="sup-message", markup=False)
        with Horizontal(id="sup-body"):
            with VerticalScroll(id="sup-cards"):
                yield SiteCard("Site", id="card-site")
                yield HintsCard("Hints", id="card-hints")
                yield ContinuationCard("Continuation", id="card-cont")
                yield VerdictCard("Verdict", id="card-verdict")
                yield NextCard("Next round", id="card-next")
            with Vertical(id="sup-right"):
                if TextPane is not None:
                    yield TextPane("feedback / prompt / details", id="sup-detail")
                else:  # pragma: no cover
                    yield Static("", id="sup-detail", markup=False)
                if StreamView is not None:
                    yield StreamView(id="sup-stream")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._open()
        self._show_session_badge()

    def _show_session_badge(self) -> None:
        """The embedded stream view shows the session kind from the start (attested profile
        or an unattested --policy-url/--policy-model pair), before any call is made."""
        if StreamView is None:
            return
        from eviscene_tui.policy.status_line import ProfileError, target_from_options

        try:
            target = target_from_options(self.options)
        except (ProfileError, OSError):
            badge = "no policy"
        else:
            badge = "no policy" if target is None else target.label
        self.query_one("#sup-stream", StreamView).set_badge(badge)

    # ------------------------------------------------------------------ helpers
    def message(self, text: str, severity: str = "info") -> None:
        self.last_message = text
        style = {"error": "$error", "warning": "$warning", "ok": "$success"}.get(severity)
        markup = f"[{style}]$m[/]" if style else "$m"  # style from the fixed table above, never run data
        self.query_one("#sup-message", Static).update(Content.from_markup(markup, m=safe_text(text, limit=600)))

    def detail(self, text: str) -> None:
        pane = self.query_one("#sup-detail")
        if hasattr(pane, "set_text"):
            pane.set_text(text)
        else:  # pragma: no cover
            pane.update(safe_text(text))

    def _label(self) -> str:
        root = getattr(self.case, "root", None)
        base = getattr(self.options, "root", None)
        if root is not None and base is not None:
            try:
                rel = os.path.relpath(os.path.abspath(root), os.path.abspath(base))
                return rel if not rel.startswith("..") else str(root)
            except ValueError:
                pass
        return str(root or "case")

    def _begin(self, label: str) -> bool:
        if self.search is None:
            self.message("the supervised search is not open", "warning")
            return False
        if self.search.read_only:
            self.message(self.search.read_only_reason or "read-only", "warning")
            return False
        if self.busy:
            self.message("busy: wait for the current operation to finish", "warning")
            return False
        self.busy = True
        self.message(f"{label}…")
        return True

    # ------------------------------------------------------------------ workers
    @work(thread=True, exclusive=True, group="supervised-open", exit_on_error=False)
    def _open(self, step: int | None = None, note: str | None = None) -> None:
        from eviscene_tui.supervised import InputError, SupervisedSearch

        try:
            search = SupervisedSearch.for_case(
                self.case, self.options, label=self._label(), source_step_index=step, site_note=note,
                budgets=self.budgets, settings=self.settings,
            )
        except InputError as exc:
            if step is None and "no failure site" in str(exc):
                self.post_message(NeedSite(str(exc)))
            else:
                self.post_message(OpFailed("open", f"cannot open a supervised search for this case: {exc}"))
            return
        except Exception as exc:  # noqa: BLE001 - shown, not fatal
            self.post_message(OpFailed("open", f"cannot open a supervised search for this case: {exc}"))
            return
        note = "; ".join(search.messages)
        self.post_message(SearchOpened(search, note))

    @work(thread=True, exclusive=True, group="supervised-io", exit_on_error=False)
    def _run_sync(self, label: str, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self.post_message(OpFailed(label, str(exc) or type(exc).__name__))
            return
        saved = isinstance(result, dict) and "hash" in result
        self.post_message(OpDone(label, saved=saved))

    @work(exclusive=True, group="supervised-net", exit_on_error=False)
    async def _fetch(self) -> None:
        try:
            props = await self.search.fetch_proposals()
        except Exception as exc:  # noqa: BLE001
            self.post_message(OpFailed("fetch hints", str(exc)))
            return
        self.post_message(OpDone("fetch hints", saved=False, detail=f"{len(props)} proposal(s)"))

    @work(exclusive=True, group="supervised-stream", exit_on_error=False)
    async def _stream(self, runner: Any) -> None:
        view = self.query_one("#sup-stream") if StreamView is not None else None
        acc = view.reset(badge="policy") if view is not None else None

        def on_event(ev: Any) -> None:
            if acc is not None:
                acc.add(ev)
                view.feed(ev)

        try:
            outcome = await self.search.run_continuation(runner, on_event=on_event)
        except asyncio.CancelledError:
            if view is not None:
                view.finish("cancelled")
            raise
        except Exception as exc:  # noqa: BLE001
            if view is not None:
                view.finish("failed")
            self.post_message(OpFailed("continuation", str(exc)))
            return
        if view is not None:
            view.finish(outcome.status)
        if outcome.ok:
            self.post_message(OpDone("continuation", saved=False, detail="recorded into the round; give your verdict"))
        else:
            self.post_message(OpFailed("continuation", f"{outcome.status}: {outcome.error}"))

    @work(thread=True, exclusive=True, group="supervised-journal", exit_on_error=False)
    def _load_journal(self) -> None:
        from eviscene_tui.journal import fold, stale_paths, verify_chain

        search = self.search
        if search is None:
            return
        report = verify_chain(search.journal.path)
        search.journal.reload()
        lines = [
            f"journal {search.journal.path}",
            f"chain: {'verified' if report.ok else 'BROKEN'} · {report.events} events"
            + (f" · torn tail of {report.torn_tail.length} bytes" if report.torn_tail is not None else ""),
        ]
        lines += [f"  ! {p}" for p in report.problems[:10]]
        for d in fold(search.journal.events).decisions:
            ev = d.event
            stale = stale_paths(ev, search.root)
            t = ev.get("target") or {}
            lines.append(
                f"{ev.get('seq'):>4} {ev.get('ts')} {ev.get('action'):16} round {t.get('round')} {d.status}"
                + (f" STALE ({', '.join(stale)})" if stale else "")
                + (f" — {ev.get('reason')}" if ev.get("reason") else "")
            )
        self.post_message(JournalView("\n".join(lines)))

    def action_ack_torn(self) -> None:
        if self.search is None or not self.search.torn_tail_warning:
            self.message("the journal has no torn tail", "info")
            return
        if self._begin("acknowledge torn tail"):
            self._run_sync("acknowledge torn tail", self.search.acknowledge_torn_tail, "acknowledged in the supervised screen")

    def action_journal(self) -> None:
        if self.search is not None:
            self._load_journal()

    def on_journal_view(self, message: "JournalView") -> None:
        self.detail(message.text)

    # ------------------------------------------------------------------ message handlers
    def on_search_opened(self, message: SearchOpened) -> None:
        self.search = message.search
        if self.search.read_only:
            self.message(self.search.read_only_reason or "read-only", "warning")
        elif self.search.torn_tail_warning:
            self.message(self.search.torn_tail_warning + " (ctrl+t)", "warning")
        else:
            self.message(message.note or f"supervised root: {self.search.root}", "ok")
        self.refresh_view()

    def on_need_site(self, message: NeedSite) -> None:
        self.message(message.reason, "warning")

        def done(values: dict | None) -> None:
            if not values:
                self.message("no starting step chosen; the supervised search was not opened", "warning")
                return
            try:
                step = int(values["step"])
            except (TypeError, ValueError):
                self.message("the step must be a number", "error")
                return
            if not (values.get("note") or "").strip():
                self.message("a note is required", "error")
                return
            self._open(step, values["note"])

        self.app.push_screen(
            FormScreen(
                "No recoverable site: pick the step to repair",
                [("step", "source step index (a policy step)", "e.g. 7"), ("note", "note (why this step)", "required")],
            ),
            done,
        )

    def on_op_done(self, message: OpDone) -> None:
        self.busy = False
        text = f"{message.label}: saved" if message.saved else f"{message.label}: done"
        if message.detail:
            text += f" — {message.detail}"
        self.message(text, "ok")
        self.refresh_view()

    def on_op_failed(self, message: OpFailed) -> None:
        self.busy = False
        self.message(f"{message.label} failed: {message.message}", "error")
        self.refresh_view()

    # ------------------------------------------------------------------ rendering (no I/O)
    def refresh_view(self) -> None:
        s = self.search
        if s is None:
            return
        d = s.draft
        stage = d.stage if d is not None else "between rounds"
        rounds = len(s.history)
        self.query_one("#sup-title", Static).update(
            Content.from_markup(
                "[b]Supervised search[/]  $case  round $round  status [b]$status[/]  gate [b]$gate[/]$ro",
                case=_s(s.inputs.label, 60),
                round=str(d.index if d is not None and d.stage != "closed" else rounds),
                status=_s(s.status, 40),
                gate=stage if d is None or d.stage != "closed" else "between rounds",
                ro="  READ-ONLY" if s.read_only else "",
            )
        )
        open_stage = d.stage if d is not None and d.stage != "closed" else None
        for card_id, active in (
            ("#card-site", open_stage == "site"),
            ("#card-hints", open_stage == "hints"),
            ("#card-cont", open_stage == "continuation"),
            ("#card-verdict", open_stage == "verdict"),
            ("#card-next", open_stage is None),
        ):
            card = self.query_one(card_id, Card)
            card.set_class(not active, "-inactive")
            if active and open_stage != getattr(self, "_focused_gate", "unset"):
                # a new gate: move the keyboard to its card so its decision keys are live
                self._focused_gate = open_stage
                card.focus()
        self._render_site()
        self._render_hints()
        self._render_cont()
        self._render_verdict()
        self._render_next()

    def _render_site(self) -> None:
        s, d = self.search, self.search.draft
        site = d.site if d is not None and d.stage != "closed" else s.inputs.site
        step = None
        try:
            steps = s.inputs.trace["state"]["all_steps"]
            step = steps[int(site["source_step_index"])]
        except (KeyError, IndexError, TypeError, ValueError):
            pass
        preview = ""
        if isinstance(step, dict):
            preview = step.get("thought") or step.get("output") or step.get("tool_name") or ""
        flag = "  relocalization requested by the feedback" if d is not None and d.relocalization_requested and d.stage == "site" else ""
        self.query_one("#card-site", Card).set_body(
            Content.from_markup(
                "step [b]$idx[/] ($stage)  kind [b]$kind[/]  category $cat\nid $sid\n$preview$flag\n[dim]a accept · r relocalize[/]",
                idx=_s(site.get("source_step_index")),
                stage=_s(site.get("stage"), 40),
                kind=_s(site.get("localization_kind"), 40),
                cat=_s(site.get("semantic_category") or "—", 60),
                sid=_s(site.get("step_id"), 80),
                preview=_s(preview, 160),
                flag=flag,
            )
        )

    def _render_hints(self) -> None:
        d = self.search.draft
        card = self.query_one("#card-hints", HintsCard)
        ol = card.query_one(OptionList)
        keep = ol.highlighted
        ol.clear_options()
        props = d.proposals if d is not None and d.stage != "closed" else []
        for p in props:
            mark = "✓" if p.passed else "✗ " + ",".join(p.audit.get("errors") or [])
            status = {"approved": "APPROVED", "rejected": "rejected"}.get(p.status, "")
            ol.add_option(
                Option(
                    Content.from_markup(
                        "[b]$mark[/] $status $text  [dim]$by · $sha[/]",
                        mark=mark, status=status, text=_s(p.text, 120), by=_s(p.provider, 30), sha=p.hint_sha256[:10],
                    )
                )
            )
        if props:
            ol.highlighted = keep if keep is not None and keep < len(props) else 0
            if card.has_focus:
                ol.focus()  # proposals arrived while the card had the keyboard: arrows pick one
        card.set_body(
            Content.from_markup(
                "$n proposal(s)\n[dim]f fetch · n type · a approve · x reject · p prompt · e end round[/]", n=str(len(props))
            )
        )

    def _render_cont(self) -> None:
        d = self.search.draft
        text = "no approved hint yet"
        if d is not None and d.approved is not None and d.stage != "closed":
            text = "approved: " + _s(d.approved.text, 160)
            if d.outcome is not None:
                text += f"\nlast run: {d.outcome.status}" + (f" — {_s(d.outcome.error, 160)}" if d.outcome.error else "")
        self.query_one("#card-cont", Card).set_body(Content.from_markup("$t\n[dim]c run · ctrl+x cancel[/]", t=text))

    def _render_verdict(self) -> None:
        d = self.search.draft
        text = "no attempt to judge"
        if d is not None and d.record is not None and d.stage == "verdict":
            cont = d.record.get("continuation") or {}
            text = (
                f"attempt {_s(d.record.get('attempt_id'), 40)}\n"
                f"completion ids {len(d.record.get('completion_ids') or [])}, stop {_s(cont.get('stop_reason'), 40)}, "
                f"episode sha {_s(cont.get('hinted_teacher_episode_trace_sha256'), 12)}"
            )
        self.query_one("#card-verdict", Card).set_body(Content.from_markup("$t\n[dim]a approve · x reject · r relocalize[/]", t=text))

    def _render_next(self) -> None:
        s = self.search
        d = s.draft
        if d is not None and d.stage != "closed":
            body = "round in progress"
        elif s.stopped:
            body = f"stopped: {s.status}"
        else:
            try:
                fb = s.preview_feedback()
                anchor = fb.get("anchor_feedback") or {}
                summary = (
                    f"needs_relocalization: {str(fb.get('needs_relocalization')).lower()}\n"
                    f"locked_hint: {_s(fb.get('locked_hint') or '—', 100)}\n"
                    f"excluded_hints: {len(fb.get('excluded_hints') or [])}  previous_rounds: {len(fb.get('previous_rounds') or [])}\n"
                    f"anchor_feedback: step {_s(anchor.get('selected_source_step', '—'))}, "
                    f"earliest error {_s(anchor.get('earliest_error_step', '—'))}, checker {_s(anchor.get('checker', {}), 160)}"
                )
                body = summary + "\ns start the round · t stop here (full object on the right)"
                self.detail("next round feedback (driver rules):\n" + orjson.dumps(fb, option=orjson.OPT_INDENT_2).decode())
            except Exception as exc:  # noqa: BLE001
                body = f"cannot compute the feedback: {exc}"
        self.query_one("#card-next", Card).set_body(Content.from_markup("$t", t=body))

    # ------------------------------------------------------------------ operations (called by cards)
    def op_begin_round(self) -> None:
        if self.search is not None and self.search.draft is not None and self.search.draft.stage != "closed":
            self.message("a round is already open", "warning")
            return
        if self._begin("start round"):
            self._run_sync("start round", self.search.begin_round)

    def op_stop(self) -> None:
        if self._begin("stop"):
            self._run_sync("stop", self.search.stop)

    def op_accept_site(self) -> None:
        if self._begin("accept site"):
            self._run_sync("accept site", self.search.accept_site)

    def ask_relocalize(self) -> None:
        if self.search is None:
            return

        def done(values: dict | None) -> None:
            if not values:
                return
            try:
                step = int(values["step"])
            except (TypeError, ValueError):
                self.message("relocalize: the step must be a number", "error")
                return
            category = values.get("category") or None
            if self._begin("relocalize"):
                self._run_sync("relocalize", self.search.relocalize, step, values.get("note", ""), category=category)

        self.app.push_screen(
            FormScreen(
                "Relocalize: pick the step where the failure really is",
                [("step", "source step index", "e.g. 7"), ("note", "note (why)", "required"), ("category", "semantic category (optional)", "e.g. wrong_search_direction")],
            ),
            done,
        )

    def op_fetch(self) -> None:
        if self._begin("fetch hints"):
            self._fetch()

    def show_prompt(self) -> None:
        if self.search is None or self.search.draft is None:
            return
        try:
            msgs = self.search.proposer_prompt()
        except Exception as exc:  # noqa: BLE001
            self.message(str(exc), "warning")
            return
        text = "\n\n".join(f"--- {m['role']} ---\n{m['content']}" for m in msgs)
        self.detail("exact hint-constructor prompt:\n" + text)

    def ask_new_hint(self) -> None:
        if self.search is None:
            return

        def done(values: dict | None) -> None:
            if not values or not (values.get("editor") or "").strip():
                return
            try:
                level = int(values.get("level") or 1)
            except ValueError:
                level = -1
            try:
                p = self.search.add_operator_hint(values["editor"], level=level)  # in memory: audit only, no I/O
            except Exception as exc:  # noqa: BLE001
                self.message(str(exc), "error")
                return
            verdict = "passes its audit" if p.passed else "fails its audit: " + ", ".join(p.audit.get("errors") or [])
            self.message(f"hint {p.index} added; it {verdict}", "ok" if p.passed else "warning")
            self.refresh_view()

        self.app.push_screen(FormScreen("Type a hint", [("level", "hint level", "1")], editor="hint text"), done)

    def op_approve_hint(self, index: int | None) -> None:
        if index is None:
            self.message("highlight a proposal first", "warning")
            return
        if self._begin("approve hint"):
            self._run_sync("approve hint", self.search.approve_hint, index)

    def ask_reject_hint(self, index: int | None) -> None:
        if index is None:
            self.message("highlight a proposal first", "warning")
            return

        def done(values: dict | None) -> None:
            if values and self._begin("reject hint"):
                self._run_sync("reject hint", self.search.reject_hint, index, values.get("reason", ""))

        self.app.push_screen(FormScreen("Reject this hint", [("reason", "reason", "required")]), done)

    def ask_end_round(self) -> None:
        def done(values: dict | None) -> None:
            if values and self._begin("end round"):
                self._run_sync("end round", self.search.finish_round, values.get("note", ""))

        self.app.push_screen(FormScreen("End the round without an attempt", [("note", "note", "required")]), done)

    def _runner(self) -> Any:
        if self.runner is not None:
            return self.runner
        from eviscene_tui.supervised import PolicyContinuationRunner

        return PolicyContinuationRunner.from_options(self.options)

    def op_run_continuation(self) -> None:
        if self.search is None:
            return
        try:
            runner = self._runner()
        except Exception as exc:  # noqa: BLE001
            self.message(f"cannot run a continuation: {exc}", "error")
            return
        if self._begin("continuation"):
            self.stream_worker = self._stream(runner)

    def cancel_stream(self) -> None:
        if self.stream_worker is not None and self.stream_worker.is_running:
            self.stream_worker.cancel()
            self.busy = False
            self.message("continuation cancelled", "warning")

    def ask_approve_attempt(self) -> None:
        def done(values: dict | None) -> None:
            if values is not None and self._begin("approve attempt"):
                self._run_sync("approve attempt", self.search.approve_attempt, values.get("reason", ""))

        self.app.push_screen(FormScreen("Approve the attempt (the search converges)", [("reason", "reason (optional)", "")]), done)

    def ask_reject_attempt(self) -> None:
        def done(values: dict | None) -> None:
            if not values:
                return
            raw = (values.get("earliest") or "").strip()
            try:
                earliest = int(raw) if raw else None
            except ValueError:
                self.message("earliest error step must be a number", "error")
                return
            if self._begin("reject attempt"):
                self._run_sync(
                    "reject attempt", self.search.reject_attempt, values.get("reason", ""),
                    checker=values.get("checker") or {}, earliest_error_step=earliest,
                )

        self.app.push_screen(
            FormScreen("Reject the attempt", [("reason", "reason", "required"), ("earliest", "earliest error step (optional)", "")], checker=True),
            done,
        )

    def action_back(self) -> None:
        if self.stream_worker is not None and self.stream_worker.is_running:
            self.stream_worker.cancel()
        if self.search is not None:
            search, self.search = self.search, None
            search.close()
        self.app.pop_screen()
