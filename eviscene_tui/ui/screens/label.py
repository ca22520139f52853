"""The triage label picker: the configured labels numbered 1-9, the note beside them.

- a number picks that label and saves at once (with the note as it is); ``0`` clears the
  label; Enter saves the highlighted one; Tab moves to the note (multi-line), where
  ``ctrl+s`` saves;
- it opens on the case's current label with its note;
- Esc with an edited note asks before the typed text is thrown away.

Dismisses with a :class:`TriagePick` (``label`` None = clear) or None (cancelled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from eviscene_tui.safe_text import safe_text
from eviscene_tui.settings import DEFAULT_TRIAGE_LABELS
from eviscene_tui.ui.actions import bindings
from eviscene_tui.ui.screens.confirm import ConfirmScreen
from eviscene_tui.ui.widgets.untrusted_edit import UntrustedTextArea

CLEAR = "__clear__"


@dataclass(frozen=True, slots=True)
class TriagePick:
    label: str | None  # None: clear the label
    note: str


class TriageLabelScreen(ModalScreen[TriagePick | None]):
    BINDINGS = bindings("label")
    DEFAULT_CSS = """
    TriageLabelScreen { align: center middle; }
    TriageLabelScreen #label-box { width: 76; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    TriageLabelScreen #label-options { height: auto; max-height: 12; }
    TriageLabelScreen #label-note { height: 5; }
    TriageLabelScreen .label-help { color: $text-muted; }
    """

    def __init__(self, case_title: str, labels: Sequence[str] = DEFAULT_TRIAGE_LABELS, current: str = "", note: str = "",
                 *, count: int = 1) -> None:
        """``case_title``: safe text naming the case (or the selection); ``current`` and
        ``note``: the case's current label and note (the picker opens on them)."""
        super().__init__()
        self.case_title = case_title
        self.labels = tuple(labels)[:9]
        self.current = current
        self.note = note
        self.count = count

    def compose(self) -> ComposeResult:
        with Vertical(id="label-box"):
            whom = self.case_title if self.count == 1 else f"{self.count} selected cases"
            yield Static(Content.assemble(("Triage label", "bold"), " for ", whom))
            now = f"now: {safe_text(self.current, single_line=True, limit=40)}" if self.current else "now: unlabelled"
            yield Static(Content(now), classes="label-help")
            options = [Option(Content.assemble((f"{i + 1} ", "bold"), label), id=label) for i, label in enumerate(self.labels)]
            options.append(Option(Content.assemble(("0 ", "bold"), ("no label (clear)", "italic")), id=CLEAR))
            yield OptionList(*options, id="label-options")
            yield Static(Content("note (optional, several lines; Tab here, ctrl+s saves):"), classes="label-help")
            yield UntrustedTextArea(self.note, id="label-note", soft_wrap=True)
            yield Static(Content("1-9 pick and save \u00b7 0 clear \u00b7 Enter saves the highlighted \u00b7 Tab: the note \u00b7 Esc cancels"),
                         classes="label-help")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.labels.index(self.current) if self.current in self.labels else 0
        options.focus()

    @property
    def note_text(self) -> str:
        return self.query_one("#label-note", UntrustedTextArea).value

    def _highlighted(self) -> str | None:
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is None:
            return self.current or None
        option_id = options.get_option_at_index(index).id
        return None if option_id == CLEAR else option_id

    def _save(self, label: str | None) -> None:
        self.dismiss(TriagePick(label, self.note_text.strip("\n")))

    def action_pick(self, number: int) -> None:
        """A number key: that label (0: none), saved at once."""
        if number == 0:
            self._save(None)
        elif 1 <= number <= len(self.labels):
            self._save(self.labels[number - 1])
        else:
            self.notify(f"there are {len(self.labels)} labels", markup=False, timeout=2)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self._save(None if event.option_id == CLEAR else event.option_id)

    def action_save(self) -> None:
        self._save(self._highlighted())

    def action_cancel(self) -> None:
        if self.note_text == self.note:
            self.dismiss(None)
            return

        def done(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        self.app.push_screen(ConfirmScreen("The note was edited", ["What you typed in the note is not saved yet."],
                                           "Discard it and close?"), done)
