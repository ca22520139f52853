"""Full detail of one trace step (a modal over the case screen).

``k`` closes it with the result ``"tokens"``: the screen that pushed it opens the token
inspector on this step's capture (the detail says "press k" under the token capture)."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.screen import ModalScreen

from eviscene_tui.ui.actions import bindings
from eviscene_tui.state.case_view import Line
from eviscene_tui.ui.widgets.doc import doc_content
from eviscene_tui.ui.widgets.doc_view import DocView
from eviscene_tui.ui.widgets.key_footer import KeyFooter


class StepDetailScreen(ModalScreen["str | None"]):
    BINDINGS = bindings("detail")

    def __init__(self, index: int, doc: list[Line], revealed: bool = False, *, painted: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.index = index
        self.doc = doc
        self.revealed = revealed
        self._painted = painted  # called once the detail is on screen

    def compose(self) -> ComposeResult:
        # a Line-API view: a Static would lay out a step's whole page text before the first paint
        yield DocView(doc_content(self.doc, self.revealed), id="detail-doc", classes="detail-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#detail-doc").focus()
        if self._painted is not None:
            self.call_after_refresh(self._painted)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_tokens(self) -> None:
        self.dismiss("tokens")
