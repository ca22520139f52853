"""The user's settings: one config file, resolved once, read once, one typed value.

Where the file is, first match wins: ``--config FILE``; ``$EVISCENE_TUI_CONFIG``;
``<XDG config dir>/eviscene-tui/config.toml`` (platformdirs). TOML::

    theme = "eviscene-light"        # default theme (--theme wins)

    [keys]                          # binding id = key(s), comma separated or a list
    "case.failure" = "F"
    "runs.filter.triage" = "t,T"  # ids: eviscene_tui.ui.actions, listed on the help screen

    [policy]                        # policy client (see eviscene_tui.policy.config)
    temperature = 0.7
    read_timeout = 600
    hint_placement = "as_run"       # as_run | user_suffix | system_suffix | user_prefix
    api_key = "..."                 # $EVISCENE_POLICY_API_KEY wins

    [supervised]                    # the app's own search budgets (driver defaults)
    max_attempts = 6
    max_proposals = 12
    max_seconds = 1800

    [paths]                         # moved trees: recorded prefix = where it is now
    map = { "/data/eviscene" = "/home/me/eviscene" }
    workdir = "~/eviscene-records"  # where the app writes (default: <opened>.eviscene-tui beside it)

    [triage]                        # the triage queue
    labels = ["agent_correct", "localizer_miss", "needs_relocalization", "data_problem", "unrecoverable"]
    advance_after_label = true      # a pick opens the next case of the queue

Error policy, the same for every table: a missing file (at the default place)
is fine; a file that cannot be read, is not TOML, or holds a bad value never
raises. The bad part is dropped (that table's or that key's defaults are kept)
and :attr:`Settings.problems` carries one message per fault naming the file and
the line, for the app to show (a notification) and the commands to print.

:func:`load_settings` is called once, where the command line is parsed; the
resulting :class:`Settings` is passed down (``AppOptions.settings``) and never
re-read. This module sits on the lowest floor: stdlib, pydantic, platformdirs.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_config_path
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ENV_CONFIG = "EVISCENE_TUI_CONFIG"
ENV_API_KEY = "EVISCENE_POLICY_API_KEY"
APP_NAME = "eviscene-tui"

#: where the hint goes in the teacher request (``policy.request.apply_hint``)
HintPlacement = Literal["as_run", "user_suffix", "system_suffix", "user_prefix"]
HINT_PLACEMENTS: tuple[str, ...] = ("as_run", "user_suffix", "system_suffix", "user_prefix")


class _Table(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)  # TOML values are typed: no coercion


class PolicySettings(_Table):
    """The ``[policy]`` table: the policy client's settings."""

    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(600.0, gt=0)  # covers queueing + prefill (first token)
    stall_timeout: float = Field(120.0, gt=0)  # max time between complete SSE events once tokens flow
    min_token_rate: float = Field(2.0, gt=0)  # the stream deadline's floor: read_timeout + max_tokens / this
    stream_deadline: float | None = Field(None, gt=0)  # an explicit overall deadline (seconds) instead
    max_event_bytes: int = Field(16 << 20, ge=64 << 10)  # one SSE event larger than this ends the stream
    temperature: float = Field(0.7, ge=0)
    max_tokens: int | None = Field(None, gt=0)
    logprobs: bool = False
    top_logprobs: int = Field(0, ge=0)
    return_tokens_as_token_ids: bool = False
    hint_placement: HintPlacement = "as_run"
    status_interval: float = Field(3.0, gt=0)
    direct_body: bool = True
    api_key: str | None = Field(None, repr=False, min_length=1)


class SupervisedSettings(_Table):
    """The ``[supervised]`` table: budgets of the app's own search, checked as the driver does."""

    max_attempts: int = Field(6, ge=1, le=32)
    max_proposals: int = Field(12, le=64)
    max_seconds: float = Field(1800, ge=1, le=86400)

    @model_validator(mode="after")
    def _proposals_cover_attempts(self) -> SupervisedSettings:
        if self.max_proposals < self.max_attempts:
            raise ValueError(
                f"max_proposals ({self.max_proposals}) must be at least max_attempts ({self.max_attempts})"
            )
        return self


class PathsSettings(_Table):
    """The ``[paths]`` table: ``map`` rewrites a recorded absolute prefix to where the tree is
    now; ``workdir`` is where the app writes whatever it opens (``--workdir`` wins)."""

    map: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip() or not os.path.isabs(os.path.expanduser(value.strip())):
            raise ValueError("must be an absolute path (or start with ~)")
        return os.path.expanduser(value.strip())

    @field_validator("map")
    @classmethod
    def _non_empty(cls, value: dict[str, str]) -> dict[str, str]:
        for old, new in value.items():
            if not old.strip() or not new.strip():
                raise ValueError("both sides of a [paths] map entry must be non-empty paths")
        return value


#: the default ``[triage] labels`` (numbered 1-9 in the label picker, in this order)
DEFAULT_TRIAGE_LABELS: tuple[str, ...] = ("agent_correct", "localizer_miss", "needs_relocalization", "data_problem", "unrecoverable")
#: what a triage label may be: a short snake_case name (it is a column value in exports)
TRIAGE_LABEL_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_TRIAGE_LABELS = 9


class TriageSettings(_Table):
    """The ``[triage]`` table: the label set of the triage queue and what a pick does."""

    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_TRIAGE_LABELS))
    advance_after_label: bool = True  # a pick opens the next case of the current queue

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: list[str]) -> list[str]:
        if not 1 <= len(value) <= MAX_TRIAGE_LABELS:
            raise ValueError(f"must name 1 to {MAX_TRIAGE_LABELS} labels (the picker numbers them 1-{MAX_TRIAGE_LABELS})")
        bad = [v for v in value if not TRIAGE_LABEL_PATTERN.match(v)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a label name (lower-case letters, digits and _, starting with a letter)")
        if len(set(value)) != len(value):
            raise ValueError("names a label twice")
        return value


class Settings(BaseModel):
    """Everything the user configured, typed and frozen; defaults where nothing (valid) was given."""

    model_config = ConfigDict(frozen=True)

    path: Path | None = None  # the file looked at (None: defaults only, nothing looked up)
    found: bool = False  # the file existed and was read
    theme: str | None = None
    keys: dict[str, str] = Field(default_factory=dict)  # binding id -> key(s), comma separated
    policy: PolicySettings = Field(default_factory=PolicySettings)
    supervised: SupervisedSettings = Field(default_factory=SupervisedSettings)
    paths: PathsSettings = Field(default_factory=PathsSettings)
    triage: TriageSettings = Field(default_factory=TriageSettings)
    problems: tuple[str, ...] = ()  # one readable message per fault, file and line named


def config_path(explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The config file to read: the flag, else ``$EVISCENE_TUI_CONFIG``, else the XDG location."""
    if explicit:
        return Path(explicit)
    value = (os.environ if env is None else env).get(ENV_CONFIG)
    if value:
        return Path(value)
    return user_config_path(APP_NAME, appauthor=False) / "config.toml"


def load_settings(explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Resolve the config file (see the module doc), read and validate it; never raises."""
    env = os.environ if env is None else env
    path = config_path(explicit, env)
    named = bool(explicit) or bool(env.get(ENV_CONFIG))
    problems: list[str] = []
    data: dict[str, Any] = {}
    text = ""
    found = False
    try:
        text = path.read_bytes().decode("utf-8")
        found = True
    except FileNotFoundError:
        if named:
            problems.append(f"config file {path} does not exist; using defaults")
    except UnicodeDecodeError as exc:
        problems.append(f"config {path} is not UTF-8 text (byte {exc.start}); using defaults")
    except OSError as exc:
        problems.append(f"cannot read config {path}: {exc.strerror or exc}; using defaults")
    if text:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            # tomllib's message names the line and column: "... (at line 3, column 7)"
            problems.append(f"config {path} is not valid TOML: {exc}; using defaults")
    values: dict[str, Any] = {}
    where = _Where(path, text)
    theme = data.pop("theme", None)
    if theme is not None:
        if isinstance(theme, str) and theme.strip():
            values["theme"] = theme.strip()
        else:
            problems.append(f"{where.of(None, 'theme')}: 'theme' must be a non-empty string; ignored")
    values["keys"] = _keys(data.pop("keys", {}), where, problems)
    tables: dict[str, type[_Table]] = {
        "policy": PolicySettings, "supervised": SupervisedSettings, "paths": PathsSettings, "triage": TriageSettings,
    }
    for name, model in tables.items():
        raw = data.pop(name, {})
        if not isinstance(raw, dict):
            problems.append(f"{where.of(None, name)}: [{name}] must be a table; using its defaults")
            raw = {}
        values[name] = _table(model, name, raw, where, problems)
    for unknown in data:
        problems.append(f"{where.of(None, unknown)}: unknown setting {unknown!r}; ignored")
    api_key = env.get(ENV_API_KEY)
    if api_key:
        values["policy"] = values["policy"].model_copy(update={"api_key": api_key})
    return Settings(path=path, found=found, problems=tuple(problems), **values)


def _keys(raw: Any, where: _Where, problems: list[str]) -> dict[str, str]:
    if not isinstance(raw, dict):
        problems.append(f'{where.of(None, "keys")}: [keys] must be a table of binding id = "key"; ignored')
        return {}
    out: dict[str, str] = {}
    for binding_id, value in raw.items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where.of('keys', binding_id)}: key for {binding_id!r} must be a non-empty string; ignored")
            continue
        out[str(binding_id)] = value.strip()
    return out


def _table(model: type[_Table], name: str, raw: dict[str, Any], where: _Where, problems: list[str]) -> Any:
    """Validate one table; drop each bad key (its default stays) and say so; a fault
    spanning the table (e.g. proposals < attempts) keeps the whole table's defaults."""
    values = dict(raw)
    for _ in range(len(raw) + 1):
        try:
            return model.model_validate(values)
        except ValidationError as exc:
            bad: set[str] = set()
            for err in exc.errors():
                key = str(err["loc"][0]) if err["loc"] else None
                message = str(err["msg"]).removeprefix("Value error, ")
                if err["type"] == "extra_forbidden":
                    message = f"unknown setting {key!r}"
                if key is None or key not in values:
                    problems.append(f"{where.of(name, None)}: [{name}] {message}; using the table's defaults")
                    return model()
                problems.append(f"{where.of(name, key)}: [{name}] {key} = {values[key]!r}: {message}; using the default")
                bad.add(key)
            values = {k: v for k, v in values.items() if k not in bad}
    return model()


class _Where:
    """``FILE, line N`` for a key of a table (found by reading the text; TOML parsers keep no positions)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def of(self, table: str | None, key: str | None) -> str:
        line = self._line(table, key)
        return f"config {self.path}" + (f", line {line}" if line else "")

    def _line(self, table: str | None, key: str | None) -> int | None:
        current: str | None = None
        header = None
        key_re = re.compile(r"""^\s*["']?%s["']?\s*=""" % re.escape(key)) if key is not None else None
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            if stripped.startswith("[") and not stripped.startswith("[["):
                current = stripped.strip("[] \t").split("]")[0].strip().strip("\"'")
                if table is not None and current == table:
                    header = number
                    if key is None:
                        return number
                continue
            if key_re is not None and current == table and key_re.match(line):
                return number
        return header
