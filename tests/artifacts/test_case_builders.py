"""Fixture builders for the artifact-layer tests (imported by the other artifact tests).

Builds small but realistic driver outputs in a temp dir with the shared jsonio writers:
a source trace with a runtime archive, a feedback search root with two rounds, a single run.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import (
    canonical_json_bytes,
    canonical_jsonl_bytes,
    canonical_sha256,
    encode_bound,
    hint_sha256,
    pretty_json_bytes,
)

HOSTILE = "\x1b]0;pwned\x1b\\\x1b[2J[@click=app.quit]x[/] \u202eevil\u202c [/]"


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x80\x20\x10" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_json(path: Path, value: Any) -> Path:
    return write(path, pretty_json_bytes(value))


def write_bound(path: Path, identity: Any, payload: Any, *, force_gzip: bool | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    for name, data in encode_bound(path, identity, payload, force_gzip=force_gzip).items():
        (path.parent / name).write_bytes(data)
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- runtime store
def put_blob(store: Path, data: bytes, ext: str, media_type: str, **meta: Any) -> dict[str, Any]:
    digest = sha(data)
    rel = f"artifacts/sha256/{digest[:2]}/{digest}.{ext}"
    write(store / rel, data)
    write_json(
        store / f"artifacts/sha256/{digest[:2]}/{digest}.meta.json",
        {"sha256": digest, "media_type": media_type, "size_bytes": len(data), "ext": ext, **meta},
    )
    return {"sha256": digest, "path": rel, "media_type": media_type, "size_bytes": len(data)}


def build_store(store: Path, *, case_id: str = "case-1", attempt_id: str = "src-attempt", system: str = "You are a verifier.") -> dict[str, Any]:
    """A runtime store with events and one archived policy request req-000001 (with a PNG)."""
    png = tiny_png(4, 3)
    img = put_blob(store, png, "png", "image/png", width=4, height=3)
    payload = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Is this image real?"},
                {"type": "image_ref", "sha256": img["sha256"], "media_type": "image/png"},
            ],
        }
    ]
    sys_ref = put_blob(store, system.encode("utf-8"), "txt", "text/plain")
    pay_ref = put_blob(store, canonical_json_bytes(payload), "json", "application/json")
    tool1 = {"type": "function", "function": {"name": "web_search", "description": "search", "parameters": {"type": "object"}}}
    tool2 = {"type": "function", "function": {"name": "zoom", "description": "zoom", "parameters": {"type": "object"}}}
    t1 = put_blob(store, canonical_json_bytes(tool1), "json", "application/json")
    t2 = put_blob(store, canonical_json_bytes(tool2), "json", "application/json")
    rf = put_blob(store, canonical_json_bytes({"type": "json_object"}), "json", "application/json")
    gc = put_blob(store, canonical_json_bytes({"temperature": 0.7, "max_tokens": 2048}), "json", "application/json")
    items = [
        {"kind": "system_prompt", "artifact": sys_ref, "media": [], "content_hash": sys_ref["sha256"]},
        {"kind": "input_payload", "artifact": pay_ref, "media": [img], "content_hash": pay_ref["sha256"]},
        {"kind": "tool_schema", "artifact": t1, "media": [], "content_hash": t1["sha256"]},
        {"kind": "tool_schema", "artifact": t2, "media": [], "content_hash": t2["sha256"]},
        {"kind": "response_format", "artifact": rf, "media": [], "content_hash": rf["sha256"]},
        {"kind": "generation_config", "artifact": gc, "media": [], "content_hash": gc["sha256"]},
    ]
    ledger = {
        "schema_version": "ifv-context-ledger-v1",
        "request_id": "req-000001",
        "stage": "unified_react",
        "lifecycle_kind": "policy",
        "prompt_version": "p1",
        "model": "ifv-qwen3.5-9b",
        "status": "completed",
        "error": None,
        "provider_input_tokens": 100,
        "provider_output_tokens": 10,
        "provider_thought_tokens": 0,
        "max_output_tokens": 2048,
        "image_count": 1,
        "request_snapshot_sha256": canonical_sha256(payload),
        "context_items": items,
        "started_at": "2026-01-01T00:00:00Z",
        "completed_at": "2026-01-01T00:00:01Z",
        "interaction_id": "iid-1",
    }
    write_json(store / "context" / "req-000001.json", ledger)
    events = [
        {"schema_version": "ifv-runtime-events-v1", "sequence": i + 1, "event_id": f"evt-{i + 1:08d}", "event_type": et,
         "recorded_at": "2026-01-01T00:00:00Z", "case_id": case_id, "attempt_id": attempt_id, "payload": {"request_id": "req-000001"}}
        for i, et in enumerate(["case_attempt_started", "context_request_started", "context_request_completed"])
    ]
    write(store / "events.jsonl", canonical_jsonl_bytes(events))
    return {"image_sha": img["sha256"], "png": png, "payload": payload, "tools": [tool1, tool2], "system": system}


# --------------------------------------------------------------------------- traces
def capture(status: str = "complete", n: int = 3) -> dict[str, Any]:
    return {
        "schema_version": "ifv-policy-token-capture-v1",
        "status": status,
        "prompt_token_ids": [248045, 248053, 248056, 248056, 248054, 248046],
        "completion_token_ids": list(range(10, 10 + n)),
        "completion_logprobs": [-0.1] * n,
        "completion_topk_by_position": [[{"token_id": 11, "probability": 0.9}]] * n,
        "topk": 1,
        "missing": [] if status == "complete" else ["completion_logprobs"],
    }


def make_trace(n_steps: int = 6, *, runtime_path: str = "source-runtime/case-1/src-attempt", stage_key: str = "stage",
               hostile: bool = False) -> dict[str, Any]:
    steps = []
    for i in range(n_steps):
        policy = i % 2 == 1
        md: dict[str, Any] = {"interaction_id": f"iid-{i}"}
        if policy:
            md.update(
                {
                    "policy_input": {"system_instruction": "sys", "input_payload": [{"role": "user", "content": "hi"}], "tools": [], "response_format": None},
                    "policy_action": {"tool_name": "web_search", "arguments": {"q": "x"}},
                    "policy_token_capture": capture(),
                    "context_request_id": "req-000001",
                }
            )
        steps.append(
            {
                "round": i,
                stage_key: "unified_judgment" if i == n_steps - 1 else "unified_react",
                "action_type": "output" if i == n_steps - 1 else "tool_call",
                "tool_name": None if i == n_steps - 1 else "web_search",
                "tool_args": {"query": f"q{i}" + (HOSTILE if hostile else "")},
                "tool_result": '{"results": [{"title": "t", "n": %d}]}' % i,
                "tokens": {"prompt": 10, "completion": 2, "thought": 0},
                "thought": "thinking\nabout it" + (HOSTILE if hostile else ""),
                "output": "",
                "metadata": md,
            }
        )
    return {
        "image_id": "episode-1",
        "case_id": "case-1",
        "verdict": "real",
        "state": {
            "image_id": "episode-1",
            "runtime_case": {"case_id": "case-1", "image_path": "/x.png", "image_sha256": "0" * 64},
            "all_steps": steps,
            "runtime_store": {
                "schema_version": "ifv-runtime-events-v1",
                "case_id": "case-1",
                "attempt_id": "src-attempt",
                "runtime_path": runtime_path,
                "events_path": runtime_path + "/events.jsonl",
            },
        },
    }


# --------------------------------------------------------------------------- attempts etc.
def site(index: int = 3, kind: str = "semantic_task_verifier") -> dict[str, Any]:
    return {
        "step_index": 1,
        "source_step_index": index,
        "step_id": f"episode-1:react:iid-{index}",
        "stage": "unified_react",
        "example_type": "react",
        "context_request_id": "req-000001",
        "runtime_store_path": "source-runtime/case-1/src-attempt",
        "localization_kind": kind,
        "semantic_category": "wrong_search_direction",
        "localization_verifier": "gemini-psd-repair:psd-task-review-v1",
    }


def candidate(index: int = 3) -> dict[str, Any]:
    return {
        "schema_version": "ifv-psd-candidate-v1",
        "candidate_id": "psd-candidate:" + "a" * 64,
        "class": "repair_seed",
        "candidate_status": "localized",
        "case_id": "case-1",
        "episode_id": "episode-1",
        "repair_signal": "terminal_outcome_mismatch",
        "failure_localization": {"status": "localized", "repair_anchor_source_step_index": index},
        "strict_trace_audit_failure_codes": [],
        "repair_site": {**site(index), "rollout_token_capture": capture()},
        "source": {"source_trace_path": "inputs/trace.json", "source_runtime_store_path": "source-runtime/case-1/src-attempt"},
    }


def attempt(hint: str, *, index: int = 3, verified: bool | None = None, accepted: bool = False,
            episode: str = "episodes/hint-00-teacher.json") -> dict[str, Any]:
    lv: dict[str, Any] = {}
    if verified is not None:
        lv = judge_artifact(hint, anchor=verified)
    return {
        "schema_version": "ifv-psd-repair-attempt-v1",
        "candidate_id": "psd-candidate:" + "a" * 64,
        "attempt_id": "psd-repair-hint:" + hint_sha256(hint),
        "case_id": "case-1",
        "episode_id": "episode-1",
        "repair_step_id": f"episode-1:react:iid-{index}",
        "model_roles": {"hint_constructor": {"provider": "gemini", "model": "g", "supplies_training_distribution": False}},
        "repair_site": site(index),
        "repair_tier": "causal_episode_pass" if accepted else "unrepairable",
        "source_rollout_failed": True,
        "hinted_local_pass": accepted,
        "hinted_episode_pass": accepted,
        "hinted_strict_trace_audit_pass": True,
        "hint_record": {"text": hint, "level": 1, "provider": "gemini", "model": "g", "proposal_id": "psd-repair-hint:x",
                        "audit": {"schema_version": "ifv-psd-hint-audit-v1", "passed": True, "hint_level": 1,
                                  "hint_chars": len(hint), "hint_sha256": hint_sha256(hint), "errors": [], "leak_paths": []}},
        "verification": {"source_rollout_failed": True, "repair_tier": "unrepairable", "expected_verdict": "fake",
                         "hinted_recorded_verdict": "real", "reasons": ["local:hinted_local_verifier_failed"]},
        "local_verification": lv,
        "accepted": accepted,
        "scaffold_only": False,
        "student_prompt_ids": [1, 2, 3],
        "teacher_prompt_ids": [1, 2, 3, 4],
        "completion_ids": [5, 6],
        "repair_rollout_token_capture": capture(),
        "source_trace_sha256": "b" * 64,
        "continuation": {"teacher_complete": True, "stop_reason": "teacher_episode_complete", "teacher_step_count": 2,
                         "hinted_teacher_episode_trace": episode},
    }


def judge_artifact(hint: str, *, anchor: bool = False, earliest: int = 3) -> dict[str, Any]:
    checks = {"source_error_confirmed": True, "repaired_at_selected_step": anchor, "grounded_episode": True,
              "procedural_hint": True, "anchor_matches": anchor, "episode_complete": True}
    return {
        "schema_version": "ifv-psd-local-verification-v1",
        "verifier": {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": "g"},
        "hint_sha256": hint_sha256(hint),
        "passed": all(checks.values()),
        "checks": [{"name": k, "passed": v} for k, v in checks.items()],
        "evidence": [{"reason": "because"}],
        "review": {**checks, "earliest_error_step": earliest, "explanation": "secret explanation", "passed": all(checks.values())},
    }


def feedback(*, relocalize: bool = False, hint: str | None = None) -> dict[str, Any]:
    if hint is None:
        return {"previous_rounds": [], "locked_hint": "", "excluded_hints": [], "needs_relocalization": False, "anchor_feedback": {}}
    checker = {"source_error_confirmed": True, "repaired_at_selected_step": False, "grounded_episode": True,
               "procedural_hint": True, "anchor_matches": not relocalize, "episode_complete": True}
    return {
        "previous_rounds": [{"attempts": [{"hint": hint, "selected_source_step": 3, "checker": checker, "earliest_error_step": 1,
                                           "task_passed": False, "strict_trace_passed": True, "accepted": False, "repaired_steps": []}],
                             "rejected_proposal_reasons": ["changed_verified_hint"], "status": "generated"}],
        "locked_hint": "",
        "excluded_hints": [hint],
        "needs_relocalization": relocalize,
        "anchor_feedback": {"selected_source_step": 3, "earliest_error_step": 1, "checker": checker},
    }


def build_run_dir(run: Path, *, hint: str, index: int, verified: bool | None, accepted: bool = False,
                  trace_rel: str = "../../inputs/trace.json", public_rel: str | None = None, gzip_continuation: bool = False) -> None:
    config = {"trace": {"path": trace_rel, "sha256": "b" * 64}, "search_mode": "single", "hint_count": 1,
              "public_context": {"path": public_rel, "sha256": "c" * 64} if public_rel else None, "private_context": None}
    write_bound(run / "run-inputs.json", config, {"status": "initialized"})
    write_json(run / "semantic-localization.json", {
        "schema_version": "ifv-psd-semantic-localization-v1", "passed": True, "source_trace_canonical_sha256": "d" * 64,
        "candidates": [{"source_step_index": index, "recoverable": True, "selected": True, "category": "wrong_search_direction",
                        "verifier": {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": "g"},
                        "observed_basis": [{"trace": "source", "step_index": index, "quote": "literal text"}], "explanation": "x"}],
        "explanation": "x"})
    write(run / "repair_candidates.jsonl", canonical_jsonl_bytes([candidate(index)]))
    rec = attempt(hint, index=index, verified=verified, accepted=accepted)
    write(run / "repair_attempts.jsonl", canonical_jsonl_bytes([rec]))
    write_json(run / "manifest.json", {"schema_version": "ifv-psd-repair-driver-result-v1", "status": "generated", "trace": trace_rel,
                                       "candidate_count": 1, "accepted_count": int(accepted),
                                       "pending_hinted_episode_count": 0 if verified is not None else 1})
    proposal = {"text": hint, "level": 1, "proposal_id": "psd-repair-hint:x", "provider": "gemini", "model": "g",
                "audit": rec["hint_record"]["audit"]}
    write_bound(run / "hint-proposals.json", config, [proposal])
    write_json(run / "proposer-hint-audits.json", {"proposals": [{"passed": True, "audit": proposal["audit"]},
                                                                 {"passed": False, "reason": "binary_verdict_leak"},
                                                                 {"passed": False}]})
    write_bound(run / "proposer-response.json", {"run": "x"}, {"prompt_tokens": 10, "completion_tokens": 5, "text": '{"hints": ["%s"]}' % hint})
    write_json(run / "live-serving-check.json", {"model_id": "ifv-qwen3.5-9b", "root": "/models/q", "max_model_len": 131072})
    write_json(run / "generation-last-error.json", {"hint_index": 0, "retry": 0, "error_type": "ReadTimeout", "archive": "runtime/c/hint-00-x"})
    episode = make_trace(4, runtime_path="rounds/runtime/x")
    write_json(run / "episodes" / "hint-00-teacher.json", episode)
    cont = {"teacher_steps": [{"stage_name": "psd_teacher_repair", "action_type": "tool_call", "tool_name": "web_search",
                               "tool_args": {"q": "x"}, "tool_result": "r", "metadata": {}},
                              {"stage_name": "psd_teacher_judgment", "action_type": "output", "output": "fake", "metadata": {}}],
            "student_steps": [], "hint": hint, "teacher_complete": True, "student_complete": False,
            "stop_reason": "teacher_episode_complete", "teacher_episode_trace": episode}
    write_bound(run / "continuations" / "hint-00.json", {"run": "r", "hint": hint_sha256(hint)}, cont, force_gzip=gzip_continuation)
    if verified is not None:
        write_json(run / "judge" / "hint-00.json", judge_artifact(hint, anchor=verified))
        write_json(run / "finalization.json", {"schema_version": "ifv-psd-repair-finalization-v1", "status": "ready_for_assembly",
                                               "attempts": 1, "accepted": int(accepted), "rejected": int(not accepted), "unresolved": [],
                                               "provider_calls": 0})
        write_json(run / "judge-summary.json", {"schema_version": "ifv-psd-repair-finalization-v1", "status": "ready_for_assembly",
                                                "judge_model": "g", "errors": []})
        write_json(run / "gemini-verification-bundle.json", {"schema_version": "ifv-psd-repair-verification-bundle-v1",
                                                             "attempts": [{"hint_index": 0, "hint_sha256": hint_sha256(hint),
                                                                           "local_verification": "judge/hint-00.json"}]})


def build_search(root: Path, *, gzip_continuation: bool = False) -> Path:
    """A feedback search root: round-00 rejected (anchor mismatch), round-01 relocalized and pending."""
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / "inputs" / "trace.json", make_trace(6))
    build_store(root / "source-runtime" / "case-1" / "src-attempt")
    h0, h1 = "Check the date first.", "Verify the location.\nThen the date."
    build_run_dir(root / "rounds" / "round-00", hint=h0, index=3, verified=False, public_rel="round-inputs/round-00/public.json")
    build_run_dir(root / "rounds" / "round-01", hint=h1, index=1, verified=None, gzip_continuation=gzip_continuation,
                  public_rel="round-inputs/round-01/public.json")
    fb0, fb1 = feedback(), feedback(relocalize=True, hint=h0)
    for n, fb in ((0, fb0), (1, fb1)):
        write_bound(root / "requests" / f"round-{n:02d}.json", {"search": "s", "round": n}, fb)
        write_json(root / "round-inputs" / f"round-{n:02d}" / "public.json", {"case": "public", "repair_search": fb})
        write_json(root / "round-inputs" / f"round-{n:02d}" / "media.json", {"episodes": []})
    recs = [attempt(h0, index=3, verified=False), attempt(h1, index=1, verified=None)]
    write(root / "repair_attempts.jsonl", canonical_jsonl_bytes(recs))
    write(root / "repair_candidates.jsonl", canonical_jsonl_bytes([candidate(3)]))
    identity = {"version": "ifv-psd-feedback-search-v1", "inputs": {"trace": {"path": "inputs/trace.json", "sha256": "b" * 64}},
                "max_attempts": 6, "max_proposals": 12, "max_seconds": 1800}
    rows = [{"directory": str(root / "rounds" / "round-00"), "files": {}, "records": [recs[0]], "candidates": [candidate(3)],
             "feedback": {"attempts": [], "rejected_proposal_reasons": [], "status": "generated"}, "no_further_hint": False}]
    write_bound(root / "search-state.json", identity, {"status": "paused_pending_verifier", "elapsed_seconds": 12.5, "rounds": rows})
    write_json(root / "manifest.json", {"schema_version": "ifv-psd-feedback-search-v1", "status": "paused_pending_verifier",
                                        "converged": False, "candidate_count": 2, "accepted_count": 0, "proposal_rounds": 2,
                                        "rounds": [str(root / "rounds" / "round-00"), str(root / "rounds" / "round-01")],
                                        "execution_error": None})
    return root


def build_single(run: Path, *, status: str = "generated") -> Path:
    run.mkdir(parents=True, exist_ok=True)
    write_json(run / "inputs" / "trace.json", make_trace(6))
    build_store(run / "source-runtime" / "case-1" / "src-attempt")
    build_run_dir(run, hint="Look closer.", index=3, verified=True, accepted=True, trace_rel="inputs/trace.json")
    m = (run / "manifest.json").read_bytes()
    write(run / "manifest.json", m.replace(b'"generated"', f'"{status}"'.encode()))
    return run


# --------------------------------------------------------------------------- sanity tests of the builders
def test_builders_produce_expected_files(tmp_path: Path) -> None:
    root = build_search(tmp_path / "search")
    assert (root / "rounds" / "round-01" / "continuations" / "hint-00.json").is_file()
    assert (root / "source-runtime" / "case-1" / "src-attempt" / "context" / "req-000001.json").is_file()
    single = build_single(tmp_path / "single")
    assert (single / "run-inputs.json").is_file()


def test_tiny_png_header() -> None:
    data = tiny_png(5, 7)
    assert data.startswith(b"\x89PNG") and struct.unpack(">II", data[16:24]) == (5, 7)
