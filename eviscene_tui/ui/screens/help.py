"""The help screen: every binding, grouped by screen, with its id (for the keymap
file) and the key currently bound (after user overrides)."""

from __future__ import annotations

import importlib

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from eviscene_tui.settings import config_path
from eviscene_tui.ui.widgets.key_footer import KeyFooter

# (title, module, class) — other engineers' screens are listed when importable.
SCREENS = (
    ("Everywhere", "eviscene_tui.ui.app", "EvisceneApp"),
    ("Runs screen", "eviscene_tui.ui.screens.runs", "RunsScreen"),
    ("Runs table", "eviscene_tui.ui.widgets.runs_table", "RunsTable"),
    ("Case screen", "eviscene_tui.ui.screens.case", "CaseScreen"),
    ("Source trace", "eviscene_tui.ui.widgets.trace_view", "TraceView"),
    ("Step detail", "eviscene_tui.ui.screens.step_detail", "StepDetailScreen"),
    ("Go to step", "eviscene_tui.ui.screens.goto", "GotoStepScreen"),
    ("Triage label", "eviscene_tui.ui.screens.label", "TriageLabelScreen"),
    ("Stream screen", "eviscene_tui.ui.screens.stream", "StreamScreen"),
    ("Supervised search", "eviscene_tui.ui.screens.supervised", "SupervisedScreen"),
    ("Token inspector", "eviscene_tui.ui.screens.tokens", "TokenScreen"),
)


def _bindings(cls: type) -> list[Binding]:
    out: list[Binding] = []
    for item in getattr(cls, "BINDINGS", []):
        if isinstance(item, Binding):
            out.append(item)
        elif isinstance(item, tuple) and len(item) >= 2:
            out.append(Binding(*item))
    return out


def help_content(keymap: dict[str, str], display=None) -> Content:
    """The help text; ``display(binding)`` formats a key (App.get_key_display)."""
    parts: list[Content] = [
        Content.assemble(("eviscene-tui keys", "bold $primary"), ("   ctrl+p: command palette (\"noun: verb\" commands) \u00b7 ?/f1/esc: close help", "dim")),
        Content.assemble(("Override keys in ", "dim"), (str(config_path()), "dim italic"), (' with a [keys] table: "binding.id" = "key"', "dim")),
    ]
    for title, module, name in SCREENS:
        try:
            cls = getattr(importlib.import_module(module), name)
        except Exception:  # noqa: BLE001 - a screen another engineer has not landed yet
            continue
        rows = _bindings(cls)
        if not rows:
            continue
        parts.append(Content(""))
        parts.append(Content.from_markup("[b $accent]$t[/]", t=title))
        for b in rows:
            key = keymap.get(b.id, b.key) if b.id else b.key
            keys = [k.strip() for k in key.split(",") if k.strip()]
            if display is not None:
                try:
                    keys = [display(Binding(k, b.action, b.description)) for k in keys]
                except Exception:  # noqa: BLE001 - fall back to the raw key names
                    pass
            shown = ", ".join(keys)
            parts.append(
                Content.assemble(
                    (f"  {shown:<10}", "bold"),
                    (f"{b.description or b.action:<18}", ""),
                    (f" {b.id or ''}", "dim"),
                    (f"  {b.tooltip}" if b.tooltip else "", "dim italic"),
                )
            )
    return Content("\n").join(parts)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close", id="help.close"),
        Binding("question_mark", "close", "Close", show=False, id="help.close_q"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(help_content(getattr(self.app, "_keymap", {}) or {}, self.app.get_key_display), id="help-text")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
