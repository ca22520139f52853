"""The supervised root's writer: write-once files, atomic state files, the evidence guard, leftovers."""

from __future__ import annotations

import os

import pytest

from eviscene_tui.storage import EvidenceWriteRefused, WorkDir
from eviscene_tui.supervised.layout import LayoutWriter
from eviscene_tui.supervised.stages import SearchError


def _writer(tmp_path):
    evidence = tmp_path / "runs"
    evidence.mkdir()
    work = WorkDir(tmp_path / "runs.eviscene-tui", evidence_roots=[evidence])
    root = work.path / "supervised" / "case"
    return LayoutWriter(root, work), evidence


def test_a_written_file_is_never_overwritten_but_a_retry_with_the_same_bytes_passes(tmp_path):
    lay, _ = _writer(tmp_path)
    path = lay.request_path(0)
    lay.write_json(path, {"a": 1})
    lay.write_json(path, {"a": 1})  # the same bytes: a retry after a crash
    with pytest.raises(SearchError, match="requests/round-00.json already exists with different content"):
        lay.write_json(path, {"a": 2})
    assert b'"a": 1' in path.read_bytes()
    lay.write_json(lay.round_dir(0) / "manifest.json", {"v": 1}, replace=True)
    lay.write_json(lay.round_dir(0) / "manifest.json", {"v": 2}, replace=True)  # a state file is rewritten
    assert b'"v": 2' in (lay.round_dir(0) / "manifest.json").read_bytes()


def test_nothing_is_written_inside_the_evidence_root(tmp_path):
    lay, evidence = _writer(tmp_path)
    with pytest.raises(EvidenceWriteRefused):
        lay.write_json(evidence / "manifest.json", {})
    assert list(evidence.iterdir()) == []


def test_leftover_temporary_files_of_dead_writers_are_swept(tmp_path):
    lay, _ = _writer(tmp_path)
    lay.write_json(lay.root / "manifest.json", {}, replace=True)
    mine = lay.root / f".manifest.json.{os.getpid()}.0123abcd.tmp"
    other = lay.root / ".x.json.1.89abcdef.tmp"  # pid 1 is alive: another writer's, kept
    unrelated = lay.root / "notes.tmp"
    for p in (mine, other, unrelated):
        p.write_bytes(b"x")
    messages = lay.sweep_tmp()
    assert messages == ["removed 1 temporary file(s) left by an interrupted write"]
    assert not mine.exists() and other.exists() and unrelated.exists()
