"""A one-line search input whose keys step through matches: Enter / down next, up previous,
Esc closes. It only posts messages; the screen runs the search (in a worker)."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Input

from eviscene_tui.ui.actions import bindings


class SearchBox(Input):
    BINDINGS = bindings("search")

    class Step(Message):
        """Go to the next (1) or previous (-1) match of the current query."""

        def __init__(self, direction: int) -> None:
            super().__init__()
            self.direction = direction

    class Closed(Message):
        """The operator closed the search."""

    def action_step(self, direction: int) -> None:
        self.post_message(self.Step(direction))

    def action_close(self) -> None:
        self.post_message(self.Closed())
