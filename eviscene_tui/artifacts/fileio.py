"""The one way a file of a run tree (or an input beside it) is opened for reading.

A run tree is evidence from another machine, and sometimes from a hostile one: any
name in it can be a FIFO (an ``open()`` that never returns), a device, a socket, a
directory, or a sparse file of 2 GiB where a 2 KB config belongs. So every reader in
``artifacts/`` (and the services that read run files) opens through here:

- the path is ``stat``-ed first and refused unless it is a regular file (unless a
  directory walk has just seen it as one, ``walked``: then it is opened without
  following a symlink, and the descriptor's ``fstat`` alone decides);
- it is opened with ``O_NONBLOCK`` (a FIFO swapped in after the check still cannot
  block the open), and the open descriptor is ``fstat``-ed and refused unless it is the
  same regular file;
- its size is compared with the most a real file of its kind holds (:data:`LIMITS`,
  one table for the whole app): a bigger one is refused unread;
- with ``inside``, a path whose symlinks lead out of those directories is refused
  unopened (the files the run wrote must stay in its root).

A refusal is a :class:`ReadRefused` (an ``OSError``, so every existing ``except
OSError`` still holds) that carries its :class:`Problem`: ``not_regular_file``,
``file_too_large`` or ``path_outside_root``, each with a one-line message.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import zlib
from collections.abc import Sequence
from typing import BinaryIO

from eviscene_tui.artifacts.problems import Problem, ProblemCode

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

#: the largest a real file of each kind is, with room to spare. Configs, manifests and
#: status files are kilobytes; what holds feedback (it grows by a projected teacher
#: episode each round) is megabytes; traces, continuations, ledgers and the search state
#: carry token ids and whole episodes and reach hundreds of MB (the driver's own limit
#: on a bound gzip archive is 1 GiB; its search pauses once its files pass 2 GiB). A
#: file beyond its kind's limit is not
#: a file of that kind: it is reported (``file_too_large``) and never read.
LIMITS: dict[str, int] = {
    "config": 8 * MiB,  # run-inputs.json, manifests, live-serving-check, last error, serving profile, media.json
    "report": 64 * MiB,  # finalization, judge summary, verification bundle, audits, localization, judge files, proposals
    "feedback": 256 * MiB,  # requests/round-NN.json, round-inputs public.json
    "ledger": 1 * GiB,  # repair_attempts / repair_candidates (.jsonl, .jsonl.gz), events.jsonl, items.jsonl
    "trace": 2 * GiB,  # source traces, teacher episodes, continuations, search-state.json, gzip archives
    "blob": 1 * GiB,  # runtime archive content-addressed blobs
    "image": 256 * MiB,  # media/<sha>.image, image inputs
    "tokenizer": 256 * MiB,  # tokenizer.json and its configs
    "other": 1 * GiB,  # anything else: hashed in blocks, parsed only when small
}

#: the kind of a file by its name (the driver's fixed names, §1.2 and §2.14)
_KIND_BY_NAME: dict[str, str] = {
    "run-inputs.json": "config",
    "manifest.json": "config",
    "live-serving-check.json": "config",
    "generation-last-error.json": "config",
    "serving-profile.json": "config",
    "media.json": "config",
    "progress.json": "config",
    "config.json": "config",
    "preprocessor_config.json": "config",
    "tokenizer_config.json": "config",
    "finalization.json": "report",
    "judge-summary.json": "report",
    "gemini-verification-bundle.json": "report",
    "proposer-hint-audits.json": "report",
    "semantic-localization.json": "report",
    "hint-proposals.json": "report",
    "proposer-response.json": "report",
    "inputs.json": "report",
    "public.json": "feedback",
    "search-state.json": "trace",
    "trace.json": "trace",
    "events.jsonl": "ledger",
    "items.jsonl": "ledger",
    "tokenizer.json": "tokenizer",
}

_KIND_BY_PARENT: dict[str, str] = {
    "requests": "feedback",
    "continuations": "trace",
    "episodes": "trace",
    "judge": "report",
    "judge-cache": "report",
    "context": "report",
    "media": "image",
}

_BLOB_RE = re.compile(r"^[0-9a-f]{64}\.")


def _split(text: str) -> tuple[str, str]:
    """``os.path.split`` of a POSIX ``str`` path (every file read asks for its kind)."""
    head, sep, name = text.rpartition("/")
    if sep:
        head = head.rstrip("/") or sep * (len(head) + 1)
    return head, name


def kind_of(path: str | os.PathLike[str]) -> str:
    """The kind of file ``path`` names (a key of :data:`LIMITS`), from its name."""
    text = path if type(path) is str else os.fspath(path)
    if os.sep == "/":
        kind = _KIND_BY_NAME.get(text.rpartition("/")[2])  # most files read have a fixed name
        if kind is not None:
            return kind
    head, name = os.path.split(text) if os.sep != "/" else _split(text)
    kind = _KIND_BY_NAME.get(name)
    if kind is not None:
        return kind
    parent = head.rpartition(os.sep)[2]
    if name.endswith(".meta.json"):
        return "config"
    if _BLOB_RE.match(name) and len(os.path.basename(os.path.dirname(head))) == 6 and parent and len(parent) == 2:
        return "blob"  # artifacts/sha256/<2hex>/<sha>.<ext>
    kind = _KIND_BY_PARENT.get(parent)
    if kind is not None:
        return kind
    if name.endswith((".jsonl", ".jsonl.gz")):
        return "ledger"
    if name.endswith(".json.gz"):
        return "trace"
    if name.endswith((".png", ".jpg", ".jpeg", ".gif", ".webp", ".image")):
        return "image"
    return "other"


def limit_for(path: str | os.PathLike[str]) -> int:
    """The most bytes a real file like ``path`` holds (:data:`LIMITS` by :func:`kind_of`)."""
    return LIMITS[kind_of(path)]


def _size_text(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _what(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


class ReadRefused(OSError):
    """A file that is not read (never opened, or closed unread), with the problem to show."""

    def __init__(self, path: str, code: ProblemCode, message: str) -> None:
        super().__init__(errno.EPERM, message, path)
        self.path = path
        self.code = code
        self.message = message

    def problem(self) -> Problem:
        return Problem(code=self.code, path=self.path, message=self.message)


def not_regular(path: str, mode: int) -> ReadRefused:
    return ReadRefused(path, ProblemCode.NOT_REGULAR_FILE, f"expected a regular file, found {_what(mode)}; not read")


def too_large(path: str, size: int, limit: int) -> ReadRefused:
    kind = kind_of(path)
    if LIMITS.get(kind) == limit:
        why = f"more than any real file of its kind holds ({kind}: at most {_size_text(limit)})"
    else:
        why = f"more than is read of such a file (at most {_size_text(limit)})"
    return ReadRefused(path, ProblemCode.FILE_TOO_LARGE, f"{_size_text(size)}, {why}; not read")


def _within(real: str, dirs: Sequence[str]) -> bool:
    return any(real == d or real.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


_real_dirs: dict[str, str] = {}


def _real_dir(path: str) -> str:
    """``os.path.realpath`` of a boundary directory (remembered: the same few case roots
    are asked about for every file)."""
    real = _real_dirs.get(path)
    if real is None:
        if len(_real_dirs) >= 1024:
            _real_dirs.clear()
        real = _real_dirs[path] = os.path.realpath(path)
    return real


def _no_symlink_below(path: str, boundary: str) -> bool:
    """True when no component of ``path`` below ``boundary`` (a lexical prefix of it) is a
    symlink: then it resolves inside the boundary wherever the boundary itself resolves.
    One ``lstat`` per component (a full ``realpath`` costs fifteen times that)."""
    rest = path[len(boundary):].strip(os.sep)
    current = boundary
    for part in rest.split(os.sep) if rest else ():
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
        except FileNotFoundError:
            return True  # nothing there to follow: the open reports the missing file
    return True


def outside_refusal(path: str, inside: Sequence[str]) -> ReadRefused | None:
    """The refusal of a path whose symlinks lead out of every directory in ``inside``
    (absolute, normalised; ``path`` normally lies lexically below one), None when it
    stays inside."""
    try:
        p = os.path.normpath(os.path.abspath(path))
        for boundary in inside:
            if _within(p, [boundary]) and _no_symlink_below(p, boundary):
                return None
        real = os.path.realpath(p)
        if _within(real, [_real_dir(b) for b in inside]):
            return None
    except (OSError, ValueError):
        return ReadRefused(path, ProblemCode.PATH_OUTSIDE_ROOT, "path cannot be resolved; not read")
    link = ""
    try:
        if os.path.islink(path):
            link = f" (-> {os.readlink(path)})"
    except OSError:
        pass
    return ReadRefused(path, ProblemCode.PATH_OUTSIDE_ROOT, f"a symlink leads outside the case root{link}; not read")


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_WALKED_FLAGS = _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0)


def _open_fd(p: str, cap: int, inside: Sequence[str] | None, walked: bool = False) -> tuple[int, os.stat_result]:
    """The checked, open descriptor of ``p`` and its ``fstat`` (see the module doc).

    ``walked``: the caller has just seen ``p`` as a regular file, not a symlink (a
    directory walk's entry type, which is what the ``stat`` tells): that ``stat`` is
    skipped, and the ``fstat`` of the open descriptor still refuses anything else (a
    FIFO or device swapped in since the walk cannot block the open either)."""
    if inside is not None:
        refused = outside_refusal(p, inside)
        if refused is not None:
            raise refused
    before = None
    if not walked:
        before = os.stat(p)
        if not stat.S_ISREG(before.st_mode):
            raise not_regular(p, before.st_mode)
        if cap and before.st_size > cap:
            raise too_large(p, before.st_size, cap)
    # a FIFO swapped in after the stat cannot block this; nor can a symlink swapped in
    # after the walk lead anywhere (the walk saw no symlink there)
    fd = os.open(p, _WALKED_FLAGS if walked else _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(p, st.st_mode)
        if before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise ReadRefused(p, ProblemCode.NOT_REGULAR_FILE, "the file was replaced while it was opened; not read")
        if cap and st.st_size > cap:
            raise too_large(p, st.st_size, cap)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    inside: Sequence[str] | None = None,
) -> BinaryIO:
    """Open a regular file for reading without ever blocking (see the module doc).

    ``limit``: the most bytes it may hold (default: its kind's, :func:`limit_for`; 0 for
    none). ``inside``: directories (absolute, normalised) it must resolve into: a
    symlink below them that leads out is refused before anything is opened. Raises
    :class:`ReadRefused`, or the ``OSError`` of a missing or unreadable file."""
    p = os.fspath(path)
    fd, _st = _open_fd(p, limit_for(p) if limit is None else limit, inside)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    inside: Sequence[str] | None = None,
    walked: bool = False,
) -> bytes:
    """A regular file's bytes, read once into one buffer of the file's size (never a
    second copy, never a buffer of the limit's size); a file that grew past its limit
    while read is refused. ``walked``: see :func:`_open_fd` (one ``stat`` fewer)."""
    p = path if type(path) is str else os.fspath(path)
    cap = limit_for(p) if limit is None else limit
    fd, st = _open_fd(p, cap, inside, walked)
    return _read_open(p, fd, st.st_size, cap)


def read_regular_if_small(path: str, small: int, *, walked: bool = False) -> bytes | None:
    """:func:`read_regular` (its kind's limit) of a file of at most ``small`` bytes; None,
    unread, for a bigger one (the size is the open descriptor's: one open either way)."""
    cap = limit_for(path)
    fd, st = _open_fd(path, cap, None, walked)
    if st.st_size > small:
        os.close(fd)
        return None
    return _read_open(path, fd, st.st_size, cap)


def _read_open(p: str, fd: int, size: int, cap: int) -> bytes:
    """The bytes of the checked descriptor ``fd`` (closed here) of ``size`` bytes at its ``fstat``."""
    try:
        want = size + 1  # one byte more tells a file that grew since the fstat
        parts: list[bytes] = []
        total = 0
        while total < want:  # one read, unless the file passes what one read returns (2 GiB)
            more = os.read(fd, want - total)
            if not more:
                break
            parts.append(more)
            total += len(more)
            if total == size:
                break  # all the fstat saw, from a read asked for one byte more: a regular file's end (no second read to see it)
        while total >= want and (not cap or total <= cap):  # it grew: on to its end or just past the limit
            more = os.read(fd, (cap + 1 - total) if cap else 1 << 20)
            if not more:
                break
            parts.append(more)
            total += len(more)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
    finally:
        os.close(fd)
    if cap and len(data) > cap:
        raise too_large(p, len(data), cap)
    return data


def gunzip_capped(data: bytes, path: str, limit: int | None = None) -> bytes:
    """The gunzipped bytes of ``data`` (one gzip member or several), refused once they
    pass ``limit`` (default: the kind's limit of ``path``): a small archive cannot
    expand into memory without bound. Raises ``zlib.error`` / ``EOFError`` on a broken
    stream, :class:`ReadRefused` past the limit."""
    cap = limit_for(path) if limit is None else limit
    out: list[bytes] = []
    total = 0
    view = memoryview(data)
    while view:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = inflater.decompress(view, cap + 1 - total if cap else 0)
        while True:
            total += len(chunk)
            out.append(chunk)
            if cap and total > cap:
                raise ReadRefused(path, ProblemCode.FILE_TOO_LARGE, f"expands to more than {_size_text(cap)}; not read")
            if not inflater.unconsumed_tail:
                break
            chunk = inflater.decompress(inflater.unconsumed_tail, cap + 1 - total if cap else 0)
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        rest = inflater.unused_data
        if not rest.strip(b"\x00"):  # the end, or the zero padding some writers leave
            break
        view = memoryview(rest)
    return b"".join(out)


__all__ = [
    "LIMITS",
    "ReadRefused",
    "gunzip_capped",
    "kind_of",
    "limit_for",
    "not_regular",
    "open_regular",
    "outside_refusal",
    "read_regular",
    "read_regular_if_small",
    "too_large",
]
