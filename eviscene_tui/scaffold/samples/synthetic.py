"""Synthetic data for benchmarks and tests (deterministic, fast to write).

- :func:`make_many_cases` — ``n`` small but valid cases (feedback searches and single
  runs, several statuses; every hash binds), for the ``check`` / runs-screen benchmarks;
- :func:`make_big_trace` — one source trace of about ``target_bytes`` (thousands of
  steps, big ``tool_result`` strings), for the trace-loading benchmarks;
- :func:`make_big_case` — a single run directory whose source trace (outside the root) is big, with a
  semantic localization pointing at the failure step (for "open a 200 MB case");
- :func:`make_big_capture_ids` — ``n`` Qwen3.5 token ids that decode with the tiny
  tokenizer (chat frames, image-pad runs, text), e.g. 1,000,000 for the token view.

The small cases use the same shapes as ``sample_runs`` but no runtime archives (their
traces name none: ``check`` reports a named archive it cannot find), no
images and text-only prompts (so no ``psd_media``), which keeps each case to ~12-22
files. Absolute paths lie under ``/data/eviscene/synthetic/<case>`` (the recorded
``output_dir``), so a reader maps them back into the case.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.jsonio import encode_bound, hint_sha256, pretty_json_bytes
from eviscene_tui.scaffold.samples.cases import slate_unsupported
from eviscene_tui.scaffold.samples.tree import Tree
from eviscene_tui.scaffold.tiny import encode, special_id

FAKE_ROOT = "/data/eviscene/synthetic"
TRACE = "source-trace.json"
PROFILE_ID = "ifv-qwen3.5-9b"
MODEL_PATH = "/models/Qwen3.5-9B"
CHECKS = ("source_error_confirmed", "repaired_at_selected_step", "grounded_episode", "procedural_hint", "anchor_matches", "episode_complete")

# kinds of small cases, cycled by index (≈ 60 % single runs, 40 % feedback searches)
KINDS = (
    "single_generated",
    "search_converged",
    "single_no_admissible_hints",
    "single_generated",
    "search_no_further_grounded_hint",
    "single_generating",
    "single_generated",
    "search_paused_pending_verifier",
    "single_generated",
    "single_no_admissible_hints",
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# The synthetic data holds only str/int/bool/None and a few short floats (-0.25, 0.8,
# 300.0) whose orjson text equals Python's repr, so orjson gives the same bytes as the
# driver's json.dumps writers (checked by tests/scaffold/samples/test_samples_synthetic.py).
def _pretty(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _csha(value: Any) -> str:
    return hashlib.sha256(_canon(value)).hexdigest()


def _bound_bytes(identity: Any, payload: Any) -> bytes:
    return _pretty({"identity": identity, "payload": payload, "payload_sha256": _csha(payload)})


class _Writer:
    """Collects one case's files, then writes them with as few syscalls as possible."""

    def __init__(self, root: Path, fake: str) -> None:
        self.root = root
        self.fake = fake
        self.files: dict[str, bytes] = {}

    def put(self, rel: str, data: bytes) -> str:
        self.files[rel] = data
        return _sha(data)

    def json(self, rel: str, value: Any) -> str:
        return self.put(rel, _pretty(value))

    def jsonl(self, rel: str, rows: list[Any]) -> str:
        return self.put(rel, b"".join(_canon(r) + b"\n" for r in rows))

    def bound(self, rel: str, identity: Any, payload: Any) -> None:
        self.put(rel, _bound_bytes(identity, payload))

    def abs(self, rel: str) -> str:
        return f"{self.fake}/{rel}" if rel else self.fake

    def binding(self, rel: str) -> dict[str, str]:
        return {"path": self.abs(rel), "sha256": _sha(self.files[rel])}

    def flush(self) -> None:
        root = str(self.root)
        dirs = {rel.rsplit("/", 1)[0] for rel in self.files if "/" in rel}
        os.makedirs(root, exist_ok=True)
        for d in sorted(dirs):
            os.makedirs(f"{root}/{d}", exist_ok=True)
        for rel, data in self.files.items():
            with open(f"{root}/{rel}", "wb") as fh:
                fh.write(data)


_ID_CACHE: dict[str, list[int]] = {}


def _ids(text: str) -> list[int]:
    if text not in _ID_CACHE:
        _ID_CACHE[text] = encode(text)
    return _ID_CACHE[text]


def _capture(prompt_text: str, completion_text: str) -> dict[str, Any]:
    prompt = _ids(prompt_text)
    completion = _ids(completion_text) + [special_id("<|im_end|>")]
    return {
        "schema_version": "ifv-policy-token-capture-v1",
        "status": "complete",
        "prompt_token_ids": prompt,
        "completion_token_ids": completion,
        "completion_logprobs": [-0.25 if i % 3 else -0.031 for i in range(len(completion))],
        "completion_topk_by_position": [],
        "topk": 0,
        "missing": [],
    }


_SYSTEM = "<|im_start|>system\nYou are EviScene, an image fact-checker.<|im_end|>\n"


def _step(i: int, case_id: str, *, judgment: bool = False, stage_key: str = "stage", teacher: bool = False) -> dict[str, Any]:
    user = "<|im_start|>user\nClaim: the photo shows the event.<|im_end|>\n"
    prompt = _SYSTEM + user + "<|im_start|>assistant\n"
    if judgment:
        out = {"verdict": "fake" if teacher else "real", "confidence": 0.8, "overall_assessment": "done"}
        text = json.dumps(out)
        step = {"round": i + 1, stage_key: "unified_judgment", "action_type": "output", "tool_name": None, "tool_args": None,
                "tool_result": None, "thought": "Judge now.", "output": text}
        action: dict[str, Any] = {"type": "output", "output": out}
    else:
        args = {"query": f"event photo step {i}"}
        text = "Search.\n<tool_call>\n" + json.dumps({"name": "web_search", "arguments": args}) + "\n</tool_call>"
        step = {"round": i + 1, stage_key: "unified_react", "action_type": "tool_call", "tool_name": "web_search", "tool_args": args,
                "tool_result": json.dumps({"results": [{"title": f"result {i}", "url": f"https://example.org/{i}"}]}),
                "thought": "Search.", "output": None}
        action = {"type": "tool_call", "tool_name": "web_search", "arguments": args}
    cap = _capture(prompt, text)
    step["tokens"] = {"prompt": len(cap["prompt_token_ids"]), "completion": len(cap["completion_token_ids"]), "thought": 0}
    step["metadata"] = {
        "policy_input": {"system_instruction": "You are EviScene.", "input_payload": [{"role": "user", "content": f"Claim {case_id}"}],
                         "tools": [], "response_format": None},
        "policy_action": action,
        "policy_token_capture": cap,
        "context_request_id": f"req-{i + 1:06d}",
        "interaction_id": f"ia-{case_id}-{i}",
    }
    return step


def _trace(case_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    final = json.loads(steps[-1]["output"])
    return {
        "image_id": f"ep-{case_id}",
        "case_id": case_id,
        "verdict": final["verdict"],
        "confidence": final["confidence"],
        "judgment": final,
        "termination": "success",
        "error": None,
        "state": {
            "image_id": f"ep-{case_id}",
            "runtime_case": {"case_id": case_id},
            "all_steps": steps,
            "termination": "success",
            "errors": [],
        },
    }


def _single_run(w: _Writer, prefix: str, case_id: str, status: str, *, public_rel: str | None, accept: bool | None,
                extra_inputs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Write one run directory under ``prefix`` ('' = case root); return its attempt records.

    ``accept``: True/False = judged accepted/rejected, None = pending (no verifier yet)."""
    p = prefix
    trace = json.loads(w.files[TRACE])
    trace_sha = _sha(w.files[TRACE])
    steps = trace["state"]["all_steps"]
    config = _run_config(w, prefix, public_rel, extra_inputs)
    w.bound(p + "run-inputs.json", config, {"status": "initialized"})
    trace_canon = _csha(trace)
    if status == "no_recoverable_site":
        w.json(p + "semantic-localization.json", {"schema_version": "ifv-psd-semantic-localization-v1", "passed": False,
                                                   "source_trace_canonical_sha256": trace_canon, "candidates": [], "explanation": "no site"})
        w.jsonl(p + "repair_candidates.jsonl", [])
        w.json(p + "manifest.json", {"status": "no_recoverable_site", "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0})
        return []
    anchor = 0
    site, candidate_id = _localize(w, p, case_id, steps, anchor, trace_canon, trace_sha)
    step_id = site["step_id"]
    head = {"schema_version": "ifv-psd-repair-driver-result-v1", "trace": w.abs(TRACE), "runtime_archive": None,
            "source_task_review": None, "source_audit": None, "train_cases_sha256": None, "source_access_policy": None}
    if status == "no_admissible_hints":
        w.json(p + "proposer-hint-audits.json", {"proposals": [{"passed": False, "reason": "binary_verdict_leak"},
                                                               {"passed": False, "reason": "hint_too_long"}]})
        w.bound(p + "hint-proposals.json", config, [])
        w.jsonl(p + "repair_attempts.jsonl", [])
        w.json(p + "manifest.json", {**head, "status": "no_admissible_hints", "candidate_count": 0, "accepted_count": 0,
                                     "pending_hinted_episode_count": 0})
        return []
    proposal = _propose(w, p, config, case_id, step_id)
    teacher, episode, ep_sha = _teach(w, p, _csha(config), case_id, steps, anchor, step_id, proposal["text"])
    tcap = teacher[0]["metadata"]["policy_token_capture"]
    local_verification = _judge(accept, step_id, trace_sha, proposal["text"], tcap, episode, anchor)
    passed = bool(local_verification) and local_verification["passed"]
    tier = "causal_episode_pass" if passed else "unrepairable"
    record = {
        "schema_version": "ifv-psd-repair-attempt-v1", "candidate_id": candidate_id, "attempt_id": proposal["proposal_id"], "case_id": case_id,
        "episode_id": f"ep-{case_id}", "repair_step_id": step_id, "repair_site": site, "repair_tier": tier,
        "source_rollout_failed": True, "hinted_local_pass": passed, "hinted_episode_pass": passed, "hinted_strict_trace_audit_pass": True,
        "hint_record": proposal,
        "verification": {"repair_tier": tier, "expected_verdict": "fake", "hinted_recorded_verdict": "fake", "reasons": []},
        "local_verification": local_verification, "accepted": passed, "scaffold_only": False,
        "student_prompt_ids": steps[anchor]["metadata"]["policy_token_capture"]["prompt_token_ids"],
        "teacher_prompt_ids": tcap["prompt_token_ids"], "completion_ids": tcap["completion_token_ids"],
        "repair_rollout_token_capture": tcap, "source_trace_sha256": trace_sha,
        "continuation": {"teacher_complete": True, "student_complete": False, "stop_reason": "teacher_episode_complete",
                         "teacher_step_count": 2, "student_step_count": 0, "hinted_teacher_episode_verified": True,
                         "hinted_teacher_episode_trace": "episodes/hint-00-teacher.json",
                         "hinted_teacher_episode_trace_sha256": ep_sha},
    }
    w.jsonl(p + "repair_attempts.jsonl", [record])
    counts = {"candidate_count": 1, "accepted_count": int(passed), "pending_hinted_episode_count": int(not local_verification)}
    w.json(p + "manifest.json", {**head, "status": status, **counts})
    return [record]


def _run_config(w: _Writer, prefix: str, public_rel: str | None, extra_inputs: dict[str, Any] | None) -> dict[str, Any]:
    """The run's ``run-inputs.json`` identity, in the driver's key order."""
    return {
        "trace": w.binding(TRACE),
        "public_context": w.binding(public_rel) if public_rel else None,
        **(extra_inputs or {}),
        "output_dir": w.abs(prefix.rstrip("/")),
        "policy_model": PROFILE_ID,
        "round_start_checkpoint": MODEL_PATH,
        "hint_count": 1,
        "search_mode": "single",
        "continuation_policy_version": "native-contract-and-observed-slate-positions-v6",
    }


def _localize(w: _Writer, p: str, case_id: str, steps: list[dict[str, Any]], anchor: int, trace_canon: str,
              trace_sha: str) -> tuple[dict[str, Any], str]:
    """The semantic localization at ``anchor`` and the bound candidate; (site, candidate id)."""
    step_id = f"ep-{case_id}:react:{steps[anchor]['metadata']['interaction_id']}"
    w.json(p + "semantic-localization.json", {
        "schema_version": "ifv-psd-semantic-localization-v1", "passed": True, "source_trace_canonical_sha256": trace_canon,
        "candidates": [{"source_step_index": anchor, "recoverable": True, "selected": True, "category": "wrong_search_direction",
                        "verifier": {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": "gemini"},
                        "observed_basis": [{"trace": "source", "step_index": anchor, "quote": "Search."}], "explanation": "x"}],
        "explanation": "one site"})
    candidate_id = "psd-candidate:" + _csha({"kind": "repair", "case_id": case_id, "episode_id": f"ep-{case_id}",
                                                        "step_id": step_id, "source_trace_sha256": trace_sha})
    site = {"step_index": anchor, "source_step_index": anchor, "step_id": step_id, "stage": "unified_react", "example_type": "react",
            "context_request_id": "req-000001", "localization_kind": "semantic_task_verifier",
            "semantic_category": "wrong_search_direction"}
    candidate = {"schema_version": "ifv-psd-candidate-v1", "candidate_id": candidate_id, "class": "repair_seed",
                 "candidate_status": "localized", "case_id": case_id, "episode_id": f"ep-{case_id}",
                 "repair_site": {**site, "rollout_token_capture": steps[anchor]["metadata"]["policy_token_capture"]}}
    w.jsonl(p + "repair_candidates.jsonl", [candidate])
    return site, candidate_id


def _propose(w: _Writer, p: str, config: dict[str, Any], case_id: str, step_id: str) -> dict[str, Any]:
    """One admitted hint (its audit and the bound proposals); the attempt's hint record."""
    hint = f"Open the oldest match first ({case_id})."
    audit = {"schema_version": "ifv-psd-hint-audit-v1", "passed": True, "hint_level": 1, "hint_chars": len(hint),
             "hint_sha256": hint_sha256(hint), "errors": [], "leak_paths": []}
    proposal_id = "psd-repair-hint:" + _csha({"candidate_id": step_id, "hint": hint, "level": 1})
    w.json(p + "proposer-hint-audits.json", {"proposals": [{"passed": True, "audit": audit}]})
    w.bound(p + "hint-proposals.json", config, [{"text": hint, "level": 1, "proposal_id": proposal_id, "provider": "gemini",
                                                  "model": "gemini", "audit": audit}])
    return {"text": hint, "level": 1, "provider": "gemini", "model": "gemini", "proposal_id": proposal_id, "audit": audit}


def _teach(w: _Writer, p: str, config_sha: str, case_id: str, steps: list[dict[str, Any]], anchor: int, step_id: str,
           hint: str) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """The hinted teacher's two steps, its continuation and episode; (steps, episode, episode sha)."""
    teacher = [_step(anchor, case_id, stage_key="stage_name", teacher=True), _step(anchor + 1, case_id, judgment=True, stage_key="stage_name", teacher=True)]
    teacher[0]["stage_name"] = "psd_teacher_repair"
    teacher[1]["stage_name"] = "psd_teacher_judgment"
    episode = json.loads(w.files[TRACE])
    suffix = []
    for s in teacher:
        s2 = json.loads(json.dumps(s))
        s2["stage"] = "unified_judgment" if s2.pop("stage_name") == "psd_teacher_judgment" else "unified_react"
        s2["metadata"]["psd_role"] = "teacher"
        s2["metadata"]["psd_suffix_step"] = True
        suffix.append(s2)
    episode["state"]["all_steps"] = steps[:anchor] + suffix
    episode.update({"verdict": "fake", "judgment": json.loads(suffix[-1]["output"]),
                    "psd_repair": {"role": "teacher", "repair_step_id": step_id, "source_step_index": anchor,
                                   "terminal_state_replayed": True, "source_runtime_store_path": None}})
    w.bound(p + "continuations/hint-00.json", {"run": config_sha, "hint": hint_sha256(hint)},
            {"teacher_steps": teacher, "student_steps": [], "hint": hint, "teacher_complete": True, "student_complete": False,
             "stop_reason": "teacher_episode_complete", "teacher_episode_trace": episode, "local_targets": None})
    ep_sha = w.json(p + "episodes/hint-00-teacher.json", episode)
    return teacher, episode, ep_sha


def _judge(accept: bool | None, step_id: str, trace_sha: str, hint: str, tcap: dict[str, Any], episode: dict[str, Any],
           anchor: int) -> dict[str, Any]:
    """The local verification of an accepted / rejected attempt; ``{}`` while pending."""
    if accept is None:
        return {}
    passed = bool(accept)
    checks = [{"name": n, "passed": passed or n != "grounded_episode"} for n in CHECKS]
    return {"schema_version": "ifv-psd-local-verification-v1", "repair_step_id": step_id, "source_trace_sha256": trace_sha,
            "hint_sha256": hint_sha256(hint), "teacher_prompt_sha256": _csha(tcap["prompt_token_ids"]),
            "teacher_completion_sha256": _csha(tcap["completion_token_ids"]),
            "teacher_episode_canonical_sha256": _csha(episode), "passed": passed, "checks": checks,
            "evidence": [{"reason": "synthetic"}], "review": {"passed": passed, "earliest_error_step": anchor}}


def _write_case(dest: Path, index: int) -> None:
    kind = KINDS[index % len(KINDS)]
    name = f"case-{index:05d}"
    case_id = f"syn-{index:05d}"
    w = _Writer(dest / name, f"{FAKE_ROOT}/{name}")
    steps = [_step(0, case_id), _step(1, case_id), _step(2, case_id, judgment=True)]
    w.put(TRACE, orjson.dumps(_trace(case_id, steps)) + b"\n")
    if kind.startswith("single_"):
        status = kind[len("single_"):]
        _single_run(w, "", case_id, status, public_rel=None,
                    accept=None if status == "generating" else (index % 3 == 0))
        w.flush()
        return
    status = kind[len("search_"):]
    inputs = {"trace": w.binding(TRACE), "output_dir": w.abs(""), "search_mode": "feedback"}
    identity = {"version": "ifv-psd-feedback-search-v1", "inputs": inputs, "max_attempts": 6, "max_proposals": 12, "max_seconds": 1800}
    feedback = {"previous_rounds": [], "locked_hint": "", "excluded_hints": [], "needs_relocalization": False, "anchor_feedback": {}}
    w.bound("requests/round-00.json", {"search": _csha(identity), "round": 0}, feedback)
    w.json("round-inputs/round-00/public.json", {"case_id": case_id, "claim": f"Claim {case_id}", "repair_search": feedback})
    w.json("round-inputs/round-00/media.json", {"episodes": []})
    run_status = {"converged": "generated", "no_further_grounded_hint": "no_recoverable_site", "paused_pending_verifier": "generated"}[status]
    accept = {"converged": True, "no_further_grounded_hint": None, "paused_pending_verifier": None}[status]
    records = _single_run(w, "rounds/round-00/", case_id, run_status, public_rel="round-inputs/round-00/public.json", accept=accept,
                          extra_inputs={"search_media": w.binding("round-inputs/round-00/media.json")})
    rows: list[dict[str, Any]] = []
    if status != "paused_pending_verifier":
        files = {w.abs(rel): _sha(data) for rel, data in w.files.items()
                 if rel.startswith("rounds/round-00/") and rel.count("/") == 2 and rel.rsplit("/", 1)[1] in (
                     "manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "proposer-hint-audits.json",
                     "hint-proposals.json", "semantic-localization.json")}
        if records:
            files[w.abs("rounds/round-00/episodes/hint-00-teacher.json")] = _sha(w.files["rounds/round-00/episodes/hint-00-teacher.json"])
        abs_records = []
        for r in records:
            r = dict(r, continuation=dict(r["continuation"], hinted_teacher_episode_trace=w.abs("rounds/round-00/episodes/hint-00-teacher.json")))
            abs_records.append(r)
        cands = [json.loads(line) for line in w.files["rounds/round-00/repair_candidates.jsonl"].splitlines()]
        rows.append({"directory": w.abs("rounds/round-00"), "files": files, "records": abs_records, "candidates": cands,
                     "feedback": {"attempts": [], "rejected_proposal_reasons": [], "status": run_status},
                     "no_further_hint": not records})
    root_records = [r for row in rows for r in row["records"]]
    w.bound("search-state.json", identity, {"status": status, "elapsed_seconds": 300.0, "rounds": rows})
    w.jsonl("repair_attempts.jsonl", root_records)
    w.jsonl("repair_candidates.jsonl", [c for row in rows for c in row["candidates"]])
    w.json("manifest.json", {"schema_version": "ifv-psd-feedback-search-v1", "status": status, "converged": status == "converged",
                             "candidate_count": len(root_records), "accepted_count": sum(1 for r in root_records if r["accepted"]),
                             "proposal_rounds": 1, "attempt_budget": 6, "proposal_budget": 12, "elapsed_seconds": 300.0,
                             "stop_reason": status, "rounds": [w.abs("rounds/round-00")], "execution_error": None,
                             "training_distribution_provider": "frozen_self_teacher_only"})
    w.flush()


def expected_kind(index: int) -> str:
    """The kind of case ``make_many_cases`` writes at ``index`` (e.g. ``search_converged``)."""
    return KINDS[index % len(KINDS)]


def _write_range(args: tuple[str, int, int]) -> int:
    dest, start, stop = args
    for i in range(start, stop):
        _write_case(Path(dest), i)
    return stop - start


def make_many_cases(dest: Path, n: int, *, workers: int | None = None) -> None:
    """Write ``n`` small valid cases ``case-00000`` … under ``dest`` (created).

    Large ``n`` is split over a process pool (the bytes do not depend on the split)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    if n < 400 or workers <= 1:
        _write_range((str(dest), 0, n))
        return
    step = max(100, n // (workers * 4))
    chunks = [(str(dest), a, min(n, a + step)) for a in range(0, n, step)]
    ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for _ in pool.map(_write_range, chunks):
            pass


# --------------------------------------------------------------------------- big data
_BIG_RESULT_ITEM = (
    '{"title":"Flooded street, archive photo %d","url":"https://news.example.org/archive/%d",'
    '"snippet":"Residents wade through water after the storm; the photo was first published years earlier. '
    'Aid groups said roads remained closed for days.","date":"2019-03-%02d","score":%d}'
)


def _big_tool_result(i: int, target: int) -> str:
    items = []
    size = 20
    k = 0
    while size < target:
        item = _BIG_RESULT_ITEM % (i * 1000 + k, i * 1000 + k, 1 + k % 28, k % 97)
        items.append(item)
        size += len(item) + 1
        k += 1
    return '{"results":[' + ",".join(items) + "]}"


def make_big_trace(path: Path, target_bytes: int) -> dict[str, Any]:
    """Write a source trace of about ``target_bytes`` (compact JSON, streamed).

    Thousands of ``unified_react`` tool-call steps with big JSON ``tool_result`` strings
    and token captures, ending with one ``unified_judgment`` step. Returns
    ``{"path", "bytes", "steps", "failure_step_index", "case_id", "episode_id"}``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    per_step = max(4_000, min(60_000, target_bytes // 4000))
    case_id = "big-case-0001"
    prompt_ids = _ids(_SYSTEM + "<|im_start|>user\nClaim: photo shows the flood.<|im_end|>\n<|im_start|>assistant\n")

    def react(i: int) -> bytes:
        step = _step(i, case_id)
        step["tool_result"] = _big_tool_result(i, per_step)
        step["thought"] = f"Step {i}: compare the archive dates before searching the claimed event again."
        step["metadata"]["policy_token_capture"]["prompt_token_ids"] = prompt_ids + list(range(300, 300 + (i % 200)))
        step["tokens"]["prompt"] = len(step["metadata"]["policy_token_capture"]["prompt_token_ids"])
        return orjson.dumps(step)

    n_steps = max(3, target_bytes // (len(react(100)) + 1))
    failure = (n_steps * 2) // 3
    written = 0
    with open(path, "wb") as fh:
        head = {
            "image_id": "ep-big-0001",
            "case_id": case_id,
            "verdict": "real",
            "confidence": 0.7,
            "judgment": {"verdict": "real", "confidence": 0.7, "overall_assessment": "looks consistent"},
            "termination": "success",
            "error": None,
        }
        state_head = {
            "image_id": "ep-big-0001",
            "runtime_case": {"case_id": case_id},
            "termination": "success",
            "errors": [],
        }
        prefix = orjson.dumps(head)[:-1] + b',"state":' + orjson.dumps(state_head)[:-1] + b',"all_steps":['
        fh.write(prefix)
        written += len(prefix)
        for i in range(n_steps):
            data = orjson.dumps(_step(i, case_id, judgment=True)) if i == n_steps - 1 else react(i)
            if i:
                fh.write(b",")
                written += 1
            fh.write(data)
            written += len(data)
        tail = b"]}}\n"
        fh.write(tail)
        written += len(tail)
    return {"path": str(path), "bytes": written, "steps": n_steps, "failure_step_index": failure, "case_id": case_id, "episode_id": "ep-big-0001"}


def make_big_case(dest: Path, target_bytes: int) -> dict[str, Any]:
    """A single run directory (status ``no_admissible_hints``) whose source trace is big,
    with a semantic localization selecting the failure step. As the driver leaves it and
    then copied: the trace is an input OUTSIDE the case root, beside it
    (``<dest parent>/inputs/<dest name>/trace.json``), and every recorded path names the
    cluster location ``/data/eviscene/synthetic/…`` (so it is found through the moved-tree
    rules). Returns ``make_big_trace``'s info plus ``case_dir``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    trace_path = dest.parent / "inputs" / dest.name / "trace.json"
    info = make_big_trace(trace_path, target_bytes)
    trace_sha = _sha_file(trace_path)
    fake = f"{FAKE_ROOT}/{dest.name}"
    recorded_trace = f"{FAKE_ROOT}/inputs/{dest.name}/trace.json"
    config = {"trace": {"path": recorded_trace, "sha256": trace_sha}, "output_dir": fake, "search_mode": "single",
              "policy_model": PROFILE_ID, "hint_count": 1}
    doc = encode_bound(Path("run-inputs.json"), config, {"status": "initialized"})
    for name, data in doc.items():
        (dest / name).write_bytes(data)
    failure = info["failure_step_index"]
    (dest / "semantic-localization.json").write_bytes(pretty_json_bytes({
        "schema_version": "ifv-psd-semantic-localization-v1",
        "passed": True,
        "source_trace_canonical_sha256": None,  # not computed for the benchmark trace (hashing 200 MB canonically is slow)
        "candidates": [{"source_step_index": failure, "recoverable": True, "selected": True, "category": "wrong_search_direction",
                        "verifier": {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": "gemini"},
                        "observed_basis": [{"trace": "source", "step_index": failure, "quote": f"Step {failure}: compare the archive dates"}],
                        "explanation": "The agent searched the claimed event again instead of the archive."}],
        "explanation": "one site",
    }))
    (dest / "repair_candidates.jsonl").write_bytes(b"")
    (dest / "repair_attempts.jsonl").write_bytes(b"")
    (dest / "manifest.json").write_bytes(pretty_json_bytes({
        "schema_version": "ifv-psd-repair-driver-result-v1", "status": "no_admissible_hints", "trace": recorded_trace,
        "runtime_archive": None, "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0,
    }))
    return {**info, "case_dir": str(dest)}


def make_slate_case(dest: Path) -> None:
    """A slate-mode search root at ``dest`` (layout ``slate``, problem ``unsupported_layout``)."""
    tree = Tree()
    slate_unsupported(tree, base="slate")
    dest = Path(dest)
    for rel, data in tree.files.items():
        target = dest / rel.split("/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _sha_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def make_big_capture_ids(n: int = 1_000_000, *, image_pads: int = 1024) -> list[int]:
    """``n`` Qwen3.5 prompt ids that decode with the tiny tokenizer: a chat prompt with an
    image (``<|vision_start|>`` + ``image_pads`` × 248056 + ``<|vision_end|>``) and then
    tool turns repeated until ``n`` ids (each turn holding one more small image)."""
    vs, pad, ve = special_id("<|vision_start|>"), special_id("<|image_pad|>"), special_id("<|vision_end|>")
    head = _ids(_SYSTEM + "<|im_start|>user\nClaim: the photo shows the flood.") + [vs] + [pad] * image_pads + [ve] + _ids("<|im_end|>\n")
    turn = _ids(
        '<|im_start|>assistant\nSearch the archive.\n<tool_call>\n{"name": "web_search", "arguments": {"query": "flood photo"}}\n'
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
    ) + [vs] + [pad] * 64 + [ve] + _ids('{"results": [{"title": "Cyclone Idai floods Beira", "date": "2019-03-18"}]}\n</tool_response><|im_end|>\n')
    out = list(head)
    while len(out) < n:
        out.extend(turn)
    del out[n:]
    return out
