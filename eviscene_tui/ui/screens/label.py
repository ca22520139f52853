"""Pick a triage label (and a reason) for a case; recorded in the review journal."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from eviscene_tui.ui.actions import bindings

LABELS = ("needs_relocalization", "unrecoverable", "data_problem", "note")


class TriageLabelScreen(ModalScreen[tuple[str, str] | None]):
    BINDINGS = bindings("label")

    def __init__(self, case_title: str, current: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.case_title = case_title
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            yield Static(Content.from_markup("[b]Triage label[/b] for $c", c=self.case_title))
            if self.current:
                yield Static(Content("current: " + ", ".join(self.current)))
            yield OptionList(*[Option(Content(label), id=label) for label in LABELS], id="label-options")
            yield Input(placeholder="reason (optional), Enter to record, Esc to cancel", id="label-reason")

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
        self.dismiss((LABELS[index], event.value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)
