"""The operator gate screen of a driver search (``G`` on the runs or case screen).
The content is :class:`~eviscene_tui.ui.widgets.gate_panel.GatePanel`; the two modals
its card uses (the step picker for relocalize, the reason prompt for stop / reject)
are in :mod:`eviscene_tui.ui.screens.dialogs`.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen

from eviscene_tui.options import AppOptions
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui.actions import BY_ID, applied_keymap, bindings, effective_keys
from eviscene_tui.ui.screens.dialogs import ReasonPrompt, StepPicker
from eviscene_tui.ui.widgets.gate_panel import GateCard, GatePanel, render_card, render_header, render_history, render_progress
from eviscene_tui.ui.widgets.key_footer import KeyFooter

__all__ = ["GateCard", "GatePanel", "GateScreen", "ReasonPrompt", "StepPicker", "render_card", "render_header", "render_history", "render_progress"]


class GateScreen(Screen[None]):
    BINDINGS = bindings("gate")

    def __init__(self, session: GateSession, options: AppOptions | None = None) -> None:
        super().__init__()
        self.session = session
        self.options = options

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="gate-body"):
            yield GatePanel(self.session, options=self.options, id="gate-panel")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(GateCard).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """R (resume) is shown and runs only once the gated driver is gone after a stop;
        the panel refreshes the bindings on every new snapshot."""
        if action == "resume":
            return not self.session.resume_refusal()
        return True

    def on_key(self, event: events.Key) -> None:
        """A resume key pressed while resuming does not apply (its binding is hidden, so
        the key reaches the screen): say why instead of doing nothing."""
        if event.key not in effective_keys(BY_ID["gate.resume"], applied_keymap(self.app)):
            return
        why = self.session.resume_refusal()
        if why:
            event.stop()
            self.notify(safe_text(f"cannot resume: {why}", single_line=True), severity="warning", markup=False)

    def action_resume(self) -> None:
        self.query_one(GatePanel).resume()
