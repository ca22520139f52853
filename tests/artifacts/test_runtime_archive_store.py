"""RuntimeStore: events (torn tail vs torn middle), ledger, blobs, reconstruction, paths."""

from __future__ import annotations

from pathlib import Path

from test_case_builders import build_store, put_blob, write_json

from eviscene_tui.artifacts.jsonio import canonical_json_bytes
from eviscene_tui.artifacts.problems import ProblemCode
from eviscene_tui.artifacts.runtime_archive import (
    RuntimeStore,
    image_size,
    request_from_policy_input,
    sniff_mime,
)


def test_events_and_torn_tail(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    build_store(store_dir)
    store = RuntimeStore(store_dir)
    events, problems = store.events()
    assert problems == [] and not store.torn_tail
    assert [e.event_type for e in events] == ["case_attempt_started", "context_request_started", "context_request_completed"]
    assert events[0].event_id == "evt-00000001" and events[0].sequence == 1
    with open(store_dir / "events.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":"ifv-runtime-events-v1","seq')
    events, problems = store.events(refresh=True)
    assert len(events) == 3 and problems == [] and store.torn_tail
    data = (store_dir / "events.jsonl").read_bytes()
    lines = data.split(b"\n")
    lines[1] = lines[1][:20]
    (store_dir / "events.jsonl").write_bytes(b"\n".join(lines))
    events, problems = store.events(refresh=True)
    assert len(events) == 2 and [p.code for p in problems] == [ProblemCode.JSONL_TORN_LINE]


def test_events_missing_is_empty(tmp_path: Path) -> None:
    store = RuntimeStore(tmp_path / "none")
    assert store.events() == ([], []) and not store.exists
    assert store.descriptor.attempt_id == "none"


def test_context_request_and_reconstruct(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    info = build_store(store_dir, system="Be \x1b[2J careful")
    store = RuntimeStore(store_dir)
    assert store.request_ids() == ["req-000001"]
    ledger, problems = store.context_request("req-000001")
    assert problems == [] and ledger.status == "completed" and len(ledger.items_of("tool_schema")) == 2
    req, problems = store.reconstruct_request("req-000001")
    assert problems == []
    assert req.system_prompt == "Be \x1b[2J careful"
    assert req.tool_schemas == info["tools"]
    assert req.response_format == {"type": "json_object"}
    assert req.generation_config == {"temperature": 0.7, "max_tokens": 2048}
    assert len(req.images) == 1
    img = req.images[0]
    assert (img.sha256, img.mime, img.width, img.height, img.data) == (info["image_sha"], "image/png", 4, 3, info["png"])
    part = req.input_payload[0]["content"][1]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")
    assert req.input_payload_refs == info["payload"]
    d = req.to_dict()
    assert d["input_payload"] == info["payload"] and "data_url" not in d["images"][0]
    assert d["images"][0]["size_bytes"] == len(info["png"])
    assert req.to_dict(with_images=True)["images"][0]["data_url"].startswith("data:image/png")
    assert req.request_id == "req-000001" and req.store_path == store_dir


def test_tampered_and_missing_blobs(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    info = build_store(store_dir)
    sha = info["image_sha"]
    blob = store_dir / "artifacts" / "sha256" / sha[:2] / f"{sha}.png"
    blob.write_bytes(blob.read_bytes() + b"tamper")
    store = RuntimeStore(store_dir)
    data, problems = store.artifact_bytes(sha)
    assert data is not None and [p.code for p in problems] == [ProblemCode.FILE_HASH_MISMATCH]
    req, problems = store.reconstruct_request("req-000001")
    assert req is not None and req.images == []  # tampered bytes are never put into a request
    assert req.rejected_images[0].verified is False
    assert req.input_payload[0]["content"][1]["type"] == "image_ref"
    assert ProblemCode.FILE_HASH_MISMATCH in {p.code for p in problems}
    blob.unlink()
    req, problems = store.reconstruct_request("req-000001")
    assert req is not None and req.images == []
    assert ProblemCode.MISSING_ARTIFACT in {p.code for p in problems}
    assert req.input_payload[0]["content"][1]["type"] == "image_ref"  # left as a reference


def test_bad_request_ids_and_missing_request(tmp_path: Path) -> None:
    store = RuntimeStore(tmp_path)
    for bad in ("../../etc/passwd", "a/b", "", ".."):
        req, problems = store.reconstruct_request(bad)
        assert req is None and problems
    req, problems = store.reconstruct_request("req-000009")
    assert req is None and problems[0].code == ProblemCode.MISSING_ARTIFACT


def test_artifact_path_outside_store_refused(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    store = RuntimeStore(store_dir)
    data, problems = store.artifact_bytes("", "../secret.txt")
    assert data is None and problems[0].code == ProblemCode.PATH_OUTSIDE_ROOT
    write_json(store_dir / "context" / "req-000002.json", {"request_id": "req-000002", "context_items": [
        {"kind": "system_prompt", "artifact": {"path": "../secret.txt"}}, {"kind": "weird", "artifact": 5}, "junk"]})
    req, problems = store.reconstruct_request("req-000002")
    assert req is not None and req.system_prompt is None
    assert ProblemCode.PATH_OUTSIDE_ROOT in {p.code for p in problems}


def test_legacy_artifact_forms(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    tools = [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}]
    t = put_blob(store_dir, canonical_json_bytes(tools), "json", "application/json")
    s = put_blob(store_dir, canonical_json_bytes("json-string prompt"), "json", "application/json")
    write_json(store_dir / "context" / "req-000001.json", {"request_id": "req-000001", "context_items": [
        {"kind": "tool_schema", "artifact": t["sha256"]}, {"kind": "system_prompt", "artifact": s["path"]},
        {"kind": "input_payload", "content_hash": put_blob(store_dir, b'{"x":1}', "json", "application/json")["sha256"]}]})
    req, problems = RuntimeStore(store_dir).reconstruct_request("req-000001")
    assert problems == []
    assert req.tool_schemas == tools and req.system_prompt == "json-string prompt" and req.input_payload == {"x": 1}


def test_request_from_policy_input(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    info = build_store(store_dir)
    pi = {"system_instruction": "s", "input_payload": info["payload"], "tools": info["tools"], "response_format": None}
    req, problems = request_from_policy_input(pi, store=RuntimeStore(store_dir), request_id="req-000001")
    assert problems == [] and req.source == "policy_input" and len(req.images) == 1
    req, problems = request_from_policy_input(pi)
    assert req.images == [] and req.input_payload == info["payload"]
    req, problems = request_from_policy_input("nope")
    assert req is None and problems


def test_image_helpers() -> None:
    from test_case_builders import tiny_png

    assert image_size(tiny_png(9, 4)) == (9, 4)
    assert sniff_mime(tiny_png()) == "image/png"
    assert image_size(b"GIF89a\x05\x00\x06\x00") == (5, 6)
    jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x20\x00\x30\x03"
    assert image_size(jpeg) == (48, 32) and sniff_mime(jpeg) == "image/jpeg"
    assert image_size(b"junk") == (None, None) and sniff_mime(b"junk") is None
    assert image_size(b"\xff\xd8\xff") == (None, None)


def test_an_image_ref_whose_type_is_not_a_string_is_no_image_ref() -> None:
    """A part's ``type`` is run data: a list or an object there is not a crash (found by the
    case fuzzer: ``{"type": []}`` raised TypeError while a request was rebuilt)."""
    from eviscene_tui.artifacts.runtime_archive import image_ref_sha

    sha = "ab" * 32
    assert image_ref_sha({"type": "image_ref", "sha256": sha}) == sha
    for kind in ([], {"image_ref": 1}, ["image_ref"], 3, None):
        assert image_ref_sha({"type": kind, "sha256": sha}) is None
