"""Hand-built, valid PSD cases for the integrity / layout / summary / check tests.

``build_search(dest)`` writes a converged one-round feedback search root and
``build_run(dest)`` a single run directory, both with real sha bindings, so that
``check_case`` finds nothing; tests then damage one thing and expect one code.
Absolute paths are recorded as on a driver machine (``/remote/runs/...``), and the
source trace is an input OUTSIDE the case root, beside it (``<parent>/inputs/``), as
the driver leaves it: the checker finds it through the moved-tree rebase.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import (
    canonical_jsonl_bytes,
    canonical_sha256,
    encode_bound,
    hint_sha256,
    pretty_json_bytes,
    sha256_bytes,
)
from eviscene_tui.artifacts.integrity import check_case
from eviscene_tui.artifacts.layout import CaseRef, Layout

RUN_SCHEMA = "ifv-psd-repair-driver-result-v1"
SEARCH_SCHEMA = "ifv-psd-feedback-search-v1"
IMAGE = b"\x89PNG\r\n\x1a\n" + b"fake image bytes for tests" * 4
IMAGE_SHA = hashlib.sha256(IMAGE).hexdigest()
HINT = "Check the reverse image search results before concluding."
CAPTURE = {
    "schema_version": "ifv-policy-token-capture-v1",
    "status": "complete",
    "prompt_token_ids": [248045, 11, 248053, 248056, 248056, 248056, 248056, 248054, 12],
    "completion_token_ids": [13, 14, 248046],
    "completion_logprobs": [-0.1, -0.2, -0.01],
    "completion_topk_by_position": [],
    "topk": 0,
    "missing": [],
}


def write(path: Path, data: bytes) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def write_json(path: Path, value: Any) -> bytes:
    return write(path, pretty_json_bytes(value))


def write_jsonl(path: Path, rows: list[Any]) -> bytes:
    return write(path, canonical_jsonl_bytes(rows))


def write_bound(path: Path, identity: Any, payload: Any, *, force_gzip: bool | None = None) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    main = b""
    for name, data in encode_bound(path, identity, payload, force_gzip=force_gzip).items():
        (path.parent / name).write_bytes(data)
        if name == path.name:
            main = data
    return main


def sha(data: bytes) -> str:
    return sha256_bytes(data)


def attempt_row(
    *, episode_path: str, episode_sha: str, case_id: str = "case-001", accepted: bool = True, image_paths: list[str] | None = None
) -> dict[str, Any]:
    return {
        "schema_version": "ifv-psd-repair-attempt-v1",
        "candidate_id": f"psd-candidate:{case_id}",
        "attempt_id": "psd-repair-hint:abc",
        "case_id": case_id,
        "episode_id": "img-1",
        "repair_site": {
            "step_index": 1,
            "source_step_index": 3,
            "stage": "unified_react",
            "localization_kind": "semantic_task_verifier",
            "semantic_category": "wrong_search_direction",
        },
        "repair_tier": "causal_episode_pass" if accepted else "unrepairable",
        "hint_record": {
            "text": HINT,
            "level": 1,
            "audit": {"schema_version": "ifv-psd-hint-audit-v1", "passed": True, "hint_sha256": hint_sha256(HINT)},
        },
        "verification": {"reasons": []},
        "local_verification": {"passed": accepted} if accepted is not None else {},
        "accepted": bool(accepted),
        "student_prompt_ids": list(CAPTURE["prompt_token_ids"]),
        "teacher_prompt_ids": list(CAPTURE["prompt_token_ids"]) + [99],
        "completion_ids": [13, 14],
        "repair_rollout_token_capture": dict(CAPTURE),
        "source_trace_sha256": "0" * 64,
        "continuation": {
            "teacher_complete": True,
            "stop_reason": "teacher_episode_complete",
            "hinted_teacher_episode_trace": episode_path,
            "hinted_teacher_episode_trace_sha256": episode_sha,
        },
        "psd_media": {
            "schema_version": "ifv-psd-media-v3",
            "processor_id": "/models/qwen3.5",
            "processor_config": {},
            "image_sha256": [IMAGE_SHA],
            "image_paths": image_paths or [],
            "merge_size": 2,
        },
    }


def write_source_trace(local_dir: Path, recorded_dir: str) -> dict[str, str]:
    """A small source trace at ``local_dir/inputs/source.json`` (step 3 is the policy step
    the fixtures' site points at, with a complete capture); returns its binding as the
    driver recorded it (under ``recorded_dir``)."""
    steps: list[dict[str, Any]] = [{"stage": "unified_react", "action_type": "tool_call"} for _ in range(3)]
    steps.append({"stage": "unified_react", "action_type": "tool_call", "metadata": {"policy_token_capture": dict(CAPTURE)}})
    data = write_json(local_dir / "inputs" / "source.json", {"image_id": "img-1", "state": {"all_steps": steps}})
    return {"path": f"{recorded_dir.rstrip('/')}/inputs/source.json", "sha256": sha(data)}


def build_run(run: Path, recorded: str, *, search_root_recorded: str | None = None, case_id: str = "case-001",
              accepted: bool = True, trace_binding: dict[str, str] | None = None) -> dict[str, Any]:
    """A complete run directory (single run, or one feedback round). Returns what it wrote."""
    run.mkdir(parents=True, exist_ok=True)
    if trace_binding is None:
        trace_binding = write_source_trace(run.parent, recorded.rstrip("/").rsplit("/", 1)[0] or "/")
    config: dict[str, Any] = {
        "output_dir": recorded,
        "search_mode": "single",
        "hint_count": 1,
        "candidate_offset": None,
        "continuation_policy_version": "native-contract-and-observed-slate-positions-v6",
        "trace": dict(trace_binding),
        "gold": None,
    }
    if search_root_recorded:
        public = (run.parent.parent / "round-inputs" / run.name / "public.json").read_bytes()
        media = (run.parent.parent / "round-inputs" / run.name / "media.json").read_bytes()
        config["public_context"] = {"path": f"{search_root_recorded}/round-inputs/{run.name}/public.json", "sha256": sha(public)}
        config["search_media"] = {"path": f"{search_root_recorded}/round-inputs/{run.name}/media.json", "sha256": sha(media)}
    write_bound(run / "run-inputs.json", config, {"status": "initialized"})
    audit = {"schema_version": "ifv-psd-hint-audit-v1", "passed": True, "hint_sha256": hint_sha256(HINT)}
    write_bound(run / "hint-proposals.json", config, [{"text": HINT, "level": 1, "proposal_id": "p", "audit": audit}])
    write_json(run / "proposer-hint-audits.json", {"proposals": [{"passed": True, "audit": audit}]})
    write_bound(run / "proposer-response.json", {"model": "m"}, {"prompt_tokens": 10, "completion_tokens": 5, "text": "{}"})
    write_json(
        run / "semantic-localization.json",
        {"schema_version": "ifv-psd-semantic-localization-v1", "passed": True, "candidates": []},
    )
    write_json(run / "live-serving-check.json", {"model_id": "m", "root": "/models/m", "max_model_len": 131072})
    write_jsonl(
        run / "repair_candidates.jsonl",
        [
            {
                "schema_version": "ifv-psd-candidate-v1",
                "candidate_id": f"psd-candidate:{case_id}",
                "case_id": case_id,
                "repair_site": {"source_step_index": 3, "rollout_token_capture": dict(CAPTURE)},
            }
        ],
    )
    episode = write_json(run / "episodes" / "hint-00-teacher.json", {"image_id": "img-1", "state": {"all_steps": []}})
    write(run / "media" / f"{IMAGE_SHA}.image", IMAGE)
    teacher_step = {
        "stage_name": "psd_teacher_repair",
        "action_type": "tool_call",
        "metadata": {"policy_token_capture": dict(CAPTURE)},
    }
    write_bound(
        run / "continuations" / "hint-00.json",
        {"run": canonical_sha256(config), "hint": hint_sha256(HINT)},
        {"hint": HINT, "teacher_steps": [teacher_step], "student_steps": [], "teacher_complete": True,
         "student_complete": False, "stop_reason": "teacher_episode_complete"},
    )
    row = attempt_row(
        episode_path="episodes/hint-00-teacher.json",
        episode_sha=sha(episode),
        case_id=case_id,
        accepted=accepted,
        image_paths=[f"{recorded}/media/{IMAGE_SHA}.image"],
    )
    write_jsonl(run / "repair_attempts.jsonl", [row])
    write_json(
        run / "judge" / "hint-00.json",
        {"schema_version": "ifv-psd-local-verification-v1", "passed": accepted, "checks": []},
    )
    write_json(
        run / "gemini-verification-bundle.json",
        {
            "schema_version": "ifv-psd-repair-verification-bundle-v1",
            "attempts": [{"hint_index": 0, "hint_sha256": hint_sha256(HINT), "local_verification": "judge/hint-00.json"}],
        },
    )
    write_json(
        run / "finalization.json",
        {"schema_version": "ifv-psd-repair-finalization-v1", "status": "ready_for_assembly", "attempts": 1},
    )
    response = {"status": "completed", "text": "ok"}
    identity = {"version": "psd-task-review-v1", "model": "g"}
    write_json(
        run / "judge-cache" / f"{canonical_sha256(identity)}.json",
        {"identity": identity, "response": response, "response_sha256": canonical_sha256(response)},
    )
    store = run / "runtime" / case_id / "hint-00-0123456789ab"
    blob = b"system prompt text"
    write(store / "artifacts" / "sha256" / sha(blob)[:2] / f"{sha(blob)}.txt", blob)
    write_json(store / "context" / "req-000001.json", {"schema_version": "ifv-context-ledger-v1", "request_id": "req-000001", "status": "completed"})
    events = canonical_jsonl_bytes(
        [{"schema_version": "ifv-runtime-events-v1", "sequence": 1, "event_type": "case_attempt_started"}]
    )
    write(store / "events.jsonl", events + b'{"schema_version":"ifv-runtime-ev')  # torn tail: normal
    manifest = {
        "schema_version": RUN_SCHEMA,
        "status": "generated",
        "candidate_count": 1,
        "accepted_count": 1 if accepted else 0,
        "pending_hinted_episode_count": 0,
    }
    write_json(run / "manifest.json", manifest)
    return {"config": config, "row": row, "episode": episode}


def build_search(root: Path, recorded: str = "/remote/runs/search-a", *, case_id: str = "case-001") -> dict[str, Any]:
    """A converged feedback search root with one round."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "search.lock").write_bytes(b"")
    beside, rec_beside = root.parent, recorded.rstrip("/").rsplit("/", 1)[0] or "/"
    if beside.name == "repairs":  # a wrapper case: its inputs sit beside the wrapper's repairs/
        beside, rec_beside = beside.parent, rec_beside.rsplit("/", 1)[0] or "/"
    trace_binding = write_source_trace(beside, rec_beside)
    identity = {
        "version": SEARCH_SCHEMA,
        "inputs": {"output_dir": recorded, "trace": dict(trace_binding)},
        "max_attempts": 6,
        "max_proposals": 12,
        "max_seconds": 1800,
    }
    feedback = {"previous_rounds": [], "locked_hint": "", "excluded_hints": [], "needs_relocalization": False, "anchor_feedback": {}}
    write_json(root / "round-inputs" / "round-00" / "public.json", {"task": "x", "repair_search": feedback})
    write_json(root / "round-inputs" / "round-00" / "media.json", {"episodes": []})
    write_bound(root / "requests" / "round-00.json", {"search": canonical_sha256(identity), "round": 0}, feedback)
    rdir = root / "rounds" / "round-00"
    rec_round = f"{recorded}/rounds/round-00"
    built = build_run(rdir, rec_round, search_root_recorded=recorded, case_id=case_id, trace_binding=trace_binding)
    files = {}
    for name in ("manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "episodes/hint-00-teacher.json",
                 "proposer-hint-audits.json", "hint-proposals.json", "proposer-response.json",
                 "live-serving-check.json", "semantic-localization.json"):
        files[f"{rec_round}/{name}"] = sha((rdir / name).read_bytes())
    record = dict(built["row"])
    record["continuation"] = dict(record["continuation"])
    record["continuation"]["hinted_teacher_episode_trace"] = f"{rec_round}/episodes/hint-00-teacher.json"
    candidates = [{"schema_version": "ifv-psd-candidate-v1", "candidate_id": f"psd-candidate:{case_id}", "case_id": case_id}]
    payload = {
        "status": "converged",
        "elapsed_seconds": 12.5,
        "rounds": [
            {
                "directory": rec_round,
                "files": files,
                "records": [record],
                "candidates": candidates,
                "feedback": {"attempts": [], "rejected_proposal_reasons": [], "status": "generated"},
                "no_further_hint": False,
            }
        ],
    }
    write_bound(root / "search-state.json", identity, payload)
    write_jsonl(root / "repair_attempts.jsonl", [record])
    write_jsonl(root / "repair_candidates.jsonl", candidates)
    write_json(
        root / "manifest.json",
        {
            "schema_version": SEARCH_SCHEMA,
            "status": "converged",
            "converged": True,
            "candidate_count": 1,
            "accepted_count": 1,
            "proposal_rounds": 1,
            "attempt_budget": 6,
            "proposal_budget": 12,
            "elapsed_seconds": 12.5,
            "stop_reason": "converged",
            "rounds": [rec_round],
            "execution_error": None,
            "training_distribution_provider": "frozen_self_teacher_only",
        },
    )
    return {"identity": identity, "payload": payload, "record": record, "round": rdir}


def codes(problems) -> list[str]:
    return sorted({str(p.code) for p in problems})


def test_fixture_search_is_clean(tmp_path: Path) -> None:
    build_search(tmp_path / "s")
    problems = check_case(CaseRef(tmp_path / "s", Layout.FEEDBACK_SEARCH))
    assert problems == [], [p.message for p in problems]


def test_fixture_run_is_clean(tmp_path: Path) -> None:
    build_run(tmp_path / "r", "/remote/runs/r")
    problems = check_case(CaseRef(tmp_path / "r", Layout.SINGLE_RUN))
    assert problems == [], [p.message for p in problems]
