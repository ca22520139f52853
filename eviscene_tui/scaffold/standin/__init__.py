"""A small STAND-IN of the real EviScene driver's contract (not EviScene), for the gate tests.

``run_standin_driver.py`` and its ``eviscene_training`` package (stdlib only)
have the driver's shape: the ``run_search`` seam (``execute_round``) and
``QwenContinuationAdapter.propose_hints``, with a scripted localizer, hint
constructor and judge and a one-step teacher continuation from the policy server
(the bundled fake vLLM). The feedback rules it applies are the gate protocol's,
imported, never copied.

:func:`write_inputs` writes a small case's inputs OUTSIDE any search root, as a
real driver's inputs are (source trace, gold, public context).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DRIVER_PATH = Path(__file__).with_name("run_standin_driver.py")

# The scripted judge accepts a repair only at this step; the scripted localizer
# first guesses ERROR_GUESS (the first "no match"), so the operator has to relocalize.
ERROR_STEP = 5
ERROR_GUESS = 3


@dataclass(frozen=True)
class StandinInputs:
    trace: Path
    gold: Path
    public_context: Path


def token_capture(prompt: int, completion: int, seed: int) -> dict:
    """A complete ``ifv-policy-token-capture-v1`` of one policy request (synthetic ids,
    as many as the step's token counts), as a real rollout records for every policy step."""
    return {"schema_version": "ifv-policy-token-capture-v1", "status": "complete",
            "prompt_token_ids": [(seed * 7919 + k) % 150000 + 1 for k in range(prompt)],
            "completion_token_ids": [(seed * 104729 + k) % 150000 + 1 for k in range(completion)],
            "completion_logprobs": [-0.1] * completion, "completion_topk_by_position": [], "topk": 0, "missing": []}


def _step(i: int, thought: str, tool: str, args: dict, result: str) -> dict:
    prompt, completion = 900 + 40 * i, 60
    return {
        "round": i, "stage": "unified_react", "action_type": "tool_call", "tool_name": tool, "tool_args": args,
        "tool_result": result, "thought": thought, "tokens": {"prompt": prompt, "completion": completion, "thought": 30},
        "metadata": {"policy_input": {"input_payload": {"step": i}}, "policy_action": {"tool": tool, "arguments": args},
                     "context_request_id": f"req-{i + 1:06d}", "policy_token_capture": token_capture(prompt, completion, i)},
    }


def source_trace(case_id: str = "standin-flood-photo") -> dict:
    steps = [
        _step(0, "The claim dates the flood photo to last week. I start with the visible text.", "ocr", {"region": "sign"}, "Text: 'RUE DE LA GARE'"),
        _step(1, "The sign suggests a French-speaking city. I search the event named in the claim.", "web_search", {"query": "flood city centre last week"}, "12 results about last week's flood"),
        _step(2, "Many results describe the flood; I look for this exact photo among them.", "web_search", {"query": "flood photo rue de la gare"}, "3 results, none with this photo"),
        _step(3, "I try a reverse image search restricted to last week.", "reverse_image_search", {"query": "flood street", "after": "last week"}, "no match"),
        _step(4, "Again with a different crop.", "reverse_image_search", {"query": "flood street crop", "after": "last week"}, "no match"),
        _step(5, "No match twice, so the photo is probably new; I stop searching for older copies.", "web_search", {"query": "flood eyewitness photo"}, "an eyewitness gallery"),
        _step(6, "The gallery looks consistent with the claim.", "open_page", {"url": "https://example.org/gallery"}, "gallery page"),
    ]
    steps.append({"round": 7, "stage": "unified_judgment", "action_type": "output", "tool_name": None, "tool_args": {},
                  "tool_result": "", "thought": "", "output": "verdict: real", "tokens": {"prompt": 1400, "completion": 40, "thought": 0},
                  "metadata": {"policy_input": {"input_payload": {"step": 7}}, "policy_action": {"verdict": "real"},
                               "context_request_id": "req-000008", "policy_token_capture": token_capture(1400, 40, 7)}})
    return {
        "image_id": case_id, "case_id": case_id, "claim": "This photo shows last week's flood in the city centre.",
        "verdict": "real", "termination": "success",
        "state": {"image_id": case_id, "runtime_case": {"case_id": case_id}, "all_steps": steps,
                  "runtime_store": {"runtime_path": f"/data/eviscene/runtime/{case_id}/source", "events_path": f"/data/eviscene/runtime/{case_id}/source/events.jsonl"}},
    }


def write_inputs(directory: str | os.PathLike[str], case_id: str = "standin-flood-photo") -> StandinInputs:
    """Write trace.json, gold.json and public.json into ``directory`` (outside the search root)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = StandinInputs(d / "trace.json", d / "gold.json", d / "public.json")
    docs = {
        paths.trace: source_trace(case_id),
        paths.gold: {"verdict": "fake", "error_step": ERROR_STEP, "note": "stand-in gold (private to the scripted judge)"},
        paths.public_context: {"claim": "This photo shows last week's flood in the city centre.", "case_id": case_id},
    }
    for path, doc in docs.items():
        if not path.exists():
            path.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return paths


def driver_args(inputs: StandinInputs, root: str | os.PathLike[str], *, policy_url: str | None = None,
                policy_model: str | None = None, resume: bool = False, extra: list[str] | None = None) -> list[str]:
    """``DRIVER.py ARGS…`` for the stand-in, as ``eviscene-tui gate -- …`` takes them."""
    argv = [str(DRIVER_PATH), "--trace", str(inputs.trace), "--gold", str(inputs.gold),
            "--public-context", str(inputs.public_context), "--output-dir", str(root), "--search-mode", "feedback"]
    if policy_url:
        argv += ["--policy-base-url", policy_url]
    if policy_model:
        argv += ["--policy-model", policy_model]
    if resume:
        argv.append("--resume")
    return argv + list(extra or [])
