"""Options shared by the app and its screens (built once from the command line)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.gate.protocol import operator_identity
from eviscene_tui.journal.records import read_workdirs, record_key
from eviscene_tui.policy.profile import PolicyTarget, resolve_policy_target
from eviscene_tui.settings import Settings, load_settings
from eviscene_tui.storage import WorkDir, choose_workdir


@dataclass(frozen=True)
class AppOptions:
    root: Path
    workdir: Path
    theme: str | None = None
    poll: bool = False
    operator: str = field(default_factory=lambda: operator_identity(None))  # the one rule of every surface
    policy_profile: Path | None = None
    policy_url: str | None = None
    policy_model: str | None = None
    hint_url: str | None = None
    hint_model: str | None = None
    tokenizer: Path | None = None
    config: Path | None = None
    #: the user's settings, resolved and read once (``from_args``); defaults when built directly
    settings: Settings = field(default_factory=Settings)
    #: gated driver searches to offer on the runs screen (``G``) besides the opened root's (the demo's stand-in)
    gate_roots: tuple[Path, ...] = ()
    #: ``--path-map OLD=NEW`` values (they come before the config file's ``[paths] map``)
    path_map_args: tuple[str, ...] = ()
    #: why the work directory is that one (``storage.choose_workdir``): shown where the app writes
    workdir_source: str = "default: beside the opened path"

    @property
    def key_root(self) -> Path:
        """What the runs table's row keys (the case folder shown) are relative to: the
        opened path. Records are never keyed by it: they carry the case's record key
        (``journal.records``), whichever folder was opened."""
        return self.root

    @property
    def path_map(self) -> PathMap:
        """Where recorded paths of moved trees / inputs copied elsewhere are looked for
        (``artifacts.paths``): the command line's mappings, then the config file's."""
        return path_map_for(self.path_map_args, self.settings)

    def policy_target(self) -> PolicyTarget | None:
        """The configured policy server (the one rule, :func:`resolve_policy_target`), None
        when none is configured. Raises ``ProfileError`` (a readable message) for a bad
        profile or an incomplete unattested pair."""
        return resolve_policy_target(profile=self.policy_profile, url=self.policy_url, model=self.policy_model)

    @classmethod
    def from_args(cls, root: Path, args: object, *, settings: Settings | None = None) -> AppOptions:
        """From parsed command-line arguments (any object with the flags as attributes:
        each subcommand's namespace has its own subset). Reads the config file once,
        unless ``settings`` are given."""

        def get(name: str) -> Any:
            return getattr(args, name, None)

        settings = settings if settings is not None else load_settings(get("config"))
        workdir, why = choose_workdir(root, get("workdir"), settings.paths.workdir)
        return cls(
            root=Path(root),
            workdir=workdir,
            workdir_source=why,
            theme=get("theme"),
            poll=bool(get("poll")),
            operator=operator_identity(get("operator")),
            policy_profile=Path(get("policy_profile")) if get("policy_profile") else None,
            policy_url=get("policy_url"),
            policy_model=get("policy_model"),
            hint_url=get("hint_url"),
            hint_model=get("hint_model"),
            tokenizer=Path(get("tokenizer")) if get("tokenizer") else None,
            config=Path(get("config")) if get("config") else None,
            settings=settings,
            gate_roots=tuple(Path(p) for p in (get("gate_roots") or ())),
            path_map_args=tuple(get("path_map") or ()),
        )

    def record_workdirs(self, case_root: str | os.PathLike[str] | None) -> list[Path]:
        """Where the records of one case may be (``journal.records.read_workdirs``): this
        work directory first (also before it exists: it is where new records go), then
        the case's and its ancestors' work directories and the registry's, by the case's
        record key. File reads: call it from a worker."""
        if case_root is None:
            return [Path(self.workdir)]
        rk = record_key(case_root)
        found = read_workdirs([case_root], self.workdir, rk.keys, opened=self.root)
        return [Path(self.workdir), *(w for w in found if os.path.realpath(w) != os.path.realpath(self.workdir))]

    def work(self) -> WorkDir:
        """The guarded writer for the app's own directory (refuses the evidence root)."""
        return WorkDir(self.workdir, evidence_roots=[self.root])


def path_map_for(values: tuple[str, ...] | list[str] | None, settings: Settings | None = None) -> PathMap:
    """``--path-map OLD=NEW`` values (ValueError on a malformed one) followed by the
    config file's ``[paths] map`` table."""
    cli = PathMap.parse(values or ())
    table = settings.paths.map if settings is not None else {}
    return cli.merged(PathMap.from_mapping(table)) if table else cli
