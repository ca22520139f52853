"""The app's themes: ``eviscene-dark`` and ``eviscene-light``.

Colours are read from ``themes/<name>.toml`` and fall back to the same values defined
here, so an install without the folder still has both themes. Theme-specific styles are
in ``themes/<name>.tcss``; every style uses theme variables only. The folder is the
repository's ``themes/`` (editable installs, ``make``) or, in a wheel install, the copy
installed as data files under ``<prefix>/share/eviscene-tui/themes``.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from textual.theme import Theme

DARK = "eviscene-dark"
LIGHT = "eviscene-light"
DEFAULT_THEME = DARK



def find_themes_dir(candidates: list[Path] | None = None) -> Path:
    """The first themes folder that holds the dark theme: the source tree's, then the
    installed data files'. The source tree's path is returned when none exists."""
    if candidates is None:
        candidates = [
            Path(__file__).resolve().parents[2] / "themes",
            Path(sys.prefix) / "share" / "eviscene-tui" / "themes",
        ]
    for folder in candidates:
        if (folder / f"{DARK}.toml").is_file():
            return folder
    return candidates[0]


THEMES_DIR = find_themes_dir()

_FALLBACK: dict[str, dict[str, object]] = {
    DARK: {
        "dark": True,
        "primary": "#5fafd7",
        "secondary": "#8787d7",
        "accent": "#d7af5f",
        "warning": "#e0a040",
        "error": "#e05f5f",
        "success": "#5fd787",
        "foreground": "#d8dee9",
        "background": "#12161c",
        "surface": "#1a2029",
        "panel": "#232b36",
        "variables": {
            "block-cursor-background": "#2f4a63",
            "block-cursor-foreground": "#ffffff",
            "footer-key-foreground": "#d7af5f",
        },
    },
    LIGHT: {
        "dark": False,
        "primary": "#1f5f8b",
        "secondary": "#5a4fa0",
        "accent": "#8a5a00",
        "warning": "#a36200",
        "error": "#b3261e",
        "success": "#1e7b3a",
        "foreground": "#1c232b",
        "background": "#f7f7f4",
        "surface": "#ecece7",
        "panel": "#dfe3e8",
        "variables": {
            "block-cursor-background": "#bcd3e6",
            "block-cursor-foreground": "#10161c",
            "footer-key-foreground": "#8a5a00",
        },
    },
}

_FIELDS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background", "surface", "panel")


def _load_spec(name: str) -> dict[str, object]:
    spec = dict(_FALLBACK[name])
    path = THEMES_DIR / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return spec
    for key in _FIELDS:
        if isinstance(data.get(key), str):
            spec[key] = data[key]
    if isinstance(data.get("dark"), bool):
        spec["dark"] = data["dark"]
    if isinstance(data.get("variables"), dict):
        old = spec.get("variables")
        variables = dict(old) if isinstance(old, dict) else {}
        variables.update({str(k): str(v) for k, v in data["variables"].items()})
        spec["variables"] = variables
    return spec


def build_theme(name: str) -> Theme:
    spec = _load_spec(name)
    return Theme(
        name=name,
        primary=str(spec["primary"]),
        secondary=str(spec["secondary"]),
        accent=str(spec["accent"]),
        warning=str(spec["warning"]),
        error=str(spec["error"]),
        success=str(spec["success"]),
        foreground=str(spec["foreground"]),
        background=str(spec["background"]),
        surface=str(spec["surface"]),
        panel=str(spec["panel"]),
        dark=bool(spec["dark"]),
        variables=dict(v) if isinstance(v := spec.get("variables"), dict) else {},
    )


def app_themes() -> list[Theme]:
    return [build_theme(DARK), build_theme(LIGHT)]


def theme_css_paths() -> list[Path]:
    """The theme-specific ``.tcss`` files that exist."""
    return [p for p in (THEMES_DIR / f"{DARK}.tcss", THEMES_DIR / f"{LIGHT}.tcss") if p.is_file()]
