"""Reading the files of a case for the integrity check, and the small helpers every
concern shares.

Paths are plain ``str`` (pathlib is too slow over 10,000 cases). Raw JSON from run
files is untrusted: the ``as_dict`` / ``as_list`` helpers give an empty container for
anything of the wrong shape, so every check reads what it can and reports the rest.
"""

from __future__ import annotations

import os
import re
import zlib

from eviscene_tui import pace
from eviscene_tui.artifacts.jsonio import (
    BoundRead,
    jsonl_file_rows,
    parse_json_bytes,
    read_file_bytes,
    read_bound,
)
from eviscene_tui.artifacts.schemas import KNOWN_SCHEMAS
from eviscene_tui.artifacts.problems import Problem, ProblemCode

MAX_PARSE_BYTES = 20 << 20  # generic JSON parse and source-trace capture check only below this
MAX_LEDGER_BYTES = 1 << 30
YIELD_BEFORE_PARSE = 1 << 20  # files this big give way to the operator before they are parsed
MEMO_MAX = 2 << 20  # files up to this size (outside runtime archives) are read once per check and kept
HEX64 = re.compile(r"^[0-9a-f]{64}$")
HINT_FILE_RE = re.compile(r"^hint-(\d+)\.json$")
EPISODE_RE = re.compile(r"^hint-(\d+)-teacher\.json$")
REQUEST_RE = re.compile(r"^round-(\d+)\.json$")
CONTEXT_RE = re.compile(r"^req-\d+\.json$")

_VERSION_SUFFIX = re.compile(r"-v\d+$")


def schema_family(schema: str) -> str:
    """``ifv-psd-media-v3`` -> ``ifv-psd-media``."""
    return _VERSION_SUFFIX.sub("", schema)


KNOWN_FAMILIES = frozenset(schema_family(s) for s in KNOWN_SCHEMAS)


def _join(head: str, *names: str) -> str:
    """``os.path.join`` of ``str`` paths on POSIX, the same result without its generic
    machinery (bytes, path-likes): every check of every case joins paths dozens of times."""
    for name in names:
        if name.startswith("/"):
            head = name
        elif not head or head.endswith("/"):
            head += name
        else:
            head = f"{head}/{name}"
    return head


join = _join if os.sep == "/" and os.altsep is None else os.path.join
parent = os.path.dirname


def base(path: str) -> str:
    return path.rsplit(os.sep, 1)[-1]


def short(sha: object) -> str:
    """The first 12 characters of a hash for a message (``repr`` of an empty value)."""
    return f"{str(sha)[:12]}…" if sha else repr(sha)


def as_dict(value: object) -> dict[str, object]:
    """``value`` when it is a JSON object, else an empty one (raw run JSON is untrusted)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[object]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def int_list(value: object) -> list[int] | None:
    if isinstance(value, list) and all(type(v) is int for v in value):
        return value
    return None


def json_kind(value: object) -> str:
    """The JSON name of a parsed value's type (for "expected an object, found ...")."""
    kinds: dict[type, str] = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return kinds.get(type(value), "null" if value is None else type(value).__name__)


def read_bytes(
    path: str, cache: dict[str, bytes] | None = None, walked: bool = False
) -> tuple[bytes | None, list[Problem]]:
    """A file's bytes (from ``cache`` when there, kept in it when small), or the problem.
    ``walked``: the case's walk saw it as a regular file (one ``stat`` fewer)."""
    if cache is not None:
        hit = cache.get(path)
        if hit is not None:
            return hit, []
    data, problems = read_file_bytes(path, walked=walked)
    if data is not None and cache is not None and len(data) <= MEMO_MAX:
        cache[path] = data
    return data, problems


def read_json(path: str, cache: dict[str, bytes] | None = None, walked: bool = False) -> tuple[object, list[Problem]]:
    """``jsonio.read_json`` without pathlib (this module runs over 10,000 cases)."""
    data, problems = read_bytes(path, cache, walked)
    if data is None:
        return None, problems
    if len(data) >= YIELD_BEFORE_PARSE:
        # one parse holds the interpreter throughout (a source trace with a big capture):
        # in background work it starts only once the operator's key or capture is served
        pace.yield_to_input()
    return parse_json_bytes(data, path)


def read_jsonl(path: str, cache: dict[str, bytes] | None = None, walked: bool = False) -> tuple[list[object], list[Problem]]:
    """``jsonio.read_jsonl`` without pathlib (``.jsonl`` and ``.jsonl.gz``)."""
    data, problems = read_bytes(path, cache, walked)
    if data is None:
        return [], problems
    return jsonl_file_rows(data, path)


def safe_read_bound(path: str) -> BoundRead:
    """``jsonio.read_bound``, plus a corrupt gzip stream (``zlib.error``, which the shared
    reader does not catch) turned into a ``json_invalid`` problem."""
    try:
        return read_bound(path)
    except (zlib.error, EOFError, OSError, ValueError) as exc:
        result = BoundRead()
        result.form = "invalid"
        result.problems.append(
            Problem(code=ProblemCode.JSON_INVALID, path=path, message=f"bound envelope: corrupt gzip archive: {exc}")
        )
        return result
