"""What ``check`` saw nowhere before: references into runtime archives (the run's own and
the source rollout's), on a sample case laid out as the driver writes it, moved."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from fault_trees import copy_case

from eviscene_tui.artifacts.integrity import check_case
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.problems import Problem

CASE = "feedback-converged-3-rounds"


def _check(root: Path) -> list[Problem]:
    return check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))


def _hint_store(root: Path) -> Path:
    return next((root / "rounds" / "round-01" / "runtime").glob("*/hint-00-*"))


def _source_store(root: Path) -> Path:
    return next((root.parent / "inputs" / root.name / "runtime").glob("*/rollout-*"))


def _blob_of(store: Path, request: str = "req-000001", kind: str = "system_prompt") -> Path:
    manifest = orjson.loads((store / "context" / f"{request}.json").read_bytes())
    item = next(i for i in manifest["context_items"] if i["kind"] == kind)
    sha = item["artifact"]["sha256"]
    return next(p for p in (store / "artifacts" / "sha256" / sha[:2]).glob(f"{sha}.*") if not p.name.endswith(".meta.json"))


def _drop_event_line(store: Path, n: int) -> None:
    lines = (store / "events.jsonl").read_bytes().splitlines(keepends=True)
    (store / "events.jsonl").write_bytes(b"".join(lines[:n] + lines[n + 1:]))


def _edit_event(store: Path, n: int, key: str, value: object) -> None:
    lines = (store / "events.jsonl").read_bytes().splitlines()
    row = orjson.loads(lines[n])
    row[key] = value
    lines[n] = orjson.dumps(row, option=orjson.OPT_SORT_KEYS)
    (store / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")


Mutation = Callable[[Path], Path]  # damages the case, returns the path the problem names


def blob_deleted(root: Path) -> Path:
    blob = _blob_of(_hint_store(root))
    blob.unlink()
    return blob.with_name(blob.name.split(".")[0])


def meta_deleted(root: Path) -> Path:
    blob = _blob_of(_hint_store(root))
    Path(f"{blob.parent / blob.name.split('.')[0]}.meta.json").unlink()
    return blob.with_name(blob.name.split(".")[0])


def request_deleted(root: Path) -> Path:
    path = _hint_store(root) / "context" / "req-000002.json"
    path.unlink()
    return path


def events_deleted(root: Path) -> Path:
    path = _hint_store(root) / "events.jsonl"
    path.unlink()
    return path


def hint_store_deleted(root: Path) -> Path:
    store = _hint_store(root)
    shutil.rmtree(store)
    return store


def source_blob_edited(root: Path) -> Path:
    blob = _blob_of(_source_store(root))
    blob.write_bytes(blob.read_bytes() + b" ")
    return blob


def source_blob_deleted(root: Path) -> Path:
    blob = _blob_of(_source_store(root))
    blob.unlink()
    return blob.with_name(blob.name.split(".")[0])


def source_request_deleted(root: Path) -> Path:
    path = _source_store(root) / "context" / "req-000004.json"  # the failure step's request
    path.unlink()
    return path


def source_request_edited(root: Path) -> Path:
    path = _source_store(root) / "context" / "req-000003.json"
    path.write_bytes(path.read_bytes()[:-20])
    return path


def source_event_dropped(root: Path) -> Path:
    _drop_event_line(_source_store(root), 3)
    return _source_store(root) / "events.jsonl"


def source_event_moved_to_another_case(root: Path) -> Path:
    _edit_event(_source_store(root), 2, "case_id", "case-somebody-else")
    return _source_store(root) / "events.jsonl"


def source_event_torn_in_the_middle(root: Path) -> Path:
    path = _source_store(root) / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + b"\n"
    path.write_bytes(b"".join(lines))
    return path


MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "a blob a request names is deleted": (blob_deleted, "missing_artifact"),
    "a blob's meta file is deleted": (meta_deleted, "missing_artifact"),
    "a request a teacher step names is deleted": (request_deleted, "missing_artifact"),
    "a store's events log is deleted": (events_deleted, "missing_artifact"),
    "the hint's whole store is deleted": (hint_store_deleted, "missing_artifact"),
    "a source store blob is edited": (source_blob_edited, "file_hash_mismatch"),
    "a source store blob is deleted": (source_blob_deleted, "missing_artifact"),
    "the failure step's source request is deleted": (source_request_deleted, "missing_artifact"),
    "a source request is truncated": (source_request_edited, "json_invalid"),
    "a source event is dropped": (source_event_dropped, "json_invalid"),
    "a source event names another case": (source_event_moved_to_another_case, "json_invalid"),
    "a source event line is torn mid-file": (source_event_torn_in_the_middle, "jsonl_torn_line"),
}


def test_the_sample_is_clean(tmp_path: Path) -> None:
    assert _check(copy_case(CASE, tmp_path)) == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_runtime_archive_mutation_is_reported(tmp_path: Path, name: str) -> None:
    root = copy_case(CASE, tmp_path)
    mutate, code = MUTATIONS[name]
    where = mutate(root)
    problems = _check(root)
    hits = [p for p in problems if p.code == code and Path(p.path) == where]
    assert hits, f"{name}: no {code} at {where}: {[(p.code, p.path, p.message) for p in problems]}"
    assert all("\n" not in p.message for p in hits)


def test_a_source_store_left_behind_by_the_copy_is_reported_once(tmp_path: Path) -> None:
    """The inputs were copied with the trace but without the rollout's runtime/ folder:
    one missing_artifact names the archive, where the trace records it and where it was
    looked for; nothing else about the archive is claimed."""
    root = copy_case(CASE, tmp_path)
    store = _source_store(root)
    shutil.rmtree(store.parent.parent)
    problems = _check(root)
    hits = [p for p in problems if "source runtime archive" in p.message]
    assert len(hits) == 1 and hits[0].code == "missing_artifact", [(p.code, p.message) for p in problems]
    assert "not found:" in hits[0].message and "looked for at" in hits[0].message
    assert hits[0].path == str(store)
    assert problems == hits


def test_the_hint_stores_requests_are_those_its_steps_name(tmp_path: Path) -> None:
    root = copy_case(CASE, tmp_path)
    where = request_deleted(root)
    hit = next(p for p in _check(root) if Path(p.path) == where)
    assert "continuation teacher step request req-000002" in hit.message and "continuations/hint-00.json" in hit.message


def test_a_source_store_that_moved_with_its_trace_is_found_by_its_tail(tmp_path: Path) -> None:
    """The trace (read where it is) names its store by an absolute path of the machine it
    ran on; the inputs were copied here with their runtime/ folder: the store is found
    under the trace's folder's ancestors by the longest tail of that path."""
    from eviscene_tui.artifacts.paths import PathResolver

    store = tmp_path / "here" / "inputs" / "case-a" / "runtime" / "case-a" / "rollout-1"
    store.mkdir(parents=True)
    trace_dir = tmp_path / "here" / "inputs" / "case-a"
    resolver = PathResolver(str(tmp_path / "elsewhere" / "root"))
    found = resolver.source("/cluster/data/inputs/case-a/runtime/case-a/rollout-1", near=[str(trace_dir)])
    assert found.ok and found.path == str(store) and found.rule == "the source rollout's working directory"
    assert not resolver.source("/cluster/data/inputs/case-b/runtime/case-b/rollout-1", near=[str(trace_dir)]).ok
