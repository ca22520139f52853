"""Checking an append-only JSONL file again and again (a runtime ``events.jsonl`` that a
driver is writing) at the cost of what was appended since the last check.

The integrity check of an open case runs again whenever the driver writes into it (the
case screen's check and the runs table's, each about once a second or two during a
burst), and a runtime event log is tens of MB by then. Reading, parsing and walking all
of it each time kept the interpreter lock busy for long stretches while the UI thread's
key handling waited, and keeping every parsed row between checks made each full garbage
collection walk them. Here a check keeps no rows, only what it concludes:

- the problems and line count of the file's complete lines (up to its last ``\\n``), the
  number of rows, and the first row a caller's ``pick`` selects (a row at an unknown
  schema version), are remembered under the path together with the file's device, inode
  and the sha256 of those bytes;
- the next check of the same inode, at least as long, reads and hashes the remembered
  prefix in 1 MiB pieces (file reads and hashlib both release the interpreter lock, and
  no copy of the whole file is held) and, when it still hashes the same, parses only the
  bytes after it. Anything else (truncation, a rewrite in place, a new inode, another
  ``pick``) parses the whole file again;
- a last line without a newline is parsed on every check and never remembered (a writer
  mid-line completes it later);
- lines are split and parsed in chunks of about ``CHUNK`` bytes; between chunks, and
  between the pieces of the prefix, the check gives way to the operator's last key
  (``pace.yield_to_input``) or at least lets another thread take the lock.

The result is exactly what :func:`jsonio.parse_jsonl_bytes` of the whole file gives: the
same problems in the same order with the same messages, the same torn-tail flag, the
same row count, and the first picked row with its line number.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from eviscene_tui import pace
from eviscene_tui.artifacts.fileio import open_regular
from eviscene_tui.artifacts.jsonio import torn_line_problem
from eviscene_tui.artifacts.problems import Problem

CHUNK = 256 << 10
#: the remembered prefix is read back (to hash it) in pieces of this size
PREFIX_PIECE = 1 << 20
#: smaller files are parsed whole each time (fast, and not worth remembering)
MEMO_MIN = 1 << 20
#: at most this many files are remembered (the oldest entry is dropped first)
MEMO_FILES = 16

#: selects a row worth reporting (the first one the log holds is kept)
RowPick = Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class PickedRow:
    """A row ``pick`` selected, and its 1-based line number in the file."""

    line: int
    row: Any


@dataclass(frozen=True, slots=True)
class LogScan:
    """What a check of a JSONL log found: the problems (torn or invalid lines, in file
    order), whether the last line is a torn one without a newline, how many rows parse,
    and the first row ``pick`` selected (None when no row was)."""

    problems: list[Problem]
    torn_tail: bool
    rows: int
    picked: PickedRow | None


@dataclass(frozen=True, slots=True)
class _Seen:
    """What was read of one file's complete lines: ``data[:done]``, ``lines`` newlines."""

    dev: int
    ino: int
    done: int
    digest: bytes
    lines: int
    rows: int
    problems: list[Problem]
    picked: PickedRow | None
    pick: RowPick


@dataclass(slots=True)
class _Tally:
    """The running conclusions of one check, line by line."""

    lines: int
    rows: int
    problems: list[Problem]
    picked: PickedRow | None


_memo: dict[str, _Seen] = {}
_memo_lock = threading.Lock()


def forget() -> None:
    """Drop every remembered file (tests; a caller that wants its memory back)."""
    with _memo_lock:
        _memo.clear()


def scan_jsonl_appended(path: str, pick: RowPick) -> LogScan:
    """Check the JSONL file at ``path`` (as ``parse_jsonl_bytes`` of its bytes would),
    parsing only what was appended since the last check of this path with the same
    ``pick`` when the earlier bytes are unchanged. Raises ``OSError`` as ``open`` does
    (a missing or unreadable file), ``fileio.ReadRefused`` for a file that is not a
    regular file or beyond its kind's limit."""
    with open_regular(path) as fh:
        st = os.fstat(fh.fileno())
        seen = _memo.get(path)
        resumed = _resume(fh, st, seen, pick) if seen is not None else None
        if resumed is not None and seen is not None:
            start, hasher = seen.done, resumed
            tally = _Tally(seen.lines, seen.rows, seen.problems, seen.picked)
        else:
            fh.seek(0)
            start, hasher = 0, hashlib.sha256()
            tally = _Tally(0, 0, [], None)
        data = fh.read()  # from ``start`` on
    done = data.rfind(b"\n") + 1
    if done:
        _complete_lines(data, done, tally, path, pick)
    if start + len(data) >= MEMO_MIN:
        hasher.update(memoryview(data)[:done])
        _remember(path, _Seen(st.st_dev, st.st_ino, start + done, hasher.digest(), tally.lines, tally.rows,
                              tally.problems, tally.picked, pick))
    return _with_last_line(data, done, tally, path, pick)


def _resume(fh: BinaryIO, st: os.stat_result, seen: _Seen, pick: RowPick) -> Any:
    """When the file is the one remembered, checked with the same ``pick``, and still
    starts with the bytes read then: a sha256 holding those bytes, the file positioned
    after them (to go on with); else None."""
    if (st.st_dev, st.st_ino) != (seen.dev, seen.ino) or st.st_size < seen.done or pick is not seen.pick:
        return None
    hasher = hashlib.sha256()
    left = seen.done
    while left:
        piece = fh.read(min(PREFIX_PIECE, left))
        if not piece:
            return None  # truncated since the fstat
        hasher.update(piece)
        left -= len(piece)
        pace.yield_to_input()
    return hasher if hasher.digest() == seen.digest else None


def _complete_lines(data: bytes, done: int, tally: _Tally, path: str, pick: RowPick) -> None:
    """Count, check and pick the newline-terminated lines in ``data[:done]`` (which ends
    with ``\\n``), numbered after the lines already in ``tally``. The tally's problem list
    is replaced, never appended to (a remembered one is shared)."""
    problems: list[Problem] = []
    number, rows, picked = tally.lines, tally.rows, tally.picked
    pos = 0
    while pos < done:
        end = data.find(b"\n", min(pos + CHUNK, done) - 1) + 1
        for line in data[pos:end].split(b"\n")[:-1]:
            number += 1
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                problems.append(torn_line_problem(path, f"line {number}", exc))
                continue
            rows += 1
            if picked is None and pick(row):
                picked = PickedRow(number, row)
        pos = end
        if pos < done and not pace.yield_to_input():
            time.sleep(0)  # let the UI thread take the interpreter lock between chunks
    tally.lines, tally.rows, tally.picked = number, rows, picked
    if problems:
        tally.problems = tally.problems + problems


def _with_last_line(data: bytes, done: int, tally: _Tally, path: str, pick: RowPick) -> LogScan:
    """The check's result, counting the bytes after the last newline: a row, or the
    torn-tail problem."""
    tail = data[done:]
    if not tail.strip():
        return LogScan(list(tally.problems), False, tally.rows, tally.picked)
    try:
        row = orjson.loads(tail)
    except orjson.JSONDecodeError as exc:
        problem = torn_line_problem(path, "last line (no trailing newline)", exc)
        return LogScan([*tally.problems, problem], True, tally.rows, tally.picked)
    picked = tally.picked
    if picked is None and pick(row):
        picked = PickedRow(tally.lines + 1, row)
    return LogScan(list(tally.problems), False, tally.rows + 1, picked)


def _remember(path: str, seen: _Seen) -> None:
    with _memo_lock:
        if path not in _memo and len(_memo) >= MEMO_FILES:
            _memo.pop(next(iter(_memo)))
        _memo[path] = seen
