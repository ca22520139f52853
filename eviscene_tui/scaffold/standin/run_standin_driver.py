"""STAND-IN EviScene PSD repair driver (NOT EviScene) -- bundled with eviscene-tui.

Shaped like ``scripts/run_psd_repair_driver.py``: it puts its own folder on
``sys.path``, imports ``run_search`` from ``eviscene_training.psd_repair_search``
at call time and runs each feedback round as a single-mode child through
``execute_round`` (round inputs written once and checked on resume, the
proposer through ``QwenContinuationAdapter.propose_hints``, filtering with
``revision_rejection``, ``proposer-hint-audits.json``, one hinted teacher step
from the policy server, a scripted judge). Standard library only. It exists so
that ``eviscene-tui gate`` can be demonstrated and tested without EviScene; its
localizer, hint constructor and judge are scripted, not models.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from eviscene_training.io import _sha, load_bound, load_json, load_jsonl, save_bound, sha256_file, write_json, write_jsonl
from eviscene_training.psd_repair_runtime import QwenContinuationAdapter, HintProposal

FILE_ARGS = ("trace", "gold", "public_context", "semantic_verification", "search_media")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--gold", type=Path, required=True)
    parser.add_argument("--public-context", type=Path, required=True)
    parser.add_argument("--semantic-verification", type=Path)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--policy-base-url")
    parser.add_argument("--policy-model", default="ifv-qwen3.5-9b")
    parser.add_argument("--hint-count", type=int, default=4)
    parser.add_argument("--hint-level", type=int, default=1)
    parser.add_argument("--max-suffix-actions", type=int, default=2)
    parser.add_argument("--search-mode", choices=("slate", "feedback", "single"), default="feedback")
    parser.add_argument("--repair-attempts", type=int, default=6)
    parser.add_argument("--proposal-rounds", type=int, default=12)
    parser.add_argument("--search-seconds", type=int, default=1800)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="stand-in only: pause inside the teacher step (demo pacing)")
    parser.add_argument("--search-media", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true")
    return parser


# ------------------------------------------------------------------ scripted localizer
def _policy_steps(trace: dict[str, Any]) -> list[int]:
    return [i for i, s in enumerate(trace["state"]["all_steps"]) if s.get("stage") == "unified_react"]


def _localization(trace: dict[str, Any], step: int, basis: str) -> dict[str, Any]:
    quote = str(trace["state"]["all_steps"][step].get("tool_result") or trace["state"]["all_steps"][step].get("thought") or "")[:120]
    return {
        "schema_version": "ifv-psd-semantic-localization-v1", "passed": True,
        "source_trace_canonical_sha256": _sha(trace),
        "candidates": [{"source_step_index": step, "recoverable": True, "selected": True, "category": "wrong_search_direction",
                        "verifier": {"kind": "task", "name": "standin-localizer", "version": "standin-v1", "model": "scripted"},
                        "observed_basis": [{"trace": "source", "step_index": step, "quote": quote}], "explanation": basis}],
        "explanation": basis,
    }


def localize_initial(trace: dict[str, Any]) -> dict[str, Any] | None:
    """The first policy step whose tool result reports no match (the stand-in's guess)."""
    for i in _policy_steps(trace):
        if "no match" in str(trace["state"]["all_steps"][i].get("tool_result") or "").lower():
            return _localization(trace, i, "first repeated no-match result")
    return None


def relocalize(trace: dict[str, Any], anchor: dict[str, Any]) -> dict[str, Any] | None:
    """With ``earliest_error_step`` K: step K; else the next policy step after the anchor."""
    steps = _policy_steps(trace)
    k = anchor.get("earliest_error_step")
    if type(k) is int and k in steps:
        return _localization(trace, k, f"relocalized to the earliest error step {k} named by the feedback")
    selected = anchor.get("selected_source_step")
    later = [i for i in steps if type(selected) is int and i > selected]
    if later:
        return _localization(trace, later[0], f"relocalized past the disputed anchor {selected}")
    return None


def selected_step(localization: dict[str, Any]) -> int | None:
    for c in localization.get("candidates") or []:
        if c.get("selected"):
            return c.get("source_step_index")
    return None


# ------------------------------------------------------------------ scripted judge
def _source_capture(trace: dict[str, Any], site: int) -> dict[str, Any]:
    """The rollout's token capture of the source step at the failure site."""
    steps = (trace.get("state") or {}).get("all_steps") or []
    meta = steps[site].get("metadata") if 0 <= site < len(steps) and isinstance(steps[site], dict) else None
    capture = meta.get("policy_token_capture") if isinstance(meta, dict) else None
    return capture if isinstance(capture, dict) else {}


def _teacher_capture(episode: dict[str, Any]) -> dict[str, Any]:
    """The capture of the first complete teacher action (psd_teacher_repair + tool_call) of
    the hinted episode: where the attempt's teacher_prompt_ids / completion_ids come from."""
    for step in (episode.get("state") or {}).get("all_steps") or []:
        meta = step.get("metadata") if isinstance(step, dict) else None
        if not isinstance(meta, dict) or not meta.get("psd_suffix_step"):
            continue
        capture = meta.get("policy_token_capture")
        if isinstance(capture, dict) and capture.get("status") == "complete":
            return capture
    return {}


def judge(site: int, gold: dict[str, Any], hint: HintProposal, record_base: dict[str, Any]) -> dict[str, Any]:
    repaired = site == gold.get("error_step")
    checks = {"source_error_confirmed": True, "repaired_at_selected_step": repaired, "grounded_episode": True,
              "procedural_hint": True, "anchor_matches": True, "episode_complete": True}
    return {
        "schema_version": "ifv-psd-local-verification-v1",
        "verifier": {"kind": "task", "name": "standin-judge", "version": "standin-v1", "model": "scripted"},
        "repair_step_id": record_base["repair_step_id"], "hint_sha256": hint.audit["hint_sha256"], "passed": repaired,
        "checks": [{"name": n, "passed": v} for n, v in checks.items()],
        "evidence": [{"reason": "scripted stand-in judge"}],
        "review": {**checks, "earliest_error_step": gold.get("error_step") if repaired else -1, "passed": repaired},
    }


# ------------------------------------------------------------------ one round (single mode)
async def _run_single(args: argparse.Namespace) -> dict[str, Any]:
    trace, gold, public_context = load_json(args.trace), load_json(args.gold), load_json(args.public_context)
    config = _run_config(args)
    output_dir = args.output_dir
    if args.resume:
        load_bound(output_dir / "run-inputs.json", identity=config)
    else:
        output_dir.mkdir(parents=True, exist_ok=False)
        save_bound(output_dir / "run-inputs.json", identity=config, payload={"status": "initialized"})
    feedback = public_context.get("repair_search", {})
    localization = _round_localization(args, trace, feedback)
    site = selected_step(localization) if localization and localization.get("passed") else None
    if site is None:
        write_jsonl(output_dir / "repair_candidates.jsonl", [])
        write_jsonl(output_dir / "repair_attempts.jsonl", [])
        result = {"status": "no_recoverable_site", "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0}
        write_json(output_dir / "manifest.json", result)
        return result
    write_json(output_dir / "semantic-localization.json", localization)
    candidate, failure_site = _bind_candidate(args, trace, site)
    write_jsonl(output_dir / "repair_candidates.jsonl", [candidate])
    if not (output_dir / "manifest.json").exists():
        write_json(output_dir / "manifest.json", {"schema_version": "ifv-psd-repair-driver-result-v1", "status": "generating",
                                                  "trace": str(args.trace), "candidate_count": 0, "accepted_count": 0})
    adapter = QwenContinuationAdapter(policy_base_url=args.policy_base_url, policy_model=args.policy_model,
                                      run_dir=output_dir, case_id=str(trace.get("case_id") or "case"), step_seconds=args.step_seconds,
                                      max_suffix_actions=args.max_suffix_actions)
    adapter.proposer_cache_path = output_dir / "proposer-response.json"
    proposals = await _proposals(adapter, args, config, failure_site, public_context, gold, feedback)
    records = load_jsonl(output_dir / "repair_attempts.jsonl")
    for index, hint in enumerate(proposals):
        if index < len(records):
            if records[index]["hint_record"]["proposal_id"] != hint.proposal_id:
                raise ValueError("saved PSD attempt changed on resume")
            continue
        episode = await _teacher_episode(adapter, output_dir, config, failure_site, trace, hint, index)
        name = f"hint-{index:02d}-teacher.json"
        write_json(output_dir / "episodes" / name, episode)
        verification = judge(site, gold, hint, {"repair_step_id": failure_site["step_id"]})
        suffix = sum(1 for s in episode["state"]["all_steps"] if (s.get("metadata") or {}).get("psd_suffix_step"))
        records.append(_attempt_record(args, trace, candidate, failure_site, hint, verification, _teacher_capture(episode), name, suffix))
        write_jsonl(output_dir / "repair_attempts.jsonl", records)
    result = {"schema_version": "ifv-psd-repair-driver-result-v1", "status": "generated" if records else "no_admissible_hints",
              "trace": str(args.trace), "candidate_count": len(records),
              "accepted_count": sum(r.get("accepted") is True for r in records), "pending_hinted_episode_count": 0,
              "artifacts": {"repair_attempts": "repair_attempts.jsonl"}}
    write_json(output_dir / "manifest.json", result)
    return result


def _run_config(args: argparse.Namespace) -> dict[str, Any]:
    """The run's identity: its arguments, each input file as {path, sha256}."""
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "resume"}
    for key in FILE_ARGS:
        value = getattr(args, key)
        if value is not None:
            config[key] = {"path": str(value.resolve()), "sha256": sha256_file(value)}
    return config


def _round_localization(args: argparse.Namespace, trace: dict[str, Any], feedback: dict[str, Any]) -> dict[str, Any] | None:
    """Relocalized when the feedback asks, else the given semantic verification, else the scripted guess."""
    if feedback.get("needs_relocalization"):
        return relocalize(trace, feedback.get("anchor_feedback") or {})
    if args.semantic_verification:
        return load_json(args.semantic_verification)
    return localize_initial(trace)


def _bind_candidate(args: argparse.Namespace, trace: dict[str, Any], site: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The localized candidate row and the failure site the proposer and teacher see."""
    episode_id = trace.get("image_id") or "episode"
    step_id = f"{episode_id}:react:{site + 1}"
    runtime_path = ((trace.get("state") or {}).get("runtime_store") or {}).get("runtime_path")
    failure_site = {"source_step_index": site, "step_index": _policy_steps(trace).index(site), "step_id": step_id,
                    "stage": "unified_react", "runtime_store_path": runtime_path}
    candidate = {"schema_version": "ifv-psd-candidate-v1",
                 "candidate_id": "psd-candidate:" + _sha({"kind": "repair", "case_id": trace.get("case_id"), "episode_id": episode_id,
                                                          "step_id": step_id, "source_trace_sha256": sha256_file(args.trace)}),
                 "class": "repair_seed", "candidate_status": "localized", "case_id": trace.get("case_id"), "episode_id": episode_id,
                 "repair_signal": "terminal_outcome_mismatch",
                 "repair_site": {"step_id": step_id, "source_step_index": site, "stage": "unified_react", "example_type": "react",
                                 "runtime_store_path": runtime_path,
                                 "rollout_token_capture": _source_capture(trace, site)}}
    return candidate, failure_site


async def _proposals(adapter: QwenContinuationAdapter, args: argparse.Namespace, config: dict[str, Any], failure_site: dict[str, Any],
                     public_context: dict[str, Any], gold: dict[str, Any], feedback: dict[str, Any]) -> list[HintProposal]:
    """The round's hints: the bound proposals on resume, else the proposer's, filtered by
    the feedback (a rejected one leaves its reason in the audits)."""
    output_dir = args.output_dir
    proposals_path = output_dir / "hint-proposals.json"
    if proposals_path.exists():
        return [HintProposal(**row) for row in load_bound(proposals_path, identity=config)]
    proposals = await adapter.propose_hints(failure_site=failure_site, public_trace_context=public_context,
                                            private_context=gold, hint_count=args.hint_count, hint_level=args.hint_level)
    from eviscene_training.psd_repair_search import revision_rejection  # lazy: imported at call time, as the real driver does

    filtered = []
    audit_path = output_dir / "proposer-hint-audits.json"
    audits = load_json(audit_path).get("proposals", []) if audit_path.exists() else []
    for hint in proposals:
        reason = revision_rejection(hint.text, feedback)
        if reason:
            audits.append({"passed": False, "reason": reason})
        else:
            filtered.append(hint)
    write_json(audit_path, {"proposals": audits})
    save_bound(proposals_path, identity=config, payload=[
        {"text": h.text, "level": h.level, "proposal_id": h.proposal_id, "provider": h.provider, "model": h.model,
         "audit": dict(h.audit)} for h in filtered])
    return filtered


async def _teacher_episode(adapter: QwenContinuationAdapter, output_dir: Path, config: dict[str, Any], failure_site: dict[str, Any],
                           trace: dict[str, Any], hint: HintProposal, index: int) -> dict[str, Any]:
    """The hinted teacher episode: from the bound continuation cache, else run and cached."""
    cache = output_dir / "continuations" / f"hint-{index:02d}.json"
    identity = {"run": _sha(config), "hint": hint.audit["hint_sha256"]}
    if cache.exists():
        return load_bound(cache, identity=identity)["teacher_episode_trace"]
    continuation = await adapter.run_hinted_episode(failure_site=failure_site, hint=hint, base_trace=trace, index=index)
    episode = continuation.teacher_episode_trace
    save_bound(cache, identity=identity, payload={"teacher_steps": continuation.teacher_steps, "student_steps": [],
                                                  "hint": hint.text, "teacher_complete": True, "student_complete": False,
                                                  "stop_reason": continuation.stop_reason, "teacher_episode_trace": episode})
    return episode


def _attempt_record(args: argparse.Namespace, trace: dict[str, Any], candidate: dict[str, Any], failure_site: dict[str, Any],
                    hint: HintProposal, verification: dict[str, Any], teacher_capture: dict[str, Any], name: str,
                    teacher_steps: int) -> dict[str, Any]:
    """The judged attempt record (the episode written as ``episodes/<name>``)."""
    site, step_id = failure_site["source_step_index"], failure_site["step_id"]
    accepted = verification["passed"] is True
    return {
        "schema_version": "ifv-psd-repair-attempt-v1", "candidate_id": candidate["candidate_id"],
        "attempt_id": "psd-repair-hint:" + hashlib.sha256(hint.proposal_id.encode()).hexdigest(),
        "case_id": trace.get("case_id"), "episode_id": candidate["episode_id"], "repair_step_id": step_id,
        "repair_site": {"step_index": failure_site["step_index"], "source_step_index": site, "step_id": step_id, "stage": "unified_react",
                        "example_type": "react", "localization_kind": "semantic_task_verifier"},
        "repair_tier": "causal_episode_pass" if accepted else "unrepairable", "source_rollout_failed": True,
        "hinted_local_pass": accepted, "hinted_episode_pass": accepted, "hinted_strict_trace_audit_pass": True,
        "hint_record": {"text": hint.text, "level": hint.level, "provider": hint.provider, "model": hint.model,
                        "proposal_id": hint.proposal_id, "audit": dict(hint.audit)},
        "verification": {"source_rollout_failed": True, "hinted_local_pass": accepted, "hinted_episode_pass": accepted,
                         "repair_tier": "causal_episode_pass" if accepted else "unrepairable", "reasons": [] if accepted else ["hinted_local_verifier_failed"]},
        "local_verification": verification, "accepted": accepted, "scaffold_only": False,
        "student_prompt_ids": list(_source_capture(trace, site).get("prompt_token_ids") or []),
        "teacher_prompt_ids": list(teacher_capture.get("prompt_token_ids") or []),
        "completion_ids": list(teacher_capture.get("completion_token_ids") or []),
        "repair_rollout_token_capture": teacher_capture,
        "source_trace_sha256": sha256_file(args.trace),
        "continuation": {"teacher_complete": True, "student_complete": False, "stop_reason": "teacher_episode_complete",
                         "teacher_step_count": teacher_steps, "student_step_count": 0, "hinted_teacher_episode_trace": f"episodes/{name}",
                         "hinted_teacher_episode_trace_sha256": sha256_file(args.output_dir / "episodes" / name)},
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.search_mode != "feedback":
        return await _run_single(args)
    from eviscene_training.psd_repair_search import run_search, reusable_localization  # lazy: imported at call time, as the real driver does

    identity = {}
    for key, value in vars(args).items():
        if key == "resume":
            continue
        identity[key] = ({"path": str(value.resolve()), "sha256": sha256_file(value)}
                         if isinstance(value, Path) and key != "output_dir" else
                         str(value.resolve()) if isinstance(value, Path) else value)
    original_context = load_json(args.public_context)

    async def execute_round(directory: Path, feedback: dict[str, Any], history: list[dict[str, Any]]) -> None:
        child = copy.copy(args)
        child.search_mode, child.hint_count = "single", 1
        child.output_dir = directory
        child.resume = (directory / "run-inputs.json").exists()
        if child.resume:
            original = load_json(directory / "run-inputs.json")["identity"].get("semantic_verification")
            child.semantic_verification = Path(original["path"]) if original else None
        else:
            child.semantic_verification = reusable_localization(history, feedback) or args.semantic_verification
        context = {**original_context, "repair_search": feedback}
        inputs = directory.parent.parent / "round-inputs" / directory.name
        context_path, media_path = inputs / "public.json", inputs / "media.json"
        media = {"episodes": [{"path": name, "sha256": digest} for row in history for name, digest in row["files"].items()
                              if name.endswith("-teacher.json")]}
        for path, payload in ((context_path, context), (media_path, media)):
            if path.exists():
                if load_json(path) != payload:
                    raise ValueError("search child input changed on resume")
            else:
                write_json(path, payload)
        child.public_context, child.search_media = context_path, media_path
        await _run_single(child)

    return await run_search(root=args.output_dir, identity=identity, resume=args.resume, execute_round=execute_round,
                            max_attempts=args.repair_attempts, max_proposals=args.proposal_rounds, max_seconds=args.search_seconds)


def main() -> None:
    args = _parser().parse_args()
    print(json.dumps(asyncio.run(_run(args)), ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
