"""STAND-IN of ``eviscene_training.psd_repair_search`` (NOT EviScene).

The feedback search loop with the contract of psd-run-format §4 (budgets,
``search.lock``, ``search-state.json``, ``requests/round-NN.json``, statuses,
resume checks); the rules it applies are the gate protocol's, imported, not copied.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Awaitable, Callable

import eviscene_gate_protocol as P
from eviscene_training.io import _sha, load_bound, load_json, load_jsonl, save_bound, sha256_file, write_jsonl

try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SEARCH_VERSION = "ifv-psd-feedback-search-v1"
ROUND_FILES = ("manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "proposer-hint-audits.json",
               "hint-proposals.json", "proposer-response.json", "live-serving-check.json", "semantic-localization.json")
revision_context = P.revision_context
revision_rejection = P.revision_rejection


@contextlib.contextmanager
def search_lock(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "search.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a second writer fails at once (OSError)
        yield
    finally:
        os.close(fd)


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


def inspect_round(directory: Path) -> dict[str, Any] | None:
    """The history row of a finished round; None while a verifier is pending."""
    manifest = load_json(directory / "manifest.json")
    records = load_jsonl(directory / "repair_attempts.jsonl")
    audit_path = directory / "proposer-hint-audits.json"
    audits = load_json(audit_path).get("proposals", []) if audit_path.exists() else []
    if any(not r.get("local_verification") for r in records) or (manifest.get("pending_hinted_episode_count") or 0) > 0:
        return None
    if len(records) > 1:
        raise ValueError("a feedback round produced more than one attempt")
    files = {str((directory / n).resolve()): sha256_file(directory / n) for n in ROUND_FILES if (directory / n).exists()}
    episodes = []
    for record in records:
        episode_path = (directory / record["continuation"]["hinted_teacher_episode_trace"]).resolve()
        files[str(episode_path)] = sha256_file(episode_path)
        record["continuation"]["hinted_teacher_episode_trace"] = str(episode_path)
        episodes.append(load_json(episode_path))
    status = manifest.get("status")
    return {"directory": str(directory.resolve()), "files": files, "records": records,
            "candidates": load_jsonl(directory / "repair_candidates.jsonl"),
            "feedback": P.round_feedback(records, audits, status, episodes),
            "no_further_hint": P.no_further_hint(records, audits, status)}


def _persist(root: Path, identity: dict[str, Any], state: dict[str, Any], budgets: tuple[int, int]) -> None:
    save_bound(root / "search-state.json", identity=identity, payload=state)
    records = [r for row in state["rounds"] for r in row["records"]]
    candidates: dict[str, Any] = {}
    for row in state["rounds"]:
        for c in row["candidates"]:
            candidates.setdefault(c["candidate_id"], c)
    write_jsonl(root / "repair_attempts.jsonl", records)
    write_jsonl(root / "repair_candidates.jsonl", list(candidates.values()))
    manifest = {"schema_version": SEARCH_VERSION, "status": state["status"], "converged": state["status"] == "converged",
                "candidate_count": len(records), "accepted_count": sum(r.get("accepted") is True for r in records),
                "proposal_rounds": len(state["rounds"]), "attempt_budget": budgets[0], "proposal_budget": budgets[1],
                "elapsed_seconds": state["elapsed_seconds"], "stop_reason": state["status"],
                "rounds": [row["directory"] for row in state["rounds"]], "execution_error": state.get("execution_error"),
                "training_distribution_provider": "frozen_self_teacher_only"}
    tmp = root / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, root / "manifest.json")


async def run_search(*, root: Path, identity: dict[str, Any], resume: bool,
                     execute_round: Callable[[Path, dict[str, Any], list[dict[str, Any]]], Awaitable[Any]],
                     max_attempts: int = 6, max_proposals: int = 12, max_seconds: float = 3600) -> dict[str, Any]:
    P.validate_budgets(max_attempts, max_proposals, max_seconds)
    root = Path(root)
    search_identity = {"version": SEARCH_VERSION, "inputs": identity, "max_attempts": max_attempts,
                       "max_proposals": max_proposals, "max_seconds": max_seconds}
    if resume and not (root / "search-state.json").exists():
        raise FileNotFoundError(f"nothing to resume in {root}")
    if not resume:
        root.mkdir(parents=True, exist_ok=False)
    budgets = (max_attempts, max_proposals)
    with search_lock(root):
        state = load_bound(root / "search-state.json", identity=search_identity) if resume else \
            {"status": "searching", "elapsed_seconds": 0.0, "rounds": []}
        for row in state["rounds"]:  # verify_snapshot
            for name, digest in row["files"].items():
                if sha256_file(name) != digest:
                    raise ValueError(f"search snapshot changed: {name}")
        while True:
            size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
            stop = P.next_stop(state, max_attempts, max_proposals, max_seconds, size)
            if stop:
                state["status"] = stop
                _persist(root, search_identity, state, budgets)
                return load_json(root / "manifest.json")
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
                traceback.print_exc()  # the stand-in also prints it (the real driver keeps only the type)
                state["elapsed_seconds"] += time.monotonic() - started
                state["status"] = P.PAUSED_EXECUTION_ERROR
                state["execution_error"] = {"round": index, "type": type(exc).__name__}
                _persist(root, search_identity, state, budgets)
                return load_json(root / "manifest.json")
            state["elapsed_seconds"] += time.monotonic() - started
            row = inspect_round(directory)
            if row is None:
                state["status"] = "paused_pending_verifier"
                _persist(root, search_identity, state, budgets)
                return load_json(root / "manifest.json")
            state["rounds"].append(row)
            _persist(root, search_identity, state, budgets)
