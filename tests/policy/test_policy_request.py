"""The hinted teacher request: hint placement rule, request view with image
placeholders, rebuild from a runtime archive (built here per the convention)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from eviscene_tui.artifacts.jsonio import canonical_json_bytes, pretty_json_bytes
from eviscene_tui.artifacts.runtime_archive import RuntimeStore, request_from_policy_input
from eviscene_tui.scaffold.fake_vllm.testing import TOOLS, png_data_url
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.request import (
    HINT_CLOSE,
    HINT_OPEN,
    RequestUnavailable,
    apply_hint,
    chat_body,
    describe_request,
    teacher_request_from_archived,
    with_hint,
)

BASE = [{"role": "system", "content": "sys"}, {"role": "user", "content": [{"type": "text", "text": "q1"}]},
        {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]


def test_user_suffix_default_goes_to_last_user_message():
    msgs, loc = apply_hint(BASE, "  Look at the date.  ")
    assert msgs[3]["content"] == f"q2\n\n{HINT_OPEN}\nLook at the date.\n{HINT_CLOSE}"
    assert loc == {"placement": "user_suffix", "message_index": 3, "role": "user", "length": len(msgs[3]["content"]) - 2, "part_index": None, "char_offset": 2}
    assert BASE[3]["content"] == "q2"  # input untouched


def test_system_suffix_and_user_prefix():
    msgs, loc = apply_hint(BASE, "H", "system_suffix")
    assert msgs[0]["content"].startswith("sys\n\n" + HINT_OPEN) and loc["message_index"] == 0
    msgs, loc = apply_hint(BASE[:2], "H", "user_prefix")
    assert msgs[1]["content"][0]["text"] == f"{HINT_OPEN}\nH\n{HINT_CLOSE}\n\nq1" and loc["part_index"] == 0
    with pytest.raises(ValueError):
        apply_hint(BASE, "H", "somewhere")


def test_list_content_gets_own_text_part_and_with_hint_replaces():
    msgs, loc = apply_hint(BASE[:2], "first")
    assert msgs[1]["content"][-1]["text"].endswith(f"first\n{HINT_CLOSE}") and loc["part_index"] == 1
    from eviscene_tui.policy.request import TeacherRequest

    req = TeacherRequest(messages=msgs, hint="first", hint_location=loc)
    req2 = with_hint(req, "second")
    texts = [p["text"] for p in req2.messages[1]["content"]]
    assert texts == ["q1", f"\n\n{HINT_OPEN}\nsecond\n{HINT_CLOSE}"]
    assert with_hint(req2, None).messages == BASE[:2]


def test_empty_hint_is_not_inserted():
    msgs, loc = apply_hint(BASE, "   ")
    assert msgs == BASE and loc is None


def test_body_and_describe_with_placeholder():
    url, raw = png_data_url(40, 30)
    from eviscene_tui.policy.request import TeacherRequest

    req = TeacherRequest(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}],
                         tools=TOOLS, generation={"max_output_tokens": 128, "temperature": 0.1, "top_p": 0.9, "junk": 1})
    body = chat_body(req, PolicyConfig(temperature=0.7, logprobs=True, top_logprobs=5), model="m")
    assert body["temperature"] == 0.7 and body["max_tokens"] == 128 and body["top_p"] == 0.9 and "junk" not in body
    assert body["stream"] and body["return_token_ids"] and body["stream_options"] == {"include_usage": True}
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    text = describe_request(body)
    sha = hashlib.sha256(raw).hexdigest()
    assert f"<image sha256={sha} image/png {len(raw)} bytes>" in text and "base64" not in text


# ---------------------------------------------------------------------------- archive fixture


def _blob(store: Path, data: bytes, ext: str, media_type: str, kind: str, **extra) -> dict:
    sha = hashlib.sha256(data).hexdigest()
    d = store / "artifacts" / "sha256" / sha[:2]
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{sha}.{ext}").write_bytes(data)
    meta = {"sha256": sha, "media_type": media_type, "size_bytes": len(data), "ext": ext, "kind": kind, **extra}
    (d / f"{sha}.meta.json").write_bytes(pretty_json_bytes(meta))
    return {"sha256": sha, "path": f"artifacts/sha256/{sha[:2]}/{sha}.{ext}", "media_type": media_type, "size_bytes": len(data), **extra}


def build_store(root: Path, *, drop_image: bool = False) -> tuple[Path, str]:
    store = root / "runtime" / "case-1" / "hint-00-abc"
    (store / "context").mkdir(parents=True)
    _, png = png_data_url(64, 64)
    img = _blob(store, png, "png", "image/png", "media", width=64, height=64)
    payload = [{"role": "user", "content": [{"type": "text", "text": "Verify the claim."},
                                            {"type": "image_ref", "sha256": img["sha256"], "media_type": "image/png"}]}]
    items = [
        {"kind": "system_prompt", "artifact": _blob(store, b"You are a verifier.", "txt", "text/plain", "context"), "media": []},
        {"kind": "input_payload", "artifact": _blob(store, canonical_json_bytes(payload), "json", "application/json", "context"), "media": [img]},
    ]
    for tool in TOOLS:
        items.append({"kind": "tool_schema", "artifact": _blob(store, canonical_json_bytes(tool), "json", "application/json", "context"), "media": []})
    items.append({"kind": "generation_config", "artifact": _blob(store, canonical_json_bytes({"temperature": 0.2, "max_tokens": 512}), "json", "application/json", "context"), "media": []})
    for it in items:
        it["content_hash"] = it["artifact"]["sha256"]
    ledger = {"schema_version": "ifv-context-ledger-v1", "request_id": "req-000001", "stage": "unified_react", "lifecycle_kind": "policy",
              "model": "ifv-qwen3.5-9b", "status": "completed", "error": None, "image_count": 1, "context_items": items}
    (store / "context" / "req-000001.json").write_bytes(pretty_json_bytes(ledger))
    (store / "events.jsonl").write_bytes(canonical_json_bytes({"schema_version": "ifv-runtime-events-v1", "sequence": 1, "event_id": "evt-00000001",
                                                               "event_type": "case_attempt_started", "case_id": "case-1", "attempt_id": "hint-00-abc", "payload": {}}) + b"\n")
    if drop_image:
        (store / img["path"]).unlink()
    return store, img["sha256"]


def test_rebuild_from_archive(tmp_path):
    store, sha = build_store(tmp_path)
    archived, problems = RuntimeStore(store).reconstruct_request("req-000001")
    assert archived is not None, problems
    req = teacher_request_from_archived(archived, hint="Check EXIF.", step_index=7)
    assert req.source == "archive" and req.request_id == "req-000001" and req.step_index == 7
    assert req.messages[0] == {"role": "system", "content": "You are a verifier."}
    parts = req.messages[1]["content"]
    assert parts[1]["type"] == "image_url" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[-1]["text"].endswith(f"Check EXIF.\n{HINT_CLOSE}")
    assert req.images[0].sha256 == sha and req.images[0].width == 64
    body = chat_body(req, PolicyConfig(), model="m")
    assert body["tools"] == TOOLS and body["max_tokens"] == 512 and body["temperature"] == 0.7
    assert f"sha256={sha}" in describe_request(body, req.images)


def test_missing_archived_image_blocks_the_request(tmp_path):
    store, _ = build_store(tmp_path, drop_image=True)
    archived, problems = RuntimeStore(store).reconstruct_request("req-000001")
    with pytest.raises(RequestUnavailable, match="image"):
        teacher_request_from_archived(archived, hint="h", problems=[str(p) for p in problems])


def test_fallback_policy_input(tmp_path):
    store, sha = build_store(tmp_path)
    pi = {"system_instruction": "S", "input_payload": [{"role": "user", "content": [{"type": "text", "text": "T"}, {"type": "image_ref", "sha256": sha}]}], "tools": TOOLS}
    archived, _ = request_from_policy_input(pi, store=RuntimeStore(store))
    req = teacher_request_from_archived(archived, hint="h")
    assert req.source == "policy_input" and req.messages[1]["content"][1]["type"] == "image_url"
    archived, _ = request_from_policy_input(pi, store=None)
    with pytest.raises(RequestUnavailable):
        teacher_request_from_archived(archived, hint="h")
