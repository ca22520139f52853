"""An editable widget pre-filled with untrusted text (hints and notes from run files).

A TextArea writes its text to the terminal as it is, so a run's hint
holding ``ESC ] 0 ; … BEL`` or a bidi override would reach the terminal raw.
This widget shows :func:`safe_text` of the prefill instead (control and bidi
characters as visible placeholders) and keeps the original: :attr:`value` is the
original text while the operator has not changed what is shown, and the edited
text once they have.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import TextArea

from eviscene_tui.safe_text import safe_text


class UntrustedTextArea(TextArea):
    """A multi-line editor whose prefill comes from run data."""

    def __init__(self, raw: str = "", **kwargs: Any) -> None:
        self._raw = raw
        self._shown = safe_text(raw)
        super().__init__(self._shown, **kwargs)

    def set_untrusted(self, raw: str) -> None:
        """Replace the content with (the displayed form of) ``raw``."""
        self._raw = raw
        self._shown = safe_text(raw)
        self.text = self._shown

    @property
    def value(self) -> str:
        """The original prefill while the shown text is unedited, else what was typed."""
        text = self.text
        return self._raw if text == self._shown else text

