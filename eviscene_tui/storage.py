"""Where and how the app writes: only in its own work directory, atomically.

Evidence is sacred: nothing here ever writes inside a run root the app opened.
Every writer goes through :class:`WorkDir`, which refuses paths inside a
registered evidence root.

- :func:`write_new_file`: tmp + fsync + ``link`` (fails if the name exists), so a
  completed file is never overwritten;
- :func:`replace_file`: tmp + fsync + ``os.replace`` for state files that the
  driver's format rewrites by design (``manifest.json``, ``search-state.json``);
- :func:`append_line`: one ``write()`` of a whole line, then fsync.
"""

from __future__ import annotations

import errno
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path


class EvidenceWriteRefused(RuntimeError):
    """Raised when code tries to write inside an opened evidence root."""


WORKDIR_SUFFIX = ".eviscene-tui"

#: THE rule for where the app and every command write (README "Where it writes", ``--help``):
WORKDIR_RULE = (
    "the work directory is --workdir DIR, else [paths] workdir in the config file, else "
    "<opened path>.eviscene-tui beside the opened path (a path inside a *.eviscene-tui folder "
    "writes to that folder); it never depends on what else exists on disk"
)


def workdir_beside(path: str | os.PathLike[str]) -> Path:
    """``<path>.eviscene-tui`` beside ``path`` (its resolved form)."""
    r = Path(path).resolve()
    return r.parent / f"{r.name}{WORKDIR_SUFFIX}"


def enclosing_workdir(path: str | os.PathLike[str]) -> Path | None:
    """The nearest folder named ``*.eviscene-tui`` that holds ``path`` (or is it): a
    supervised root, a demo search, anything the app wrote. Read from the path's name
    alone, never from what exists on disk."""
    p = Path(path).resolve()
    for folder in (p, *p.parents):
        if folder.name.endswith(WORKDIR_SUFFIX) and folder.parent != folder:
            return folder
    return None


def default_workdir(opened: str | os.PathLike[str]) -> Path:
    """The default work directory of an opened path: ``<opened>.eviscene-tui`` beside it,
    or the ``*.eviscene-tui`` folder the path is inside. A pure function of the path:
    folders that appear or disappear elsewhere never move it (see :data:`WORKDIR_RULE`)."""
    inside = enclosing_workdir(opened)
    return inside if inside is not None else workdir_beside(opened)


def choose_workdir(
    opened: str | os.PathLike[str],
    explicit: str | os.PathLike[str] | None = None,
    configured: str | os.PathLike[str] | None = None,
) -> tuple[Path, str]:
    """(work directory, why it is that one) for ``opened``: ``--workdir``, else the config
    file's ``[paths] workdir``, else :func:`default_workdir`."""
    if explicit:
        return Path(explicit).expanduser().resolve(), "--workdir"
    if configured:
        return Path(configured).expanduser().resolve(), "[paths] workdir in the config file"
    return default_workdir(opened), "default: beside the opened path"


def write_new_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically create ``path``; raise FileExistsError if it already exists (the
    protocol's tmp + fsync + ``link``: the one spelling of the app's writes)."""
    from eviscene_tui.gate import protocol as P  # lazy: `--help` and the paths' rules stay light

    p = Path(path)
    if not P.create_exclusive(p, data):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(p))
    return p


def replace_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``path``, replacing an older version (state files only)."""
    from eviscene_tui.gate import protocol as P  # lazy: `--help` and the paths' rules stay light

    p = Path(path)
    P.atomic_replace(p, data)
    return p


def append_line(path: str | os.PathLike[str], line: bytes) -> None:
    """Append one complete line with a single ``write()`` and fsync before returning."""
    if not line.endswith(b"\n"):
        line += b"\n"
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
        if written != len(line):  # pragma: no cover - short writes on regular files are exotic
            raise OSError(f"short append to {p}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def unique_name(stem: str, suffix: str) -> str:
    """A new, sortable file name per attempt: ``<stem>-<UTC time>-<random>.<suffix>``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stem}-{stamp}-{secrets.token_hex(4)}{suffix}"


class WorkDir:
    """The app's own directory, with a guard against writing into evidence roots."""

    def __init__(self, path: str | os.PathLike[str], evidence_roots: Sequence[str | os.PathLike[str]] = ()) -> None:
        self.path = Path(path).resolve()
        self.evidence_roots = [Path(r).resolve() for r in evidence_roots]
        for root in self.evidence_roots:
            if self.path == root or root in self.path.parents:
                raise EvidenceWriteRefused(f"work directory {self.path} is inside the evidence root {root}")

    def guard(self, target: str | os.PathLike[str]) -> Path:
        t = Path(target).resolve()
        for root in self.evidence_roots:
            if t == root or root in t.parents:
                raise EvidenceWriteRefused(f"refusing to write {t}: it is inside the evidence root {root}")
        return t

    def sub(self, *parts: str) -> Path:
        p = self.path.joinpath(*parts)
        self.guard(p)
        return p

    def write_new(self, target: str | os.PathLike[str], data: bytes) -> Path:
        return write_new_file(self.guard(target), data)

    def replace(self, target: str | os.PathLike[str], data: bytes) -> Path:
        return replace_file(self.guard(target), data)

    def append(self, target: str | os.PathLike[str], line: bytes) -> None:
        append_line(self.guard(target), line)
