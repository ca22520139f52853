"""Artifact-layer benchmarks (figures printed by ``make bench``, never asserted).

(a) ``check`` (discovery + summary + full integrity check) over a generated folder of
    10,000 small cases. Goal: < 3 s on a 2-core machine (the parse floor: orjson of the
    same bytes; the rest is the integrity checkers' Python, about 2 ms of CPU a case).
(b) Parse time of a generated 200 MB source trace through the artifact layer
    (``eviscene_tui.artifacts.trace.load_trace``) vs bare ``orjson.loads`` of the same
    bytes. Goal: <= 1.3x.

Synthetic data comes from ``eviscene_tui.scaffold.samples.synthetic`` (``make_many_cases``,
``make_big_trace``) when that module exists; otherwise from the small local
generators below.
"""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.jsonio import (
    canonical_jsonl_bytes,
    canonical_sha256,
    encode_bound,
    hint_sha256,
    pretty_json_bytes,
)

N_CASES = int(os.environ.get("EVISCENE_BENCH_CASES", "10000"))
TRACE_BYTES = int(os.environ.get("EVISCENE_BENCH_TRACE_MB", "200")) << 20


# --------------------------------------------------------------------------- local generators
def _bound(rel: str, identity: Any, payload: Any) -> dict[str, bytes]:
    parent = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
    return {parent + name: data for name, data in encode_bound(Path(rel), identity, payload).items()}


def _run_files(prefix: str, recorded: str, case_id: str) -> dict[str, bytes]:
    """A small, complete run directory (one accepted hint) as {relative path: bytes}."""
    files: dict[str, bytes] = {}
    hint = f"Compare the upload dates before concluding ({case_id})."
    config = {"output_dir": recorded, "search_mode": "single", "hint_count": 1, "candidate_offset": None,
              "trace": {"path": "/data/traces/source.json", "sha256": "1" * 64}}
    files.update(_bound(f"{prefix}run-inputs.json", config, {"status": "initialized"}))
    audit = {"schema_version": "ifv-psd-hint-audit-v1", "passed": True, "hint_sha256": hint_sha256(hint)}
    files.update(_bound(f"{prefix}hint-proposals.json", config, [{"text": hint, "level": 1, "audit": audit}]))
    capture = {"schema_version": "ifv-policy-token-capture-v1", "status": "complete", "missing": [],
               "prompt_token_ids": [248045, 11, 12, 248053, 248056, 248056, 248054], "completion_token_ids": [5, 248046]}
    site = {"source_step_index": 3, "stage": "unified_react", "example_type": "react",
            "localization_kind": "semantic_task_verifier", "semantic_category": "wrong_search_direction"}
    files[f"{prefix}repair_candidates.jsonl"] = canonical_jsonl_bytes(
        [{"schema_version": "ifv-psd-candidate-v1", "candidate_id": f"psd-candidate:{case_id}", "case_id": case_id,
          "repair_site": dict(site, rollout_token_capture=capture)}]
    )
    episode = pretty_json_bytes({"image_id": case_id, "state": {"all_steps": [{"stage": "unified_react"}] * 4}})
    files[f"{prefix}episodes/hint-00-teacher.json"] = episode
    image = hashlib.sha256(case_id.encode()).digest() * 8
    image_sha = hashlib.sha256(image).hexdigest()
    files[f"{prefix}media/{image_sha}.image"] = image
    step = {"stage_name": "psd_teacher_repair", "action_type": "tool_call", "metadata": {"policy_token_capture": capture}}
    files.update(_bound(f"{prefix}continuations/hint-00.json", {"run": canonical_sha256(config), "hint": hint_sha256(hint)},
                        {"hint": hint, "teacher_steps": [step], "student_steps": [], "stop_reason": "teacher_episode_complete"}))
    row = {"schema_version": "ifv-psd-repair-attempt-v1", "case_id": case_id, "candidate_id": f"psd-candidate:{case_id}",
           "repair_site": site, "hint_record": {"text": hint, "level": 1, "audit": audit},
           "local_verification": {"passed": True}, "accepted": True, "repair_rollout_token_capture": capture,
           "student_prompt_ids": capture["prompt_token_ids"], "teacher_prompt_ids": capture["prompt_token_ids"],
           "psd_media": {"schema_version": "ifv-psd-media-v3", "image_sha256": [image_sha],
                         "image_paths": [f"{recorded}/media/{image_sha}.image"], "merge_size": 2},
           "continuation": {"hinted_teacher_episode_trace": "episodes/hint-00-teacher.json",
                            "hinted_teacher_episode_trace_sha256": hashlib.sha256(episode).hexdigest()}}
    files[f"{prefix}repair_attempts.jsonl"] = canonical_jsonl_bytes([row])
    files[f"{prefix}judge/hint-00.json"] = pretty_json_bytes({"schema_version": "ifv-psd-local-verification-v1", "passed": True})
    files[f"{prefix}manifest.json"] = pretty_json_bytes(
        {"schema_version": "ifv-psd-repair-driver-result-v1", "status": "generated", "candidate_count": 1, "accepted_count": 1,
         "pending_hinted_episode_count": 0})
    return files


def _search_files(recorded: str, case_id: str) -> dict[str, bytes]:
    rec_round = f"{recorded}/rounds/round-00"
    files = _run_files("rounds/round-00/", rec_round, case_id)
    identity = {"version": "ifv-psd-feedback-search-v1", "inputs": {"output_dir": recorded}, "max_attempts": 6,
                "max_proposals": 12, "max_seconds": 1800}
    snapshot = {f"{rec_round}/{name}": hashlib.sha256(files[f"rounds/round-00/{name}"]).hexdigest()
                for name in ("manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "hint-proposals.json",
                             "episodes/hint-00-teacher.json")}
    row = orjson.loads(files["rounds/round-00/repair_attempts.jsonl"])
    row["continuation"]["hinted_teacher_episode_trace"] = f"{rec_round}/episodes/hint-00-teacher.json"
    payload = {"status": "converged", "rounds": [{"directory": rec_round, "files": snapshot, "records": [row]}]}
    files.update(_bound("search-state.json", identity, payload))
    files["repair_attempts.jsonl"] = canonical_jsonl_bytes([row])
    files["repair_candidates.jsonl"] = files["rounds/round-00/repair_candidates.jsonl"]
    files["manifest.json"] = pretty_json_bytes({"schema_version": "ifv-psd-feedback-search-v1", "status": "converged",
                                                "candidate_count": 1, "accepted_count": 1, "proposal_rounds": 1,
                                                "rounds": [rec_round]})
    files["search.lock"] = b""
    return files


def local_make_many_cases(dest: Path, n: int) -> None:
    """``n`` small cases: three single runs for every feedback search root, 100 per folder."""
    for i in range(n):
        rel = f"batch-{i // 100:03d}/case-{i:05d}"
        case_id = f"case-{i:05d}"
        recorded = f"/data/runs/{rel}"
        files = _search_files(recorded, case_id) if i % 4 == 0 else _run_files("", recorded, case_id)
        root = dest / rel
        made: set[Path] = set()
        for name, data in files.items():
            path = root / name
            if path.parent not in made:
                path.parent.mkdir(parents=True, exist_ok=True)
                made.add(path.parent)
            path.write_bytes(data)


def local_make_big_trace(path: Path, target_bytes: int) -> None:
    """A source trace of about ``target_bytes``: many steps with JSON tool results and token captures."""
    steps = []
    size = 0
    i = 0
    while size < target_bytes:
        result = orjson.dumps({"results": [{"title": f"result {i}-{k}", "snippet": "lorem ipsum " * 40, "score": k / 7}
                                           for k in range(20)]}).decode()
        capture = {"schema_version": "ifv-policy-token-capture-v1", "status": "complete", "missing": [],
                   "prompt_token_ids": list(range(1000, 1000 + 3000)), "completion_token_ids": list(range(50, 250)),
                   "completion_logprobs": [-0.125] * 200, "topk": 0}
        step = {"round": i, "stage": "unified_react", "action_type": "tool_call", "tool_name": "web_search",
                "tool_args": {"query": f"query {i}"}, "tool_result": result, "thought": "thinking " * 30,
                "tokens": {"prompt": 3000, "completion": 200, "thought": 0},
                "metadata": {"policy_input": {"system_instruction": "sys", "input_payload": {"i": i}},
                             "policy_action": {"type": "tool_call"}, "policy_token_capture": capture,
                             "context_request_id": f"req-{i + 1:06d}"}}
        size += len(orjson.dumps(step))
        steps.append(step)
        i += 1
    trace = {"image_id": "img-big", "verdict": "fake", "state": {"image_id": "img-big", "all_steps": steps}}
    path.write_bytes(orjson.dumps(trace))


def _generators() -> tuple[Any, Any, str, str]:
    """(make_many_cases, make_big_trace, source of each): the sample generator's when present."""
    many, big = local_make_many_cases, local_make_big_trace
    many_src = big_src = "bench-local generator"
    try:
        from eviscene_tui.scaffold.samples import synthetic
    except ImportError:
        return many, big, many_src, big_src
    if callable(getattr(synthetic, "make_many_cases", None)):
        many, many_src = synthetic.make_many_cases, "eviscene_tui.scaffold.samples.synthetic"
    if callable(getattr(synthetic, "make_big_trace", None)):
        big, big_src = synthetic.make_big_trace, "eviscene_tui.scaffold.samples.synthetic"
    return many, big, many_src, big_src


def _best(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


# --------------------------------------------------------------------------- benchmarks
def bench_check(tmp: Path) -> list[tuple[str, str]]:
    from eviscene_tui.artifacts.layout import discover
    from eviscene_tui.artifacts.report import build_check_report

    make_many, _, source, _ = _generators()
    dest = tmp / "many"
    dest.mkdir()
    t0 = time.perf_counter()
    make_many(dest, N_CASES)
    gen = time.perf_counter() - t0
    n_files = sum(len(f) for _, _, f in os.walk(dest))
    t0 = time.perf_counter()
    refs, _ = discover(dest)
    t_discover = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = build_check_report(dest, str(dest))
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    c0 = time.process_time()
    build_check_report(dest, str(dest), workers=1)
    t_check_1 = time.perf_counter() - t0
    c_check_1 = time.process_time() - c0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [
        ("check: generated cases", f"{report['summary']['cases']} cases, {n_files} files ({source}, {gen:.1f} s to write)"),
        ("check: discovery only", f"{t_discover:.2f} s ({len(refs)} cases)"),
        ("check: full report, process pool (goal < 3 s)", f"{t_check:.2f} s on {os.cpu_count()} cores, {report['summary']['problems']} problems"),
        ("check: full report, one process", f"{t_check_1:.2f} s wall, {c_check_1:.2f} s CPU "
         f"({1000 * c_check_1 / max(1, len(refs)):.2f} ms CPU per case; load average {load:.1f})"),
    ]


def bench_trace(tmp: Path) -> list[tuple[str, str]]:
    from eviscene_tui.artifacts.trace import load_trace, load_trace_bytes

    _, make_big, _, source = _generators()
    path = tmp / "big-trace.json"
    t0 = time.perf_counter()
    make_big(path, TRACE_BYTES)
    gen = time.perf_counter() - t0
    size = path.stat().st_size
    data = path.read_bytes()
    t_bare = _best(lambda: orjson.loads(data))
    t_read_bare = _best(lambda: orjson.loads(path.read_bytes()))
    t_layer_bytes = _best(lambda: load_trace_bytes(data, path))
    t_layer = _best(lambda: load_trace(path))
    trace, problems = load_trace(path)
    n_steps = "?"
    try:
        n_steps = str(len(trace)) if trace is not None else "?"
    except TypeError:  # a trace without a length: the count is informational only
        pass
    data, trace = b"", None  # free the big values before the next measurement
    gc.collect()
    return [
        ("trace: generated source trace", f"{size / 2**20:.0f} MiB, {n_steps} steps ({source}, {gen:.1f} s to write)"),
        ("trace: bare orjson.loads (bytes in memory)", f"{t_bare:.2f} s"),
        ("trace: read + orjson.loads", f"{t_read_bare:.2f} s"),
        ("trace: artifacts.trace.load_trace_bytes (same bytes in memory)", f"{t_layer_bytes:.2f} s"),
        ("trace: artifacts.trace.load_trace (read + parse)", f"{t_layer:.2f} s, {len(problems)} problems"),
        ("trace: artifact-layer parse / bare orjson.loads, same bytes (goal <= 1.3x)", f"{t_layer_bytes / t_bare:.2f}x"),
        ("trace: load_trace / read + orjson.loads, same file", f"{t_layer / t_read_bare:.2f}x"),
    ]


def run() -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="eviscene-bench-artifacts-"))
    try:
        rows.extend(bench_check(tmp))
        shutil.rmtree(tmp / "many", ignore_errors=True)
        rows.extend(bench_trace(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":  # pragma: no cover
    for label, figure in run():
        print(f"  {label:<55} {figure}")
