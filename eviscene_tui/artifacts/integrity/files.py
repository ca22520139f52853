"""Reading one case's files for the checks: JSON files, bound envelopes, JSONL ledgers,
``schema_version`` strings and file hashes, each problem reported once.

Every file read is marked ``handled`` (the generic pass skips it); small files' bytes are
kept in the shared ``cache`` so each file is opened once per check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from eviscene_tui.artifacts.integrity.reading import (
    KNOWN_FAMILIES,
    MEMO_MAX,
    base,
    join,
    json_kind,
    parent,
    read_bytes,
    read_json,
    read_jsonl,
    safe_read_bound,
    schema_family,
)
from eviscene_tui.artifacts.fileio import ReadRefused, read_regular_if_small
from eviscene_tui.artifacts.integrity.tree import CaseTree, Findings
from eviscene_tui.artifacts.jsonio import (
    BOUND_GZIP_SCHEMA,
    BoundRead,
    Parsed,
    canonical_sha256,
    parse_json_bytes,
    sha256_bytes,
    sha256_file,
)
from eviscene_tui.artifacts.schemas import KNOWN_SCHEMAS
from eviscene_tui.artifacts.problems import Problem, ProblemCode

#: what a ``schema_version`` may be: one string, a set of them, or None (any known family at a known version)
Expected = frozenset[str] | set[str] | str | None


class CaseFiles:
    def __init__(self, tree: CaseTree, findings: Findings, cache: dict[str, bytes], parsed: Parsed | None = None) -> None:
        self.tree = tree
        self.findings = findings
        # bytes of every small file read in this check, by absolute path: each file is
        # opened once (parse + hash), and summarize_case(cache=...) re-uses them
        self.cache = cache
        # what was parsed of those bytes (JSON files, plain JSONL ledgers), for the summary
        self.parsed = parsed
        self._sha_cache: dict[str, str | None] = {}

    def readable(self, path: str) -> bool:
        """False for a path that is never opened (``CaseTree.may_read``: the walk already
        reported why); callers then say nothing more about it."""
        return self.tree.may_read(path)

    def file_sha(self, path: str, *, memo: bool = True) -> str | None:
        """sha256 of a file's bytes (once per check); None when it cannot be read (a
        refusal of ``fileio`` - not a regular file, too large - is reported here).
        ``memo``: keep small files' bytes for a later parse; content-addressed blobs are
        hashed and never read again."""
        if path not in self._sha_cache:
            if not self.readable(path):
                self._sha_cache[path] = None
                return None
            try:
                hit = self.cache.get(path)
                if hit is None and memo:
                    hit = read_regular_if_small(path, MEMO_MAX, walked=path in self.tree.fileset)
                    if hit is not None:
                        self.cache[path] = hit
                self._sha_cache[path] = sha256_bytes(hit) if hit is not None else sha256_file(path)
            except ReadRefused as exc:
                self.findings.extend([exc.problem()])
                self._sha_cache[path] = None
            except OSError:
                self._sha_cache[path] = None
        return self._sha_cache[path]

    def json_file(self, path: str, *, required: str | None = None, obj: bool = True) -> object:
        """Parse a JSON file; missing -> None (a problem only when ``required`` names it).

        ``obj``: the file must hold a JSON object (anything else is ``json_invalid``).
        """
        self.tree.handled.add(path)
        if not self.tree.exists(path):
            if required:
                self.findings.add(ProblemCode.MISSING_ARTIFACT, path, f"{required} not found")
            return None
        if not self.readable(path):
            return None
        value, problems = read_json(path, self.cache, path in self.tree.fileset)
        self._keep(path, value, problems)
        self.findings.extend(problems)
        if obj and not problems and not isinstance(value, dict):
            self.findings.add(ProblemCode.JSON_INVALID, path, f"expected a JSON object, found a JSON {json_kind(value)}")
            return None
        return value

    def _keep(self, path: str, value: object, problems: list[Problem]) -> None:
        """Leave what was parsed of the cached bytes of ``path`` in ``parsed``."""
        if self.parsed is not None:
            data = self.cache.get(path)
            if data is not None:
                self.parsed[path] = (data, value, problems)

    def bound_file(self, path: str, *, required: str | None = None) -> BoundRead | None:
        """Read a bound envelope (plain or gzip); returns the BoundRead or None when missing."""
        self.tree.handled.add(path)
        if not self.tree.exists(path):
            if required:
                self.findings.add(ProblemCode.MISSING_ARTIFACT, path, f"{required} not found")
            return None
        if not self.readable(path):
            return None
        bound = self._read_bound_fast(path)
        if bound.archive:
            self.tree.handled.add(join(parent(path), bound.archive))
        for p in bound.problems:
            message = p.message
            if p.code == ProblemCode.BOUND_HASH_MISMATCH and p.path == path:
                message = f"bound envelope: {message}"
            self.findings.add(p.code, p.path, message)
        return bound

    def bound_files(self, d: str, name_re: re.Pattern[str]) -> Iterator[tuple[str, BoundRead]]:
        """The readable bound envelopes (plain or gzip form) in ``d`` whose names match ``name_re``."""
        for path in self.tree.list_files(d):
            if not name_re.match(base(path)):
                continue
            bound = self.bound_file(path)
            if bound is not None and bound.form in ("plain", "gzip"):
                yield path, bound

    def _read_bound_fast(self, path: str) -> BoundRead:
        """The plain form read without pathlib; anything else goes to ``jsonio.read_bound``."""
        data, problems = read_bytes(path, self.cache, path in self.tree.fileset)
        if data is None:
            result = BoundRead()
            result.form = "missing" if problems and problems[0].code == ProblemCode.MISSING_ARTIFACT else "invalid"
            result.problems = problems
            return result
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
            # the payload is what orjson parsed: its canonical bytes are orjson's unless a float
            # is written otherwise (jsonio.canonical_json_bytes); no walk of it
            actual = canonical_sha256(result.payload, parsed=True)
            if actual != result.payload_sha256:
                result.problems.append(
                    Problem(
                        code=ProblemCode.BOUND_HASH_MISMATCH,
                        path=path,
                        message=f"payload_sha256 {str(result.payload_sha256)[:12]}… does not match the payload ({actual[:12]}…)",
                    )
                )
        return result

    def ledger(self, path: str) -> list[dict[str, object]]:
        """The JSON-object rows of a JSONL ledger (torn lines and non-object rows reported)."""
        self.tree.handled.add(path)
        if not self.tree.exists(path) or not self.readable(path):
            return []
        rows, problems = read_jsonl(path, self.cache, path in self.tree.fileset)
        if not path.endswith(".gz"):
            self._keep(path, rows, problems)
        self.findings.extend(problems)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, dict)]
        if bad:
            self.findings.add(
                ProblemCode.JSON_INVALID,
                path,
                f"{len(bad)} parsed row(s) are not JSON objects (first: parsed row {bad[0] + 1}, a JSON {json_kind(rows[bad[0]])})",
            )
        return [r for r in rows if isinstance(r, dict)]

    def schema(self, value: object, path: str, label: str, expected: Expected) -> None:
        """``expected`` None: a file of no specific kind; only a known schema family at an
        unknown version (e.g. ``ifv-psd-media-v9``) is flagged."""
        if not isinstance(value, dict) or "schema_version" not in value:
            return
        found = value.get("schema_version")
        if expected is None:
            self._known_family_version(found, path, label)
            return
        allowed = {expected} if isinstance(expected, str) else set(expected)
        if isinstance(found, str) and found in allowed:
            return
        want = " or ".join(sorted(allowed))
        self.findings.add(ProblemCode.SCHEMA_UNKNOWN, path, f"{label}: schema_version {found!r} is not known (expected {want})")

    def _known_family_version(self, found: object, path: str, label: str) -> None:
        if not isinstance(found, str):
            return
        family = schema_family(found)
        if found in KNOWN_SCHEMAS or family not in KNOWN_FAMILIES:
            return
        versions = sorted(k for k in KNOWN_SCHEMAS if schema_family(k) == family)
        self.findings.add(
            ProblemCode.SCHEMA_UNKNOWN, path,
            f"{label}: schema_version {found!r} is not a known version (known: {', '.join(versions)})",
        )
