"""A vertical scrollbar that renders its rows straight from the bar's geometry.

Textual's ``ScrollBar`` draws itself through the general widget pipeline (a Rich renderable
rendered by the console, split into lines, each line restyled and filtered) for every row,
and it is drawn again on every page of a big token capture, a large part of the page's
frame (``make bench`` prints it with the ``lean_token_view`` switch on and off). :class:`LeanScrollBar` keeps every behaviour of Textual's bar
(its styles, hover and grab colours, mouse actions) and only renders faster: the bar's
segments from ``ScrollBarRender.render_bar``, laid on the widget's base style as Textual
does, one strip a row, through the app's line filters. Anything unusual (a horizontal bar,
a custom renderer, a styled box) takes Textual's own path. Tests compare both outputs.
"""

from __future__ import annotations

from rich.color import Color
from rich.segment import Segment
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from eviscene_tui import switches

_BACK_DEFAULT = Color.parse("#555555")
_BAR_DEFAULT = Color.parse("bright_magenta")


class LeanScrollBar(ScrollBar):
    """Textual's scrollbar with the fast row drawing of this module."""

    def render_lines(self, crop: Region) -> list[Strip]:
        bar = self.render()
        if not switches.on("lean_token_view"):
            return super().render_lines(crop)
        if not (self.vertical and type(bar) is ScrollBarRender and self.renderer is ScrollBarRender and plain_box(self)):
            return super().render_lines(crop)
        width, height = self.size
        style = bar.style if not isinstance(bar.style, str) else self.app.console.get_style(bar.style)
        rows = ScrollBarRender.render_bar(
            size=height,
            window_size=bar.window_size,
            virtual_size=bar.virtual_size,
            position=bar.position,
            vertical=True,
            thickness=width,
            back_color=style.bgcolor or _BACK_DEFAULT,
            bar_color=style.color or _BAR_DEFAULT,
        ).segments
        base = self.visual_style.rich_style
        filters = self.app.get_line_filters()
        _base_background, background = self.background_colors
        strips: list[Strip] = []
        for y in crop.line_range:
            seg = rows[y] if y < len(rows) else Segment(" " * width)
            strip = Strip([Segment(seg.text, base + seg.style if seg.style is not None else base, seg.control)], width)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        x1, x2 = crop.column_span
        if (x1, x2) != (0, width):
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips


def plain_box(widget: Widget) -> bool:
    """No padding, border, outline, tint, opacity, hatch or alignment on ``widget``: the lines
    it renders are the lines on screen, so they may be handed to the compositor as they are
    (Textual's styles pipeline would only copy them)."""
    styles = widget.styles
    return (
        not any(styles.gutter)
        and not any(edge for edge, _color in styles.outline)
        and styles.tint.a == 0
        and widget.opacity == 1.0
        and styles.text_opacity == 1.0
        and not (styles.has_rule("hatch") and styles.hatch != "none")
        and styles.content_align == ("left", "top")
    )
