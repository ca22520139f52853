"""Image preview: terminal graphics through ``textual-image`` where supported, else half blocks.

``textual-image`` probes the terminal (Sixel / Kitty graphics / cell size) when
``textual_image.widget`` is imported, and that probe only works *before* Textual
starts reading stdin. So the app launcher should call :func:`prepare_terminal_graphics`
before ``App.run()``. When it was not called, this widget never imports
``textual_image`` (a probe inside a running app would steal keystrokes) and draws a
half-block preview itself (``▀`` with the top pixel as foreground and the bottom pixel
as background) — which is also what headless tests see.

The widget never reads files: a worker decodes the image (:func:`load_preview_image`)
and hands a small PIL image to :meth:`ImagePreview.set_image`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from eviscene_tui.artifacts.fileio import open_regular
from eviscene_tui.safe_text import safe_text

PREVIEW_MAX_PIXELS = 256  # longest side of the thumbnail handed to the widget

_graphics_ready = False
_graphics_failure = ""  # why terminal graphics are off (shown beside the half-block preview)


def prepare_terminal_graphics() -> bool:
    """Import ``textual_image.widget`` (terminal probe) before the app starts. Idempotent.

    Returns True when terminal graphics are available to the preview.
    """
    global _graphics_ready, _graphics_failure
    if _graphics_ready:
        return True
    try:
        import textual_image.widget  # noqa: F401  # lazy: optional terminal-image package; importing it probes the terminal, once, before the app reads stdin
    except Exception as exc:  # noqa: BLE001 - no tty, closed stdout, odd terminal: the half-block preview is shown, with the reason
        _graphics_failure = safe_text(f"{type(exc).__name__}: {exc}", single_line=True, limit=80)
        return False
    _graphics_ready = True
    return True


def graphics_mode() -> str:
    """'textual-image (<renderer>)' when prepared, else 'half-block'."""
    if _graphics_ready and "textual_image.widget" in sys.modules:
        mod = sys.modules["textual_image.widget"]
        image_cls = getattr(mod, "Image", None)
        return f"textual-image ({getattr(image_cls, '__name__', 'auto')})"
    return f"half-block (terminal graphics off: {_graphics_failure})" if _graphics_failure else "half-block"


def load_preview_image(path: str | Path) -> tuple[Any | None, dict[str, Any]]:
    """Decode an image file into a small RGB thumbnail (worker side). Never raises.

    Returns (PIL image or None, info with width/height/format/error).
    """
    info: dict[str, Any] = {"width": None, "height": None, "format": None, "error": None}
    try:
        from PIL import Image  # lazy: the preview's decoder (Pillow) loads with the first image, in a worker thread, not at app start

        with open_regular(path) as fh, Image.open(fh) as im:  # a regular file only: never a FIFO or device
            info["width"], info["height"], info["format"] = im.width, im.height, im.format
            im.draft("RGB", (PREVIEW_MAX_PIXELS, PREVIEW_MAX_PIXELS))
            thumb = im.convert("RGB")
            thumb.thumbnail((PREVIEW_MAX_PIXELS, PREVIEW_MAX_PIXELS))
            thumb.load()
            return thumb, info
    except Exception as exc:  # noqa: BLE001 - unreadable or not an image: the error is shown in the preview
        info["error"] = f"{type(exc).__name__}"
        return None, info


class HalfBlockImage(Widget):
    """Draws a PIL image with ``▀`` half blocks (two pixels per cell)."""

    DEFAULT_CSS = """
    HalfBlockImage { height: auto; width: 1fr; }
    """

    def __init__(self, *, max_rows: int = 16, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._image: Any = None
        self._max_rows = max_rows
        self._rows: list[Strip] = []
        self._rendered_for: tuple[int, int] | None = None

    def set_image(self, image: Any) -> None:
        self._image = image
        self._rendered_for = None
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        if self._image is None:
            return 0
        w, h = self._image.size
        cols = max(1, min(width, w))
        rows = max(1, round(h * cols / w / 2))
        return min(rows, self._max_rows)

    def _build(self, width: int, height: int) -> None:
        img = self._image
        w, h = img.size
        scale = min(width / w, (height * 2) / h)
        cols = max(1, int(w * scale))
        px_rows = max(2, int(h * scale) // 2 * 2)
        small = img.resize((cols, px_rows))
        pixels = small.load()
        strips: list[Strip] = []
        for y in range(0, px_rows, 2):
            segs = []
            for x in range(cols):
                top = pixels[x, y]
                bottom = pixels[x, y + 1] if y + 1 < px_rows else top
                segs.append(
                    Segment("▀", Style(color=Color.from_rgb(*top[:3]), bgcolor=Color.from_rgb(*bottom[:3])))
                )
            strips.append(Strip(segs, cols))
        self._rows = strips
        self._rendered_for = (width, height)

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        if self._image is None or width <= 0:
            return Strip.blank(width)
        if self._rendered_for != (width, height):
            self._build(width, height)
        if y < len(self._rows):
            return self._rows[y].crop_extend(0, width, self.rich_style)
        return Strip.blank(width, self.rich_style)


class ImagePreview(Vertical):
    """Caption (dimensions, hash, status) and the picture."""

    DEFAULT_CSS = """
    ImagePreview { height: auto; }
    ImagePreview > .image-preview--caption { height: auto; color: $foreground-muted; }
    ImagePreview > .image-preview--picture { height: auto; max-height: 16; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._caption = Static("", markup=False, classes="image-preview--caption")

    def compose(self) -> ComposeResult:
        yield self._caption

    def clear(self) -> None:
        for child in list(self.children):
            if child is not self._caption:
                child.remove()
        self._caption.update("")

    def set_image(self, image: Any, caption: Content | str) -> None:
        """Show ``image`` (a PIL image from :func:`load_preview_image`, or None) under ``caption``."""
        for child in list(self.children):
            if child is not self._caption:
                child.remove()
        self._caption.update(caption if isinstance(caption, Content) else Content(caption))
        if image is None:
            return
        if graphics_mode().startswith("textual-image"):
            from textual_image.widget import Image as TIImage  # lazy: optional terminal-image package, present only once prepare_terminal_graphics probed the terminal

            widget = TIImage(image, classes="image-preview--picture")
            widget.styles.width = "auto"
            widget.styles.height = 12
            self.mount(widget)
        else:
            pic = HalfBlockImage(classes="image-preview--picture")
            pic.set_image(image)
            self.mount(pic)
