"""The writer of the bundled driver's search root, in the driver's layout, inside the app's work directory.

Every write goes through the :class:`~eviscene_tui.storage.WorkDir`, which refuses
paths inside the driver's root:

- write-once files (requests, round inputs, ``run-inputs.json``, continuations,
  episodes, media) with tmp + fsync + link: a file that already exists must hold
  exactly the same bytes (a retry after a crash), otherwise the action is refused
  and the file is never overwritten;
- the state files the driver rewrites by design (``search-state.json``, manifests,
  ledgers, audits, judge, ``live-serving-check.json``,
  ``generation-last-error.json``) with tmp + fsync + rename.

What the files contain is decided by ``stages.py``; this module only names the
paths and writes the bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_jsonl_bytes, encode_bound, pretty_json_bytes, sha256_file
from eviscene_tui.storage import WorkDir
from eviscene_tui.gate.sidecar import pid_alive
from eviscene_tui.gate.bundled import records as R
from eviscene_tui.gate.bundled import stages as S
from eviscene_tui.gate.bundled.stages import Budgets

# ``storage`` names its temporary files ``.<name>.<pid>.<8 hex>.tmp``.
_TMP_NAME = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")


class LayoutWriter:
    """Paths and atomic writes of one bundled-driver root (``root`` lies in ``work``)."""

    def __init__(self, root: Path, work: WorkDir) -> None:
        self.root = root
        self.work = work

    # ------------------------------------------------------------------ paths
    def round_dir(self, index: int) -> Path:
        return self.root / "rounds" / R.round_name(index)

    def request_path(self, index: int) -> Path:
        return self.root / "requests" / f"{R.round_name(index)}.json"

    def inputs_dir(self, index: int) -> Path:
        return self.root / "round-inputs" / R.round_name(index)

    def rel(self, path: Path) -> str:
        """``path`` relative to the root (for messages), or as given when it lies elsewhere."""
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    # ------------------------------------------------------------------ writes
    def write_new(self, path: Path, data: bytes) -> None:
        """Write-once: a file that already exists must hold exactly these bytes (a retry
        after a crash); otherwise it is never overwritten and the action is refused."""
        try:
            self.work.write_new(path, data)
        except FileExistsError:
            try:
                same = path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                raise S.SearchError(
                    f"{self.rel(path)} already exists with different content; written files are never overwritten"
                ) from None

    def replace(self, path: Path, data: bytes) -> None:
        self.work.replace(path, data)

    def write_json(self, path: Path, doc: Any, *, replace: bool = False) -> None:
        data = pretty_json_bytes(doc)
        if replace:
            self.replace(path, data)
        else:
            self.write_new(path, data)

    def write_jsonl(self, path: Path, rows: Sequence[Any]) -> None:
        self.replace(path, canonical_jsonl_bytes(list(rows)))

    def write_bound(self, path: Path, identity: Any, payload: Any, *, replace: bool = False) -> None:
        """A bound file (identity + payload files) as ``encode_bound`` lays it out."""
        for name, data in encode_bound(path, identity, payload).items():
            target = path.parent / name
            if replace:
                self.replace(target, data)
            else:
                self.write_new(target, data)

    # ------------------------------------------------------------------ the search root's state
    def persist(self, state: Mapping[str, Any], identity: Mapping[str, Any], budgets: Budgets) -> None:
        """``search-state.json``, then the root ledgers and manifest derived from it."""
        payload = S.search_state_payload(state)
        self.write_bound(self.root / "search-state.json", dict(identity), payload, replace=True)
        self.write_jsonl(self.root / "repair_attempts.jsonl", S.all_records(payload["rounds"]))
        self.write_jsonl(self.root / "repair_candidates.jsonl", S.merged_candidates(payload["rounds"]))
        self.write_json(self.root / "manifest.json", S.search_manifest(payload, budgets), replace=True)

    def round_files(self, round_dir: Path) -> dict[str, str]:
        """Digests of the round's files the search-state row lists (``round_dir`` resolved)."""
        return {str(round_dir / n): sha256_file(round_dir / n) for n in S.ROUND_FILES if (round_dir / n).is_file()}

    def write_media(self, round_dir: Path, images: Sequence[tuple[str, str, bytes]]) -> tuple[list[str], list[str]]:
        """Store each request image once under ``media/<sha>.image``; (shas, absolute paths)."""
        shas, paths = [], []
        for sha, _mime, data in images:
            target = round_dir / "media" / f"{sha}.image"
            if not target.exists():
                self.write_new(target, data)
            shas.append(sha)
            paths.append(str(target.resolve()))
        return shas, paths

    # ------------------------------------------------------------------ leftovers
    def sweep_tmp(self) -> list[str]:
        """Remove this app's own orphaned temporary files left by a process that died
        mid-write (the final files were never created: writes are tmp + fsync +
        link/rename, so nothing decided is lost). Returns messages for the operator."""
        messages: list[str] = []
        removed = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                if not self._orphaned(name):
                    continue
                try:
                    os.unlink(self.work.guard(Path(dirpath) / name))
                    removed += 1
                except OSError as exc:
                    messages.append(f"cannot remove the leftover temporary file {name}: {exc.strerror or exc}")
        if removed:
            messages.append(f"removed {removed} temporary file(s) left by an interrupted write")
        return messages

    @staticmethod
    def _orphaned(name: str) -> bool:
        """A temporary file of this process, or of one that is no longer running."""
        m = _TMP_NAME.match(name)
        if not m:
            return False
        pid = int(m.group(1))
        return pid == os.getpid() or not pid_alive(pid)
