"""Where a case's records are: its record key, the work directories that may hold them,
and the registry that remembers where each case was written.

**The record key** (one per case, the same whichever folder was opened and wherever the
tree was moved): ``id-`` + the first 20 hex of the sha256 of the identity the case's
driver bound and checks on every ``--resume``, as compact sorted-key JSON
(``artifacts.identity.read_identity``: ``search-state.json`` of a feedback search,
``run-inputs.json`` of a single run, ``slate-state.json`` of a slate root; it holds the
recorded ``output_dir`` and every input ``{path, sha256}``). A case that records no
readable identity (a crash before its first write, a damaged envelope) is keyed by where
it is: ``at-`` + the sha256 of its absolute path; its records then do not follow
it when it is moved, and the case screen says so. Every case also answers to its
location key (an alias), so a label taken before the identity could be read is kept.

**Where records are written**: the work directory (``storage.choose_workdir``); the
first record of a case in a work directory is noted in the registry
(``<user data dir>/eviscene-tui/workdirs.jsonl``, one JSON line ``{key, workdir, case,
ts}`` appended with fsync), so a ``--workdir`` elsewhere is found again.

**Where records are read** (:func:`read_workdirs`): the work directory of the opened path,
``<A>.eviscene-tui`` for the case itself and every ancestor ``A`` of it, and every work
directory the registry names for the case's keys; records are matched by record key.
Work directories of earlier versions keyed cases by their path relative to the tree the
work directory sits beside (``<T>.eviscene-tui``: ``T/<key>``); :class:`RecordIndex`
maps those keys to the cases too.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from platformdirs import user_data_path

from eviscene_tui import pace
from eviscene_tui.artifacts.identity import CaseIdentity, read_identity
from eviscene_tui.journal.paths import SUPERVISED_DIR, case_key, review_journal_path
from eviscene_tui.storage import WORKDIR_SUFFIX, append_line

APP_NAME = "eviscene-tui"
REGISTRY_NAME = "workdirs.jsonl"
IDENTITY_PREFIX = "id-"
LOCATION_PREFIX = "at-"
KEY_HEX = 20
MAX_REGISTRY_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class RecordKey:
    """The record key of one case (see the module doc) and what it rests on."""

    key: str
    basis: str  # "identity" | "location"
    source: str  # what it was derived from, for the case screen
    aliases: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key the case's records may carry (the record key first)."""
        return (self.key, *self.aliases)

    @property
    def follows_moves(self) -> bool:
        return self.basis == "identity"

    def describe(self) -> str:
        """One line for the case screen: the key and whether it follows the case."""
        if self.follows_moves:
            return f"records keyed {self.key} (from the {self.source}: the same from any folder and after a move)"
        return (f"records keyed {self.key} by the case's location ({self.source}): this case records no readable "
                "identity, so its records do not follow it when it is moved")


def location_key(case_root: str | os.PathLike[str]) -> str:
    """``at-<hex>``: the key of a case by where it is now (its absolute path)."""
    path = os.path.abspath(os.fspath(case_root))
    return LOCATION_PREFIX + hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:KEY_HEX]


def record_key(case_root: str | os.PathLike[str], layout: str | None = None, *, identity: CaseIdentity | None = None) -> RecordKey:
    """The record key of the case at ``case_root`` (reads its identity unless given)."""
    found = identity if identity is not None else read_identity(case_root, layout)
    at = location_key(case_root)
    if found is not None:
        return RecordKey(IDENTITY_PREFIX + found.sha256[:KEY_HEX], "identity", f"{found.source} identity", (at,))
    return RecordKey(at, "location", os.path.abspath(os.fspath(case_root)))


def is_record_key(value: object) -> bool:
    """True for a key this version writes (``id-``/``at-``); else an earlier version's path key."""
    return isinstance(value, str) and value[:3] in (IDENTITY_PREFIX, LOCATION_PREFIX) and len(value) == 3 + KEY_HEX


# ---------------------------------------------------------------------- the registry
_registry_lock = threading.Lock()
_registered: dict[str, set[tuple[str, str]]] = {}  # registry path -> (key, workdir) seen


def registry_path() -> Path:
    """``<user data dir>/eviscene-tui/workdirs.jsonl`` (``$XDG_DATA_HOME`` on Linux)."""
    return user_data_path(APP_NAME, appauthor=False) / REGISTRY_NAME


def _registry_rows(path: Path) -> list[dict[str, Any]]:
    try:
        if path.stat().st_size > MAX_REGISTRY_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    rows = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a torn last line (a crash mid-append) names nothing
        if isinstance(value, dict) and isinstance(value.get("key"), str) and isinstance(value.get("workdir"), str):
            rows.append(value)
    return rows


def register_workdir(workdir: str | os.PathLike[str], rk: RecordKey, case_root: str | os.PathLike[str]) -> bool:
    """Note that the case's records are (also) in ``workdir``; once per (key, work
    directory). Returns True when a line was appended. Never raises: a registry that
    cannot be written only means another ``--workdir`` is not found from elsewhere."""
    path = registry_path()
    wd = os.path.realpath(os.fspath(workdir))
    with _registry_lock:
        seen = _registered.get(str(path))
        if seen is None:
            seen = {(r["key"], r["workdir"]) for r in _registry_rows(path)}
            _registered[str(path)] = seen
        if (rk.key, wd) in seen:
            return False
        row = {"key": rk.key, "workdir": wd, "case": os.path.realpath(os.fspath(case_root)), "basis": rk.basis,
               "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            append_line(path, orjson.dumps(row, option=orjson.OPT_SORT_KEYS))
        except OSError:
            return False
        seen.add((rk.key, wd))
        return True


def note_records_in(workdir: str | os.PathLike[str], case_root: str | os.PathLike[str]) -> bool:
    """:func:`register_workdir` for the case at ``case_root`` (its record key read here)."""
    return register_workdir(workdir, record_key(case_root), case_root)


def registered_workdirs(keys: Iterable[str]) -> list[Path]:
    """The work directories the registry names for any of ``keys``, in registry order."""
    wanted = set(keys)
    out: list[Path] = []
    for row in _registry_rows(registry_path()):
        if row["key"] in wanted and Path(row["workdir"]) not in out:
            out.append(Path(row["workdir"]))
    return out


# ---------------------------------------------------------------------- the read rule
def read_workdirs(
    case_roots: Iterable[str | os.PathLike[str]],
    write_workdir: str | os.PathLike[str] | None = None,
    keys: Iterable[str] = (),
    *,
    opened: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Every existing work directory that may hold records of the given cases (see the
    module doc): the work directory written to, the ancestors' work directories of each
    case (and of ``opened``), the registry's. Duplicates once, in that order."""
    out: list[Path] = []
    seen: set[str] = set()

    def add(candidate: Path) -> None:
        real = os.path.realpath(candidate)
        if real not in seen:
            seen.add(real)
            if os.path.isdir(real):
                out.append(Path(real))

    if write_workdir is not None:
        add(Path(write_workdir))
    looked: set[str] = set()
    roots = [*case_roots, *([opened] if opened is not None else [])]
    for n, root in enumerate(roots, 1):
        if n % 200 == 0:
            pace.yield_to_input()  # in background work (the app's label read): a key goes first
        p = os.path.abspath(os.fspath(root))
        while p not in looked:  # ancestors shared by many cases are looked at once
            looked.add(p)
            parent = os.path.dirname(p)
            if parent == p:
                break
            add(Path(parent) / (os.path.basename(p) + WORKDIR_SUFFIX))
            p = parent
    for wd in registered_workdirs(keys):
        add(wd)
    return out


def tree_of(workdir: str | os.PathLike[str]) -> Path | None:
    """The folder a work directory ``<T>.eviscene-tui`` sits beside (``T``); None for a
    work directory named otherwise (an explicit ``--workdir``)."""
    w = Path(workdir)
    if w.name.endswith(WORKDIR_SUFFIX) and len(w.name) > len(WORKDIR_SUFFIX):
        return w.parent / w.name[: -len(WORKDIR_SUFFIX)]
    return None


@dataclass(frozen=True, slots=True)
class CaseRecords:
    """One case as the record index knows it."""

    ident: str  # the caller's own name for the case (the runs row key)
    path: str  # absolute case root
    key: RecordKey


class RecordIndex:
    """Maps the case keys found in journals (record keys, their aliases, and the path
    keys of earlier versions) to the cases listed."""

    def __init__(self, cases: Iterable[CaseRecords], *, opened: str | os.PathLike[str] | None = None) -> None:
        self.cases: list[CaseRecords] = list(cases)
        self._by_key: dict[str, CaseRecords] = {}
        self._by_path: dict[str, CaseRecords] = {}
        for case in self.cases:
            for key in case.key.keys:
                self._by_key.setdefault(key, case)
            self._by_path[os.path.normpath(case.path)] = case
        self._opened = Path(os.path.abspath(opened)) if opened is not None else None

    def by_key(self, key: str) -> CaseRecords | None:
        return self._by_key.get(key)

    def resolve(self, target: object, workdir: str | os.PathLike[str]) -> CaseRecords | None:
        """The case a journal's ``target.case`` in ``workdir`` names, or None."""
        if not isinstance(target, str) or not target:
            return None
        hit = self._by_key.get(target)
        if hit is not None or is_record_key(target):
            return hit
        return self._legacy(target, workdir)

    def _legacy(self, rel: str, workdir: str | os.PathLike[str]) -> CaseRecords | None:
        """An earlier version's key: the case path relative to the tree the work
        directory belonged to (``<T>.eviscene-tui`` -> ``T``; the tree's own folder
        name when the tree was the case); an explicit work directory: relative to the
        opened folder or one of its ancestors."""
        if os.path.isabs(rel) or rel.startswith(".."):
            return self._by_path.get(os.path.normpath(rel)) if os.path.isabs(rel) else None
        tree = tree_of(workdir)
        bases = [tree] if tree is not None else ([self._opened, *self._opened.parents] if self._opened is not None else [])
        for base in bases:
            hit = self._by_path.get(os.path.normpath(os.path.join(os.path.abspath(base), rel)))
            if hit is None and rel == base.name:
                hit = self._by_path.get(os.path.normpath(os.path.abspath(base)))
            if hit is not None:
                return hit
        return None


# ---------------------------------------------------------------------- supervised searches
def legacy_supervised_names(case_root: str | os.PathLike[str], workdir: str | os.PathLike[str],
                            opened: str | os.PathLike[str] | None = None) -> list[str]:
    """The supervised-root names an earlier version gave the case in ``workdir``:
    ``case_key`` of its path relative to the work directory's tree (``<T>.eviscene-tui``),
    or, for an explicit work directory, relative to the opened folder or an ancestor."""
    tree = tree_of(workdir)
    if tree is not None:
        bases = [tree]
    elif opened is not None:
        o = Path(os.path.abspath(opened))
        bases = [o, *o.parents]
    else:
        bases = []
    names: list[str] = []
    for base in bases:
        try:
            rel = os.path.relpath(os.path.abspath(case_root), os.path.abspath(base))
        except ValueError:
            continue
        if rel.startswith(".."):
            continue
        names.append(case_key(rel))
        if rel == ".":
            names.append(case_key(Path(case_root).name))
    return names


def find_search_root(case_root: str | os.PathLike[str], rk: RecordKey, workdirs: Sequence[str | os.PathLike[str]],
                     *, folder: str = SUPERVISED_DIR, opened: str | os.PathLike[str] | None = None) -> Path | None:
    """A search of the case that this app keeps in ``<work directory>/<folder>/`` (the
    bundled driver's ``repairs/``, earlier versions' in-app ``supervised/``), in the first
    work directory that holds one (by record key, then an earlier version's name), or None."""
    for wd in workdirs:
        names = [*rk.keys, *legacy_supervised_names(case_root, wd, opened)]
        for name in names:
            root = Path(wd) / folder / name
            if (root / "search-state.json").is_file():
                return root
    return None


def find_supervised_root(case_root: str | os.PathLike[str], rk: RecordKey, workdirs: Sequence[str | os.PathLike[str]],
                         *, opened: str | os.PathLike[str] | None = None) -> Path | None:
    """An earlier version's in-app supervised search of the case (read-only now), or None."""
    return find_search_root(case_root, rk, workdirs, folder=SUPERVISED_DIR, opened=opened)


def search_home(case_root: str | os.PathLike[str], workdir: str | os.PathLike[str],
                workdirs: Sequence[str | os.PathLike[str]], *, folder: str,
                opened: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
    """(work directory, root) of the case's search in ``folder``: the one it already has in
    ``workdirs`` (it continues where it was started, from whichever folder the app was
    opened on), else a new one, ``<workdir>/<folder>/<record key>``."""
    rk = record_key(case_root)
    found = find_search_root(case_root, rk, workdirs, folder=folder, opened=opened)
    if found is not None:
        return found.parent.parent, found
    return Path(workdir), Path(workdir) / folder / rk.key


def review_journals(workdirs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The review journals of the work directories that have one."""
    return [review_journal_path(w) for w in workdirs if review_journal_path(w).is_file()]


__all__ = [
    "CaseRecords",
    "RecordIndex",
    "RecordKey",
    "find_search_root",
    "find_supervised_root",
    "is_record_key",
    "legacy_supervised_names",
    "location_key",
    "note_records_in",
    "read_workdirs",
    "record_key",
    "register_workdir",
    "registered_workdirs",
    "registry_path",
    "review_journals",
    "search_home",
    "tree_of",
]
