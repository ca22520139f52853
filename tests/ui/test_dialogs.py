"""The operator dialogs (``ui/screens/dialogs.py``): one convention, and typed text is never
lost — not to a submit that arrives in the same burst as a paste, not to Esc."""

from __future__ import annotations

from typing import Any

from conftest import screen_text, wait_until
from textual import events
from textual.app import App
from textual.widgets import Input

from eviscene_tui.state.gate import TraceStep
from eviscene_tui.ui.screens.confirm import ConfirmScreen
from eviscene_tui.ui.screens.dialogs import FormScreen, HintEditor, ReasonPrompt, StepPicker, VerdictForm


class Host(App[None]):
    """Pushes the dialog and keeps what it dismissed with (``MISSING`` while open)."""

    MISSING: Any = object()

    def __init__(self, form: FormScreen) -> None:
        super().__init__()
        self.form = form
        self.result: Any = self.MISSING

    def on_mount(self) -> None:
        self.push_screen(self.form, self._done)

    def _done(self, result: Any) -> None:
        self.result = result


async def test_a_paste_and_submit_in_one_burst_submit_all_of_the_hint() -> None:
    pasted = "Epsilon first line.\nSecond line, after the newline."
    host = Host(HintEditor("Add a hint"))
    async with host.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: host.screen is host.form and host.form.query("#f-editor"), pilot=pilot)
        for message in (events.Paste(pasted), events.Key("ctrl+s", None)):  # one burst
            host.post_message(message)
        await wait_until(lambda: host.result is not Host.MISSING, pilot=pilot)
    assert host.result["editor"] == pasted


async def test_esc_with_nothing_typed_closes_at_once() -> None:
    host = Host(ReasonPrompt("Stop the search"))
    async with host.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: host.screen is host.form, pilot=pilot)
        await pilot.press("escape")
        await wait_until(lambda: host.result is not Host.MISSING, pilot=pilot)
    assert host.result is None


async def test_esc_with_typed_text_asks_and_n_keeps_everything() -> None:
    host = Host(ReasonPrompt("Reject the hint", required=True))
    async with host.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: host.screen is host.form, pilot=pilot)
        await pilot.press(*"leaks the answer")
        await pilot.press("escape")
        await wait_until(lambda: isinstance(host.screen, ConfirmScreen), pilot=pilot)
        assert "Discard it and close?" in screen_text(host)
        await pilot.press("n")
        await wait_until(lambda: host.screen is host.form, pilot=pilot)
        assert host.result is Host.MISSING
        assert host.form.query_one("#f-reason", Input).value == "leaks the answer"
        await pilot.press("ctrl+s")
        await wait_until(lambda: host.result is not Host.MISSING, pilot=pilot)
    assert host.result == {"reason": "leaks the answer"}


async def test_esc_then_y_discards_what_was_typed() -> None:
    host = Host(HintEditor("Add a hint", prefill="Check the date."))
    async with host.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: host.screen is host.form and host.form.query("#f-editor"), pilot=pilot)
        await pilot.press(*" Then quote it.")
        await pilot.press("escape")
        await wait_until(lambda: isinstance(host.screen, ConfirmScreen), pilot=pilot)
        await pilot.press("y")
        await wait_until(lambda: host.result is not Host.MISSING, pilot=pilot)
    assert host.result is None


async def test_a_checker_value_set_counts_as_typed() -> None:
    host = Host(VerdictForm("Reject the attempt", checker=("anchor_matches",), required=True))
    async with host.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: host.screen is host.form, pilot=pilot)
        await pilot.press("tab", "t")  # from the reason to the checker value: true
        assert host.form.values()["checker"] == {"anchor_matches": True}
        await pilot.press("escape")
        await wait_until(lambda: isinstance(host.screen, ConfirmScreen), pilot=pilot)


async def test_moving_through_the_trace_is_not_typing() -> None:
    """A step picker opens on the current site; moving the highlight and leaving is not a
    loss of typed text, so Esc closes without asking."""
    steps = tuple(TraceStep(index=i, stage="policy", label=f"step {i}") for i in range(4))
    host = Host(StepPicker(steps, current=2))
    async with host.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: host.screen is host.form, pilot=pilot)
        await pilot.press("down", "up", "up")
        await pilot.press("escape")
        await wait_until(lambda: host.result is not Host.MISSING, pilot=pilot)
    assert host.result is None
