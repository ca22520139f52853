"""The one-line key footer: shows the focused chain's bindings, follows focus, clicks press keys."""

from __future__ import annotations

from conftest import screen_text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widget import Widget

from eviscene_tui.ui.widgets.key_footer import KeyFooter


class Pane(Widget, can_focus=True):
    BINDINGS = [Binding("w", "app.mark('w')", "Pane key")]


class FooterApp(App):
    BINDINGS = [
        Binding("x", "mark('x')", "Mark x"),
        Binding("y", "mark('y')", "Mark y"),
        Binding("z", "mark('z')", "Hidden", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[str] = []

    def compose(self) -> ComposeResult:
        yield Pane(id="pane")
        yield KeyFooter()

    def action_mark(self, what: str) -> None:
        self.marks.append(what)


def _line(app: App) -> str:
    return screen_text(app).splitlines()[-1]


async def test_footer_lists_shown_bindings_and_the_palette_key() -> None:
    app = FooterApp()
    async with app.run_test(size=(80, 10)) as pilot:
        app.set_focus(None)
        await pilot.pause()
        footer = app.query_one(KeyFooter)
        descriptions = [k.description for k in footer.keys]
        assert "Mark x" in descriptions and "Mark y" in descriptions
        assert "Hidden" not in descriptions
        line = _line(app)
        assert " x Mark x " in line and " y Mark y " in line
        assert line.rstrip().endswith("palette")  # command palette key docked right


async def test_footer_follows_focus_and_repaints_only_on_change() -> None:
    app = FooterApp()
    async with app.run_test(size=(80, 10)) as pilot:
        app.set_focus(None)
        await pilot.pause()
        footer = app.query_one(KeyFooter)
        assert "Pane key" not in [k.description for k in footer.keys]
        app.query_one(Pane).focus()
        await pilot.pause()
        assert "Pane key" in [k.description for k in footer.keys]
        assert " w Pane key " in _line(app)
        refreshed: list[int] = []
        original = footer.refresh
        footer.refresh = lambda *a, **k: refreshed.append(1) or original(*a, **k)  # type: ignore[method-assign]  # a test double
        app.screen.refresh_bindings()
        await pilot.pause()
        assert refreshed == []  # same keys: no repaint


async def test_clicking_a_key_presses_it() -> None:
    app = FooterApp()
    async with app.run_test(size=(80, 10)) as pilot:
        app.set_focus(None)
        await pilot.pause()
        line = _line(app)
        col = line.index("Mark y")
        await pilot.click(KeyFooter, offset=(col, 0))
        await pilot.pause()
        assert app.marks == ["y"]


class ManyKeysApp(FooterApp):
    BINDINGS = [Binding(k, f"mark('{k}')", f"Action number {k}") for k in "abcdefghijklm"] + [
        Binding("question_mark", "help", "Help"),
    ]

    def action_help(self) -> None:
        self.marks.append("help")


async def test_narrow_footer_pins_help_and_palette_and_says_keys_are_left_out() -> None:
    app = ManyKeysApp()
    async with app.run_test(size=(80, 10)) as pilot:
        app.set_focus(None)
        await pilot.pause()
        line = _line(app)
        assert len(line) == 80
        assert "\u2026" in line  # some keys left out, and it says so
        assert line.rstrip().endswith("? Help  ^p palette")
        assert line.startswith("x Mark x  y Mark y  a Action number a")  # tight form
        await pilot.click(KeyFooter, offset=(line.index("? Help"), 0))
        await pilot.pause()
        assert app.marks == ["help"]
    async with ManyKeysApp().run_test(size=(400, 10)) as pilot:
        pilot.app.set_focus(None)
        await pilot.pause()
        wide = _line(pilot.app)
        assert "\u2026" not in wide and " m Action number m " in wide and " ? Help " in wide
