"""Hypothesis: random bytes and mutated traces into load_trace; no exception escapes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_case_builders import make_trace

from eviscene_tui.artifacts.trace import load_trace

LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                     max_leaves=15)
STEP_KEYS = ["stage", "stage_name", "action_type", "tool_name", "tool_args", "tool_result", "thought", "output", "metadata", "tokens"]
MD_KEYS = ["policy_input", "policy_action", "policy_token_capture", "context_request_id", "interaction_id", "psd_role"]


def _exercise(path: Path) -> None:
    trace, problems = load_trace(path)
    if trace is None:
        assert problems
        return
    for i in range(trace.step_count):
        trace.brief(i)
        trace.step(i)
        trace.step_detail(i)
        trace.token_capture(i)
    trace.policy_step_indices()
    _ = trace.episode_id, trace.case_id, trace.runtime_store, trace.canonical_sha256(), trace.file_sha256()
    trace.index_for_step_id("a:react:1")


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        path.write_bytes(data)
        trace, problems = load_trace(path)
        assert trace is not None or problems


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_mutated_steps(data: st.DataObject) -> None:
    raw = make_trace(4)
    steps = raw["state"]["all_steps"]
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(steps) - 1))
        if data.draw(st.booleans()):
            steps[i] = dict(steps[i], **{data.draw(st.sampled_from(STEP_KEYS)): data.draw(VALUE)})
        else:
            md = steps[i].get("metadata") if isinstance(steps[i].get("metadata"), dict) else {}
            steps[i] = dict(steps[i], metadata=dict(md, **{data.draw(st.sampled_from(MD_KEYS)): data.draw(VALUE)}))
    if data.draw(st.booleans()):
        raw[data.draw(st.sampled_from(["image_id", "case_id", "state"]))] = data.draw(VALUE)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        path.write_bytes(json.dumps(raw).encode("utf-8", "surrogatepass"))
        _exercise(path)
