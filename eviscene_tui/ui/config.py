"""User configuration for the app: key overrides and a default theme.

Location, first match wins: ``--config FILE``; ``$EVISCENE_TUI_CONFIG``;
``<XDG config dir>/eviscene-tui/config.toml`` (platformdirs). TOML::

    theme = "eviscene-light"     # optional default theme (--theme wins)

    [keys]                       # binding id = key(s), comma separated
    "case.failure" = "F"
    "runs.triage" = "t,ctrl+t"

Binding ids are listed on the help screen (``?``). A missing file is fine; a
broken one is reported (as a message, never a crash).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from platformdirs import user_config_path

ENV_CONFIG = "EVISCENE_TUI_CONFIG"
APP_NAME = "eviscene-tui"


def config_path(explicit: Path | None = None) -> Path:
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env)
    return user_config_path(APP_NAME, appauthor=False) / "config.toml"


@dataclass
class UserConfig:
    path: Path
    keymap: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    errors: list[str] = field(default_factory=list)
    found: bool = False


def load_config(explicit: Path | None = None) -> UserConfig:
    path = config_path(explicit)
    cfg = UserConfig(path=path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if explicit is not None:
            cfg.errors.append(f"config file {path} does not exist")
        return cfg
    except OSError as exc:
        cfg.errors.append(f"cannot read config {path}: {exc.strerror or exc}")
        return cfg
    cfg.found = True
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        cfg.errors.append(f"config {path} is not valid TOML: {exc}")
        return cfg
    theme = data.get("theme")
    if theme is not None:
        if isinstance(theme, str) and theme:
            cfg.theme = theme
        else:
            cfg.errors.append(f"config {path}: 'theme' must be a string")
    keys = data.get("keys", {})
    if not isinstance(keys, dict):
        cfg.errors.append(f"config {path}: [keys] must be a table of binding id = \"key\"")
        keys = {}
    for binding_id, value in keys.items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if not isinstance(value, str) or not value.strip():
            cfg.errors.append(f"config {path}: key for {binding_id!r} must be a non-empty string")
            continue
        cfg.keymap[str(binding_id)] = value.strip()
    return cfg
