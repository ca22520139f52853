"""The operator gate screen of a driver search (``G`` on the runs or case screen),
and the two modals its card uses: the step picker for relocalize and the reason
prompt for stop / reject. The content is :class:`~eviscene_tui.ui.widgets.gate_panel.GatePanel`.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from eviscene_tui.state.gate import GateSession, TraceStep
from eviscene_tui.ui.actions import bindings
from eviscene_tui.ui.widgets.gate_panel import GateCard, GatePanel, render_card, render_header, render_history, render_progress
from eviscene_tui.ui.widgets.key_footer import KeyFooter

__all__ = ["GateCard", "GatePanel", "GateScreen", "ReasonPrompt", "StepPicker", "render_card", "render_header", "render_history", "render_progress"]


# ---------------------------------------------------------------------- modals
class ReasonPrompt(ModalScreen[str | None]):
    BINDINGS = bindings("gate.reason")

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            yield Static(Content(self.title_text))
            yield Input(placeholder="reason (journaled; Enter to decide, Esc to cancel)", id="gate-reason")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class StepPicker(ModalScreen[tuple[int | None, str] | None]):
    """Relocalize: pick the earliest error step K in the source trace (or none), then a note."""

    BINDINGS = bindings("gate.steps")
    NO_STEP = "no-step"

    def __init__(self, steps: tuple[TraceStep, ...], current: int | None) -> None:
        super().__init__()
        self.steps = steps
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            yield Static(Content.from_markup("[b]Relocalize[/b]: the earliest error step (current site: $c)", c=str(self.current)))
            options = [Option(Content("no step: relocalize without naming one"), id=self.NO_STEP)]
            options += [Option(Content(f"{s.index:>3}  {s.stage}  {s.label}"), id=f"step-{s.index}") for s in self.steps]
            yield OptionList(*options, id="gate-steps")
            yield Input(placeholder="note (journaled only; Enter to decide, Esc to cancel)", id="gate-note")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is None:
            options.focus()
            return
        option_id = options.get_option_at_index(index).id or self.NO_STEP
        step = None if option_id == self.NO_STEP else int(option_id.split("-", 1)[1])
        self.dismiss((step, event.value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)


class GateScreen(Screen[None]):
    BINDINGS = bindings("gate")

    def __init__(self, session: GateSession) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gate-body"):
            yield GatePanel(self.session, id="gate-panel")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(GateCard).focus()

    def action_resume(self) -> None:
        self.query_one(GatePanel).resume()
