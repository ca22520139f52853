"""STAND-IN of ``eviscene_training.psd_repair_search`` (NOT EviScene).

The feedback search loop with the contract of psd-run-format §4: ``run_search``
(budgets, ``search.lock``, ``search-state.json``, ``requests/round-NN.json``,
statuses, resume checks), ``revision_context`` (§4.1), ``revision_rejection``
(§4.2.3), ``inspect_round`` and ``reusable_localization``.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
import traceback
from pathlib import Path
from typing import Any, Awaitable, Callable

from eviscene_training.io import _sha, load_bound, load_json, load_jsonl, save_bound, sha256_file, write_jsonl

try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SEARCH_VERSION = "ifv-psd-feedback-search-v1"
LOCK_CHECKS = ("source_error_confirmed", "repaired_at_selected_step", "procedural_hint", "anchor_matches")
CHECK_NAMES = ("source_error_confirmed", "repaired_at_selected_step", "grounded_episode", "procedural_hint", "anchor_matches", "episode_complete")
TRACE_STEP_KEYS = ("stage", "action_type", "tool_name", "tool_args", "tool_result", "thought", "output", "index", "policy_action", "function_call_id")
STORAGE_BUDGET = 2 << 30
ROUND_FILES = (
    "manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "proposer-hint-audits.json",
    "hint-proposals.json", "proposer-response.json", "live-serving-check.json", "semantic-localization.json",
)


@contextlib.contextmanager
def search_lock(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "search.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a second writer fails at once (OSError)
        yield
    finally:
        os.close(fd)


def validate_budgets(max_attempts: Any, max_proposals: Any, max_seconds: Any) -> None:
    if type(max_attempts) is not int or not 1 <= max_attempts <= 32:
        raise ValueError("max_attempts must be an integer in 1..32")
    if type(max_proposals) is not int or not max_attempts <= max_proposals <= 64:
        raise ValueError("max_proposals must be an integer between max_attempts and 64")
    if type(max_seconds) not in (int, float) or not 1 <= max_seconds <= 86400:
        raise ValueError("max_seconds must be in 1..86400")


# ------------------------------------------------------------------ feedback rules
def checker_values(local_verification: Any) -> dict[str, bool]:
    lv = local_verification if isinstance(local_verification, dict) else {}
    out = {}
    for row in lv.get("checks") or []:
        if isinstance(row, dict) and row.get("name") in CHECK_NAMES and type(row.get("passed")) is bool:
            out.setdefault(row["name"], row["passed"])
    return {name: out[name] for name in CHECK_NAMES if name in out}


def trace_steps(episode: Any) -> list[dict[str, Any]]:
    steps = ((episode or {}).get("state") or {}).get("all_steps") or []
    out = []
    for index, step in enumerate(steps):
        meta = step.get("metadata") or {}
        if not meta.get("psd_suffix_step"):
            continue
        row = {key: step.get(key) for key in TRACE_STEP_KEYS if key in step}
        row["index"] = index
        row["policy_action"] = meta.get("policy_action")
        row["function_call_id"] = meta.get("function_call_id")
        out.append(row)
    return out


def public_attempt_feedback(record: dict[str, Any], episode: Any) -> dict[str, Any]:
    lv = record.get("local_verification") or {}
    earliest = (lv.get("review") or {}).get("earliest_error_step")
    return {
        "hint": record["hint_record"]["text"],
        "selected_source_step": record["repair_site"]["source_step_index"],
        "checker": checker_values(lv),
        "earliest_error_step": earliest if type(earliest) is int else -1,
        "task_passed": record.get("hinted_episode_pass") is True,
        "strict_trace_passed": record.get("hinted_strict_trace_audit_pass") is True,
        "accepted": record.get("accepted") is True,
        "repaired_steps": trace_steps(episode),
    }


def revision_context(history: list[dict[str, Any]]) -> dict[str, Any]:
    previous = [copy.deepcopy(row["feedback"]) for row in history]
    attempts = [a for fb in previous for a in fb.get("attempts", [])]
    lock = ""
    for attempt in attempts:
        if all(attempt["checker"].get(name) is True for name in LOCK_CHECKS):
            hint = attempt["hint"]
            if not lock or hint == lock or hint.startswith(lock + "\n"):
                lock = hint
    excluded: list[str] = []
    for attempt in attempts:
        if attempt["hint"] not in excluded:
            excluded.append(attempt["hint"])
    last = attempts[-1] if attempts else None
    return {
        "previous_rounds": previous,
        "locked_hint": lock,
        "excluded_hints": excluded,
        "needs_relocalization": bool(attempts) and not lock and last["checker"].get("anchor_matches") is False,
        "anchor_feedback": (
            {"selected_source_step": last["selected_source_step"], "earliest_error_step": last["earliest_error_step"],
             "checker": dict(last["checker"])} if last else {}
        ),
    }


def revision_rejection(hint: str, feedback: dict[str, Any]) -> str:
    stripped = hint.strip()
    if any(stripped == h.strip() for h in feedback.get("excluded_hints", [])):
        return "repeated_completed_hint"
    lock = feedback.get("locked_hint") or ""
    if lock and not hint.startswith(lock + "\n"):
        return "changed_verified_hint"
    return ""


def reusable_localization(history: list[dict[str, Any]], feedback: dict[str, Any]) -> Path | None:
    """The latest round's semantic localization, unless the feedback asks to relocalize."""
    if feedback.get("needs_relocalization"):
        return None
    for row in reversed(history):
        for name, digest in row.get("files", {}).items():
            if name.endswith("/semantic-localization.json"):
                if sha256_file(name) != digest:
                    raise ValueError("reusable localization changed")
                return Path(name)
    return None


# ------------------------------------------------------------------ rounds
def inspect_round(directory: Path) -> dict[str, Any] | None:
    """The history row of a finished round; None while a verifier is pending."""
    manifest = load_json(directory / "manifest.json")
    records = load_jsonl(directory / "repair_attempts.jsonl")
    candidates = load_jsonl(directory / "repair_candidates.jsonl")
    audit_path = directory / "proposer-hint-audits.json"
    audits = load_json(audit_path).get("proposals", []) if audit_path.exists() else []
    if any(not r.get("local_verification") for r in records) or (manifest.get("pending_hinted_episode_count") or 0) > 0:
        return None
    if len(records) > 1:
        raise ValueError("a feedback round produced more than one attempt")
    files = {}
    for name in ROUND_FILES:
        path = directory / name
        if path.exists():
            files[str(path.resolve())] = sha256_file(path)
    episodes = []
    for record in records:
        episode_path = (directory / record["continuation"]["hinted_teacher_episode_trace"]).resolve()
        files[str(episode_path)] = sha256_file(episode_path)
        record["continuation"]["hinted_teacher_episode_trace"] = str(episode_path)
        episodes.append(load_json(episode_path))
    status = manifest.get("status")
    reasons = [row.get("reason") or "hint_audit_failed" for row in audits if row.get("passed") is not True]
    return {
        "directory": str(directory.resolve()),
        "files": files,
        "records": records,
        "candidates": candidates,
        "feedback": {
            "attempts": [public_attempt_feedback(r, e) for r, e in zip(records, episodes)],
            "rejected_proposal_reasons": reasons,
            "status": status,
        },
        "no_further_hint": status == "no_recoverable_site" or (not records and not audits),
    }


def verify_snapshot(rounds: list[dict[str, Any]]) -> None:
    for row in rounds:
        for name, digest in row["files"].items():
            if not Path(name).exists() or sha256_file(name) != digest:
                raise ValueError(f"search snapshot changed: {name}")


def _tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _next_stop(state: dict[str, Any], max_attempts: int, max_proposals: int, max_seconds: float, root: Path) -> str | None:
    rows = state["rounds"]
    records = [r for row in rows for r in row["records"]]
    if any(r.get("accepted") is True for r in records):
        return "converged"
    if len(records) >= max_attempts:
        return "attempt_budget_exhausted"
    if len(rows) >= max_proposals:
        return "proposal_budget_exhausted"
    if state["elapsed_seconds"] >= max_seconds:
        return "time_budget_exhausted"
    if rows and rows[-1]["no_further_hint"]:
        return "no_further_grounded_hint"
    if _tree_size(root) >= STORAGE_BUDGET:
        return "paused_storage_budget"
    return None


def _persist(root: Path, identity: dict[str, Any], state: dict[str, Any], budgets: tuple[int, int]) -> dict[str, Any]:
    save_bound(root / "search-state.json", identity=identity, payload=state)
    records = [r for row in state["rounds"] for r in row["records"]]
    candidates: dict[str, Any] = {}
    for row in state["rounds"]:
        for c in row["candidates"]:
            candidates.setdefault(c["candidate_id"], c)
    write_jsonl(root / "repair_attempts.jsonl", records)
    write_jsonl(root / "repair_candidates.jsonl", list(candidates.values()))
    manifest = {
        "schema_version": SEARCH_VERSION,
        "status": state["status"],
        "converged": state["status"] == "converged",
        "candidate_count": len(records),
        "accepted_count": sum(r.get("accepted") is True for r in records),
        "proposal_rounds": len(state["rounds"]),
        "attempt_budget": budgets[0],
        "proposal_budget": budgets[1],
        "elapsed_seconds": state["elapsed_seconds"],
        "stop_reason": state["status"],
        "rounds": [row["directory"] for row in state["rounds"]],
        "execution_error": state.get("execution_error"),
        "training_distribution_provider": "frozen_self_teacher_only",
    }
    tmp = root / "manifest.json.tmp"
    tmp.write_text(__import__("json").dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, root / "manifest.json")
    return manifest


async def run_search(
    *,
    root: Path,
    identity: dict[str, Any],
    resume: bool,
    execute_round: Callable[[Path, dict[str, Any], list[dict[str, Any]]], Awaitable[Any]],
    max_attempts: int = 6,
    max_proposals: int = 12,
    max_seconds: float = 3600,
) -> dict[str, Any]:
    validate_budgets(max_attempts, max_proposals, max_seconds)
    root = Path(root)
    search_identity = {"version": SEARCH_VERSION, "inputs": identity, "max_attempts": max_attempts,
                       "max_proposals": max_proposals, "max_seconds": max_seconds}
    if resume:
        if not (root / "search-state.json").exists():
            raise FileNotFoundError(f"nothing to resume in {root}")
    else:
        root.mkdir(parents=True, exist_ok=False)
    budgets = (max_attempts, max_proposals)
    with search_lock(root):
        if resume:
            state = load_bound(root / "search-state.json", identity=search_identity)
            verify_snapshot(state["rounds"])
        else:
            state = {"status": "searching", "elapsed_seconds": 0.0, "rounds": []}
            _persist(root, search_identity, state, budgets)
        while True:
            stop = _next_stop(state, max_attempts, max_proposals, max_seconds, root)
            if stop:
                state["status"] = stop
                return _persist(root, search_identity, state, budgets)
            index = len(state["rounds"])
            feedback = revision_context(state["rounds"])
            request = root / "requests" / f"round-{index:02d}.json"
            request_identity = {"search": _sha(search_identity), "round": index}
            if request.exists():
                if load_bound(request, identity=request_identity) != feedback:
                    raise ValueError("search feedback changed on resume")
            else:
                save_bound(request, identity=request_identity, payload=feedback)
            state["status"] = "searching"
            state.pop("execution_error", None)
            _persist(root, search_identity, state, budgets)
            directory = root / "rounds" / f"round-{index:02d}"
            started = time.monotonic()
            try:
                await execute_round(directory, feedback, copy.deepcopy(state["rounds"]))
            except Exception as exc:  # noqa: BLE001 - as the driver: any round failure pauses the search, recorded
                # the stand-in also prints the traceback (the real driver keeps only the type)
                traceback.print_exc()
                state["elapsed_seconds"] += time.monotonic() - started
                state["status"] = "paused_execution_error"
                state["execution_error"] = {"round": index, "type": type(exc).__name__}
                return _persist(root, search_identity, state, budgets)
            state["elapsed_seconds"] += time.monotonic() - started
            row = inspect_round(directory)
            if row is None:
                state["status"] = "paused_pending_verifier"
                return _persist(root, search_identity, state, budgets)
            state["rounds"].append(row)
            _persist(root, search_identity, state, budgets)
