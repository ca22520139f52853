"""The path trust model (``artifacts.paths``): rules, rebases, and hostile path values."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import test_integrity_fixtures as fx
from test_moved_trees import opened_files

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.integrity import check_case
from eviscene_tui.artifacts.jsonio import canonical_jsonl_bytes, encode_bound
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.paths import (
    INVALID,
    MISSING,
    OK,
    OUTSIDE,
    UNMAPPED,
    PathMap,
    PathResolver,
    ancestors,
)


def test_moved_tree_rebases_from_the_common_tail(tmp_path: Path) -> None:
    root = tmp_path / "home" / "me" / "copy" / "psd-fb-x"
    (root / "rounds" / "round-00").mkdir(parents=True)
    (tmp_path / "home" / "me" / "copy" / "inputs").mkdir()
    (tmp_path / "home" / "me" / "copy" / "inputs" / "trace.json").write_text("{}")
    r = PathResolver(str(root))
    assert r.add_written("/data/exp/psd-fb-x", root)
    assert [(x.old, x.new) for x in r.rebases] == [("/data/exp", str(tmp_path / "home" / "me" / "copy"))]
    got = r.bound_input("/data/exp/inputs/trace.json")
    assert got.ok and got.path == str(tmp_path / "home/me/copy/inputs/trace.json") and got.rule == "moved tree"
    assert "/data/exp" in got.how() and r.moved()
    w = r.written("/data/exp/psd-fb-x/rounds/round-00/manifest.json")
    assert w.outcome == OK and w.path == str(root / "rounds/round-00/manifest.json")
    # a root renamed on the way: its parent is the rebase
    r2 = PathResolver(str(root))
    r2.add_written("/data/exp/other-name", root)
    assert [(x.old, x.new) for x in r2.rebases] == [("/data/exp", str(root.parent))]
    # a file under no known prefix is looked for as recorded only, and reported missing
    miss = r.bound_input("/elsewhere/trace.json")
    assert miss.outcome == MISSING and miss.looked_at == ("/elsewhere/trace.json",)


def test_written_paths_stay_inside(tmp_path: Path) -> None:
    root = tmp_path / "case"
    (root / "rounds" / "round-00" / "episodes").mkdir(parents=True)
    (tmp_path / "outside.json").write_text("{}")
    os.symlink(tmp_path / "outside.json", root / "rounds" / "round-00" / "episodes" / "link.json")
    r = PathResolver(str(root))
    r.add_written("/remote/case", root)
    run = root / "rounds" / "round-00"
    assert r.written("episodes/x.json", base=run).outcome == OK
    assert r.written("../../../outside.json", base=run).outcome == OUTSIDE
    assert r.written("episodes/link.json", base=run).outcome == OUTSIDE  # a symlink out
    assert r.written(str(tmp_path / "outside.json")).outcome == UNMAPPED
    assert r.written("/remote/case/../outside.json").outcome == UNMAPPED
    assert r.written("/remote/case/rounds/../../outside.json").outcome == UNMAPPED
    assert r.written("a\x00b", base=run).outcome == INVALID
    assert r.written("x" * 5000, base=run).outcome == INVALID
    assert r.written("\udc80name", base=run).outcome == INVALID  # not encodable: no such file can exist
    assert r.written(None).outcome == INVALID
    # paths relative to the driver's working directory: the root's ancestors are tried
    (root / "rounds" / "round-00" / "runtime" / "c" / "a").mkdir(parents=True)
    got = r.written("case/rounds/round-00/runtime/c/a", cwd=True)
    assert got.outcome == OK and got.path == str(root / "rounds/round-00/runtime/c/a") and got.rule == "driver working directory"


def test_path_map_comes_first(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "t.json").write_text("{}")
    pm = PathMap.parse([f"/cluster/inputs={tmp_path}/mine"]).merged(PathMap.from_mapping({"/x": "/y"}))
    assert pm.entries[0] == ("/cluster/inputs", str(tmp_path / "mine")) and pm.entries[1][0] == "/x"
    r = PathResolver(str(tmp_path / "case"), path_map=pm)
    got = r.bound_input("/cluster/inputs/t.json")
    assert got.ok and got.rule == "path map" and got.path == str(tmp_path / "mine" / "t.json")


def test_source_rollout_relative_to_its_trace(tmp_path: Path) -> None:
    store = tmp_path / "inputs" / "c" / "runtime" / "case" / "att"
    store.mkdir(parents=True)
    r = PathResolver(str(tmp_path / "runs" / "c"))
    got = r.source("inputs/c/runtime/case/att", near=[tmp_path / "inputs" / "c"])
    assert got.ok and got.path == str(store)
    assert r.source("runtime/case/att", near=[tmp_path / "inputs" / "c"]).ok
    assert r.source("nowhere/att", near=[tmp_path]).outcome == MISSING


def test_ancestors() -> None:
    assert ancestors("/a/b") == ["/a/b", "/a", "/"]


# ----------------------------------------------------------------------------- hostile values
SECRET = "secret-written"  # only ever named by paths the run wrote: must never be opened

PATH_VALUES = st.one_of(
    st.sampled_from([
        "", ".", "..", "/", "../../../secret-written/s.json", "../../secret-written/s.json",
        "/remote/runs/secret-written/s.json", "/remote/runs/search-a/../secret-written/s.json",
        "episodes/link-out.json", "rounds/round-00/episodes/link-out.json", "a\x00b", "x" * 5000,
        "/" + "d/" * 700 + "f.json", "\udcff\udcfe.json", "episodes/hint-00-teacher.json", "C:\\\\Windows\\\\x",
        "~/secret-written/s.json", "rounds/round-00/../../../secret-written/s.json",
    ]),
    st.text(max_size=60),
)
WRITTEN_SLOTS = ["episode", "snapshot", "media", "manifest_rounds", "bundle", "episode_runtime"]
INPUT_SLOTS = ["trace", "candidate_runtime"]


def _hostile_search(base: Path) -> Path:
    root = base / "s"
    fx.build_search(root)
    (base / SECRET).mkdir()
    (base / SECRET / "s.json").write_text(json.dumps({"state": {"all_steps": []}, "secret": "SECRET-CONTENT"}))
    os.symlink(base / SECRET / "s.json", root / "rounds" / "round-00" / "episodes" / "link-out.json")
    return root


def _rewrite(path: Path, edit) -> None:
    rows = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    edit(rows)
    try:
        path.write_bytes(canonical_jsonl_bytes(rows))
    except UnicodeEncodeError:  # a lone surrogate: written as a \u escape (orjson then refuses the line)
        path.write_bytes(b"".join(json.dumps(r, sort_keys=True, separators=(",", ":")).encode() + b"\n" for r in rows))


def _inject(root: Path, slot: str, value: str) -> None:
    rdir = root / "rounds" / "round-00"
    if slot == "episode":
        _rewrite(rdir / "repair_attempts.jsonl", lambda rows: rows[0]["continuation"].__setitem__("hinted_teacher_episode_trace", value))
        _rewrite(root / "repair_attempts.jsonl", lambda rows: rows[0]["continuation"].__setitem__("hinted_teacher_episode_trace", value))
    elif slot == "media":
        _rewrite(rdir / "repair_attempts.jsonl", lambda rows: rows[0]["psd_media"].__setitem__("image_paths", [value]))
    elif slot in ("snapshot", "manifest_rounds", "trace"):
        doc = json.loads((root / "search-state.json").read_bytes())
        ident, payload = doc["identity"], doc["payload"]
        if slot == "snapshot":
            payload["rounds"][0]["files"][value] = "0" * 64
        elif slot == "trace":
            ident["inputs"]["trace"]["path"] = value
        try:
            for name, data in encode_bound(root / "search-state.json", ident, payload).items():
                (root / name).write_bytes(data)
        except UnicodeEncodeError:  # a lone surrogate: written as a \u escape (orjson then refuses the file)
            (root / "search-state.json").write_text(json.dumps({"identity": ident, "payload": payload, "payload_sha256": "0" * 64}))
        if slot == "manifest_rounds":
            m = json.loads((root / "manifest.json").read_bytes())
            m["rounds"] = [value]
            (root / "manifest.json").write_text(json.dumps(m))
    elif slot == "bundle":
        p = rdir / "gemini-verification-bundle.json"
        doc = json.loads(p.read_bytes()) if p.exists() else {"attempts": [{}]}
        doc.setdefault("attempts", [{}])[0]["local_verification"] = value
        p.write_text(json.dumps(doc))
    elif slot == "episode_runtime":
        ep = rdir / "episodes" / "hint-00-teacher.json"
        doc = json.loads(ep.read_bytes())
        doc.setdefault("state", {})["runtime_store"] = {"runtime_path": value}
        ep.write_text(json.dumps(doc))
    elif slot == "candidate_runtime":
        _rewrite(rdir / "repair_candidates.jsonl", lambda rows: rows[0].setdefault("repair_site", {}).__setitem__("runtime_store_path", value))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(slots=st.lists(st.sampled_from(WRITTEN_SLOTS + INPUT_SLOTS), min_size=1, max_size=3), values=st.lists(PATH_VALUES, min_size=3, max_size=3))
def test_hostile_path_values_never_raise_and_never_read_outside(tmp_path_factory, slots: list[str], values: list[str]) -> None:
    base = tmp_path_factory.mktemp("hp")
    root = _hostile_search(base)
    for slot, value in zip(slots, values):
        # the input slots may name the secret too, but through a different folder, so any
        # read of the secret folder comes from a written path
        if slot in INPUT_SLOTS:
            value = value.replace(SECRET, "secret-input")
            # a bound input is read wherever it is, also through a symlink: the root's
            # link-out symlinks lead to the written secret, so an input names them not
            value = value.replace("link-out.json", "link-in.json")
        _inject(root, slot, value)
    secret = str((base / SECRET).resolve())
    with opened_files() as seen:
        problems = check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))
        case = load_case(root)
        case.all_problems()
        case.input_provenance(verify=True)
        for r in case.rounds:
            for n in r.episode_paths:
                r.episode(n)
            for att in r.attempts or []:
                runtime = att.continuation.hinted_teacher_episode_trace if att.continuation else None
                case.runtime_store_for(runtime)
        ep, _ = case.rounds[0].episode(0)
        if ep is not None and ep.runtime_store is not None:
            case.runtime_store_for(ep.runtime_store.runtime_path)
        case.source_runtime_store()
        site = case.failure_site()
        if site is not None and site.source_step_index is not None:
            case.source_step_request(site.source_step_index)
            case.runtime_store_for(site.runtime_store_path, source=True)
    assert not [p for p in seen if p == secret or p.startswith(secret + os.sep)], (slots, values)
    for p in problems:
        assert p.code in {"missing_artifact", "path_outside_root", "json_invalid", "jsonl_torn_line", "file_hash_mismatch", "bound_hash_mismatch",
                          "media_mismatch", "token_capture_incomplete", "schema_unknown"}, p


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(PATH_VALUES, st.text(alphabet=st.characters(codec=None, exclude_characters=""), max_size=40)),
       base=st.sampled_from([None, "rounds/round-00", "..", "/"]))
def test_resolver_never_raises(tmp_path_factory, value: str, base: str | None) -> None:
    root = tmp_path_factory.getbasetemp() / "resolver-root"
    root.mkdir(exist_ok=True)
    r = PathResolver(str(root))
    r.add_written("/remote/runs/x", root)
    r.add_written(value, root)
    for found in (
        r.written(value, base=None if base is None else str(root / base), cwd=True),
        r.bound_input(value),
        r.source(value, near=[str(root)]),
    ):
        assert found.outcome in (OK, MISSING, OUTSIDE, UNMAPPED, INVALID)
    w = r.written(value, base=str(root), cwd=True)
    if w.outcome == OK:
        assert w.path is not None and r.inside(w.path)


ESCAPES = ["../../../secret-written/s.json", "episodes/link-out.json", "rounds/round-00/episodes/link-out.json",
           "/remote/runs/secret-written/s.json", "/remote/runs/search-a/../secret-written/s.json"]


@pytest.mark.parametrize("slot", WRITTEN_SLOTS)
@pytest.mark.parametrize("value", ESCAPES)
def test_every_written_slot_refuses_every_escape(tmp_path: Path, slot: str, value: str) -> None:
    """The same property as above, for each slot and each kind of escape (deterministic)."""
    root = _hostile_search(tmp_path)
    _inject(root, slot, value)
    secret = str((tmp_path / SECRET).resolve())
    with opened_files() as seen:
        check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))
        case = load_case(root)
        case.all_problems()
        for r in case.rounds:
            for n in r.episode_paths:
                r.episode(n)
        ep, _ = case.rounds[0].episode(0)
        if ep is not None and ep.runtime_store is not None:
            case.runtime_store_for(ep.runtime_store.runtime_path)
    assert not [p for p in seen if p == secret or p.startswith(secret + os.sep)]


@pytest.mark.parametrize("slot", WRITTEN_SLOTS + INPUT_SLOTS)
@pytest.mark.parametrize("value", ["\udcff\udcfe.json", "a\x00b", "x" * 5000, "/" + "d/" * 700 + "f.json", ""])
def test_every_slot_takes_unusable_values(tmp_path: Path, slot: str, value: str) -> None:
    root = _hostile_search(tmp_path)
    _inject(root, slot, value)
    check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))  # never raises
    case = load_case(root)
    case.all_problems()
    case.input_provenance(verify=True)
    case.source_runtime_store()
