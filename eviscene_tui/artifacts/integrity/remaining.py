"""The files no other check covered: content-addressed names (``media/<sha>.image``,
runtime ``artifacts/sha256/``), runtime ``events.jsonl`` logs (a torn last line is normal
there), any other JSONL ledger or JSON file (parses; a known schema family at an
unknown version is flagged)."""

from __future__ import annotations

import os

from eviscene_tui.artifacts.fileio import ReadRefused
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import CONTEXT_RE, HEX64, MAX_PARSE_BYTES, join, read_json, short
from eviscene_tui.artifacts.jsonl_append import scan_jsonl_appended
from eviscene_tui.artifacts.schemas import SCHEMA_CONTEXT_LEDGER, SCHEMA_RUNTIME_EVENTS
from eviscene_tui.artifacts.problems import ProblemCode


class RemainingFiles:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx
        self._runtime_prefix = join(ctx.root, "runtime") + os.sep
        self._rounds_prefix = join(ctx.root, "rounds") + os.sep

    def run(self) -> None:
        handled = self.ctx.tree.handled
        for f in self.ctx.tree.files:
            if f in handled:
                continue
            try:
                self._file(f)
            except ReadRefused as exc:
                self.ctx.findings.extend([exc.problem()])
            except OSError as exc:
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, f, f"cannot read: {exc.strerror or exc}")

    def _in_runtime(self, f: str) -> bool:
        """Inside a runtime archive (the case's, or a round's)."""
        rounds = self._rounds_prefix
        return f.startswith(self._runtime_prefix) or (f.startswith(rounds) and f"{os.sep}runtime{os.sep}" in f[len(rounds):])

    def _file(self, f: str) -> None:
        parts = f.rsplit(os.sep, 4)
        name = parts[-1]
        parent = parts[-2] if len(parts) >= 2 else ""
        if name.endswith(".image") and parent == "media":
            self._content_addressed(f, name[: -len(".image")], ProblemCode.MEDIA_MISMATCH, "media file")
            return
        if len(parts) >= 5 and parts[-3] == "sha256" and parts[-4] == "artifacts":
            self._runtime_blob(f, name)
            return
        if name == "events.jsonl":
            self._events(f)
        elif name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
            self.ctx.files.ledger(f)
        elif name.endswith(".json"):
            self._json(f, name, parent, in_runtime=self._in_runtime(f))

    def _content_addressed(self, p: str, stem: str, code: ProblemCode, what: str) -> None:
        if not HEX64.match(stem.lower()):
            return
        actual = self.ctx.files.file_sha(p, memo=False)
        if actual is not None and actual != stem.lower():
            self.ctx.add(code, p, f"{what} named by sha256 {short(stem)} holds bytes hashing to {short(actual)}")

    def _runtime_blob(self, p: str, name: str) -> None:
        if name.endswith(".meta.json"):
            self._json(p, name, "", in_runtime=True)
            return
        self._content_addressed(p, name.split(".", 1)[0], ProblemCode.FILE_HASH_MISMATCH, "runtime archive artifact")

    def _events(self, p: str) -> None:
        # checked again on every check while a driver appends: only the new lines are read
        scan = scan_jsonl_appended(p, _other_schema)
        problems = scan.problems
        if scan.torn_tail and problems:
            problems = problems[:-1]  # a torn last line of an append-only events log is normal
        self.ctx.findings.extend(problems)
        if scan.picked is not None:
            self.ctx.files.schema(scan.picked.row, p, f"event line {scan.picked.line}", SCHEMA_RUNTIME_EVENTS)

    def _json(self, p: str, name: str, parent: str, *, in_runtime: bool) -> None:
        cache = None if in_runtime else self.ctx.files.cache
        hit = cache.get(p) if cache is not None else None  # bytes already read: their size, no stat
        if (len(hit) if hit is not None else os.stat(p).st_size) >= MAX_PARSE_BYTES:
            return
        value, problems = read_json(p, cache, p in self.ctx.tree.fileset)
        self.ctx.findings.extend(problems)
        if parent == "context" and CONTEXT_RE.match(name):
            self.ctx.files.schema(value, p, "context request manifest", SCHEMA_CONTEXT_LEDGER)
        elif not in_runtime:
            self.ctx.files.schema(value, p, name, None)


def _other_schema(row: object) -> bool:
    """An event at a schema version other than the runtime events' own."""
    return isinstance(row, dict) and "schema_version" in row and row.get("schema_version") != SCHEMA_RUNTIME_EVENTS
