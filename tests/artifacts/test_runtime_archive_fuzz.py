"""Hypothesis: random bytes / mutated ledgers into RuntimeStore; no exception escapes."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_case_builders import build_store

from eviscene_tui.artifacts.runtime_archive import RuntimeStore

LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=70))
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)),
                     max_leaves=10)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store-template") / "store"
    build_store(store)
    return store


def _copy(template: Path) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="a1store-")) / "store"
    shutil.copytree(template, dest)
    return dest


def _exercise(store_dir: Path) -> None:
    store = RuntimeStore(store_dir)
    store.events()
    for rid in store.request_ids() + ["req-000001", "../x"]:
        store.context_request(rid)
        req, problems = store.reconstruct_request(rid)
        if req is not None:
            req.to_dict()
            req.to_dict(with_images=True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_bytes_into_store(template: Path, data: st.DataObject) -> None:
    store_dir = _copy(template)
    try:
        files = sorted(p for p in store_dir.rglob("*") if p.is_file())
        target = data.draw(st.sampled_from(files))
        target.write_bytes(data.draw(st.binary(max_size=200)))
        _exercise(store_dir)
    finally:
        shutil.rmtree(store_dir.parent, ignore_errors=True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_ledger(template: Path, data: st.DataObject) -> None:
    store_dir = _copy(template)
    try:
        path = store_dir / "context" / "req-000001.json"
        ledger = json.loads(path.read_text())
        items = ledger["context_items"]
        i = data.draw(st.integers(0, len(items) - 1))
        key = data.draw(st.sampled_from(["kind", "artifact", "media", "content_hash", None]))
        if key is None:
            items[i] = data.draw(VALUE)
        else:
            items[i][key] = data.draw(VALUE)
        if data.draw(st.booleans()):
            ledger[data.draw(st.sampled_from(["context_items", "request_id", "status"]))] = data.draw(VALUE)
        path.write_bytes(json.dumps(ledger).encode("utf-8", "surrogatepass"))
        _exercise(store_dir)
    finally:
        shutil.rmtree(store_dir.parent, ignore_errors=True)


