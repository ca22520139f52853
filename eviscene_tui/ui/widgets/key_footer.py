"""The key footer: one rendered line listing the screen's shown bindings.

Textual's ``Footer`` recomposes itself, one ``FooterKey`` widget per binding, each time
the screen's bindings are refreshed (every focus change, screen resume and action check);
each new key widget is styled twice. On the case screen that was about half of the main
thread's work while a case opened, competing for the GIL with the worker parsing the
trace. This footer is a single widget that renders a line of :class:`Content` and
repaints only when the list of keys it shows actually changed. Clicking a key presses it;
the command-palette key sits at the right edge, as in Textual's footer.

Binding descriptions and key names are the app's own strings (or the user's key
overrides), never run data; they are assembled as plain text, never parsed as markup.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from textual import events
from textual.content import Content
from textual.widget import Widget


class _Key(NamedTuple):
    key: str
    display: str
    description: str
    enabled: bool
    action: str = ""


def _pinned(key: _Key) -> bool:
    """Keys kept visible at the right edge however narrow the terminal (help)."""
    return key.action.rsplit(".", 1)[-1] == "help"


class KeyFooter(Widget):
    """Footer for every screen: the shown bindings of the focused chain, in one line."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-footer--key", "key-footer--description", "key-footer--disabled"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        width: 1fr;
        color: $footer-foreground;
        background: $footer-background;
        text-wrap: nowrap;
        text-overflow: clip;
        & > .key-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .key-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .key-footer--disabled {
            text-style: dim;
        }
    }
    """

    def __init__(self, *, show_command_palette: bool = True, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.show_command_palette = show_command_palette
        self._keys: tuple[_Key, ...] = ()
        self._palette: _Key | None = None
        self._spans: list[tuple[int, int, str]] = []  # (start, end, key) of each shown key, for clicks

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    @property
    def keys(self) -> tuple[_Key, ...]:
        """The keys shown now, in order."""
        return self._keys

    def _bindings_changed(self, screen: Any) -> None:
        keys, palette = self._collect(screen)
        if keys != self._keys or palette != self._palette:
            self._keys, self._palette = keys, palette
            self.refresh()

    def _collect(self, screen: Any) -> tuple[tuple[_Key, ...], _Key | None]:
        app = self.app
        seen: set[str] = set()
        keys: list[_Key] = []
        palette: _Key | None = None
        active = screen.active_bindings
        for _node, binding, enabled, _tooltip in active.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            keys.append(_Key(binding.key, app.get_key_display(binding), binding.description, bool(enabled), binding.action))
        if self.show_command_palette and getattr(app, "ENABLE_COMMAND_PALETTE", False):
            entry = active.get(app.COMMAND_PALETTE_BINDING)
            if entry is not None:
                _node, binding, enabled, _tooltip = entry
                palette = _Key(binding.key, app.get_key_display(binding), binding.description, bool(enabled), binding.action)
                keys = [k for k in keys if k.key != binding.key]
        return tuple(keys), palette

    def render(self) -> Content:
        """All keys when they fit. Otherwise a tighter form, with the help key and the
        palette key pinned at the right edge and the keys that do not fit left out (an
        ellipsis says so); the help screen lists every key."""
        width = self.size.width
        styles = (
            self.get_visual_style("key-footer--key"),
            self.get_visual_style("key-footer--description"),
            self.get_visual_style("key-footer--disabled"),
        )
        left = list(self._keys)
        right = [self._palette] if self._palette is not None else []
        pieces = [self._piece(k, styles, tight=False) for k in left]
        tail = [self._piece(k, styles, tight=False) for k in right]
        if sum(p.cell_length for p in pieces + tail) + (1 if tail else 0) > width:
            right = [k for k in left if _pinned(k)] + right
            left = [k for k in left if not _pinned(k)]
            pieces = [self._piece(k, styles, tight=True) for k in left]
            tail = [self._piece(k, styles, tight=True) for k in right]
        tail_width = sum(p.cell_length for p in tail)
        budget = width - tail_width - (1 if tail else 0)
        shown: list[Content] = []
        spans: list[tuple[int, int, str]] = []
        x = 0
        for key, piece in zip(left, pieces):
            if x + piece.cell_length > budget:
                shown.append(Content("\u2026"))
                x += 1
                break
            shown.append(piece)
            spans.append((x, x + piece.cell_length, key.key))
            x += piece.cell_length
        if tail and width - x - tail_width >= 1:
            shown.append(Content(" " * (width - x - tail_width)))
            x = width - tail_width
            for key, piece in zip(right, tail):
                shown.append(piece)
                spans.append((x, x + piece.cell_length, key.key))
                x += piece.cell_length
        self._spans = spans
        return Content.assemble(*shown)

    @staticmethod
    def _piece(key: _Key, styles: tuple[Any, Any, Any], *, tight: bool) -> Content:
        key_style, description_style, disabled_style = styles
        if tight:
            piece = Content.assemble((key.display, key_style), (f" {key.description}  " if key.description else "  ", description_style))
        else:
            piece = Content.assemble((f" {key.display} ", key_style), (f"{key.description} " if key.description else "", description_style))
        return piece if key.enabled else piece.stylize(disabled_style)

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                event.stop()
                self.app.simulate_key(key)
                return
