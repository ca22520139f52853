"""Reading an append-only JSONL file again and again (a runtime ``events.jsonl`` that a
driver is writing) at the cost of what was appended since the last read.

The integrity check of an open case runs again whenever the driver writes into it, and
a runtime event log is tens of MB by then. Parsing all of it each time keeps the
interpreter lock busy for long stretches (one ``bytes.split`` over the whole file, then
one ``orjson.loads`` per line) while the UI thread's key handling waits. Here:

- the rows, problems and line count of the file's complete lines (up to its last
  ``\\n``) are remembered under the path together with the file's device, inode and
  the sha256 of those bytes. The next read of the same inode, at least as long, whose
  first bytes still hash the same (hashlib releases the lock while it hashes), parses
  only the bytes after them. Anything else (truncation, a rewrite in place, a new
  inode) parses the whole file again;
- a last line without a newline is parsed on every read and never remembered (a writer
  mid-line completes it later);
- lines are split and parsed in chunks of about ``CHUNK`` bytes with ``time.sleep(0)``
  between chunks, so another thread gets the lock during a long first read.

The result is exactly :func:`jsonio.parse_jsonl_bytes` of the whole file: the same
rows, the same problems in the same order with the same messages, the same torn-tail
flag. The remembered rows are shared between reads: callers must not mutate them (the
returned list itself is always a new one).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson

from eviscene_tui.artifacts.jsonio import torn_line_problem
from eviscene_tui.artifacts.problems import Problem

CHUNK = 256 << 10
#: smaller files are parsed whole each time (fast, and not worth the memo's memory)
MEMO_MIN = 1 << 20
#: at most this many files are remembered (the oldest entry is dropped first)
MEMO_FILES = 16


@dataclass(frozen=True)
class _Seen:
    """What was read of one file's complete lines: ``data[:done]``, ``lines`` newlines."""

    dev: int
    ino: int
    done: int
    digest: bytes
    lines: int
    rows: list[Any]
    problems: list[Problem]


_memo: dict[str, _Seen] = {}
_memo_lock = threading.Lock()


def forget() -> None:
    """Drop every remembered file (tests; a caller that wants its memory back)."""
    with _memo_lock:
        _memo.clear()


def read_jsonl_appended(path: str) -> tuple[list[Any], list[Problem], bool]:
    """``parse_jsonl_bytes(<the file's bytes>, path)``, parsing only what was appended
    since the last call for this path when the earlier bytes are unchanged. Raises
    ``OSError`` as ``open`` does (a missing or unreadable file)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read()
    seen = _memo.get(path)
    hasher = _same_prefix(seen, st, data) if seen is not None else None
    start, lines, rows, problems = 0, 0, [], []
    if seen is not None and hasher is not None:
        start, lines, rows, problems = seen.done, seen.lines, seen.rows, seen.problems
    else:
        hasher = hashlib.sha256()
    done = data.rfind(b"\n", start) + 1 or start
    if done > start:
        new_rows, new_problems, lines = _complete_lines(data, start, done, lines, path)
        rows = rows + new_rows if new_rows else rows
        problems = problems + new_problems if new_problems else problems
    if len(data) >= MEMO_MIN:
        hasher.update(memoryview(data)[start:done])
        _remember(path, _Seen(st.st_dev, st.st_ino, done, hasher.digest(), lines, rows, problems))
    tail_rows, tail_problem = _last_line(data, done, lines, path)
    return rows + tail_rows, problems + tail_problem, bool(tail_problem)


def _same_prefix(seen: _Seen, st: os.stat_result, data: bytes) -> Any:
    """When the file is the one remembered and still starts with the bytes read then,
    a sha256 holding those bytes (to go on with); else None."""
    if (st.st_dev, st.st_ino) != (seen.dev, seen.ino) or len(data) < seen.done:
        return None
    hasher = hashlib.sha256(memoryview(data)[: seen.done])
    return hasher if hasher.digest() == seen.digest else None


def _complete_lines(data: bytes, start: int, done: int, lines: int, path: str) -> tuple[list[Any], list[Problem], int]:
    """Rows and problems of the newline-terminated lines in ``data[start:done]`` (which
    ends with ``\\n``), numbered after ``lines`` earlier lines; and the new line count."""
    rows: list[Any] = []
    problems: list[Problem] = []
    number = lines
    pos = start
    while pos < done:
        end = data.find(b"\n", min(pos + CHUNK, done) - 1) + 1
        for line in data[pos:end].split(b"\n")[:-1]:
            number += 1
            if not line.strip():
                continue
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                problems.append(torn_line_problem(path, f"line {number}", exc))
        pos = end
        if pos < done:
            time.sleep(0)  # let the UI thread take the interpreter lock between chunks
    return rows, problems, number


def _last_line(data: bytes, done: int, lines: int, path: str) -> tuple[list[Any], list[Problem]]:
    """The row, or the torn-tail problem, of the bytes after the last newline."""
    tail = data[done:]
    if not tail.strip():
        return [], []
    try:
        return [orjson.loads(tail)], []
    except orjson.JSONDecodeError as exc:
        return [], [torn_line_problem(path, "last line (no trailing newline)", exc)]


def _remember(path: str, seen: _Seen) -> None:
    with _memo_lock:
        if path not in _memo and len(_memo) >= MEMO_FILES:
            _memo.pop(next(iter(_memo)))
        _memo[path] = seen
