"""The demo's sample runs where the app is installed (a wheel, ``pipx``): there is no
checkout and no ``make samples``, so ``eviscene-tui demo`` builds them on its first run in
the user's data directory, ``<user data dir>/eviscene-tui/sample_runs``
(``$XDG_DATA_HOME/eviscene-tui/…``, else ``~/.local/share/eviscene-tui/…`` on Linux), with
the same generator and the same bytes as ``make samples`` writes into a checkout.

They are built again when the installed package changes (its sources' digest is kept
beside the tree, in ``sample_runs.built.json``), so a new version never opens an older
version's samples. The tree is built in a temporary folder beside its place and renamed
into it, so a demo never opens a half-written tree, and of two demos started at once one
tree wins and the other start uses it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson
from platformdirs import user_data_path

from eviscene_tui.journal.records import APP_NAME
from eviscene_tui.scaffold.samples import generate
from eviscene_tui.storage import replace_file

FOLDER = "sample_runs"
STAMP_SUFFIX = ".built.json"
#: the installed package: every source file the generator runs (and the rest: cheap to read)
PACKAGE = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SampleHome:
    path: Path
    built: bool  # built by this call (else found, built by an earlier run of this version)


def home_dir() -> Path:
    """Where the demo keeps its samples: ``<user data dir>/eviscene-tui/sample_runs``."""
    return user_data_path(APP_NAME, appauthor=False) / FOLDER


def generator_digest() -> str:
    """The sha256 of the installed package's sources (relative path and bytes, in order):
    it changes with any change that could change what the generator writes."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _stamp_path(home: Path) -> Path:
    return home.with_name(home.name + STAMP_SUFFIX)


def is_current(home: Path, digest: str) -> bool:
    try:
        stamp = orjson.loads(_stamp_path(home).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return home.is_dir() and isinstance(stamp, dict) and stamp.get("generator") == digest


def ensure_samples(home: Path | None = None) -> SampleHome:
    """The samples at ``home`` (default :func:`home_dir`), built first when they are
    missing or were built by another version of the package. Raises ``OSError`` when the
    data directory cannot be written."""
    home = Path(home) if home is not None else home_dir()
    digest = generator_digest()
    if is_current(home, digest):
        return SampleHome(home, built=False)
    home.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{home.name}.building-", dir=home.parent))
    try:
        tree = scratch / FOLDER
        count = generate(tree, replace=False)
        _put_in_place(tree, home)
        replace_file(_stamp_path(home), orjson.dumps({"generator": digest, "files": count}, option=orjson.OPT_INDENT_2) + b"\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return SampleHome(home, built=True)


def _put_in_place(tree: Path, home: Path) -> None:
    """Rename the built ``tree`` to ``home``; an older tree there is moved aside first and
    removed. When another start renamed its tree there in between, that one is kept."""
    if home.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{home.name}.old-", dir=home.parent))
        try:
            os.rename(home, old / FOLDER)
        except FileNotFoundError:  # another start moved it first
            pass
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(tree, home)
    except OSError:  # another start's tree got there first (a non-empty folder): it is the same bytes
        if not home.is_dir():
            raise


__all__ = ["FOLDER", "SampleHome", "ensure_samples", "generator_digest", "home_dir"]
