"""The help screen: every key of every screen, from the actions registry, grouped by
section, with its id (for the ``[keys]`` table of the config file) and the key bound
now (after the user's overrides). It opens scrolled to the section of the screen it
was opened from."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from eviscene_tui.ui.actions import SECTIONS, actions, bindings, effective_keys
from eviscene_tui.settings import config_path

# the screen a help request comes from -> the section the help opens at
SCREEN_SECTIONS: dict[str, str] = {
    "RunsScreen": "runs",
    "SortChooser": "sort",
    "CaseScreen": "case",
    "StepDetailScreen": "detail",
    "GotoStepScreen": "goto",
    "TriageLabelScreen": "label",
    "ConfirmScreen": "confirm",
    "StreamScreen": "stream",
    "SupervisedScreen": "supervised",
    "FormScreen": "supervised.form",
    "TokenScreen": "tokens",
    "GateScreen": "gate",
    "ReasonPrompt": "gate.reason",
    "StepPicker": "gate.steps",
}


def section_for(screen: object) -> str:
    return SCREEN_SECTIONS.get(type(screen).__name__, "app")


def _section_id(scope: str) -> str:
    return "help-" + scope.replace(".", "-")


def section_content(scope: str, keymap: dict[str, str], display: Callable[[Binding], str] | None = None) -> Content:
    """One section: its title and one line per action (keys, label, id, help)."""
    lines = [Content.from_markup("[b $accent]$t[/]", t=SECTIONS[scope])]
    for action in actions(scope):
        keys = effective_keys(action, keymap)
        if display is not None:
            keys = [display(Binding(k, action.action, action.label)) for k in keys]
        lines.append(
            Content.assemble(
                (f"  {', '.join(keys):<12}", "bold"),
                (f"{action.label:<18}", ""),
                (f" {action.id:<32}", "dim"),
                (f" {action.help}", "dim italic"),
            )
        )
    return Content("\n").join(lines)


def help_content(keymap: dict[str, str], display: Callable[[Binding], str] | None = None) -> Content:
    """The whole help text (every section)."""
    parts = [_header()] + [section_content(scope, keymap, display) for scope in SECTIONS]
    return Content("\n\n").join(parts)


def _header() -> Content:
    return Content("\n").join(
        [
            Content.assemble(("eviscene-tui keys", "bold $primary"), ('   ctrl+p: command palette ("noun: verb" commands, each with its key) \u00b7 ?/f1/esc: close help', "dim")),
            Content.assemble(("Override keys in ", "dim"), (str(config_path()), "dim italic"), (' with a [keys] table: "binding.id" = "key"', "dim")),
        ]
    )


class HelpScreen(ModalScreen[None]):
    BINDINGS = bindings("help")

    def __init__(self, section: str = "app") -> None:
        super().__init__()
        self.section = section if section in SECTIONS else "app"

    def compose(self) -> ComposeResult:
        keymap = dict(getattr(self.app, "_keymap", {}) or {})
        display = self.app.get_key_display
        with VerticalScroll(id="help-body"):
            yield Static(_header(), id="help-header")
            for scope in SECTIONS:
                yield Static(section_content(scope, keymap, display), id=_section_id(scope), classes="help-section")

    def on_mount(self) -> None:
        body = self.query_one("#help-body", VerticalScroll)
        body.focus()
        if self.section != "app":
            self.call_after_refresh(self._scroll_to_section)

    def _scroll_to_section(self) -> None:
        target = self.query_one(f"#{_section_id(self.section)}", Static)
        self.query_one("#help-body", VerticalScroll).scroll_to_widget(target, animate=False, top=True)

    def action_close(self) -> None:
        self.dismiss(None)
