"""Hypothesis strategies for trace documents whose steps make a byte scan's life hard, and
the JSON writers they are dumped with (shared by the chunked-parse and step-index tests);
and :func:`write_case`, a run whose trace lies outside its root (the indexed-trace tests).

Every step starts with the same key, as the driver's serializer writes them; nested
objects may start with it too (a scan must not cut between those); strings look like
boundaries or hold unbalanced brackets.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from hypothesis import strategies as st

from eviscene_tui.artifacts.jsonio import encode_bound, pretty_json_bytes

TRICKY_TEXT = st.sampled_from(
    ['},{"round":', '}, {"round": 1}', "]}", "[[", "]", "\\", '"', "\u202e", "ü€😀", "", "x" * 40, '"round"', "{", "İK"]
)
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False, allow_infinity=False),
                 st.text(max_size=12), TRICKY_TEXT)
VALUE = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["round", "stage", "a", "b", "all_steps", '},{"round":']), inner, max_size=4),
    ),
    max_leaves=12,
)


def step(extra: dict) -> dict:
    """A step that starts with the key every step starts with."""
    return {"round": 1, **extra}


STEP = st.dictionaries(st.sampled_from(["stage", "thought", "tool_args", "metadata", "round2", "nested"]), VALUE, max_size=4).map(step)


def dump(doc: object, style: int) -> bytes:
    if style == 0:
        return orjson.dumps(doc)
    if style == 1:
        return json.dumps(doc, ensure_ascii=False).encode("utf-8")
    if style == 2:
        return json.dumps(doc, indent=1).encode("utf-8")
    return json.dumps(doc, separators=(" ,  ", " :\t")).encode("utf-8")


# -- a case whose trace lies outside its root, recorded by absolute path (as the driver's --trace)

STEPS = 400
FAILURE = 150


def _step(i: int) -> dict:
    return {
        "round": i + 1, "stage": "unified_react", "action_type": "tool_call", "tool_name": "web_search",
        "tool_args": {"query": f"archive query {i}"}, "tool_result": f"RESULT-{i} page text " + "word " * 30,
        "thought": f"THOUGHT-{i} compare the dates", "output": None,
        "tokens": {"prompt": 40, "completion": 3, "thought": 0},
        "metadata": {"policy_input": {"system_instruction": "s", "input_payload": [], "tools": [], "response_format": None},
                     "policy_action": {"type": "tool_call"}, "context_request_id": f"req-{i + 1:06d}", "interaction_id": f"ia-{i}",
                     "policy_token_capture": {"schema_version": "ifv-policy-token-capture-v1", "status": "complete",
                                              "prompt_token_ids": list(range(40)), "completion_token_ids": [1, 2, 3],
                                              "completion_logprobs": [-0.5, -0.25, -0.125], "completion_topk_by_position": [],
                                              "topk": 0, "missing": []}},
    }


def write_case(base: Path, name: str = "lazy-case") -> Path:
    """The run ``base/runs/<name>`` and its trace ``base/inputs/<name>/trace.json``
    (outside the root, recorded by absolute path, as the driver's ``--trace``)."""
    case = base / "runs" / name
    case.mkdir(parents=True)
    trace = base / "inputs" / name / "trace.json"
    trace.parent.mkdir(parents=True)
    doc = {"image_id": "ep-lazy", "case_id": name, "verdict": "real",
           "state": {"image_id": "ep-lazy", "runtime_case": {"case_id": name}, "all_steps": [_step(i) for i in range(STEPS)], "errors": []}}
    trace.write_bytes(orjson.dumps(doc))
    config = {"trace": {"path": str(trace.resolve()), "sha256": "0" * 64}, "output_dir": str(case.resolve()), "search_mode": "single",
              "policy_model": "ifv-qwen3.5-9b", "hint_count": 1}
    for fname, data in encode_bound(Path("run-inputs.json"), config, {"status": "initialized"}).items():
        (case / fname).write_bytes(data)
    (case / "semantic-localization.json").write_bytes(pretty_json_bytes({
        "schema_version": "ifv-psd-semantic-localization-v1", "passed": True, "source_trace_canonical_sha256": None,
        "candidates": [{"source_step_index": FAILURE, "recoverable": True, "selected": True, "category": "wrong_search_direction",
                        "verifier": {"kind": "task", "name": "gemini-psd-repair", "version": "psd-task-review-v1", "model": "gemini"},
                        "observed_basis": [{"trace": "source", "step_index": FAILURE, "quote": f"THOUGHT-{FAILURE}"}],
                        "explanation": "searched again"}],
        "explanation": "one site",
    }))
    (case / "repair_candidates.jsonl").write_bytes(b"")
    (case / "repair_attempts.jsonl").write_bytes(b"")
    (case / "manifest.json").write_bytes(pretty_json_bytes({
        "schema_version": "ifv-psd-repair-driver-result-v1", "status": "no_admissible_hints", "trace": str(trace.resolve()),
        "runtime_archive": None, "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0,
    }))
    return case
