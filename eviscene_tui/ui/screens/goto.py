"""A small modal asking for a step number."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from eviscene_tui.ui.actions import bindings


class GotoStepScreen(ModalScreen[int | None]):
    BINDINGS = bindings("goto")

    def __init__(self, step_count: int) -> None:
        super().__init__()
        self.step_count = step_count

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            yield Static(Content(f"Go to step (0\u2013{max(0, self.step_count - 1)}), Enter to jump, Esc to cancel"))
            yield Input(placeholder="step index", type="integer", id="goto-input")
            yield Static(Content(""), id="goto-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        try:
            value = int(text)
        except ValueError:
            self.query_one("#goto-error", Static).update(Content("enter a whole number"))
            return
        if value < 0:
            value += self.step_count
        if not 0 <= value < self.step_count:
            self.query_one("#goto-error", Static).update(Content(f"no step {text}: the trace has {self.step_count} steps"))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
