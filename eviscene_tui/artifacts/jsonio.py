"""Byte-level JSON helpers shared by every loader and every writer.

- canonical JSON and its sha256, exactly as the driver's ``_sha`` (psd-run-format §6);
- tolerant JSON / JSONL / JSONL.gz parsing with orjson that returns Problems;
- the bound envelope, plain and gzip pointer forms (§2.1), for reading and writing.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import time
import zlib
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import orjson

from eviscene_tui import pace
from eviscene_tui.artifacts.fileio import LIMITS, ReadRefused, gunzip_capped, open_regular, read_regular
from eviscene_tui.artifacts.problems import Problem, ProblemCode

BOUND_GZIP_SCHEMA = "ifv-psd-bound-gzip-v1"
GZIP_THRESHOLD = 1 << 20  # the driver switches to the gzip form at >= 1 MiB
MAX_ARCHIVE_BYTES = 1 << 30


# --------------------------------------------------------------------------- hashing
#: digits (the bytes around a float's exponent)
_DIGITS = frozenset(b"0123456789")


def _float_differs(out: bytes) -> bool:
    """Whether orjson's output holds a float it writes otherwise than Python's repr: one
    with an exponent (``1e-7``: Python writes one too, but as ``1e-07`` / ``1e+16``: a digit,
    ``e``, a sign, a digit) or below 1e-4 in plain notation (``0.00001``, where Python writes
    ``1e-05``). A string holding such text only costs the stdlib's encoder. Byte searches
    (memory speed), not a pattern (a regular expression ran at a few MB/s here)."""
    if b"0.0000" in out:
        return True
    for sign in (b"e-", b"e+"):
        k = out.find(sign)
        while k != -1:
            if k > 0 and out[k - 1] in _DIGITS and k + 2 < len(out) and out[k + 2] in _DIGITS:
                return True
            k = out.find(sign, k + 2)
    return False


def canonical_json_bytes(value: Any, *, floats_likely: bool = False, parsed: bool = False) -> bytes:
    """``json.dumps(x, ensure_ascii=False, sort_keys=True, separators=(",", ":"))`` as UTF-8.

    orjson is used when it gives identical bytes (it does for str/int/bool/None/list/dict
    with string keys, and floats whose magnitude is 0 or in [1e-4, 1e16), which both write
    as the shortest round-trip digits in plain notation), since it encodes in C; other floats
    (tiny magnitudes, which Python writes ``1e-05``, inf, nan) go through the stdlib. The
    check for that is a walk, skipped when the caller knows floats are likely (token
    captures carry logprobs), where the stdlib encoder goes first. (An orjson + Fragment
    rewrite of floats was measured slower than the stdlib.)

    ``parsed``: the value is what ``orjson.loads`` gave (a run file read back): it then
    holds only JSON types, str keys, ints within 64 bits and finite floats, so orjson's
    bytes are the stdlib's unless they hold a float written otherwise, which a search of
    them finds (:func:`_float_differs`) at a fraction of the walk's cost.
    """
    if parsed:
        try:
            out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            out = None
        if out is not None and not _float_differs(out):
            return out
    elif not floats_likely and _orjson_safe(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # e.g. a lone surrogate: the stdlib says what is wrong, as it always did
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


_NONE_T = type(None)
_PLAIN_SCALARS = frozenset({str, bool, _NONE_T})
_INT_LIMIT = 1 << 63
#: float magnitudes orjson writes exactly as Python's repr does (0 aside)
_FLOAT_MIN, _FLOAT_MAX = 1e-4, 1e16
_NUMBERS = frozenset({int, float})


def _float_safe(value: float) -> bool:
    return value == 0.0 or _FLOAT_MIN <= abs(value) < _FLOAT_MAX  # False for inf and nan


def _orjson_safe(value: Any, depth: int = 0) -> bool:
    """True when orjson gives the driver's canonical bytes: no floats, no non-str keys,
    no int >= 2**63 in magnitude. A list of scalars or ints (token ids, often 100,000
    long) is checked at C speed (one pass over the types, then min/max) instead of one
    call per element; a dict's values are checked as one such list."""
    if depth > 200:
        return False
    t = type(value)
    if t in _PLAIN_SCALARS:
        return True
    if t is int:
        fits: bool = -_INT_LIMIT < value < _INT_LIMIT
        return fits
    if t is float:
        return _float_safe(value)
    if t is list or t is tuple:
        if not value:
            return True
        types = set(map(type, value))
        if types <= _PLAIN_SCALARS:
            return True
        if types <= _NUMBERS | _PLAIN_SCALARS:
            ints = value if types == {int} else [v for v in value if type(v) is int]
            if ints and not (-_INT_LIMIT < min(ints) and max(ints) < _INT_LIMIT):
                return False
            return float not in types or all(_float_safe(v) for v in value if type(v) is float)
        if types == {dict}:
            # a list of objects (top-k rows, messages): their keys and values checked together
            keys: set[type] = set()
            values: list[Any] = []
            for row in value:
                keys.update(map(type, row))
                values.extend(row.values())
            return keys <= {str} and _orjson_safe(values, depth + 1)
        return all(_orjson_safe(v, depth + 1) for v in value)
    if t is dict:
        if not set(map(type, value)) <= {str}:
            return False
        return _orjson_safe(list(value.values()), depth)
    return False


def canonical_sha256(value: Any, *, floats_likely: bool = False, parsed: bool = False) -> str:
    """The driver's ``_sha``: sha256 of :func:`canonical_json_bytes`."""
    return hashlib.sha256(canonical_json_bytes(value, floats_likely=floats_likely, parsed=parsed)).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: files at least this big have their sha256 remembered while their stat is unchanged
SHA_MEMO_MIN = 8 << 20
#: ... when their last change (ctime) is at least this many seconds older than the hash
#: (a file still being written within the clock's granularity is hashed again)
SHA_MEMO_SETTLED = 2.0
_sha_memo: dict[tuple[int, int, int, int, int], str] = {}


def sha256_file(path: str | os.PathLike[str], *, limit: int | None = None) -> str:
    """sha256 of a file's bytes. A big input (a source trace of hundreds of MB) checked
    again and again while a driver writes its case is hashed once: the digest is kept
    under the file's (device, inode, size, mtime, ctime) - any write, and any reset of
    the mtime, changes the ctime - when the file had settled before it was read.
    Only a regular file within its kind's size limit is read (``fileio.open_regular``:
    ``ReadRefused`` otherwise)."""
    with open_regular(path, limit=limit) as fh:
        st = os.fstat(fh.fileno())
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if st.st_size >= SHA_MEMO_MIN and key in _sha_memo:
            return _sha_memo[key]
        settled = time.time() - st.st_ctime >= SHA_MEMO_SETTLED
        h = hashlib.sha256()
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            pace.yield_to_input()  # a core and the disk to the operator's key first
    digest = h.hexdigest()
    if st.st_size >= SHA_MEMO_MIN and settled:
        if len(_sha_memo) >= 256:
            _sha_memo.clear()
        _sha_memo[key] = digest
    return digest


def hint_sha256(text: str) -> str:
    """sha256 of the *stripped* hint text (not canonical JSON), §6."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- parsing
#: what one check parsed, by absolute path: (the bytes parsed, the value or JSONL rows, the
#: parse problems): a summary of the same case reads the same bytes and takes these
Parsed = dict[str, tuple[bytes, Any, list[Problem]]]


def _last_byte(data: bytes) -> int | None:
    """The last byte of ``data`` that is not JSON whitespace (no copy of ``data``)."""
    for i in range(len(data) - 1, -1, -1):
        b = data[i]
        if b not in b" \t\r\n":
            return b
    return None


def parse_json_bytes(data: bytes, path: str) -> tuple[Any | None, list[Problem]]:
    try:
        return orjson.loads(data), []
    except orjson.JSONDecodeError as exc:
        last = _last_byte(data)
        kind = "truncated" if last is not None and last not in b"}]" else "invalid"
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=path, message=f"{kind} JSON: {exc}")]


def read_file_bytes(
    path: str, *, limit: int | None = None, inside: list[str] | None = None, walked: bool = False
) -> tuple[bytes | None, list[Problem]]:
    """A file's bytes, or the problem: missing -> ``missing_artifact``; not a regular
    file -> ``not_regular_file``; bigger than its kind's limit -> ``file_too_large``
    (``fileio``: neither is ever read); unreadable -> ``missing_artifact`` with the reason.
    ``walked``: a directory walk just saw it as a regular file (``fileio.read_regular``)."""
    try:
        return read_regular(path, limit=limit, inside=inside, walked=walked), []
    except ReadRefused as exc:
        return None, [exc.problem()]
    except FileNotFoundError:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=path, message="file not found")]
    except OSError as exc:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=path, message=f"cannot read: {exc.strerror or exc}")]


def read_json(path: str | os.PathLike[str], *, inside: list[str] | None = None) -> tuple[Any | None, list[Problem]]:
    """Read a JSON file. Missing file -> ``missing_artifact``; bad JSON -> ``json_invalid``;
    with ``inside``, a path whose symlinks lead out of those directories is never opened
    (``path_outside_root``)."""
    p = str(path)
    data, problems = read_file_bytes(p, inside=inside)
    if data is None:
        return None, problems
    return parse_json_bytes(data, p)


def parse_jsonl_bytes(data: bytes, path: str) -> tuple[list[Any], list[Problem], bool]:
    """Split on ``\\n`` only (strings may hold U+2028/U+2029/U+0085).

    Returns (rows, problems, torn_tail). A line that does not parse is reported as
    ``jsonl_torn_line`` and skipped; the other lines are still read. ``torn_tail`` is
    True when the *last* line has no trailing newline and does not parse (a writer
    may be mid-write).
    """
    rows: list[Any] = []
    problems: list[Problem] = []
    torn_tail = False
    for number, row, error, at_tail in jsonl_lines(data):
        if error is None:
            rows.append(row)
            continue
        torn_tail = torn_tail or at_tail
        problems.append(torn_line_problem(path, "last line (no trailing newline)" if at_tail else f"line {number}", error))
    return rows, problems, torn_tail


def torn_line_problem(path: str, where: str, error: orjson.JSONDecodeError) -> Problem:
    """The ``jsonl_torn_line`` problem of one line (``where``: "line 7", "last line …")."""
    return Problem(code=ProblemCode.JSONL_TORN_LINE, path=path, message=f"{where} does not parse: {error}")


def jsonl_lines(data: bytes) -> Iterator[tuple[int, Any, orjson.JSONDecodeError | None, bool]]:
    """Each non-blank line of a JSONL file: (1-based line number, parsed value or None, the
    parse error or None, whether it is the last line, i.e. one without a trailing newline).
    Split on ``\\n`` only (strings may hold U+2028/U+2029/U+0085)."""
    lines = data.split(b"\n")
    last = len(lines) - 1
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield number + 1, orjson.loads(line), None, number == last
        except orjson.JSONDecodeError as exc:
            yield number + 1, None, exc, number == last


def read_jsonl(path: str | os.PathLike[str]) -> tuple[list[Any], list[Problem]]:
    """Read ``.jsonl`` or ``.jsonl.gz``."""
    p = str(path)
    raw, problems = read_file_bytes(p)
    if raw is None:
        return [], problems
    return jsonl_file_rows(raw, p)


def jsonl_file_rows(raw: bytes, path: str) -> tuple[list[Any], list[Problem]]:
    """The rows of a ``.jsonl`` file's bytes, gunzipped first when ``path`` ends in ``.gz``."""
    if path.endswith(".gz"):
        try:
            raw = gunzip_capped(raw, path, LIMITS["ledger"])
        except ReadRefused as exc:
            return [], [exc.problem()]
        except (OSError, EOFError, zlib.error) as exc:
            return [], [Problem(code=ProblemCode.JSON_INVALID, path=path, message=f"bad gzip: {exc}")]
    rows, problems, _ = parse_jsonl_bytes(raw, path)
    return rows, problems


# --------------------------------------------------------------------------- bound envelopes
def bound_document(identity: Any, payload: Any) -> dict[str, Any]:
    return {"identity": identity, "payload": payload, "payload_sha256": canonical_sha256(payload)}


def pretty_json_bytes(value: Any) -> bytes:
    """The driver's ``write_json`` format: UTF-8, ensure_ascii=False, indent=2, trailing newline."""
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def canonical_jsonl_bytes(rows: list[Any]) -> bytes:
    """The driver's ``write_jsonl``: one canonical object per line, ``\\n`` after every row."""
    return b"".join(canonical_json_bytes(r) + b"\n" for r in rows)


def encode_bound(path: Path, identity: Any, payload: Any, *, force_gzip: bool | None = None) -> dict[str, bytes]:
    """Return {filename: bytes} for a bound envelope written at ``path``.

    Plain form below 1 MiB of canonical document, gzip pointer + archive at or above
    (or when ``force_gzip`` says so). Deterministic: level-1 gzip, mtime 0.
    """
    doc = bound_document(identity, payload)
    canonical = canonical_json_bytes(doc)
    use_gzip = len(canonical) >= GZIP_THRESHOLD if force_gzip is None else force_gzip
    if not use_gzip:
        return {path.name: pretty_json_bytes(doc)}
    doc_sha = sha256_bytes(canonical)
    archive_name = f"{path.stem}-{doc_sha[:16]}.json.gz"
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=buf, mtime=0) as gz:
        gz.write(canonical)
    pointer = {
        "schema_version": BOUND_GZIP_SCHEMA,
        "identity": identity,
        "payload_sha256": doc["payload_sha256"],
        "archive": archive_name,
        "uncompressed_bytes": len(canonical),
        "uncompressed_sha256": doc_sha,
    }
    return {path.name: pretty_json_bytes(pointer), archive_name: buf.getvalue()}


class BoundRead:
    """Result of reading a bound envelope: whatever could be read plus problems."""

    __slots__ = ("identity", "payload", "payload_sha256", "form", "problems", "archive")

    def __init__(self) -> None:
        self.identity: Any = None
        self.payload: Any = None
        self.payload_sha256: str | None = None
        self.form: str = "missing"  # plain | gzip | missing | invalid
        self.problems: list[Problem] = []
        self.archive: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def read_bound(path: str | os.PathLike[str], *, verify: bool = True, inside: list[str] | None = None) -> BoundRead:
    """Read a bound envelope in either form, recomputing ``payload_sha256``; ``inside``
    as for :func:`read_json`.

    Never raises. Gzip checks: archive in the same directory, not a symlink, size
    at most 1 GiB, sha of the uncompressed bytes, identity and payload hash equal
    to the pointer's.
    """
    result = BoundRead()
    p = Path(path)
    doc, problems = read_json(p, inside=inside)
    if problems:
        result.problems = problems
        result.form = "missing" if problems[0].code == ProblemCode.MISSING_ARTIFACT else "invalid"
        return result
    if not isinstance(doc, dict):
        result.form = "invalid"
        result.problems.append(
            Problem(code=ProblemCode.JSON_INVALID, path=str(p), message="bound envelope must be a JSON object")
        )
        return result
    if doc.get("schema_version") == BOUND_GZIP_SCHEMA:
        result.form = "gzip"
        result.identity = doc.get("identity")
        result.payload_sha256 = doc.get("payload_sha256")
        archive = doc.get("archive")
        result.archive = archive if isinstance(archive, str) else None
        inner = _read_gzip_archive(p, doc, result.problems)
        if inner is None:
            return result
        if inner.get("identity") != doc.get("identity"):
            result.problems.append(
                Problem(code=ProblemCode.BOUND_HASH_MISMATCH, path=str(p), message="archive identity differs from pointer")
            )
        if inner.get("payload_sha256") != doc.get("payload_sha256"):
            result.problems.append(
                Problem(code=ProblemCode.BOUND_HASH_MISMATCH, path=str(p), message="archive payload_sha256 differs from pointer")
            )
        result.payload = inner.get("payload")
    else:
        missing = [k for k in ("identity", "payload", "payload_sha256") if k not in doc]
        if missing:
            result.form = "invalid"
            result.payload = doc.get("payload")
            result.problems.append(
                Problem(code=ProblemCode.JSON_INVALID, path=str(p), message=f"bound envelope lacks {', '.join(missing)}")
            )
            return result
        result.form = "plain"
        result.identity = doc.get("identity")
        result.payload = doc.get("payload")
        result.payload_sha256 = doc.get("payload_sha256")
    if verify and result.payload_sha256 is not None:
        actual = canonical_sha256(result.payload)
        if actual != result.payload_sha256:
            result.problems.append(
                Problem(
                    code=ProblemCode.BOUND_HASH_MISMATCH,
                    path=str(p),
                    message=f"payload_sha256 {str(result.payload_sha256)[:12]}… does not match the payload ({actual[:12]}…)",
                )
            )
    return result


def _read_gzip_archive(pointer_path: Path, doc: dict[str, Any], problems: list[Problem]) -> dict[str, Any] | None:
    name = doc.get("archive")
    where = str(pointer_path)
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        problems.append(
            Problem(code=ProblemCode.PATH_OUTSIDE_ROOT, path=where, message=f"gzip archive name {name!r} is not in the same directory")
        )
        return None
    archive = pointer_path.parent / name
    if archive.is_symlink():
        problems.append(Problem(code=ProblemCode.PATH_OUTSIDE_ROOT, path=str(archive), message="gzip archive is a symlink"))
        return None
    try:
        with open_regular(archive, limit=MAX_ARCHIVE_BYTES) as fh, gzip.GzipFile(fileobj=fh, mode="rb") as gz:
            data = gz.read(MAX_ARCHIVE_BYTES + 1)
    except ReadRefused as exc:
        problems.append(exc.problem())
        return None
    except FileNotFoundError:
        problems.append(Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(archive), message="gzip archive named by the pointer is missing"))
        return None
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(Problem(code=ProblemCode.JSON_INVALID, path=str(archive), message=f"bad gzip archive: {exc}"))
        return None
    if len(data) > MAX_ARCHIVE_BYTES:
        problems.append(Problem(code=ProblemCode.FILE_TOO_LARGE, path=str(archive), message="uncompressed archive larger than 1 GiB; not read"))
        return None
    expected_size = doc.get("uncompressed_bytes")
    if isinstance(expected_size, int) and expected_size != len(data):
        problems.append(
            Problem(code=ProblemCode.BOUND_HASH_MISMATCH, path=str(archive), message=f"uncompressed size {len(data)} != pointer's {expected_size}")
        )
    if sha256_bytes(data) != doc.get("uncompressed_sha256"):
        problems.append(
            Problem(code=ProblemCode.BOUND_HASH_MISMATCH, path=str(archive), message="uncompressed_sha256 does not match the archive bytes")
        )
    inner, parse_problems = parse_json_bytes(data, str(archive))
    problems.extend(parse_problems)
    if not isinstance(inner, dict):
        if inner is not None:
            problems.append(Problem(code=ProblemCode.JSON_INVALID, path=str(archive), message="archive document is not an object"))
        return None
    return inner
