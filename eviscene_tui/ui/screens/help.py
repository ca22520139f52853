"""The help screen: every key of every screen, from the actions registry, grouped by
section, with its id (for the ``[keys]`` table of the config file) and the key bound
now (after the user's overrides). It opens scrolled to the section of the screen it
was opened from."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from rich.cells import cell_len, set_cell_size

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from eviscene_tui.ui.actions import SECTIONS, Action, actions, applied_keymap, bindings, effective_keys
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
    "FormScreen": "dialog",
    "TokenScreen": "tokens",
    "GateScreen": "gate",
    "ReasonPrompt": "dialog",
    "StepPicker": "dialog",
    "HintEditor": "dialog",
    "VerdictForm": "dialog",
}


def section_for(screen: object) -> str:
    return SCREEN_SECTIONS.get(type(screen).__name__, "app")


def _section_id(scope: str) -> str:
    return "help-" + scope.replace(".", "-")


#: the grid's columns never grow past these (a longer key list / label / id is cut with …)
MAX_KEYS, MAX_LABEL, MAX_ID = 16, 24, 34
#: below this many cells of description beside the grid, descriptions go on their own line
MIN_DESCRIPTION = 24
#: cells of the help body that text cannot use: its border (2), padding (2), scrollbar (2)
HELP_CHROME = 6


def _cut(text: str, width: int) -> str:
    return text if cell_len(text) <= width else set_cell_size(text, width - 1) + "\u2026"


def _keys_of(action: Action, keymap: dict[str, str], display: Callable[[Binding], str] | None) -> str:
    keys = effective_keys(action, keymap)
    if display is not None:
        keys = [display(Binding(k, action.action, action.label)) for k in keys]
    return ", ".join(keys)


def grid_widths(keymap: dict[str, str], display: Callable[[Binding], str] | None = None) -> tuple[int, int, int]:
    """(keys, label, id) column widths: the longest of every section (one grid for the
    whole help), capped."""
    every = [a for scope in SECTIONS for a in actions(scope)]
    keys = max((cell_len(_keys_of(a, keymap, display)) for a in every), default=4)
    label = max((cell_len(a.label) for a in every), default=8)
    ident = max((cell_len(a.id) for a in every), default=8)
    return min(keys, MAX_KEYS), min(label, MAX_LABEL), min(ident, MAX_ID)


def _wrap(text: str, width: int) -> list[str]:
    lines = textwrap.wrap(text, width=max(width, 8), break_long_words=True, break_on_hyphens=False)
    return lines or [""]


def section_content(scope: str, keymap: dict[str, str], display: Callable[[Binding], str] | None = None, *,
                    width: int | None = None, grid: tuple[int, int, int] | None = None) -> Content:
    """One section: its title and one line per action (keys, label, id, help) on one grid;
    with ``width``, descriptions are wrapped to hang under the description column (or, on
    a terminal too narrow for that, go on their own indented lines)."""
    kw, lw, iw = grid if grid is not None else grid_widths(keymap, display)
    lines = [Content.from_markup("[b $accent]$t[/]", t=SECTIONS[scope])]
    indent = 2 + kw + 1 + lw + 1 + iw + 1
    for action in actions(scope):
        head = [
            ("  " + _cut(_keys_of(action, keymap, display), kw).ljust(kw) + " ", "bold"),
            (_cut(action.label, lw).ljust(lw) + " ", ""),
            (_cut(action.id, iw).ljust(iw) + " ", "dim"),
        ]
        if width is None:
            lines.append(Content.assemble(*head, (action.help, "dim italic")))
            continue
        if width - indent >= MIN_DESCRIPTION:
            wrapped = _wrap(action.help, width - indent)
            lines.append(Content.assemble(*head, (wrapped[0], "dim italic")))
            lines.extend(Content.assemble((" " * indent + more, "dim italic")) for more in wrapped[1:])
        else:
            lines.append(Content.assemble(*head))
            lines.extend(Content.assemble(("      " + more, "dim italic")) for more in _wrap(action.help, width - 6) if action.help)
    return Content("\n").join(lines)


def _header(config: Path | None) -> Content:
    """The title line and where to override keys: the settings file the app was started
    with (``--config``, the environment, or the default location it looked at)."""
    shown = config if config is not None else config_path()
    return Content("\n").join(
        [
            Content.assemble(("eviscene-tui keys", "bold $primary"), ('   ctrl+p: command palette ("noun: verb" commands, each with its key) \u00b7 ?/f1/esc: close help', "dim")),
            Content.assemble(("Override keys in ", "dim"), (str(shown), "dim italic"), (' with a [keys] table: "binding.id" = "key"', "dim")),
        ]
    )


class HelpScreen(ModalScreen[None]):
    BINDINGS = bindings("help")

    def __init__(self, section: str = "app", *, config: Path | None = None) -> None:
        super().__init__()
        self.section = section if section in SECTIONS else "app"
        self.config = config  # the settings file in use (None: where the default lookup goes)

    def compose(self) -> ComposeResult:
        keymap = applied_keymap(self.app)
        display = self.app.get_key_display
        with VerticalScroll(id="help-body"):
            yield Static(_header(self.config), id="help-header")
            # laid out for the terminal's width from the start (border, padding, scrollbar
            # off), so the section the help opens at is where the first layout puts it
            self._width = max(self.app.size.width - HELP_CHROME, 20)
            grid = grid_widths(keymap, display)
            for scope in SECTIONS:
                yield Static(section_content(scope, keymap, display, width=self._width, grid=grid), id=_section_id(scope), classes="help-section")

    def on_resize(self) -> None:
        if max(self.app.size.width - HELP_CHROME, 20) != self._width:
            # after the layout, so each section knows its own width
            self.call_after_refresh(self._paint_sections)

    def _paint_sections(self) -> None:
        """Re-lay the sections for the width they have (descriptions hang under their column)."""
        keymap = applied_keymap(self.app)
        display = self.app.get_key_display
        grid = grid_widths(keymap, display)
        for scope in SECTIONS:
            section = self.query_one(f"#{_section_id(scope)}", Static)
            width = section.content_region.width or max(self.app.size.width - HELP_CHROME, 20)
            section.update(section_content(scope, keymap, display, width=width, grid=grid))
        self._width = max(self.app.size.width - HELP_CHROME, 20)
        if self.section != "app":
            # the wrapped sections changed height: back at the asked section once the
            # layout that the new heights cause is done
            self.call_after_refresh(self.call_after_refresh, self._scroll_to_section)

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
