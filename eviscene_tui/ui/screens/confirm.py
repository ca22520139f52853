"""A yes / no question before an action that needs the operator's consent."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from eviscene_tui.ui.actions import bindings


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True (y / Enter) or False (n / Esc). ``lines`` are safe text."""

    BINDINGS = bindings("confirm")
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen #confirm-box { width: 80; height: auto; max-height: 90%; border: round $warning; background: $surface; padding: 0 1; }
    ConfirmScreen .confirm-title { text-style: bold; color: $warning; }
    """

    def __init__(self, title: str, lines: list[str], question: str) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Content(self.title_text), classes="confirm-title")
            for line in self.lines:
                yield Static(Content(line))
            yield Static(Content.assemble((self.question, "bold"), ("   y / Enter: go on \u00b7 n / Esc: cancel", "dim")))

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)
