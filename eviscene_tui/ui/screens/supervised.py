"""Supervised search screen: the operator-gated round, one card per gate.

    SupervisedScreen(case, options, *, runner=None, settings=None, budgets=None)

Cards (left), each focusable. A card's decision keys work only while the card
(or a child) holds the focus, and the card that holds it is marked (heavy
border, "keys: …" under it). Focus moves only when the operator moves it
(``g`` to the open gate's card, tab / shift+tab), never by itself after a
decision, so a key pressed twice never decides at two gates.

- **Site**: the current failure site (between rounds: the site the next round
  starts from). ``a`` accept, ``r`` relocalize (step + note, with the trace to pick from).
- **Hints**: proposals with their audits (✓ / ✗ code), every line of each hint.
  ``f`` fetch from the hint constructor, ``n`` type a hint (multi-line editor,
  prefilled with the locked hint), ``a`` approve the highlighted hint, ``x`` reject
  it (the dialog names it), ``p`` show the exact proposer prompt, ``e`` end the
  round without an attempt (note).
- **Continuation**: ``c`` run the approved hint's teacher continuation (streamed on
  the right), ``ctrl+x`` cancel.
- **Verdict**: ``a`` approve the attempt, ``x`` reject (reason + checker values),
  ``r`` relocalize.
- **Next round**: ``s`` start the round, ``t`` stop the search (written as the
  driver gate's stop), ``u`` resume a stopped search; only the keys that apply in
  the search's state are shown and run (none once it ended).

``j`` (anywhere) shows the decision journal: chain check, every decision with its
status, and **STALE** where an evidence file changed since the decision.

State lives in a :class:`~eviscene_tui.state.supervised_session.SupervisedSession`;
the screen subscribes and re-renders the panels whose part of the snapshot
changed. Workers do every file and network operation and post typed messages
(``ui.messages``); the handlers hand the result to the session. The screen says
"saved" only after the journal append returned (write + fsync). Run data is
shown through ``safe_text`` and ``Content`` markup variables, never f-string markup.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from eviscene_tui.journal import fold, stale_paths, verify_chain
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.events import PolicyEvent
from eviscene_tui.policy.status_line import ProfileError, target_from_options
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.stream_session import LiveFeed
from eviscene_tui.state.supervised_session import BETWEEN, SupervisedSession, SupervisedSnapshot, source_trace_listing
from eviscene_tui.supervised import InputError, PolicyContinuationRunner, SearchSettings, SupervisedSearch
from eviscene_tui.supervised.continuation import ContinuationRunner
from eviscene_tui.supervised.feedback import CHECK_NAMES, Budgets
from eviscene_tui.supervised.search import Proposal, SearchError
from eviscene_tui.artifacts.trace import load_trace as load_source_trace
from eviscene_tui.ui.actions import actions, applied_keymap, bindings, effective_keys
from eviscene_tui.ui.messages import ContinuationFinished, JournalView, NeedSite, OpDone, OpFailed, SearchOpened, SupervisedChanged
from eviscene_tui.ui.screens.dialogs import FormScreen
from eviscene_tui.ui.widgets.key_footer import KeyFooter
from eviscene_tui.ui.widgets.stream_view import StreamView, TextPane


if TYPE_CHECKING:
    from eviscene_tui.artifacts.case import CaseBundle

SEVERITY_STYLES = {"error": "$error", "warning": "$warning", "ok": "$success"}


def _s(value: Any, limit: int | None = 200) -> str:
    return safe_text("" if value is None else str(value), single_line=True, limit=limit)


def _lines(value: str, limit: int = 2000) -> str:
    """Multi-line run text (a hint keeps its lines), sanitised."""
    return safe_text(value, limit=limit)


def _int(raw: Any) -> int | None:
    try:
        return int(str(raw).strip())
    except (TypeError, ValueError):
        return None


# ============================================================================ cards
class Card(Vertical, can_focus=True):
    """One gate's card. Its keys (from the actions registry, with the user's keymap) are
    shown under the card while it holds the focus."""

    SCOPE = ""
    DEFAULT_CSS = """
    Card { height: auto; border: round $panel; padding: 0 1; margin-bottom: 1; }
    Card.-has-keys { border: heavy $accent; background: $accent 10%; }
    Card.-inactive { color: $text-muted; }
    Card .card-body { height: auto; }
    """

    def __init__(self, title: str, *, id: str) -> None:
        super().__init__(id=id)
        self.title = title
        self.border_title = title

    def compose(self) -> ComposeResult:
        yield Static("", classes="card-body", markup=False)

    def set_body(self, content: Content | str) -> None:
        self.query_one(".card-body", Static).update(content)

    def show_keys(self, has_focus: bool) -> None:
        self.set_class(has_focus, "-has-keys")
        self.border_title = ("▶ " + self.title) if has_focus else self.title
        self.border_subtitle = ("keys: " + self.keys_text()) if has_focus and self.SCOPE else ""

    def keys_text(self) -> str:
        """The card's keys that apply now ("none" when no key does)."""
        keymap: dict[str, str] = applied_keymap(self.app)
        shown = [f"{'/'.join(effective_keys(a, keymap))} {a.label.lower()}" for a in actions(self.SCOPE) if a.show and not self.refusal(a.action)]
        return " · ".join(shown) or "none"

    def refusal(self, action: str) -> str:
        """Why the card's ``action`` does not apply in the search's state ("" when it does)."""
        return ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key that does not apply now is neither shown nor run (see :meth:`on_key`)."""
        return not self.refusal(action)

    def on_key(self, event: events.Key) -> None:
        """A card key pressed while it does not apply (its binding is hidden, so the key
        reaches the card): the message line says why instead of nothing happening."""
        keymap: dict[str, str] = applied_keymap(self.app)
        for a in actions(self.SCOPE):
            if event.key in effective_keys(a, keymap):
                why = self.refusal(a.action)
                if why:
                    event.stop()
                    self.owner.session.say(why, "warning")
                return

    @property
    def owner(self) -> SupervisedScreen:
        screen = self.screen
        assert isinstance(screen, SupervisedScreen)
        return screen


class SiteCard(Card):
    SCOPE = "supervised.site"
    BINDINGS = bindings(SCOPE)

    def action_accept(self) -> None:
        self.owner.op_accept_site()

    def action_relocalize(self) -> None:
        self.owner.ask_relocalize()


class HintsCard(Card):
    SCOPE = "supervised.hints"
    BINDINGS = bindings(SCOPE)

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
    SCOPE = "supervised.continuation"
    BINDINGS = bindings(SCOPE)

    def action_run(self) -> None:
        self.owner.op_run_continuation()

    def action_cancel(self) -> None:
        self.owner.cancel_stream()


class VerdictCard(Card):
    SCOPE = "supervised.verdict"
    BINDINGS = bindings(SCOPE)

    def action_approve(self) -> None:
        self.owner.ask_approve_attempt()

    def action_reject(self) -> None:
        self.owner.ask_reject_attempt()

    def action_relocalize(self) -> None:
        self.owner.ask_relocalize()


class NextCard(Card):
    SCOPE = "supervised.next"
    BINDINGS = bindings(SCOPE)

    next_kind = ""  # the shown NextPart's kind: in_progress | stopped | ended | feedback | error
    final_status = ""  # the status the search ended with (kind "ended")

    def refusal(self, action: str) -> str:
        """s / t apply between rounds of a running search, u only to an operator stop;
        none to a search that ended."""
        kind = self.next_kind
        if kind == "ended":
            return f"the search has ended ({self.final_status}): no round can start"
        if action == "resume":
            return "" if kind == "stopped" else "the search is not stopped: nothing to resume"
        if kind == "stopped":
            return "the search was stopped by the operator: u resumes it, then s starts the round"
        if kind == "in_progress":
            return "a round is open: finish or relocalize it first"
        return ""

    def action_start(self) -> None:
        self.owner.op_begin_round()

    def action_stop(self) -> None:
        self.owner.op_stop()

    def action_resume(self) -> None:
        self.owner.op_resume()


CARD_OF_GATE = {"site": "#card-site", "hints": "#card-hints", "continuation": "#card-cont", "verdict": "#card-verdict", BETWEEN: "#card-next"}


# ============================================================================ screen
class SupervisedScreen(Screen[None]):
    BINDINGS = bindings("supervised")

    DEFAULT_CSS = """
    SupervisedScreen { layout: vertical; }
    SupervisedScreen #sup-title { height: auto; max-height: 3; padding: 0 1; background: $panel; }
    SupervisedScreen #sup-message { height: auto; max-height: 3; padding: 0 1; }
    SupervisedScreen #sup-body { height: 1fr; }
    SupervisedScreen #sup-cards { width: 1fr; }
    SupervisedScreen #sup-right { width: 1fr; }
    SupervisedScreen #proposals { height: auto; max-height: 14; }
    SupervisedScreen #sup-detail { height: 1fr; }
    SupervisedScreen #sup-stream { height: 1fr; }
    """

    def __init__(
        self,
        case: CaseBundle,
        options: AppOptions,
        *,
        runner: ContinuationRunner | None = None,
        settings: SearchSettings | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        super().__init__()
        self.case = case
        self.options = options
        self.runner = runner
        self.settings = settings
        self.budgets = budgets
        self.session = SupervisedSession()
        self.stream_worker: Worker[None] | None = None
        self._shown: SupervisedSnapshot | None = None
        self._focused_first = False

    @property
    def search(self) -> SupervisedSearch | None:
        return self.session.search

    @property
    def last_message(self) -> str:
        return self.session.message.text

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
                yield TextPane("feedback / prompt / details", id="sup-detail")
                yield StreamView(id="sup-stream")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.session.subscribe(self._show)
        self.watch(self, "focused", self._focus_moved)
        self._open()
        self._show_session_badge()

    def on_unmount(self) -> None:
        self.workers.cancel_node(self)
        self.session.close()

    def _show_session_badge(self) -> None:
        """The embedded stream view shows the session kind from the start (attested profile
        or an unattested --policy-url/--policy-model pair), before any call is made."""
        try:
            target = target_from_options(self.options)
        except (ProfileError, OSError):
            badge = "no policy"
        else:
            badge = "no policy" if target is None else target.label
        self.query_one("#sup-stream", StreamView).set_badge(badge)

    def _label(self) -> str:
        root, base = self.case.root, self.options.key_root
        try:
            rel = os.path.relpath(os.path.abspath(root), os.path.abspath(base))
        except ValueError:
            return str(root)
        return rel if not rel.startswith("..") else str(root)

    def _focus_moved(self, widget: Widget | None) -> None:
        for card in self.query(Card):
            card.show_keys(widget is not None and card in widget.ancestors_with_self)

    # ------------------------------------------------------------------ rendering (no I/O)
    def refresh_view(self) -> None:
        """Render the session's state now (after a test or a caller changed the search directly)."""
        self._show(self.session.snapshot())

    def _show(self, snap: SupervisedSnapshot) -> None:
        prev, self._shown = self._shown, snap
        if prev is None or snap.message != prev.message:
            style = SEVERITY_STYLES.get(snap.message.severity)
            markup = f"[{style}]$m[/]" if style else "$m"  # style from the fixed table above, never run data
            self.query_one("#sup-message", Static).update(Content.from_markup(markup, m=safe_text(snap.message.text, limit=600)))
        if not snap.opened or snap.title is None:
            return
        if prev is None or snap.title != prev.title:
            t = snap.title
            self.query_one("#sup-title", Static).update(
                Content.from_markup(
                    "[b]Supervised search[/]  $case  round $round  status [b]$status[/]  gate [b]$gate[/]$ro",
                    case=_s(t.label, 60), round=str(t.round), status=_s(t.status, 40), gate=t.gate,
                    ro="  READ-ONLY" if t.read_only else "",
                )
            )
        if prev is None or snap.gate != prev.gate:
            for gate, card_id in CARD_OF_GATE.items():
                self.query_one(card_id, Card).set_class(gate != snap.gate, "-inactive")
            round_closed = snap.gate == BETWEEN and prev is not None and prev.gate not in (None, BETWEEN)
            if snap.gate is not None and (not self._focused_first or (round_closed and isinstance(self.focused, Card))):
                # the keys start on the open gate's card when the search opens. Within a round they
                # stay on the card that decided (a key pressed twice never decides the next gate;
                # the message says where the next decision is); once the round has closed the
                # cards of its gates have no keys, so they move to the Next round card
                self._focused_first = True
                self._give_keys(CARD_OF_GATE[snap.gate])
        if prev is None or snap.site != prev.site:
            self._render_site(snap)
        if prev is None or snap.proposals != prev.proposals:
            self._render_hints(snap)
        if prev is None or snap.continuation != prev.continuation:
            self._render_cont(snap)
            c = snap.continuation
            if c.partial and c.ended is not None and snap.busy != "continuation" and snap.verdict is None:
                # a run cut short: the stream view shows what it streamed, as kept in the round (so also after a reopen)
                self._show_recorded(c.partial, c.ended)
        if prev is None or snap.verdict != prev.verdict:
            self._render_verdict(snap)
            if snap.verdict is not None:
                self._show_recorded(snap.verdict.events, recorded=snap.verdict.timings or (None, None))
            elif prev is not None and prev.verdict is not None:
                # the round closed on a verdict: the next continuation starts from an empty view
                self.query_one("#sup-stream", StreamView).clear()
        if prev is None or snap.next != prev.next:
            self._render_next(snap)
        if prev is None or snap.detail != prev.detail:
            self.query_one("#sup-detail", TextPane).set_text(snap.detail)

    def _render_site(self, snap: SupervisedSnapshot) -> None:
        site = snap.site
        assert site is not None
        self.query_one("#card-site", Card).set_body(
            Content.from_markup(
                "$head[b]$idx[/] ($stage)  kind [b]$kind[/]  category $cat\nid $sid\n$preview$flag",
                head="next round starts at step " if site.upcoming else "step ",
                idx=_s(site.step_index),
                stage=_s(site.stage, 40),
                kind=_s(site.kind, 40),
                cat=_s(site.category, 60),
                sid=_s(site.step_id, 80),
                preview=_s(site.preview, 160),
                flag="\nrelocalization requested by the feedback" if site.relocalization_requested else "",
            )
        )

    def _render_hints(self, snap: SupervisedSnapshot) -> None:
        card = self.query_one("#card-hints", HintsCard)
        ol = card.query_one(OptionList)
        keep = ol.highlighted
        ol.clear_options()
        for p in snap.proposals:
            mark = "✓" if p.passed else "✗ " + ",".join(p.errors)
            status = {"approved": "APPROVED", "rejected": "rejected"}.get(p.status, "")
            ol.add_option(
                Option(
                    Content.from_markup(
                        "[b]$mark[/] $status $text\n[dim]$by · $sha[/]",
                        mark=mark, status=status, text=_lines(p.text, 1200), by=_s(p.provider, 30), sha=p.sha,
                    )
                )
            )
        if snap.proposals:
            ol.highlighted = keep if keep is not None and keep < len(snap.proposals) else 0
            if card.has_focus:
                ol.focus()  # proposals arrived while the card had the keyboard: arrows pick one
        card.set_body(Content.from_markup("$n proposal(s)", n=str(len(snap.proposals))))

    def _render_cont(self, snap: SupervisedSnapshot) -> None:
        c = snap.continuation
        if c.approved is None:
            body = Content("no approved hint yet")
        else:
            streamed = f"\n{c.partial_tokens} token(s) streamed before it ended (shown on the right)" if c.partial else ""
            body = Content.from_markup(
                "approved:\n$hint$last$streamed", hint=_lines(c.approved, 1200), last=f"\nlast run: {c.last_run}" if c.last_run else "",
                streamed=streamed,
            )
        self.query_one("#card-cont", Card).set_body(body)

    def _render_verdict(self, snap: SupervisedSnapshot) -> None:
        v = snap.verdict
        if v is None:
            body = Content("no attempt to judge")
        else:
            body = Content.from_markup(
                "attempt $id\ncompletion ids $n, stop $stop, episode sha $sha\nteacher: [b]$action[/]$thought$output",
                id=_s(v.attempt_id, 40), n=str(v.completion_ids), stop=_s(v.stop_reason, 40), sha=_s(v.episode_sha, 12),
                action=_s(v.action or "—", 160),
                thought=("\nthought: " + _lines(v.thought, 600)) if v.thought else "",
                output=("\noutput: " + _lines(v.output, 600)) if v.output else "",
            )
        self.query_one("#card-verdict", Card).set_body(body)

    def _show_recorded(self, events: tuple[PolicyEvent, ...], state: str = "complete",
                       recorded: tuple[float | None, float | None] | None = None) -> None:
        """The stream view shows the continuation as recorded in the round (the same after a
        reopen as right after the live stream, which it replaces with what was written).
        ``recorded`` (for an attempt record): the (ttft, rate) the record kept, shown (and the
        state marked "recorded") when this session did not measure the stream itself; a
        cut-short run passes None and keeps its end state as it is."""
        view = self.query_one("#sup-stream", StreamView)
        feed = view.attach(LiveFeed(accumulate=True))
        for ev in events:
            feed.push(ev)
        # the replay's own arrival times are no stream's: show the timings measured while it
        # streamed when this session ran it, else none (a reopened round does not keep them)
        search = self.session.search
        outcome = search.draft.outcome if search is not None and search.draft is not None else None
        measured = outcome.timings if outcome is not None else None
        if measured or recorded is None:
            view.finish(state, timings=measured or {"ttft_s": None, "tokens_per_s": None})
        else:
            view.finish(f"{state} (recorded)", timings={"ttft_s": recorded[0], "tokens_per_s": recorded[1]})

    def _render_next(self, snap: SupervisedSnapshot) -> None:
        n = snap.next
        assert n is not None
        card = self.query_one("#card-next", NextCard)
        card.next_kind, card.final_status = n.kind, (_s(n.text, 60) if n.kind == "ended" else "")
        if n.kind == "stopped":
            body = Content.from_markup("[b $warning]stopped by operator[/]\nu resumes the search (then s starts the round)")
        elif n.kind == "ended":
            body = Content.from_markup("[b]the search has ended: $status[/]\nno round can start", status=card.final_status)
        elif n.kind == "feedback":
            body = Content.from_markup("$t\n[dim]full object on the right[/]", t=_lines(n.text, 1200))
        else:
            body = Content.from_markup("$t", t=_lines(n.text, 600))
        card.set_body(body)
        card.show_keys(card.has_focus_within)  # the keys that apply changed with the state
        self.refresh_bindings()

    # ------------------------------------------------------------------ workers
    @work(thread=True, exclusive=True, group="supervised-open", exit_on_error=False)
    def _open(self, step: int | None = None, note: str | None = None) -> None:
        try:
            search = SupervisedSearch.for_case(
                self.case, self.options, label=self._label(), source_step_index=step, site_note=note,
                budgets=self.budgets, settings=self.settings,
            )
        except InputError as exc:
            if step is None and "no failure site" in str(exc):
                self.post_message(NeedSite(str(exc), self._trace_listing()))
            else:
                self.post_message(OpFailed("open", f"cannot open a supervised search for this case: {exc}"))
            return
        except (SearchError, OSError, ValueError) as exc:
            self.post_message(OpFailed("open", f"cannot open a supervised search for this case: {exc}"))
            return
        self.post_message(SearchOpened(search, "; ".join(search.messages)))

    def _trace_listing(self) -> list[tuple[int, bool, str]]:
        """The source trace's steps (read in the worker) for the pick-a-step dialog; a big
        trace through its step index (each step parsed without its token capture)."""
        path = self.case.source_trace_path
        if path is None:
            return []
        trace, _ = load_source_trace(Path(path), spool_dir=self.options.workdir / "spool")
        return source_trace_listing(trace) if trace is not None else []

    @work(thread=True, exclusive=True, group="supervised-io", exit_on_error=False)
    def _run_sync(self, label: str, fn: Callable[..., Any], *args: Any, describe: Callable[[Any], str] | None = None, **kwargs: Any) -> None:
        try:
            result = fn(*args, **kwargs)
        except (SearchError, OSError, ValueError, RuntimeError) as exc:
            self.post_message(OpFailed(label, str(exc) or type(exc).__name__))
            return
        saved = isinstance(result, dict) and "hash" in result or isinstance(result, Proposal)
        self.post_message(OpDone(label, saved=saved, detail=describe(result) if describe is not None else ""))

    @work(exclusive=True, group="supervised-net", exit_on_error=False)
    async def _fetch(self, search: SupervisedSearch) -> None:
        try:
            props = await search.fetch_proposals()
        except (SearchError, OSError, ValueError, RuntimeError) as exc:
            self.post_message(OpFailed("fetch hints", str(exc)))
            return
        self.post_message(OpDone("fetch hints", saved=True, detail=f"{len(props)} proposal(s)"))

    @work(exclusive=True, group="supervised-stream", exit_on_error=False)
    async def _stream(self, search: SupervisedSearch, runner: ContinuationRunner, feed: LiveFeed) -> None:
        # only the feed (a plain buffer) is touched here; the view paints it on its timer
        try:
            outcome = await search.run_continuation(runner, on_event=feed.push)
        except (SearchError, OSError, ValueError, RuntimeError) as exc:
            self.post_message(ContinuationFinished(None, str(exc) or type(exc).__name__))
            return
        self.post_message(ContinuationFinished(outcome, None))

    @work(thread=True, exclusive=True, group="supervised-journal", exit_on_error=False)
    def _load_journal(self, search: SupervisedSearch) -> None:
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

    # ------------------------------------------------------------------ message handlers
    def on_search_opened(self, message: SearchOpened) -> None:
        self.session.opened(message.search, message.note)

    def on_op_done(self, message: OpDone) -> None:
        self.session.finished(message.label, saved=message.saved, detail=message.detail)
        if message.saved:
            # the runs row (and the case header) follow the search's files at once
            self.app.post_message(SupervisedChanged())

    def on_op_failed(self, message: OpFailed) -> None:
        self.session.failed(message.label, message.message)

    def on_journal_view(self, message: JournalView) -> None:
        self.session.show_detail(message.text)

    def on_continuation_finished(self, message: ContinuationFinished) -> None:
        view = self.query_one("#sup-stream", StreamView)
        outcome = message.outcome
        if outcome is None:
            view.finish("failed")
            self.session.failed("continuation", message.error or "unknown error")
        elif outcome.ok:
            view.finish(outcome.status)
            self.session.finished("continuation", saved=False, detail="recorded into the round; give your verdict")
        else:
            view.finish(outcome.status)
            self.session.failed("continuation", f"{outcome.status}: {outcome.error}")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self.stream_worker:
            if event.state == WorkerState.CANCELLED:
                self.query_one("#sup-stream", StreamView).finish("cancelled")
                self.session.cancelled("continuation")
            elif event.state == WorkerState.ERROR:
                self.query_one("#sup-stream", StreamView).finish("failed")
                self.session.failed("continuation", _internal(event.worker.error))
        elif event.state == WorkerState.ERROR and event.worker.group.startswith("supervised-"):
            # an unexpected failure in a worker: shown, and the screen is free for the next operation
            self.session.failed(self.session.busy or event.worker.group.removeprefix("supervised-"), _internal(event.worker.error))

    def on_need_site(self, message: NeedSite) -> None:
        self.session.say(message.reason, "warning")

        policy_steps = {i for i, policy, _ in message.trace if policy}

        def validate(values: dict[str, Any]) -> str | None:
            step = _int(values.get("step"))
            if step is None:
                return "the step must be a number (a policy step of the trace above)"
            if message.trace and step not in policy_steps:
                return f"step {step} is not a policy step (pick one marked ●)"
            if not (values.get("note") or "").strip():
                return "a note is required: say why this step"
            return None

        def done(values: dict[str, Any] | None) -> None:
            if not values:
                self.session.say("no starting step chosen; the supervised search was not opened", "warning")
                return
            self._open(_int(values["step"]), values["note"])

        self.app.push_screen(
            FormScreen(
                "No recoverable site: pick the step to repair",
                [("step", "source step index (a policy step)", "e.g. 7"), ("note", "note (why this step)", "required")],
                trace=message.trace, validate=validate,
            ),
            done,
        )

    # ------------------------------------------------------------------ operations (called by cards)
    def _claim(self, label: str) -> SupervisedSearch | None:
        """The open search when ``label`` may run now (else None and a message)."""
        if not self.session.begin(label):
            return None
        return self.session.search

    def _gate(self) -> str | None:
        return self.session.gate

    def _at(self, what: str, *gates: str) -> SupervisedSearch | None:
        """The open search when the round is at one of ``gates``; otherwise None and a message
        (checked before a dialog opens, so nothing typed is lost to a refusal)."""
        search = self.session.search
        if search is None:
            return None
        gate = self._gate()
        if gate not in gates:
            self.session.say(f"{what}: not possible now, the round is at {gate}", "warning")
            return None
        return search

    def op_begin_round(self) -> None:
        if self._gate() not in (None, BETWEEN):
            self.session.say("a round is already open", "warning")
            return
        search = self._claim("start round")
        if search is not None:
            self._run_sync("start round", search.begin_round)

    def op_stop(self) -> None:
        search = self.session.search
        if search is None:
            return
        if self._gate() != BETWEEN:
            self.session.say("a round is open: finish or relocalize it before stopping", "warning")
            return

        def done(values: dict[str, Any] | None) -> None:
            if values is not None and self._claim("stop") is not None:
                self._run_sync("stop", search.stop, values.get("note", ""), describe=lambda _: "stopped by operator (u resumes)")

        self.app.push_screen(
            FormScreen(
                "Stop the search", [("note", "note (optional)", "why stop here")],
                context=(
                    f"before round {len(search.history)}: the search files then read paused_execution_error "
                    "(OperatorStoppedSearch), as a stop at the driver gate; u resumes it"
                ),
            ),
            done,
        )

    def op_resume(self) -> None:
        search = self._claim("resume")
        if search is not None:
            self._run_sync("resume", search.resume, describe=lambda _: "s starts the next round")

    def op_accept_site(self) -> None:
        search = self._claim("accept site")
        if search is not None:
            self._run_sync("accept site", search.accept_site)

    def ask_relocalize(self) -> None:
        search = self._at("relocalize", "site", "hints", "continuation", "verdict")
        if search is None:
            return

        def parse(values: dict[str, Any]) -> tuple[int | None, str, str | None]:
            return _int(values.get("step")), values.get("note", ""), (values.get("category") or "").strip() or None

        def validate(values: dict[str, Any]) -> str | None:
            step, note, category = parse(values)
            if step is None:
                return "the step must be a number (pick one from the trace above)"
            return search.relocalize_problem(step, note, category=category)

        def done(values: dict[str, Any] | None) -> None:
            if not values:
                return
            step, note, category = parse(values)
            if self._claim("relocalize") is not None:
                self._run_sync("relocalize", search.relocalize, step, note, category=category)

        snap = self.session.snapshot()
        here = f"current site: step {snap.site.step_index} ({snap.site.stage})" if snap.site is not None else None
        self.app.push_screen(
            FormScreen(
                "Relocalize: pick the step where the failure really is",
                [("step", "source step index", "e.g. 7"), ("note", "note (why)", "required"), ("category", "semantic category (optional)", "e.g. wrong_search_direction")],
                context=here, trace=self.session.trace_listing(),
                trace_at=snap.site.step_index if snap.site is not None else None, validate=validate,
            ),
            done,
        )

    def op_fetch(self) -> None:
        search = self._claim("fetch hints")
        if search is not None:
            self._fetch(search)

    def show_prompt(self) -> None:
        search = self.session.search
        if search is None or search.draft is None:
            return
        try:
            msgs = search.proposer_prompt()
        except SearchError as exc:
            self.session.say(str(exc), "warning")
            return
        text = "\n\n".join(f"--- {m['role']} ---\n{m['content']}" for m in msgs)
        self.session.show_detail("exact hint-constructor prompt:\n" + text)

    def ask_new_hint(self) -> None:
        search = self._at("type a hint", "hints")
        if search is None:
            return
        locked = self.session.locked_hint()

        def validate(values: dict[str, Any]) -> str | None:
            if not (values.get("editor") or "").strip():
                return "type the hint's text"
            if (values.get("level") or "").strip() and _int(values.get("level")) is None:
                return "the hint level must be a number"
            return None

        def done(values: dict[str, Any] | None) -> None:
            if not values:
                return
            level = _int(values.get("level")) if (values.get("level") or "").strip() else None
            if self._claim("add hint") is not None:
                self._run_sync("add hint", search.add_operator_hint, values["editor"], level=level, describe=_hint_verdict)

        self.app.push_screen(
            FormScreen(
                "Type a hint",
                [("level", "hint level", "1")],
                context=("locked hint (keep it verbatim, then a newline and your advice):\n" + locked) if locked else None,
                editor="hint text", editor_text=(locked + "\n") if locked else "", validate=validate,
            ),
            done,
        )

    def op_approve_hint(self, index: int | None) -> None:
        if index is None:
            self.session.say("highlight a proposal first", "warning")
            return
        search = self._claim("approve hint")
        if search is not None:
            self._run_sync("approve hint", search.approve_hint, index)

    def ask_reject_hint(self, index: int | None) -> None:
        search = self._at("reject a hint", "hints")
        if search is None:
            return
        if index is None or search is None or search.draft is None or not 0 <= index < len(search.draft.proposals):
            self.session.say("highlight a proposal first", "warning")
            return
        proposal = search.draft.proposals[index]

        def done(values: dict[str, Any] | None) -> None:
            if values and self._claim("reject hint") is not None:
                self._run_sync("reject hint", search.reject_hint, index, values.get("reason", ""))

        self.app.push_screen(
            FormScreen(
                f"Reject hint {index}", [("reason", "reason", "required")],
                context=f"hint {index} ({proposal.provider}, {proposal.hint_sha256[:10]}):\n{proposal.text}",
                validate=_required("reason", "rejecting a hint needs a reason"),
            ),
            done,
        )

    def ask_end_round(self) -> None:
        search = self._at("end the round", "site", "hints", "continuation")
        if search is None:
            return

        def done(values: dict[str, Any] | None) -> None:
            if values and self._claim("end round") is not None:
                self._run_sync("end round", search.finish_round, values.get("note", ""))

        d = search.draft
        pending = [p for p in d.proposals if p.status == "pending" and p.passed] if d is not None else []
        context = (
            f"{d.name}: {len(d.proposals)} proposal(s); {len(pending)} pending hint(s) that pass their audit "
            "are closed as rejected with this note"
        ) if d is not None else None
        self.app.push_screen(
            FormScreen("End the round without an attempt", [("note", "note", "required")], context=context,
                       validate=_required("note", "closing a round without an attempt needs a note")),
            done,
        )

    def _runner(self) -> ContinuationRunner:
        if self.runner is not None:
            return self.runner
        return PolicyContinuationRunner.from_options(self.options)

    def op_run_continuation(self) -> None:
        if self.session.search is None:
            return
        try:
            runner = self._runner()
        except (ValueError, ProfileError, OSError) as exc:
            self.session.say(f"cannot run a continuation: {exc}", "error")
            return
        search = self._claim("continuation")
        if search is not None:
            feed = self.query_one("#sup-stream", StreamView).attach(LiveFeed(accumulate=True), badge="policy")
            self.stream_worker = self._stream(search, runner, feed)

    def cancel_stream(self) -> None:
        if self.stream_worker is not None and self.stream_worker.is_running:
            self.stream_worker.cancel()
        else:
            self.session.say("nothing is streaming", "info")

    def ask_approve_attempt(self) -> None:
        search = self._at("approve the attempt", "verdict")
        if search is None:
            return

        def done(values: dict[str, Any] | None) -> None:
            if values is not None and self._claim("approve attempt") is not None:
                self._run_sync("approve attempt", search.approve_attempt, values.get("reason", ""))

        verdict = self.session.snapshot().verdict
        self.app.push_screen(
            FormScreen(
                "Approve the attempt (the search converges)", [("reason", "reason (optional)", "")],
                context=f"attempt {verdict.attempt_id}" if verdict is not None else None,
            ),
            done,
        )

    def ask_reject_attempt(self) -> None:
        search = self._at("reject the attempt", "verdict")
        if search is None:
            return

        def validate(values: dict[str, Any]) -> str | None:
            if not (values.get("reason") or "").strip():
                return "rejecting an attempt needs a reason"
            raw = (values.get("earliest") or "").strip()
            if raw and _int(raw) is None:
                return "the earliest error step must be a number (or empty)"
            return None

        def done(values: dict[str, Any] | None) -> None:
            if not values:
                return
            raw = (values.get("earliest") or "").strip()
            if self._claim("reject attempt") is not None:
                self._run_sync(
                    "reject attempt", search.reject_attempt, values.get("reason", ""),
                    checker=values.get("checker") or {}, earliest_error_step=_int(raw) if raw else None,
                )

        verdict = self.session.snapshot().verdict
        self.app.push_screen(
            FormScreen(
                "Reject the attempt", [("reason", "reason", "required"), ("earliest", "earliest error step (optional)", "")],
                context=f"attempt {verdict.attempt_id}" if verdict is not None else None,
                checker=CHECK_NAMES, validate=validate,
            ),
            done,
        )

    def action_ack_torn(self) -> None:
        search = self.session.search
        if search is None or not search.torn_tail_warning:
            self.session.say("the journal has no torn tail", "info")
            return
        if self._claim("acknowledge torn tail") is not None:
            self._run_sync("acknowledge torn tail", search.acknowledge_torn_tail, "acknowledged in the supervised screen")

    def action_goto_gate(self) -> None:
        gate = self._gate()
        if gate is not None:
            self._give_keys(CARD_OF_GATE[gate])

    def _give_keys(self, card_id: str) -> None:
        """Focus the card (its keys act) and scroll it into view once laid out (a small
        terminal shows only part of the left column)."""
        card = self.query_one(card_id, Card)
        card.focus(scroll_visible=False)
        self.call_after_refresh(card.scroll_visible, animate=False, top=False)

    def action_journal(self) -> None:
        if self.session.search is not None:
            self._load_journal(self.session.search)

    def action_back(self) -> None:
        if self.stream_worker is not None and self.stream_worker.is_running:
            self.stream_worker.cancel()
        self.session.close()
        self.app.pop_screen()


def _internal(error: BaseException | None) -> str:
    return f"internal error: {type(error).__name__}: {error}" if error is not None else "internal error"


def _hint_verdict(p: Proposal) -> str:
    return f"hint {p.index} " + ("passes its audit" if p.passed else "fails its audit: " + ", ".join(p.audit.get("errors") or []))


def _required(field: str, problem: str) -> Callable[[dict[str, Any]], str | None]:
    def validate(values: dict[str, Any]) -> str | None:
        return None if (values.get(field) or "").strip() else problem

    return validate
