"""Full integrity check of one case (psd-run-format §6).

``check_case(ref) -> list[Problem]`` recomputes every hash the driver binds and
reports, with exactly the eleven problem codes:

- bound envelopes (run-inputs, hint-proposals, proposer-response,
  continuations/hint-NN plain and gzip, search-state, requests/round-NN):
  ``payload_sha256`` and gzip archive checks (via ``jsonio.read_bound``), plus the
  continuation identity (``run`` = canonical sha of the run config, ``hint`` = the
  hint's sha) and the request identity (``search`` = canonical sha of the search
  identity);
- ``search-state.json`` ``rounds[].files`` maps and the absolute episode paths of
  its records, ``round-inputs/round-NN/media.json`` episodes, ``run-inputs.json``
  and search ``inputs`` ``{path, sha256}`` bindings. Absolute paths written on the
  driver's machine are mapped into the case by their path relative to the recorded
  ``output_dir`` / round ``directory`` (and the wrapper root for ``repairs/<key>``);
  input bindings that do not map into the case are skipped silently;
- ``hinted_teacher_episode_trace_sha256`` against the episode file, continuations
  for attempts, judge files named by ``gemini-verification-bundle.json``;
- token captures (attempt ``repair_rollout_token_capture``, candidate
  ``rollout_token_capture``, the teacher action step of each continuation, and the
  source trace's failure step when the trace is reachable and < 20 MB);
- ``psd_media`` (through ``artifacts.media``): media files and image-pad runs;
- leftover ``*.tmp``, symlinks leaving the case, unreadable directories, torn
  JSONL lines (a torn last line of a runtime ``events.jsonl`` is normal), invalid
  JSON, unknown ``schema_version`` strings, content-addressed names
  (``media/<sha>.image``, runtime ``artifacts/sha256/``, ``judge-cache/``);
- slate roots: ``unsupported_layout`` (plus the generic file checks).

Reading only: nothing is written, locked or opened for writing; ``search.lock`` is
never opened. ``check_case`` never raises.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import os
import posixpath
import re
import zlib
from typing import Any, Iterator

from eviscene_tui.artifacts.jsonio import (
    BOUND_GZIP_SCHEMA,
    BoundRead,
    canonical_json_bytes as canonical_bytes,  # noqa: F401 - re-exported: the one canonical encoder (fast path for token-id lists)
    canonical_sha256,
    hint_sha256,
    jsonl_file_rows,
    parse_jsonl_bytes,
    parse_json_bytes,
    read_bound,
    sha256_bytes,
    sha256_file,
)
from eviscene_tui.artifacts.layout import RUN_SCHEMA, SEARCH_SCHEMA, CaseRef, Layout
from eviscene_tui.artifacts.models import (
    KNOWN_SCHEMAS,
    SCHEMA_ATTEMPT,
    SCHEMA_CANDIDATE,
    SCHEMA_CONTEXT_LEDGER,
    SCHEMA_FINALIZATION,
    SCHEMA_HINT_AUDIT,
    SCHEMA_LOCAL_VERIFICATION,
    SCHEMA_MEDIA_V1,
    SCHEMA_MEDIA_V2,
    SCHEMA_MEDIA_V3,
    SCHEMA_RUNTIME_EVENTS,
    SCHEMA_SEMANTIC_LOCALIZATION,
    SCHEMA_TOKEN_CAPTURE,
    SCHEMA_VERIFICATION_BUNDLE,
    RunInputs,
)
from eviscene_tui.artifacts.paths import (
    INPUT_WHAT,
    InputProvenance,
    PathMap,
    PathResolver,
    input_provenance,
    missing_input_message,
    run_dirs_from_media,
)
from eviscene_tui.artifacts.problems import Problem, ProblemCode
from eviscene_tui.artifacts.summary import ROUND_DIR_RE
from eviscene_tui.artifacts import media as media_mod

# schema strings: one source of truth in artifacts.models
MEDIA_SCHEMAS = frozenset({SCHEMA_MEDIA_V1, SCHEMA_MEDIA_V2, SCHEMA_MEDIA_V3})

_VERSION_SUFFIX = re.compile(r"-v\d+$")


def _schema_family(schema: str) -> str:
    return _VERSION_SUFFIX.sub("", schema)


KNOWN_FAMILIES = frozenset(_schema_family(s) for s in KNOWN_SCHEMAS)

# run-inputs identity keys that hold {path, sha256} file bindings (§2.2)
FILE_ARGS = RunInputs.FILE_ARGUMENTS
MAX_PARSE_BYTES = 20 << 20  # generic JSON parse and source-trace capture check only below this
MAX_LEDGER_BYTES = 1 << 30
HEX64 = re.compile(r"^[0-9a-f]{64}$")
HINT_FILE_RE = re.compile(r"^hint-(\d+)\.json$")
EPISODE_RE = re.compile(r"^hint-(\d+)-teacher\.json$")
REQUEST_RE = re.compile(r"^round-(\d+)\.json$")
CONTEXT_RE = re.compile(r"^req-\d+\.json$")
TEACHER_ACTION_REACT = ("psd_teacher_repair", "tool_call")
TEACHER_ACTION_JUDGMENT = ("psd_teacher_judgment", "output")
QWEN35_PAD = 248056
QWEN25_PAD = 151655
QWEN35_IM_START = 248045
QWEN25_IM_START = 151644


def check_case(
    ref: CaseRef,
    *,
    cache: dict[str, bytes] | None = None,
    path_map: PathMap | None = None,
    provenance: list[InputProvenance] | None = None,
) -> list[Problem]:
    """Every problem found in one case (problem paths are absolute).

    ``cache``: when given, the bytes of the files ``summarize_case`` reads (manifest and
    ledgers) are left in it, keyed by absolute path, so a report reads them once.
    ``path_map``: explicit ``OLD=NEW`` mappings for inputs copied elsewhere
    (``artifacts.paths``). ``provenance``: when given, one :class:`InputProvenance` per
    bound input checked is appended (where it was found, by which rule, its sha status).
    Never raises: an unexpected internal error becomes one Problem on the case root.
    """
    checker = _Checker(ref, cache, path_map=path_map, provenance=provenance)
    try:
        checker.run()
    except Exception as exc:  # noqa: BLE001 - hostile input must not crash a report: it becomes a Problem
        checker.add(
            ProblemCode.JSON_INVALID,
            ref.path,
            f"integrity check stopped early on unexpected content: {type(exc).__name__}: {exc}",
        )
    return checker.problems


def _short(sha: Any) -> str:
    return f"{str(sha)[:12]}…" if sha else repr(sha)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(type(v) is int for v in value):
        return value
    return None


def pad_runs(ids: list[int], pad_id: int) -> int:
    """Number of maximal runs of ``pad_id`` in ``ids``."""
    runs = 0
    prev = False
    for tok in ids:
        cur = tok == pad_id
        if cur and not prev:
            runs += 1
        prev = cur
    return runs


def pad_id_for_ids(*id_lists: list[int] | None) -> int:
    """Qwen3.5 (248056) unless the prompt is framed by the Qwen2.5/3-VL im_start only."""
    seen35 = seen25 = False
    for ids in id_lists:
        if not ids:
            continue
        if QWEN35_IM_START in ids or QWEN35_PAD in ids:
            seen35 = True
        elif QWEN25_IM_START in ids:
            seen25 = True
    return QWEN25_PAD if seen25 and not seen35 else QWEN35_PAD


_j = os.path.join


def _base(path: str) -> str:
    return path.rsplit(os.sep, 1)[-1]


MEMO_MAX = 2 << 20  # files up to this size (outside runtime archives) are read once per check and kept


def _read_bytes(path: str, cache: dict[str, bytes] | None = None) -> tuple[bytes | None, list[Problem]]:
    if cache is not None:
        hit = cache.get(path)
        if hit is not None:
            return hit, []
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if cache is not None and len(data) <= MEMO_MAX:
            cache[path] = data
        return data, []
    except FileNotFoundError:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=path, message="file not found")]
    except IsADirectoryError:
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=path, message="expected a file, found a directory")]
    except OSError as exc:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=path, message=f"cannot read: {exc.strerror or exc}")]


def read_json(path: str, cache: dict[str, bytes] | None = None) -> tuple[Any, list[Problem]]:
    """``jsonio.read_json`` without pathlib (this module runs over 10,000 cases)."""
    data, problems = _read_bytes(path, cache)
    if data is None:
        return None, problems
    return parse_json_bytes(data, path)


def read_jsonl(path: str, cache: dict[str, bytes] | None = None) -> tuple[list[Any], list[Problem]]:
    """``jsonio.read_jsonl`` without pathlib (``.jsonl`` and ``.jsonl.gz``)."""
    data, problems = _read_bytes(path, cache)
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


def _parent(path: str) -> str:
    return os.path.dirname(path)


class _Checker:
    """One case's check. Every path inside is an absolute, normalised ``str`` (pathlib is
    too slow for 10,000 cases); ``self.files`` / ``self.dir_files`` come from one walk,
    so existence checks inside the case cost no system call."""

    def __init__(
        self,
        ref: CaseRef,
        cache: dict[str, bytes] | None = None,
        *,
        path_map: PathMap | None = None,
        provenance: list[InputProvenance] | None = None,
    ) -> None:
        self.ref = ref
        # bytes of every small file read in this check, by absolute path: each file is
        # opened once (parse + hash), and summarize_case(cache=...) re-uses them
        self.cache: dict[str, bytes] = cache if cache is not None else {}
        self.root = os.path.normpath(os.path.abspath(ref.path))
        self.wrapper = os.path.normpath(os.path.abspath(ref.wrapper)) if ref.wrapper is not None else None
        self.problems: list[Problem] = []
        self._seen: set[tuple[str, str, str]] = set()
        allowed = [self.root] + ([self.wrapper] if self.wrapper is not None else [])
        self.allowed_lex = allowed
        self.allowed_real = []
        for a in allowed:
            try:
                self.allowed_real.append(os.path.realpath(a))
            except OSError:
                self.allowed_real.append(a)
        self.files: list[str] = []  # every regular file found by the walk
        self.fileset: set[str] = set()
        self.dir_files: dict[str, list[str]] = {}
        self.dir_dirs: dict[str, list[str]] = {}
        self.has_symlinks = False
        self.handled: set[str] = set()
        self._sha_cache: dict[str, str | None] = {}
        self._sha_checked: set[tuple[str, str]] = set()
        self._missing: set[str] = set()
        # the one path trust model (artifacts.paths): written paths stay in the case,
        # bound inputs are read wherever the rules find them
        self.paths = PathResolver(
            self.root, boundary=self.wrapper or self.root, path_map=path_map or PathMap(), lookup=self._lookup
        )
        self.provenance = provenance
        self._provenance_seen: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ helpers
    def add(self, code: ProblemCode, path: Any, message: str) -> None:
        key = (str(code), str(path), message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.problems.append(Problem(code=code, path=str(path), message=message))

    def extend(self, problems: list[Problem]) -> None:
        for p in problems:
            self.add(p.code, p.path, p.message)

    def rel(self, path: str) -> str:
        """Case-relative text for messages."""
        try:
            return os.path.relpath(path, self.root)
        except ValueError:
            return path

    @staticmethod
    def _inside(path: str, roots: list[str]) -> bool:
        for r in roots:
            if path == r or path.startswith(r.rstrip(os.sep) + os.sep):
                return True
        return False

    def in_case(self, path: str) -> bool:
        return path.startswith(self.root + os.sep) or path == self.root

    def is_file(self, path: str) -> bool:
        """A regular file (or a symlink to one, which the walk reported separately)."""
        if self.in_case(path) and not self.has_symlinks:
            return path in self.fileset
        return os.path.isfile(path)

    def exists(self, path: str) -> bool:
        if self.in_case(path) and not self.has_symlinks:
            return path in self.fileset or path in self.dir_files
        return os.path.lexists(path)

    def _lookup(self, path: str) -> str | None:
        """The walk's answer for a path inside the case (None outside it: stat it)."""
        if not self.in_case(path):
            return None
        if path in self.fileset:
            return "file"
        if path in self.dir_files:
            return "dir"
        return "absent"

    def resolve(self, recorded: Any, rel_base: str | None, *, cwd: bool = False) -> tuple[str, str | None]:
        """Map a path the run wrote into the case (``paths.PathResolver.written``).

        Returns (outcome, local path): ``ok`` (inside the case), ``outside`` (leaves
        the case through ``..`` or a symlink), ``unmapped`` (an absolute path not under
        any recorded base), ``invalid`` (not a path string).
        """
        if rel_base is None and not (isinstance(recorded, str) and recorded.startswith("/")) and not cwd:
            return ("invalid", None) if not isinstance(recorded, str) or not recorded else ("unmapped", None)
        found = self.paths.written(recorded, base=rel_base, cwd=cwd)
        return found.outcome, found.path

    def file_sha(self, path: str, *, memo: bool = True) -> str | None:
        """sha256 of a file's bytes (once per check). ``memo``: keep small files' bytes
        for a later parse; content-addressed blobs are hashed and never read again."""
        if path not in self._sha_cache:
            try:
                hit = self.cache.get(path)
                if hit is None and memo:
                    size = os.stat(path).st_size
                    if size <= MEMO_MAX:
                        hit, _ = _read_bytes(path, self.cache)
                self._sha_cache[path] = sha256_bytes(hit) if hit is not None else sha256_file(path)
            except OSError:
                self._sha_cache[path] = None
        return self._sha_cache[path]

    def check_reference(
        self,
        recorded: Any,
        expected_sha: Any,
        *,
        rel_base: str | None,
        referrer: str,
        what: str,
        in_case: bool,
        slice_: tuple[int, int] | None = None,
        key: str | None = None,
    ) -> str | None:
        """Check one recorded ``{path, sha256}`` reference; returns the local path when found.

        ``in_case``: the file must live in the case (episodes, snapshot files, media
        bindings) -> an unmapped absolute path is ``path_outside_root`` and a missing
        file is ``missing_artifact``. Otherwise (run input bindings) an unmapped path
        is skipped silently.
        """
        if not in_case:
            return self.check_input(recorded, expected_sha, referrer=referrer, what=what, slice_=slice_, key=key)
        outcome, local = self.resolve(recorded, rel_base)
        if outcome == "invalid":
            if recorded is not None:
                self.add(ProblemCode.JSON_INVALID, referrer, f"{what}: path {recorded!r} is not a path string")
            return None
        if outcome == "unmapped":
            if self.paths.knows_written_location:
                self.add(
                    ProblemCode.PATH_OUTSIDE_ROOT,
                    referrer,
                    f"{what}: path {recorded} is outside the case root (recorded base: {self.paths.written_roots[-1].old})",
                )
            return None
        if outcome == "outside":
            self.add(ProblemCode.PATH_OUTSIDE_ROOT, referrer, f"{what}: path {recorded} resolves outside the case root ({self.rel(local or '')})")
            return None
        assert local is not None
        if not self.is_file(local):
            if local in self.dir_files or os.path.isdir(local):
                self.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: expected a file referenced by {self.rel(referrer)}, found a directory")
            elif local not in self._missing:  # one report per missing file, first referrer named
                self._missing.add(local)
                self.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: file referenced by {self.rel(referrer)} is missing")
            return None
        if isinstance(expected_sha, str) and expected_sha:
            key = (local, expected_sha.lower() + (f"@{slice_}" if slice_ else ""))
            if key in self._sha_checked:
                return local
            self._sha_checked.add(key)
            actual = self._slice_sha(local, *slice_) if slice_ is not None else self.file_sha(local)
            if actual is None:
                self.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: cannot read the file")
            elif actual != expected_sha.lower():
                self.add(
                    ProblemCode.FILE_HASH_MISMATCH,
                    local,
                    f"{what}: {self.rel(referrer)} binds sha256 {_short(expected_sha)}, the file has {_short(actual)}",
                )
        return local

    @staticmethod
    def _slice_sha(path: str, offset: int, length: int) -> str | None:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                return sha256_bytes(fh.read(length))
        except (OSError, ValueError, OverflowError):
            return None

    def check_input(
        self,
        recorded: Any,
        expected_sha: Any,
        *,
        referrer: str,
        what: str,
        slice_: tuple[int, int] | None = None,
        key: str | None = None,
    ) -> str | None:
        """A bound input (``paths.PathResolver.bound_input``): read wherever it is found;
        the recorded sha256 is verified; a missing one is reported once, with where it
        was looked for."""
        if not isinstance(recorded, str) or not recorded:
            return None
        found = self.paths.bound_input(recorded, bases=[_parent(referrer)], want="file")
        sha = expected_sha.lower() if isinstance(expected_sha, str) and expected_sha else None
        status = "unbound"
        local = found.path if found.ok else None
        if found.outcome == "invalid":
            self.add(ProblemCode.JSON_INVALID, referrer, f"{what}: path {recorded!r} is not a usable path")
            status = "missing"
        elif local is None:
            status = "missing"
            if recorded not in self._missing:
                self._missing.add(recorded)
                looked = found.looked_at[0] if found.looked_at else recorded
                self.add(ProblemCode.MISSING_ARTIFACT, looked, missing_input_message(what, self.rel(referrer), found))
        elif sha is not None:
            ck = (local, sha + (f"@{slice_}" if slice_ else ""))
            actual = self._slice_sha(local, *slice_) if slice_ is not None else self.file_sha(local)
            if actual is None:
                status = "unreadable"
                self.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: cannot read the file")
            elif actual != sha:
                status = "mismatch"
                if ck not in self._sha_checked:
                    self.add(
                        ProblemCode.FILE_HASH_MISMATCH,
                        local,
                        f"{what}: {self.rel(referrer)} binds sha256 {_short(expected_sha)}, the file has {_short(actual)}",
                    )
            else:
                status = "verified"
            self._sha_checked.add(ck)
        if self.provenance is not None and key is not None and (key, recorded) not in self._provenance_seen:
            self._provenance_seen.add((key, recorded))
            self.provenance.append(
                input_provenance(key, self.rel(referrer), recorded, found, resolver=self.paths, sha256=sha, sha_status=status)
            )
        return local

    def json_file(self, path: str, *, required: str | None = None, obj: bool = True) -> Any:
        """Parse a JSON file; missing -> None (a problem only when ``required`` names it).

        ``obj``: the file must hold a JSON object (anything else is ``json_invalid``).
        """
        self.handled.add(path)
        if not self.exists(path):
            if required:
                self.add(ProblemCode.MISSING_ARTIFACT, path, f"{required} not found")
            return None
        value, problems = read_json(path, self.cache)
        self.extend(problems)
        if obj and not problems and not isinstance(value, dict):
            self.add(ProblemCode.JSON_INVALID, path, f"expected a JSON object, found a JSON {_json_kind(value)}")
            return None
        return value

    def bound_file(self, path: str, *, required: str | None = None) -> Any:
        """Read a bound envelope (plain or gzip); returns the BoundRead or None when missing."""
        self.handled.add(path)
        if not self.exists(path):
            if required:
                self.add(ProblemCode.MISSING_ARTIFACT, path, f"{required} not found")
            return None
        bound = self._read_bound_fast(path)
        if bound.archive:
            self.handled.add(_j(_parent(path), bound.archive))
        for p in bound.problems:
            message = p.message
            if p.code == ProblemCode.BOUND_HASH_MISMATCH and p.path == path:
                message = f"bound envelope: {message}"
            self.add(p.code, p.path, message)
        return bound

    def bound_files(self, d: str, name_re: re.Pattern[str]) -> Iterator[tuple[str, BoundRead]]:
        """The readable bound envelopes (plain or gzip form) in ``d`` whose names match ``name_re``."""
        for path in self.list_files(d):
            if not name_re.match(_base(path)):
                continue
            bound = self.bound_file(path)
            if bound is not None and bound.form in ("plain", "gzip"):
                yield path, bound

    def _read_bound_fast(self, path: str) -> BoundRead:
        """The plain form read without pathlib; anything else goes to ``jsonio.read_bound``."""
        data, problems = _read_bytes(path, self.cache)
        if data is None:
            return safe_read_bound(path)
        doc, problems = parse_json_bytes(data, path)
        if (
            problems
            or not isinstance(doc, dict)
            or doc.get("schema_version") == BOUND_GZIP_SCHEMA
            or not all(k in doc for k in ("identity", "payload", "payload_sha256"))
        ):
            return safe_read_bound(path)  # gzip pointer, or a broken envelope: the shared reader reports it
        result = BoundRead()
        result.form = "plain"
        result.identity = doc.get("identity")
        result.payload = doc.get("payload")
        result.payload_sha256 = doc.get("payload_sha256")
        if result.payload_sha256 is not None:
            # continuations and search-state carry token captures (float logprobs)
            floats = _base(path) == "search-state.json" or _base(_parent(path)) == "continuations"
            actual = canonical_sha256(result.payload, floats_likely=floats)
            if actual != result.payload_sha256:
                result.problems.append(
                    Problem(
                        code=ProblemCode.BOUND_HASH_MISMATCH,
                        path=path,
                        message=f"payload_sha256 {str(result.payload_sha256)[:12]}… does not match the payload ({actual[:12]}…)",
                    )
                )
        return result

    def ledger(self, path: str) -> list[dict[str, Any]]:
        self.handled.add(path)
        if not self.exists(path):
            return []
        try:
            if os.stat(path).st_size > MAX_LEDGER_BYTES:
                return []
        except OSError:
            return []
        rows, problems = read_jsonl(path, self.cache)
        self.extend(problems)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, dict)]
        if bad:
            self.add(
                ProblemCode.JSON_INVALID,
                path,
                f"{len(bad)} parsed row(s) are not JSON objects (first: parsed row {bad[0] + 1}, a JSON {_json_kind(rows[bad[0]])})",
            )
        return [r for r in rows if isinstance(r, dict)]

    def schema(self, value: Any, path: str, label: str, expected: frozenset[str] | set[str] | str | None) -> None:
        """``expected`` None: a file of no specific kind; only a known schema family at an
        unknown version (e.g. ``ifv-psd-media-v9``) is flagged."""
        if not isinstance(value, dict) or "schema_version" not in value:
            return
        found = value.get("schema_version")
        if expected is None:
            if not isinstance(found, str):
                return
            family = _schema_family(found)
            if found in KNOWN_SCHEMAS or family not in KNOWN_FAMILIES:
                return
            versions = sorted(k for k in KNOWN_SCHEMAS if _schema_family(k) == family)
            self.add(
                ProblemCode.SCHEMA_UNKNOWN, path,
                f"{label}: schema_version {found!r} is not a known version (known: {', '.join(versions)})",
            )
            return
        allowed = {expected} if isinstance(expected, str) else set(expected)
        if isinstance(found, str) and found in allowed:
            return
        want = " or ".join(sorted(allowed))
        self.add(ProblemCode.SCHEMA_UNKNOWN, path, f"{label}: schema_version {found!r} is not known (expected {want})")

    # ------------------------------------------------------------------ walk
    def walk(self) -> None:
        stack = [self.root]
        while stack:
            d = stack.pop()
            files: list[str] = []
            dirs: list[str] = []
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError as exc:
                if d == self.root:
                    self.add(ProblemCode.MISSING_ARTIFACT, d, f"cannot read the case directory: {exc.strerror or exc}")
                else:
                    self.add(ProblemCode.MISSING_ARTIFACT, d, f"cannot read directory: {exc.strerror or exc}")
                continue
            for e in entries:
                p = _j(d, e.name)
                try:
                    if e.is_symlink():
                        self.has_symlinks = True
                        self._check_symlink(p)
                        continue
                    if e.is_dir(follow_symlinks=False):
                        stack.append(p)
                        dirs.append(e.name)
                        continue
                except OSError:
                    continue
                if e.name.endswith(".tmp"):
                    self.add(
                        ProblemCode.LEFTOVER_TMP,
                        p,
                        f"leftover temporary file from an interrupted write (the final file would be {e.name[:-4]})",
                    )
                    self.handled.add(p)
                    continue
                files.append(e.name)
                self.files.append(p)
                self.fileset.add(p)
            files.sort()
            dirs.sort()
            self.dir_files[d] = files
            self.dir_dirs[d] = dirs

    def _check_symlink(self, p: str) -> None:
        try:
            target = os.path.realpath(p)
        except OSError:
            target = ""
        self.handled.add(p)
        if not target or not self._inside(target, self.allowed_real):
            try:
                link = os.readlink(p)
            except OSError:
                link = "?"
            self.add(ProblemCode.PATH_OUTSIDE_ROOT, p, f"symlink points outside the case root (-> {link})")
        elif not os.path.exists(p):
            self.add(ProblemCode.MISSING_ARTIFACT, p, "dangling symlink")

    def list_files(self, d: str) -> list[str]:
        if d in self.dir_files:
            return [_j(d, n) for n in self.dir_files[d]]
        if self.in_case(d):
            return []
        try:
            with os.scandir(d) as it:
                return sorted(_j(d, e.name) for e in it if e.is_file(follow_symlinks=False))
        except OSError:
            return []

    def list_dirs(self, d: str) -> list[str]:
        return [_j(d, n) for n in self.dir_dirs.get(d, [])]

    # ------------------------------------------------------------------ run
    def run(self) -> None:
        self.walk()
        self.paths.no_symlinks = not self.has_symlinks and self.wrapper is None
        layout = self.ref.layout
        if layout == Layout.SLATE:
            self.add(
                ProblemCode.UNSUPPORTED_LAYOUT,
                self.root,
                "slate search layout (slate-state.json / slate-rounds/) is recognised but not supported",
            )
            # slate files are not read; generic checks only below
            self.handled.update(f for f in self.files if _base(f).startswith("slate-state"))
        elif layout == Layout.FEEDBACK_SEARCH:
            self.check_search()
        elif layout == Layout.SINGLE_RUN:
            self.check_run(self.root)
        else:
            self.add(
                ProblemCode.MISSING_ARTIFACT,
                self.root,
                "not a recognisable run directory (no manifest.json, run-inputs.json or search-state.json)",
            )
        if self.wrapper is not None and self.ref.key:
            self.check_case_inputs()
        self.generic()

    def add_written_root(self, recorded_search_root: str | None, local: str) -> None:
        """Tell the resolver where the driver wrote ``local`` (and, for a wrapper case
        ``<out>/repairs/<key>``, where it wrote ``<out>``)."""
        if not recorded_search_root:
            return
        self.paths.add_written(recorded_search_root, local)
        if self.wrapper is None or not self.ref.key or local != self.root:
            return
        rec = recorded_search_root.rstrip("/")
        suffix = f"/repairs/{self.ref.key}"
        if rec.endswith(suffix):
            self.paths.add_written(rec[: -len(suffix)], self.wrapper)

    def check_case_inputs(self) -> None:
        """The wrapper's ``case-inputs/<key>/`` files parse, and the ``{path, sha256}``
        bindings its ``inputs.json`` records for this case (candidate, gold, public) still
        hold (bound inputs, ``artifacts.paths``)."""
        assert self.wrapper is not None and self.ref.key
        for path in self.list_files(_j(self.wrapper, "case-inputs", self.ref.key)):
            if path.endswith(".json"):
                self.json_file(path, obj=False)
        inputs_path = _j(self.wrapper, "inputs.json")
        if not os.path.isfile(inputs_path):
            return
        bound = safe_read_bound(inputs_path)  # its own problems are reported once, for the wrapper
        identity = _dict(bound.identity)
        if isinstance(identity.get("output_dir"), str):
            self.paths.add_written(identity["output_dir"], self.wrapper)
        for row in _list(_dict(bound.payload).get("cases")):
            row = _dict(row)
            if row.get("key") != self.ref.key:
                continue
            for name in ("candidate", "gold", "public"):
                binding = _dict(row.get(name))
                if isinstance(binding.get("path"), str):
                    self.check_input(binding["path"], binding.get("sha256"), referrer=inputs_path,
                                     what=f"wrapper case input {name}", key=f"case_inputs.{name}")

    # ------------------------------------------------------------------ search root
    def check_search(self) -> None:
        root = self.root
        state_path = _j(root, "search-state.json")
        manifest = self.json_file(_j(root, "manifest.json"), required="search manifest.json")
        self.schema(manifest, _j(root, "manifest.json"), "search manifest", SEARCH_SCHEMA)
        state = self.bound_file(state_path, required="search-state.json")
        identity = _dict(state.identity) if state is not None else {}
        payload = _dict(state.payload) if state is not None else {}
        if identity and "version" in identity and identity.get("version") != SEARCH_SCHEMA:
            self.add(
                ProblemCode.SCHEMA_UNKNOWN,
                state_path,
                f"search-state identity version {identity.get('version')!r} is not known (expected {SEARCH_SCHEMA})",
            )
        inputs = _dict(identity.get("inputs"))
        rec_root = inputs.get("output_dir") if isinstance(inputs.get("output_dir"), str) else None
        if rec_root is None:
            dirs = _list(_dict(manifest).get("rounds")) + [r.get("directory") for r in _list(payload.get("rounds")) if isinstance(r, dict)]
            for d in dirs:
                if isinstance(d, str) and d.startswith("/"):
                    parent = posixpath.dirname(d.rstrip("/"))
                    if posixpath.basename(parent) == "rounds":
                        rec_root = posixpath.dirname(parent)
                        break
        self.add_written_root(rec_root, root)
        for row in _list(payload.get("rounds")):
            directory = _dict(row).get("directory")
            if isinstance(directory, str) and ROUND_DIR_RE.match(posixpath.basename(directory.rstrip("/"))):
                self.paths.add_written(directory, _j(root, "rounds", posixpath.basename(directory.rstrip("/"))))

        # search inputs bindings: read wherever they are, sha256 verified
        for key, value in sorted(inputs.items()):
            if key == "output_dir" or not isinstance(value, dict):
                continue
            if isinstance(value.get("path"), str) and "sha256" in value:
                self.check_reference(
                    value.get("path"), value.get("sha256"), rel_base=None,
                    referrer=state_path, what=f"{INPUT_WHAT.get(key, key)} (search input {key})", in_case=False, key=key,
                )

        # manifest round directories
        for d in _list(_dict(manifest).get("rounds")):
            if isinstance(d, str):
                outcome, local = self.resolve(d, root)
                if outcome == "ok" and local is not None and not (local in self.dir_files or os.path.isdir(local)):
                    self.add(ProblemCode.MISSING_ARTIFACT, local, "round directory listed in the search manifest is missing")
                elif outcome == "outside":
                    self.add(ProblemCode.PATH_OUTSIDE_ROOT, _j(root, "manifest.json"), f"round directory {d} resolves outside the case root")

        # snapshot rows
        for index, row in enumerate(_list(payload.get("rounds"))):
            if not isinstance(row, dict):
                continue
            for fpath, sha in sorted(_dict(row.get("files")).items()):
                self.check_reference(
                    fpath, sha, rel_base=None, referrer=state_path,
                    what=f"search-state round {index} snapshot file", in_case=True,
                )
            for rec in _list(row.get("records")):
                cont = _dict(_dict(rec).get("continuation"))
                if cont.get("hinted_teacher_episode_trace") is not None:
                    self.check_reference(
                        cont.get("hinted_teacher_episode_trace"), cont.get("hinted_teacher_episode_trace_sha256"),
                        rel_base=None, referrer=state_path,
                        what=f"search-state round {index} teacher episode", in_case=True,
                    )

        # requests/round-NN.json
        search_sha = canonical_sha256(identity) if identity else None
        for path, bound in self.bound_files(_j(root, "requests"), REQUEST_RE):
            rid = _dict(bound.identity)
            if search_sha and isinstance(rid.get("search"), str) and rid.get("search") != search_sha:
                self.add(
                    ProblemCode.BOUND_HASH_MISMATCH,
                    path,
                    f"request identity.search {_short(rid.get('search'))} differs from the search-state identity ({_short(search_sha)})",
                )

        # round-inputs/round-NN/{public,media}.json
        for rdir in self.list_dirs(_j(root, "round-inputs")):
            self.json_file(_j(rdir, "public.json"))
            media_path = _j(rdir, "media.json")
            media = self.json_file(media_path)
            for j, ep in enumerate(_list(_dict(media).get("episodes"))):
                ep = _dict(ep)
                self.check_reference(
                    ep.get("path"), ep.get("sha256"), rel_base=root, referrer=media_path,
                    what=f"round-inputs {_base(rdir)} media episode {j}", in_case=True,
                )

        # root ledgers: parse, schemas, episode hashes (the per-round checks do the rest)
        attempts_path = _j(root, "repair_attempts.jsonl")
        for i, row in enumerate(self.ledger(attempts_path)):
            self.schema(row, attempts_path, f"attempt row {i + 1}", SCHEMA_ATTEMPT)
            cont = _dict(row.get("continuation"))
            if cont.get("hinted_teacher_episode_trace") is not None:
                self.check_reference(
                    cont.get("hinted_teacher_episode_trace"), cont.get("hinted_teacher_episode_trace_sha256"),
                    rel_base=None, referrer=attempts_path, what=f"attempt row {i + 1} teacher episode",
                    in_case=True,
                )
        cand_path = _j(root, "repair_candidates.jsonl")
        for i, row in enumerate(self.ledger(cand_path)):
            self.schema(row, cand_path, f"candidate row {i + 1}", SCHEMA_CANDIDATE)

        # every round directory is a run directory of this case
        for rdir in self.list_dirs(_j(root, "rounds")):
            if ROUND_DIR_RE.match(_base(rdir)):
                self.check_run(rdir, is_round=True)

    # ------------------------------------------------------------------ run directory
    def check_run(self, run: str, *, is_round: bool = False) -> None:
        label = f"round {_base(run)}" if is_round else "run"
        if is_round and not self.dir_files.get(run) and not self.dir_dirs.get(run):
            self.add(
                ProblemCode.MISSING_ARTIFACT,
                _j(run, "run-inputs.json"),
                f"round directory {_base(run)} is empty (a crash between mkdir and the first write?): "
                "without run-inputs.json every resume of this search fails",
            )
            return
        manifest_path = _j(run, "manifest.json")
        manifest = self.json_file(manifest_path, required=f"{label} manifest.json")
        self.schema(manifest, manifest_path, f"{label} manifest", RUN_SCHEMA)
        inputs_path = _j(run, "run-inputs.json")
        inputs = self.bound_file(inputs_path, required=f"{label} run-inputs.json (a run directory without it cannot be resumed)")
        config = inputs.identity if inputs is not None and inputs.form in ("plain", "gzip") else None
        identity = _dict(config)
        rec_out = identity.get("output_dir") if isinstance(identity.get("output_dir"), str) else None
        if rec_out and rec_out.startswith("/"):
            if is_round:
                self.paths.add_written(rec_out, run)
                parent = posixpath.dirname(rec_out.rstrip("/"))
                if posixpath.basename(parent) == "rounds":
                    self.paths.add_written(posixpath.dirname(parent), self.root)
            else:
                self.add_written_root(rec_out, run)
        attempts_path = _j(run, "repair_attempts.jsonl")
        attempts = self.ledger(attempts_path)
        if not self.paths.knows_written_location:
            # a relative --output-dir: the absolute psd_media image paths still say where
            # the run was written (only then: they are no better evidence than output_dir)
            for row in attempts:
                for d in run_dirs_from_media(_dict(row.get("psd_media")).get("image_paths")):
                    self.paths.add_written(d, run)

        # {path, sha256} input bindings of the run config
        if identity:
            indexed = identity.get("candidate_offset") is not None
            for key in FILE_ARGS:
                value = identity.get(key)
                if not isinstance(value, dict) or not isinstance(value.get("path"), str):
                    continue
                if key == "trace" and indexed:
                    continue  # the frozen source_trace_sha256 of the candidate, not a file hash
                slice_ = None
                off, length = value.get("offset"), value.get("length")
                if type(off) is int and type(length) is int and off >= 0 and length >= 0:
                    slice_ = (off, length)
                self.check_reference(
                    value.get("path"), value.get("sha256"), rel_base=None,
                    referrer=inputs_path, what=f"{INPUT_WHAT.get(key, key)} (run input {key})", in_case=False, slice_=slice_,
                    key=key,
                )

        # proposer files
        proposals_path = _j(run, "hint-proposals.json")
        proposals = self.bound_file(proposals_path)
        if proposals is not None:
            for i, prop in enumerate(_list(proposals.payload)):
                audit = _dict(_dict(prop).get("audit"))
                self.schema(audit, proposals_path, f"proposal {i} audit", SCHEMA_HINT_AUDIT)
        self.bound_file(_j(run, "proposer-response.json"))
        self.json_file(_j(run, "proposer-hint-audits.json"))
        semloc_path = _j(run, "semantic-localization.json")
        self.schema(self.json_file(semloc_path), semloc_path, "semantic localization", SCHEMA_SEMANTIC_LOCALIZATION)
        for name in ("live-serving-check.json", "generation-last-error.json"):
            self.json_file(_j(run, name))

        # candidates
        cand_path = _j(run, "repair_candidates.jsonl")
        candidates = self.ledger(cand_path)
        for i, row in enumerate(candidates):
            self.schema(row, cand_path, f"candidate row {i + 1}", SCHEMA_CANDIDATE)
            site = _dict(row.get("repair_site"))
            if "rollout_token_capture" in site:
                self.capture(site.get("rollout_token_capture"), cand_path, f"candidate row {i + 1} repair_site source step")

        # continuations
        run_sha = canonical_sha256(config) if config is not None else None
        site_kind = _site_kind(candidates)
        for path, bound in self.bound_files(_j(run, "continuations"), HINT_FILE_RE):
            self.check_continuation(path, bound, run_sha, site_kind)

        # attempts
        for i, row in enumerate(attempts):
            self.check_attempt(row, i, attempts_path, run)
        self.ledger(_j(run, "repair_attempts.pre-finalize.jsonl"))

        # source trace failure step (only when the trace is reachable and small)
        self.check_source_step(identity, candidates, attempts)

        # judge artifacts
        bundle_path = _j(run, "gemini-verification-bundle.json")
        bundle = self.json_file(bundle_path)
        self.schema(bundle, bundle_path, "verification bundle", SCHEMA_VERIFICATION_BUNDLE)
        for j, att in enumerate(_list(_dict(bundle).get("attempts"))):
            lv = _dict(att).get("local_verification")
            if isinstance(lv, str):
                self.check_reference(
                    lv, None, rel_base=run, referrer=bundle_path,
                    what=f"verification bundle attempt {j} judge file", in_case=True,
                )
        judged: dict[str, dict[str, Any]] = {}
        for path in self.list_files(_j(run, "judge")):
            if path.endswith(".json"):
                value = self.json_file(path)
                self.schema(value, path, "local verification", SCHEMA_LOCAL_VERIFICATION)
                if isinstance(value, dict):
                    judged[path] = value
        if judged:
            self.check_judge_bindings(run, attempts, judged)
        for name in ("finalization.json", "judge-summary.json"):
            path = _j(run, name)
            self.schema(self.json_file(path), path, name.removesuffix(".json"), SCHEMA_FINALIZATION)
        for path in self.list_files(_j(run, "judge-cache")):
            if path.endswith(".json"):
                self.check_judge_cache(path)

    def check_judge_bindings(self, run: str, attempts: list[dict[str, Any]], judged: dict[str, dict[str, Any]]) -> None:
        """``judge/hint-NN.json`` binds its attempt: hint, teacher token ids, source trace, step."""
        for i, row in enumerate(attempts):
            episode = _dict(row.get("continuation")).get("hinted_teacher_episode_trace")
            m = EPISODE_RE.match(posixpath.basename(episode)) if isinstance(episode, str) else None
            if m is None:
                continue
            path = _j(run, "judge", f"hint-{m.group(1)}.json")
            judge = judged.get(path)
            if judge is None:
                continue
            text = _dict(row.get("hint_record")).get("text")
            expected: list[tuple[str, Any, str]] = []
            if isinstance(text, str):
                expected.append(("hint_sha256", hint_sha256(text), "the attempt's hint text"))
            for key, field in (("teacher_prompt_sha256", "teacher_prompt_ids"), ("teacher_completion_sha256", "completion_ids")):
                ids = row.get(field)
                if isinstance(ids, list):
                    expected.append((key, canonical_sha256(ids), f"the attempt's {field}"))
            for key in ("source_trace_sha256", "repair_step_id"):
                if isinstance(row.get(key), str):
                    expected.append((key, row.get(key), f"the attempt's {key}"))
            for key, want, what in expected:
                found = judge.get(key)
                if isinstance(found, str) and found != want:
                    self.add(
                        ProblemCode.BOUND_HASH_MISMATCH,
                        path,
                        f"{key} {_short(found)} does not match {what} (attempt row {i + 1}: {_short(want)}); "
                        "the verdict was given for a different attempt",
                    )

    def check_continuation(self, path: str, bound: Any, run_sha: str | None, site_kind: str | None) -> None:
        ident = _dict(bound.identity)
        payload = _dict(bound.payload)
        if run_sha and isinstance(ident.get("run"), str) and ident.get("run") != run_sha:
            self.add(
                ProblemCode.BOUND_HASH_MISMATCH,
                path,
                f"continuation identity.run {_short(ident.get('run'))} differs from the run config hash {_short(run_sha)}",
            )
        hint = payload.get("hint")
        if isinstance(hint, str) and isinstance(ident.get("hint"), str) and ident.get("hint") != hint_sha256(hint):
            self.add(
                ProblemCode.BOUND_HASH_MISMATCH,
                path,
                f"continuation identity.hint {_short(ident.get('hint'))} differs from the sha of its hint text {_short(hint_sha256(hint))}",
            )
        steps = [s for s in _list(payload.get("teacher_steps")) if isinstance(s, dict)]
        if not steps:
            return
        # the teacher action: psd_teacher_repair + tool_call for a ReAct site,
        # psd_teacher_judgment + output for a judgment site (§2.5 token fields)
        kinds = [((s.get("stage_name") or s.get("stage")), s.get("action_type")) for s in steps]
        if site_kind == "judgment":
            wanted = TEACHER_ACTION_JUDGMENT
        elif site_kind == "react" or TEACHER_ACTION_REACT in kinds:
            wanted = TEACHER_ACTION_REACT
        else:
            wanted = TEACHER_ACTION_JUDGMENT
        actions = [s for s, k in zip(steps, kinds) if k == wanted]
        stage, action = wanted
        if not actions:
            self.add(
                ProblemCode.TOKEN_CAPTURE_INCOMPLETE,
                path,
                f"no teacher step {stage}/{action} holds the teacher action's token capture ({len(steps)} teacher step(s))",
            )
            return
        captures = [_dict(s.get("metadata")).get("policy_token_capture") for s in actions]
        if any(_capture_complete(c) for c in captures):
            return
        self.add(
            ProblemCode.TOKEN_CAPTURE_INCOMPLETE,
            path,
            f"teacher action ({stage}/{action}) has no complete policy_token_capture: {_capture_detail(captures[0])}",
        )

    def capture(self, cap: Any, path: str, label: str) -> None:
        if isinstance(cap, dict):
            self.schema(cap, path, f"{label} token capture", SCHEMA_TOKEN_CAPTURE)
        if _capture_complete(cap):
            return
        self.add(ProblemCode.TOKEN_CAPTURE_INCOMPLETE, path, f"{label}: token capture {_capture_detail(cap)}")

    def check_attempt(self, row: dict[str, Any], i: int, path: str, run: str) -> None:
        label = f"attempt row {i + 1}"
        self.schema(row, path, label, SCHEMA_ATTEMPT)
        audit = _dict(_dict(row.get("hint_record")).get("audit"))
        self.schema(audit, path, f"{label} hint audit", SCHEMA_HINT_AUDIT)
        # teacher token capture
        self.capture(row.get("repair_rollout_token_capture"), path, f"{label} repair_rollout_token_capture")
        # episode + continuation
        cont = _dict(row.get("continuation"))
        episode = cont.get("hinted_teacher_episode_trace")
        if episode is not None:
            self.check_reference(
                episode, cont.get("hinted_teacher_episode_trace_sha256"), rel_base=run,
                referrer=path, what=f"{label} teacher episode", in_case=True,
            )
            name = posixpath.basename(episode) if isinstance(episode, str) else ""
            m = EPISODE_RE.match(name)
            if m:
                expected = _j(run, "continuations", f"hint-{m.group(1)}.json")
                if not self.exists(expected):
                    self.add(ProblemCode.MISSING_ARTIFACT, expected, f"continuation for {label} (hint-{m.group(1)}) is missing")
        # media
        self.check_media(row, i, path, run)

    def check_media(self, row: dict[str, Any], i: int, path: str, run: str) -> None:
        label = f"attempt row {i + 1}"
        student = _int_list(row.get("student_prompt_ids"))
        teacher = _int_list(row.get("teacher_prompt_ids"))
        media_obj = row.get("psd_media")
        pad = pad_id_for_ids(student, teacher)
        if media_obj is None:
            # psd_media is optional (§7.11; older runtimes did not write it): image-pad runs
            # without it are information (the token view says "media binding not recorded"),
            # not a media_mismatch
            return
        try:
            parsed, problems = media_mod.parse_psd_media(media_obj, path=path)
            for p in problems:
                self.add(p.code, p.path, f"{label}: {p.message}")
            if parsed is None:
                return
            report = media_mod.verify_media(
                parsed, run, student_prompt_ids=student, teacher_prompt_ids=teacher,
                pad_id=pad, record_path=path, read_dimensions=False,
            )
            for p in report.problems:
                message = p.message if p.path != path else f"{label}: {p.message}"
                self.add(p.code, p.path, message)
            for img in report.images:
                if img.resolved_path:
                    self.handled.add(os.path.normpath(os.path.abspath(img.resolved_path)))
        except ImportError:  # pragma: no cover - media.py is part of the package
            self._check_media_local(media_obj, student, teacher, pad, label, path, run)

    def _check_media_local(self, media_obj: Any, student: list[int] | None, teacher: list[int] | None,
                           pad: int, label: str, path: str, run: str) -> None:
        media = _dict(media_obj)
        schema = media.get("schema_version")
        if schema not in MEDIA_SCHEMAS:
            self.add(ProblemCode.SCHEMA_UNKNOWN, path, f"{label}: psd_media schema_version {schema!r} is not known")
            return
        shas = media.get("image_sha256") if schema == "ifv-psd-media-v3" else media.get("sha256")
        shas = shas if isinstance(shas, list) else ([shas] if isinstance(shas, str) else [])
        for sha in shas:
            f = _j(run, "media", f"{sha}.image")
            self.handled.add(f)
            if not self.is_file(f):
                self.add(ProblemCode.MISSING_ARTIFACT, f, f"{label}: psd_media image is missing")
            elif self.file_sha(f) != str(sha).lower():
                self.add(ProblemCode.MEDIA_MISMATCH, f, f"{label}: image bytes do not hash to {_short(sha)}")
        for role, ids in (("student", student), ("teacher", teacher)):
            if ids is not None and pad_runs(ids, pad) != len(shas):
                self.add(
                    ProblemCode.MEDIA_MISMATCH,
                    path,
                    f"{label}: {role} prompt has {pad_runs(ids, pad)} image-pad run(s) of {pad} but psd_media lists {len(shas)} image(s)",
                )

    def check_source_step(self, identity: dict[str, Any],
                          candidates: list[dict[str, Any]], attempts: list[dict[str, Any]]) -> None:
        binding = _dict(identity.get("trace"))
        if not isinstance(binding.get("path"), str):
            return
        found = self.paths.bound_input(binding.get("path"), want="file")
        local = found.path if found.ok else None
        if local is None:
            return
        try:
            if os.stat(local).st_size >= MAX_PARSE_BYTES:
                return
        except OSError:
            return
        index = None
        for row in list(reversed(attempts)) + list(reversed(candidates)):
            value = _dict(row.get("repair_site")).get("source_step_index")
            if type(value) is int:
                index = value
                break
        if index is None:
            return
        self.handled.add(local)
        trace, problems = read_json(local, self.cache)
        self.extend(problems)
        steps = _list(_dict(_dict(trace).get("state")).get("all_steps"))
        if not 0 <= index < len(steps):
            self.add(
                ProblemCode.MISSING_ARTIFACT,
                local,
                f"source trace has {len(steps)} steps; the failure site source_step_index {index} is not among them",
            )
            return
        meta = _dict(_dict(steps[index]).get("metadata"))
        self.capture(meta.get("policy_token_capture"), local, f"source trace failure step {index} policy_token_capture")

    def check_judge_cache(self, path: str) -> None:
        value = self.json_file(path)
        if not isinstance(value, dict):
            return
        recorded = value.get("response_sha256")
        if isinstance(recorded, str) and "response" in value:
            actual = canonical_sha256(value.get("response"))
            if actual != recorded:
                self.add(
                    ProblemCode.BOUND_HASH_MISMATCH,
                    path,
                    f"judge-cache response_sha256 {_short(recorded)} does not match the cached response ({_short(actual)})",
                )
        stem = _base(path)[: -len(".json")]
        if HEX64.match(stem) and "identity" in value:
            actual = canonical_sha256(value.get("identity"))
            if actual != stem:
                self.add(
                    ProblemCode.BOUND_HASH_MISMATCH,
                    path,
                    f"judge-cache file name {_short(stem)} is not the hash of its identity ({_short(actual)})",
                )

    # ------------------------------------------------------------------ generic file checks
    def generic(self) -> None:
        runtime_prefix = _j(self.root, "runtime") + os.sep
        rounds_prefix = _j(self.root, "rounds") + os.sep
        for f in self.files:
            if f in self.handled:
                continue
            parts = f.rsplit(os.sep, 4)
            name = parts[-1]
            parent = parts[-2] if len(parts) >= 2 else ""
            in_runtime = f.startswith(runtime_prefix) or (f.startswith(rounds_prefix) and f"{os.sep}runtime{os.sep}" in f[len(rounds_prefix):])
            try:
                if name.endswith(".image") and parent == "media":
                    self._content_addressed(f, name[: -len(".image")], ProblemCode.MEDIA_MISMATCH, "media file")
                elif len(parts) >= 5 and parts[-3] == "sha256" and parts[-4] == "artifacts":
                    self._runtime_blob(f, name)
                elif name == "events.jsonl":
                    self._events(f)
                elif name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
                    self.ledger(f)
                elif name.endswith(".json"):
                    self._generic_json(f, name, parent, in_runtime=in_runtime)
            except OSError as exc:
                self.add(ProblemCode.MISSING_ARTIFACT, f, f"cannot read: {exc.strerror or exc}")

    def _content_addressed(self, p: str, stem: str, code: ProblemCode, what: str) -> None:
        if not HEX64.match(stem.lower()):
            return
        actual = self.file_sha(p, memo=False)
        if actual is not None and actual != stem.lower():
            self.add(code, p, f"{what} named by sha256 {_short(stem)} holds bytes hashing to {_short(actual)}")

    def _runtime_blob(self, p: str, name: str) -> None:
        if name.endswith(".meta.json"):
            self._generic_json(p, name, "", in_runtime=True)
            return
        self._content_addressed(p, name.split(".", 1)[0], ProblemCode.FILE_HASH_MISMATCH, "runtime archive artifact")

    def _events(self, p: str) -> None:
        if os.stat(p).st_size > MAX_LEDGER_BYTES:
            return
        with open(p, "rb") as fh:
            data = fh.read()
        rows, problems, torn_tail = parse_jsonl_bytes(data, p)
        if torn_tail and problems:
            problems = problems[:-1]  # a torn last line of an append-only events log is normal
        self.extend(problems)
        for i, row in enumerate(rows):
            if isinstance(row, dict) and "schema_version" in row and row.get("schema_version") != SCHEMA_RUNTIME_EVENTS:
                self.schema(row, p, f"event line {i + 1}", SCHEMA_RUNTIME_EVENTS)
                break

    def _generic_json(self, p: str, name: str, parent: str, *, in_runtime: bool) -> None:
        if os.stat(p).st_size >= MAX_PARSE_BYTES:
            return
        value, problems = read_json(p, None if in_runtime else self.cache)
        self.extend(problems)
        if parent == "context" and CONTEXT_RE.match(name):
            self.schema(value, p, "context request manifest", SCHEMA_CONTEXT_LEDGER)
        elif not in_runtime:
            self.schema(value, p, name, None)


def _site_kind(candidates: list[dict[str, Any]]) -> str | None:
    """``react`` / ``judgment`` from the bound candidate's repair site, else None."""
    for row in reversed(candidates):
        site = _dict(row.get("repair_site"))
        kind = site.get("example_type")
        if kind in ("react", "judgment"):
            return kind
        stage = site.get("stage")
        if stage == "unified_judgment":
            return "judgment"
        if stage == "unified_react":
            return "react"
    return None


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _capture_complete(cap: Any) -> bool:
    if not isinstance(cap, dict) or cap.get("status") != "complete":
        return False
    if _list(cap.get("missing")):
        return False
    return isinstance(cap.get("prompt_token_ids"), list) and isinstance(cap.get("completion_token_ids"), list)


def _capture_detail(cap: Any) -> str:
    if cap is None:
        return "is absent"
    if not isinstance(cap, dict):
        return f"is a {type(cap).__name__}, expected an object"
    status = cap.get("status")
    missing = [str(m) for m in _list(cap.get("missing"))]
    lacking = [k for k in ("prompt_token_ids", "completion_token_ids") if not isinstance(cap.get(k), list)]
    parts = [f"status {status!r}"]
    if missing:
        parts.append(f"missing {missing}")
    if lacking:
        parts.append(f"no {', '.join(lacking)}")
    return ", ".join(parts) + " (expected status 'complete' with prompt and completion ids)"


__all__ = ["KNOWN_SCHEMAS", "check_case", "pad_id_for_ids", "pad_runs"]
