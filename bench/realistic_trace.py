"""A source trace of the realistic shape, and a case that points at it from outside.

Real source rollouts: ~720 steps, each carrying a ~7,000-id prompt capture, 20-entry
top-k logprobs per completion token and ~56 kB of page text, about 200 MB in all. The
trace lives OUTSIDE the case root (``<dir>/inputs/<case>/trace.json``) and the run's
``run-inputs.json`` records its absolute path, as the driver does with ``--trace``.

The text-heavy kind (``text_heavy=True``): the same 720 steps carrying mostly page text
(~290 kB a step, a 300-id prompt capture, no top-k), about 217 MB: a bare ``orjson.loads``
is fast on it (strings), so it is the harder figure for the open. ``page_bytes`` sets the
page text's size (the bench's small trace: the case screen's own cost, nearly no trace).

Written deterministically and streamed (one step in memory at a time).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.jsonio import encode_bound, pretty_json_bytes

STEPS = 720
PROMPT_IDS = 7_000
COMPLETION_TOKENS = 215
TOPK = 20
PAGE_BYTES = 56_000

_WORDS = (
    "flood archive photo river bank Beira cyclone 2019 March agency wire caption date location "
    "report satellite image street water rescue boat survey official statement photographer"
).split()


TEXT_PAGE_BYTES = 290_000  # the text-heavy kind: page text instead of token ids
TEXT_PROMPT_IDS = 300


def _page(i: int, page_bytes: int = PAGE_BYTES) -> str:
    words = []
    size = 0
    k = i
    while size < page_bytes:
        w = _WORDS[(k * 7 + size) % len(_WORDS)]
        words.append(w)
        size += len(w) + 1
        k += 1
    return f"Result page {i}: " + " ".join(words)


def _step(i: int, case_id: str, *, last: bool, text_heavy: bool = False, page_bytes: int | None = None) -> dict[str, Any]:
    base = 1000 + i
    prompt = [(base + 37 * k) % 151_000 for k in range((TEXT_PROMPT_IDS if text_heavy else PROMPT_IDS) + (i % 50))]
    completion = [(base + 11 * k) % 151_000 for k in range(COMPLETION_TOKENS)]
    topk = [] if text_heavy else [
        [{"token_id": (completion[p] + 3 * j) % 151_000, "probability": round(0.9 / (j + 1), 6)} for j in range(TOPK)]
        for p in range(COMPLETION_TOKENS)
    ]
    args = {"query": f"flood photo archive step {i}"}
    if last:
        out = {"verdict": "real", "confidence": 0.7, "overall_assessment": "done"}
        step: dict[str, Any] = {"round": i + 1, "stage": "unified_judgment", "action_type": "output", "tool_name": None,
                                "tool_args": None, "tool_result": None, "thought": "Judge now.", "output": orjson.dumps(out).decode()}
        action: dict[str, Any] = {"type": "output", "output": out}
    else:
        step = {"round": i + 1, "stage": "unified_react", "action_type": "tool_call", "tool_name": "web_fetch", "tool_args": args,
                "tool_result": _page(i, page_bytes or (TEXT_PAGE_BYTES if text_heavy else PAGE_BYTES)), "thought": f"Step {i}: compare the archive dates before searching the claimed event again.",
                "output": None}
        action = {"type": "tool_call", "tool_name": "web_fetch", "arguments": args}
    step["tokens"] = {"prompt": len(prompt), "completion": len(completion), "thought": 0}
    step["metadata"] = {
        "policy_input": {"system_instruction": "You are EviScene.", "input_payload": [{"role": "user", "content": f"Claim {case_id} step {i}"}],
                         "tools": [], "response_format": None},
        "policy_action": action,
        "policy_token_capture": {
            "schema_version": "ifv-policy-token-capture-v1", "status": "complete",
            "prompt_token_ids": prompt, "completion_token_ids": completion,
            "completion_logprobs": [round(-0.01 - (k % 13) / 40, 4) for k in range(COMPLETION_TOKENS)],
            "completion_topk_by_position": topk, "topk": 0 if text_heavy else TOPK, "missing": [],
        },
        "context_request_id": f"req-{i + 1:06d}",
        "interaction_id": f"ia-{case_id}-{i}",
    }
    return step


def write_trace(path: Path, steps: int = STEPS, case_id: str = "real-shape-0001", *, text_heavy: bool = False,
                page_bytes: int | None = None) -> dict[str, Any]:
    """Write the trace; ``{"path", "bytes", "steps", "failure_step_index"}``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"image_id": "ep-" + case_id, "case_id": case_id, "verdict": "real", "confidence": 0.7, "termination": "success", "error": None}
    state_head = {"image_id": "ep-" + case_id, "runtime_case": {"case_id": case_id}, "termination": "success", "errors": []}
    h = hashlib.sha256()
    written = 0
    with open(path, "wb") as fh:
        def put(data: bytes) -> None:
            nonlocal written
            fh.write(data)
            h.update(data)
            written += len(data)

        put(orjson.dumps(head)[:-1] + b',"state":' + orjson.dumps(state_head)[:-1] + b',"all_steps":[')
        for i in range(steps):
            put((b"," if i else b"") + orjson.dumps(_step(i, case_id, last=i == steps - 1, text_heavy=text_heavy, page_bytes=page_bytes)))
        put(b'],"token_usage":{"prompt":1,"completion":2,"thought":0}}}\n')
    return {"path": str(path), "bytes": written, "steps": steps, "failure_step_index": (steps * 2) // 3, "sha256": h.hexdigest()}


def write_case(base: Path, steps: int = STEPS, *, inside: bool = False, text_heavy: bool = False,
               page_bytes: int | None = None) -> dict[str, Any]:
    """``base/inputs/<case>/trace.json`` and the run directory ``base/runs/<case>`` that
    points at it by absolute path, with a semantic localization of the failure step
    (``inside``: the trace at ``<case>/source/trace.json`` instead)."""
    name = "real-shape-0001"
    case = base / "runs" / name
    info = write_trace((case / "source" if inside else base / "inputs" / name) / "trace.json", steps, name, text_heavy=text_heavy,
                       page_bytes=page_bytes)
    case.mkdir(parents=True, exist_ok=True)
    trace_path = str(Path(info["path"]).resolve())
    config = {"trace": {"path": trace_path, "sha256": info["sha256"]}, "output_dir": str(case.resolve()), "search_mode": "single",
              "policy_model": "ifv-qwen3.5-9b", "hint_count": 1}
    for fname, data in encode_bound(Path("run-inputs.json"), config, {"status": "initialized"}).items():
        (case / fname).write_bytes(data)
    failure = info["failure_step_index"]
    (case / "semantic-localization.json").write_bytes(pretty_json_bytes({
        "schema_version": "ifv-psd-semantic-localization-v1", "passed": True, "source_trace_canonical_sha256": None,
        "candidates": [{"source_step_index": failure, "recoverable": True, "selected": True, "category": "wrong_search_direction",
                        "verifier": {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": "gemini"},
                        "observed_basis": [{"trace": "source", "step_index": failure, "quote": f"Step {failure}: compare the archive dates"}],
                        "explanation": "The agent searched the claimed event again instead of the archive."}],
        "explanation": "one site",
    }))
    (case / "repair_candidates.jsonl").write_bytes(b"")
    (case / "repair_attempts.jsonl").write_bytes(b"")
    (case / "manifest.json").write_bytes(pretty_json_bytes({
        "schema_version": "ifv-psd-repair-driver-result-v1", "status": "no_admissible_hints", "trace": trace_path,
        "runtime_archive": None, "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0,
    }))
    return {**info, "case_dir": str(case), "root": str(base / "runs")}
