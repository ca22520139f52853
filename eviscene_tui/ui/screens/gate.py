"""The operator gate screen of a driver search (``G`` on the runs or case screen),
and the two modals its card uses: the step picker for relocalize and the reason
prompt for stop / reject. The content is :class:`~eviscene_tui.ui.widgets.gate_panel.GatePanel`.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
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
# Both dialogs are centred boxes over the gate screen (kept visible, dimmed), fit an
# 80x24 terminal (their body scrolls when taller), say what they act on, and keep
# what was typed when they refuse it (the message shows inside the dialog).
_DIALOG_CSS = """
$screen { align: center middle; }
$screen #gate-dialog { width: 96; max-width: 100%; height: auto; max-height: 100%; border: round $accent;
    background: $surface; padding: 0 1; }
$screen #gate-dialog-context { height: auto; max-height: 8; color: $text-muted; }
$screen #gate-steps { height: auto; max-height: 8; }
$screen #gate-dialog-error { height: auto; color: $error; }
"""


class ReasonPrompt(ModalScreen[str | None]):
    """The reason of a stop or a hint rejection. ``context`` names what the decision acts
    on (the hint and its audit, the round's feedback); with ``required`` an empty reason
    is refused in the dialog."""

    BINDINGS = bindings("gate.reason")
    DEFAULT_CSS = _DIALOG_CSS.replace("$screen", "ReasonPrompt")

    def __init__(self, title: str, context: Text | None = None, *, required: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.context = context
        self.required = required

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gate-dialog"):
            yield Static(Content.from_markup("[b]$t[/]  (Enter decides, Esc cancels)", t=self.title_text))
            if self.context is not None:
                yield Static(self.context, id="gate-dialog-context")
            yield Input(placeholder="reason (journaled)" + ("; required" if self.required else ""), id="gate-reason")
            yield Static("", id="gate-dialog-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        reason = event.value.strip()
        if self.required and not reason:
            self.query_one("#gate-dialog-error", Static).update(Text("a reason is required: say why (it goes to the journal)"))
            return
        self.dismiss(reason)

    def action_cancel(self) -> None:
        self.dismiss(None)


class StepPicker(ModalScreen[tuple[int | None, str] | None]):
    """Relocalize: pick the earliest error step K in the source trace (or none), then a note.
    The list opens on the current site."""

    BINDINGS = bindings("gate.steps")
    DEFAULT_CSS = _DIALOG_CSS.replace("$screen", "StepPicker")
    NO_STEP = "no-step"

    def __init__(self, steps: tuple[TraceStep, ...], current: int | None, context: Text | None = None) -> None:
        super().__init__()
        self.steps = steps
        self.current = current
        self.context = context

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gate-dialog"):
            yield Static(Content.from_markup(
                "[b]Relocalize[/b]: pick the earliest error step (current site: step $c); Enter picks, Esc cancels",
                c="\u2014" if self.current is None else str(self.current)))
            if self.context is not None:
                yield Static(self.context, id="gate-dialog-context")
            options = [Option(Content("no step: relocalize without naming one"), id=self.NO_STEP)]
            options += [
                Option(Content.assemble(("\u25b6 " if s.index == self.current else "  ", "bold"), f"{s.index:>3}  {s.stage}  {s.label}"),
                       id=f"step-{s.index}")
                for s in self.steps
            ]
            yield OptionList(*options, id="gate-steps")
            yield Input(placeholder="note (journaled only; Enter decides)", id="gate-note")
            yield Static("", id="gate-dialog-error")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        at = next((i + 1 for i, s in enumerate(self.steps) if s.index == self.current), 0)
        options.highlighted = at
        options.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is None:
            self.query_one("#gate-dialog-error", Static).update(Text("pick a step (or \"no step\") first"))
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
