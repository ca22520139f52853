"""Runtime archives (psd-run-format §2.13): what a store's files reference is there.

- every context request manifest (``context/req-NNNNNN.json``) names its blobs
  (``context_items[].artifact`` and ``media[]``): each must be in the store's
  ``artifacts/sha256/<2hex>/<sha>.<ext>`` with its ``.meta.json``;
- a store with request manifests has its ``events.jsonl``;
- the steps that ran in a store name their request (``metadata.context_request_id``):
  a continuation's teacher steps in the hint's store, the source trace's steps in the
  source rollout's store; each request must be there (in a store that keeps a
  ``context/`` ledger at all: an events-only archive names none).

The run's own stores are in the case, where the generic pass already hashes every blob
and parses every events log. The SOURCE rollout's store (the trace's
``state.runtime_store``, read where it is) is outside it and checked here in full: its
events log parses (a torn last line is normal) with one ``case_id`` / ``attempt_id`` (those
of the trace's store descriptor) and consecutive ``sequence`` / ``event_id`` numbers, each
completed request's manifest exists, and every blob's bytes hash to its name.
"""

from __future__ import annotations

import os
import posixpath
import re

from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import HEX64, as_dict, as_list, join, read_json, short
from eviscene_tui.artifacts.jsonio import jsonl_lines, read_file_bytes
from eviscene_tui.artifacts.schemas import SCHEMA_CONTEXT_LEDGER, SCHEMA_RUNTIME_EVENTS
from eviscene_tui.artifacts.paths import missing_input_message
from eviscene_tui.artifacts.problems import ProblemCode

REQUEST_ID = re.compile(r"^req-\d{6,}$")


def blob_refs(manifest: object) -> list[tuple[str, str]]:
    """(what, sha256) of every blob a context request manifest names, in order."""
    out: list[tuple[str, str]] = []
    for item in as_list(as_dict(manifest).get("context_items")):
        item = as_dict(item)
        kind = item.get("kind") if isinstance(item.get("kind"), str) else "item"
        artifact = item.get("artifact")
        sha = as_dict(artifact).get("sha256") if isinstance(artifact, dict) else artifact
        if isinstance(sha, str) and HEX64.match(sha.lower()):
            out.append((f"{kind} item", sha.lower()))
        for j, ref in enumerate(as_list(item.get("media"))):
            msha = as_dict(ref).get("sha256")
            if isinstance(msha, str) and HEX64.match(msha.lower()):
                out.append((f"{kind} item media #{j + 1}", msha.lower()))
    return out


class RuntimeStores:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx
        self._checked: set[str] = set()
        self._source_done = False

    # ------------------------------------------------------------------ the run's own stores
    def run_stores(self, run: str) -> None:
        """Every ``runtime/<case>/<attempt>/`` store of one run directory."""
        tree = self.ctx.tree
        for case_dir in tree.list_dirs(join(run, "runtime")):
            for store in tree.list_dirs(case_dir):
                self.store(store, outside=False)

    def continuation_steps(self, path: str, payload: dict[str, object], run: str) -> None:
        """A continuation's teacher steps name their requests in the hint's store (its
        teacher episode's ``state.runtime_store``)."""
        episode = as_dict(payload.get("teacher_episode_trace"))
        desc = as_dict(as_dict(episode.get("state")).get("runtime_store"))
        recorded = desc.get("runtime_path")
        outcome, store = self.ctx.refs.resolve(recorded, run, cwd=True)
        if outcome != "ok" or store is None or not self.ctx.files.readable(store):
            return
        if not self.ctx.tree.is_dir(store):
            if not (isinstance(recorded, str) and recorded.startswith("/")):
                return  # relative to a working directory a moved tree no longer has: cannot be placed

            self.ctx.add(ProblemCode.MISSING_ARTIFACT, store,
                         f"the hint's runtime archive named by {self.ctx.tree.rel(path)} (teacher episode state.runtime_store) is missing")
            return
        ids = [as_dict(s.get("metadata")).get("context_request_id")
               for s in as_list(payload.get("teacher_steps")) if isinstance(s, dict)]
        self._requests_exist(store, ids, referrer=path, what="continuation teacher step")

    # ------------------------------------------------------------------ the source rollout
    def source(self, trace_local: str | None, trace: object, candidates: list[dict[str, object]]) -> None:
        """The source rollout's store, once per case: found by the path rules (read
        where it is), every file it holds checked."""
        if self._source_done:
            return
        state = as_dict(as_dict(trace).get("state"))
        desc = as_dict(state.get("runtime_store"))
        recorded: list[object] = [desc.get("runtime_path")]
        for row in candidates:
            recorded.append(as_dict(row.get("source")).get("source_runtime_store_path"))
            recorded.append(as_dict(row.get("repair_site")).get("runtime_store_path"))
        values = [v for v in recorded if isinstance(v, str) and v]
        if not values:
            return
        self._source_done = True
        near = [os.path.dirname(trace_local)] if trace_local else []
        found = self.ctx.paths.source(values[0], near=near)
        if not found.ok or found.path is None:
            # the trace was found but not the rollout's archive beside it (a copy that
            # left runtime/ behind): its requests and blobs cannot be verified. Without
            # the trace, its own "not found" says the inputs were left behind.
            if not trace_local or not self.ctx.tree.exists(trace_local):
                return
            self.ctx.add(ProblemCode.MISSING_ARTIFACT, found.looked_at[0] if found.looked_at else found.recorded,
                         missing_input_message("source runtime archive (the trace's state.runtime_store)",
                                               self.ctx.tree.rel(trace_local), found))
            return
        store = found.path
        self.store(store, outside=not self.ctx.tree.in_boundary(store), descriptor=desc)
        steps = as_list(state.get("all_steps"))
        ids = [as_dict(as_dict(s).get("metadata")).get("context_request_id") for s in steps]
        ids += [as_dict(row.get("repair_site")).get("context_request_id") for row in candidates]
        self._requests_exist(store, ids, referrer=trace_local or store, what="source trace step")

    # ------------------------------------------------------------------ one store
    def store(self, store: str, *, outside: bool, descriptor: dict[str, object] | None = None) -> None:
        if store in self._checked:
            return
        self._checked.add(store)
        tree = self.ctx.tree
        context = join(store, "context")
        manifests = sorted(p for p in tree.list_files(context) if p.endswith(".json"))
        events = join(store, "events.jsonl")
        if manifests and not tree.exists(events):
            self.ctx.add(ProblemCode.MISSING_ARTIFACT, events,
                         f"runtime archive {tree.rel(store)}: its events log is missing ({len(manifests)} request manifest(s) remain)")
        blobs = self._blobs(store)
        for path in manifests:
            self._manifest(path, store, blobs)
        if outside:
            self._verify_blobs(blobs)
            if tree.exists(events):
                self._events(events, store, descriptor or {})

    def _blobs(self, store: str) -> dict[str, list[str]]:
        """The store's blob files by sha (the blob itself and its ``.meta.json``)."""
        out: dict[str, list[str]] = {}
        tree = self.ctx.tree
        for shard in tree.list_dirs(join(store, "artifacts", "sha256")) or self._scan_dirs(join(store, "artifacts", "sha256")):
            for path in tree.list_files(shard):
                name = os.path.basename(path)
                sha = name.split(".", 1)[0].lower()
                if HEX64.match(sha):
                    out.setdefault(sha, []).append(path)
        return out

    def _scan_dirs(self, d: str) -> list[str]:
        """Sub-directories of a directory outside the case (no walk holds them)."""
        if self.ctx.tree.in_case(d):
            return []
        try:
            with os.scandir(d) as it:
                return sorted(join(d, e.name) for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            return []

    def _manifest(self, path: str, store: str, blobs: dict[str, list[str]]) -> None:
        """One request manifest: it parses, at a known schema, and every blob it names is
        in the store with its meta file."""
        self.ctx.tree.handled.add(path)
        if not self.ctx.files.readable(path):
            return
        value, problems = read_json(path, None)
        self.ctx.findings.extend(problems)
        self.ctx.files.schema(value, path, "context request manifest", SCHEMA_CONTEXT_LEDGER)
        if not isinstance(value, dict):
            return
        stem = os.path.basename(path)[: -len(".json")]
        if isinstance(value.get("request_id"), str) and value.get("request_id") != stem:
            self.ctx.add(ProblemCode.JSON_INVALID, path, f"request manifest {stem} says it is {str(value.get('request_id'))[:40]!r}")
        for what, sha in blob_refs(value):
            files = blobs.get(sha, [])
            where = self.ctx.tree.rel(join(store, "artifacts", "sha256", sha[:2], sha))
            if not [f for f in files if not f.endswith(".meta.json")]:
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, join(store, "artifacts", "sha256", sha[:2], sha),
                             f"{stem} {what} names blob {short(sha)}, which is not in its runtime archive ({where}.*)")
            elif not [f for f in files if f.endswith(".meta.json")]:
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, join(store, "artifacts", "sha256", sha[:2], sha),
                             f"{stem} {what}: blob {short(sha)} has no .meta.json beside it")

    def _requests_exist(self, store: str, ids: list[object], *, referrer: str, what: str) -> None:
        context = join(store, "context")
        if not self.ctx.tree.is_dir(context):
            return  # a store that keeps no request ledger (an events-only archive)
        for rid in dict.fromkeys(i for i in ids if isinstance(i, str) and REQUEST_ID.match(i)):
            path = join(context, f"{rid}.json")
            if not self.ctx.tree.exists(path):
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, path,
                             f"{what} request {rid} (named by {self.ctx.tree.rel(referrer)}) is not in its runtime archive")

    def _verify_blobs(self, blobs: dict[str, list[str]]) -> None:
        for sha, files in blobs.items():
            for path in files:
                if path.endswith(".meta.json"):
                    continue
                actual = self.ctx.files.file_sha(path, memo=False)
                if actual is not None and actual != sha:
                    self.ctx.add(ProblemCode.FILE_HASH_MISMATCH, path,
                                 f"source runtime archive blob named by sha256 {short(sha)} holds bytes hashing to {short(actual)}")

    def _events(self, path: str, store: str, descriptor: dict[str, object]) -> None:
        """The source store's events log (outside the case; a finished rollout's)."""
        if not self.ctx.files.readable(path):
            return
        data, problems = read_file_bytes(path)
        self.ctx.findings.extend(problems)
        if data is None:
            return
        want = {k: descriptor.get(k) for k in ("case_id", "attempt_id") if isinstance(descriptor.get(k), str)}
        expected_seq: int | None = None
        for number, row, error, at_tail in jsonl_lines(data):
            if error is not None:
                if not at_tail:  # a torn last line is normal in an append-only log
                    self.ctx.add(ProblemCode.JSONL_TORN_LINE, path, f"line {number} does not parse: {error}")
                continue
            row = as_dict(row)
            if row.get("schema_version") not in (None, SCHEMA_RUNTIME_EVENTS):
                self.ctx.files.schema(row, path, f"event line {number}", SCHEMA_RUNTIME_EVENTS)
            for key, value in want.items():
                if row.get(key) != value:
                    self.ctx.add(ProblemCode.JSON_INVALID, path,
                                 f"event line {number}: {key} {str(row.get(key))[:60]!r} is not the store's {value!r}")
                    want.pop(key)
                    break
            expected_seq = self._sequence(path, number, row, expected_seq)
            self._completed(path, store, number, row)

    def _sequence(self, path: str, number: int, row: dict[str, object], expected: int | None) -> int | None:
        """Events are numbered 1, 2, 3, … (``sequence``, ``event_id`` ``evt-%08d``): a
        line dropped or edited breaks the count. Returns the next number expected."""
        seq = row.get("sequence")
        if type(seq) is not int:
            return expected
        if expected is not None and seq != expected:
            self.ctx.add(ProblemCode.JSON_INVALID, path,
                         f"event line {number}: sequence {seq} where {expected} was expected (an event dropped or edited?)")
        elif row.get("event_id") not in (None, f"evt-{seq:08d}"):
            self.ctx.add(ProblemCode.JSON_INVALID, path,
                         f"event line {number}: event_id {str(row.get('event_id'))[:40]!r} is not evt-{seq:08d}")
        return seq + 1

    def _completed(self, path: str, store: str, number: int, row: dict[str, object]) -> None:
        """A completed request's manifest was written when it completed (§2.13)."""
        if row.get("event_type") != "context_request_completed":
            return
        payload = as_dict(row.get("payload"))
        manifest = payload.get("manifest")
        rid = payload.get("request_id")
        rel = manifest if isinstance(manifest, str) else (f"context/{rid}.json" if isinstance(rid, str) else None)
        if rel is None or rel.startswith("/") or ".." in rel.split("/"):
            return
        target = join(store, *posixpath.normpath(rel).split("/"))
        if not os.path.lexists(target):
            self.ctx.add(ProblemCode.MISSING_ARTIFACT, target,
                         f"event line {number} says request {str(rid)[:40]} completed, but its manifest {rel} is not in the source runtime archive")


__all__ = ["RuntimeStores", "blob_refs"]
