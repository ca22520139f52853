"""The operator gate screen of a driver search (``G`` on the runs or case screen).
The content is :class:`~eviscene_tui.ui.widgets.gate_panel.GatePanel`; the two modals
its card uses (the step picker for relocalize, the reason prompt for stop / reject)
are in :mod:`eviscene_tui.ui.screens.dialogs`.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen

from eviscene_tui.state.gate import GateSession
from eviscene_tui.ui.actions import bindings
from eviscene_tui.ui.screens.dialogs import ReasonPrompt, StepPicker
from eviscene_tui.ui.widgets.gate_panel import GateCard, GatePanel, render_card, render_header, render_history, render_progress
from eviscene_tui.ui.widgets.key_footer import KeyFooter

__all__ = ["GateCard", "GatePanel", "GateScreen", "ReasonPrompt", "StepPicker", "render_card", "render_header", "render_history", "render_progress"]


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
