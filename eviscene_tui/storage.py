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

import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

from eviscene_tui.artifacts.layout import _is_wrapper, _names, classify_names, is_tool_dir


class EvidenceWriteRefused(RuntimeError):
    """Raised when code tries to write inside an opened evidence root."""


WORKDIR_SUFFIX = ".eviscene-tui"
#: how far up :func:`runs_tree_root` climbs, and how many sibling folders it looks at per level
_MAX_CLIMB = 32
_MAX_SIBLINGS = 256


def workdir_beside(root: str | os.PathLike[str]) -> Path:
    """``<root>.eviscene-tui`` beside ``root`` (no climbing)."""
    r = Path(root).resolve()
    return r.parent / f"{r.name}{WORKDIR_SUFFIX}"


def _holds_cases(folder: Path, besides: Path) -> bool:
    """True when ``folder`` is a case or wrapper, is a wrapper's ``repairs/``, or holds
    a case / wrapper other than ``besides`` (the app would open ``folder`` as a tree)."""
    try:
        files, dirs = _names(folder)
    except OSError:
        return False
    if classify_names(folder, files, dirs) is not None or _is_wrapper(files, dirs):
        return True
    if folder.name == "repairs":
        return True
    looked = 0
    for name in sorted(dirs):
        if name.startswith(".") or is_tool_dir(name) or name == besides.name:
            continue
        looked += 1
        if looked > _MAX_SIBLINGS:
            break
        child = folder / name
        try:
            cfiles, cdirs = _names(child)
        except OSError:
            continue
        if classify_names(child, cfiles, cdirs) is not None or _is_wrapper(cfiles, cdirs):
            return True
    return False


def runs_tree_root(path: str | os.PathLike[str]) -> Path:
    """The outermost folder the app would be opened on that holds ``path``.

    - a path inside a work directory ``T.eviscene-tui/…`` (a supervised root): ``T``;
    - else the outermost ancestor whose work directory already exists (the app or a
      command has worked on that tree before);
    - else climb while the parent holds cases: a case inside a folder of cases, a
      ``repairs/<key>`` of a wrapper or a search root's ``repairs/``, a folder of cases
      beside other cases. A lone case (or a folder nothing encloses) is its own root.
    """
    p = Path(path).resolve()
    chain = [p, *p.parents]
    for folder in chain:
        if folder.name.endswith(WORKDIR_SUFFIX) and folder.parent != folder:
            return folder.parent / folder.name[: -len(WORKDIR_SUFFIX)]
    for folder in reversed(chain[: _MAX_CLIMB + 1]):
        if folder.parent != folder and workdir_beside(folder).is_dir():
            return folder
    current = p
    for _ in range(_MAX_CLIMB):
        parent = current.parent
        if parent == current or not _holds_cases(parent, current):
            break
        current = parent
    return current


def default_workdir(root: str | os.PathLike[str]) -> Path:
    """The app's (and every command's) default work directory for ``root``: the work
    directory ``T.eviscene-tui`` of the tree ``T`` that holds it (:func:`runs_tree_root`),
    so a case opened or streamed on its own writes where the app opened on its tree
    does, and never inside a folder the app would scan."""
    return workdir_beside(runs_tree_root(root))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_tmp(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)  # a full disk (or any failed write) leaves no temp file behind
        raise
    os.close(fd)
    return tmp


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_new_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically create ``path``; raise FileExistsError if it already exists."""
    p = Path(path)
    tmp = _write_tmp(p, data)
    try:
        os.link(tmp, p)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    _fsync_dir(p.parent)
    return p


def replace_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``path``, replacing an older version (state files only)."""
    p = Path(path)
    tmp = _write_tmp(p, data)
    try:
        os.replace(tmp, p)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(p.parent)
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
