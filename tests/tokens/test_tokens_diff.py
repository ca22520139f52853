"""Student vs teacher diff on a known insertion; completion alignment; capture checks."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.capture import from_policy_capture, logprob_bucket, normalise_topk
from eviscene_tui.tokens.diff import align, alignment_summary, prompt_diff

S = tiny.special_id


def test_known_insertion():
    head = [S("<|im_start|>")] + tiny.encode("user\nIs the photo real?")
    tail = [S("<|im_end|>"), S("<|im_start|>")] + tiny.encode("assistant\n")
    hint = tiny.encode("\nHint: check the date first.")
    student = head + tail
    teacher = head + hint + tail
    d = prompt_diff(student, teacher)
    assert d.prefix == len(head) and d.suffix == len(tail)
    assert d.inserted == (len(head), len(head) + len(hint))
    assert d.pure_insertion and not d.identical
    assert tiny.decode(teacher[slice(*d.inserted)]) == "\nHint: check the date first."
    assert prompt_diff(student, student).identical


def test_replacement_and_overlap_bounds():
    d = prompt_diff([1, 2, 3, 4], [1, 9, 9, 4])
    assert (d.prefix, d.suffix, d.inserted, d.removed) == (1, 1, (1, 3), (1, 3))
    # repeated tokens: prefix + suffix never overlap
    d = prompt_diff([7, 7, 7], [7, 7, 7, 7])
    assert d.prefix + d.suffix <= 3 and d.inserted[1] - d.inserted[0] == 1
    long_a = list(range(10000)) + [1]
    long_b = list(range(10000)) + [2, 3] + [1]
    d = prompt_diff(long_a, long_b)
    assert d.prefix == 10000 and d.inserted == (10000, 10002)


def test_alignment():
    src = tiny.encode("I will check the photo.")
    tea = tiny.encode("I will search the caption first.")
    ops, method = align(src, tea)
    assert "difflib" in method
    s = alignment_summary(ops)
    assert s["equal"] >= 3 and (s["replace"] + s["insert"]) >= 2
    ops, method = align([1, 2, 3], [1, 5, 3, 4], max_cells=1)
    assert method == "positional" and [o.tag for o in ops] == ["equal", "replace", "equal", "insert"]


def test_capture_checks_and_buckets():
    cap = {
        "status": "incomplete",
        "prompt_token_ids": [1, 2, 3],
        "completion_token_ids": [4, 5],
        "completion_logprobs": [-0.01, {"logprob": -3.0}],
        "completion_topk_by_position": [[{"token_id": 4, "probability": 0.9}, {"token_id": 9, "probability": 0.1}]],
        "topk": 2,
        "missing": ["completion_logprobs"],
    }
    data = from_policy_capture(cap, key="step:1", label="x", usage={"completion_tokens": 3, "prompt_tokens": 3})
    msgs = [(c.level, c.message) for c in data.checks]
    assert ("fail", "capture status incomplete; missing: completion_logprobs") in msgs
    assert any(lvl == "fail" and "completion_topk_length_mismatch" in m for lvl, m in msgs)
    assert any(lvl == "fail" and "usage.completion_tokens = 3" in m for lvl, m in msgs)
    assert any(lvl == "ok" and "prompt ids = usage.prompt_tokens" in m for lvl, m in msgs)
    assert data.completion_start == 3 and data.logprob_at(4) == -3.0 and data.logprob_at(2) is None
    assert data.topk_at(3)[0].token_id == 4 and data.topk_at(4) is None
    assert logprob_bucket(-0.01) == "high" and logprob_bucket(math.log(0.6)) == "mid"
    assert logprob_bucket(math.log(0.2)) == "low" and logprob_bucket(-5) == "vlow" and logprob_bucket(None) is None
    assert normalise_topk([{"7": 0.2, "3": 0.8}])[0][0].token_id == 3


_val = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({}, optional={k: _val for k in (
    "status", "prompt_token_ids", "completion_token_ids", "completion_logprobs",
    "completion_topk_by_position", "topk", "missing", "teacher_logprob_semantics")}), _val)
def test_capture_from_garbage_never_raises(cap, usage):
    data = from_policy_capture(cap, key="k", label="l", usage=usage if isinstance(usage, dict) else None)
    for off in range(len(data.ids)):
        data.logprob_at(off)
        data.topk_at(off)
        logprob_bucket(data.logprob_at(off))
