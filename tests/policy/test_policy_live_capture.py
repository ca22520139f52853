"""The token inspector's capture of a live / finished continuation (policy.capture)."""

from __future__ import annotations

from eviscene_tui.artifacts.trace import SourceTrace
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.capture import LIVE_KEY, LIVE_TEACHER_KEY, LiveSnapshot, live_capture
from eviscene_tui.policy.events import Attestation, Attested, Delta, Done, Finished, PromptTokens, TokenLogprob, TopLogprob, Usage
from eviscene_tui.tokens.sources import source_step_prompt_ids
from eviscene_tui.scaffold.synthetic_capture import SyntheticCase


def _acc(prompt, completion, *, lps=False, done=True):
    acc = StreamAccumulator()
    acc.add(Attested(Attestation("attested", "http://x/v1", model_id="m")))
    acc.add(PromptTokens(tuple(prompt)))
    for t in completion:
        lp = (TokenLogprob("t", -0.5, t, (TopLogprob("t", -0.5, t), TopLogprob("u", -1.5, t + 1))),) if lps else ()
        acc.add(Delta("content", "t", (t,), lp))
    if done:
        acc.add(Finished("stop"))
        acc.add(Usage(len(prompt), len(completion), len(prompt) + len(completion)))
        acc.add(Done())
    return acc


def test_snapshot_is_a_copy_and_capture_has_ids_logprobs_usage():
    acc = _acc([1, 2, 3], [7, 8], lps=True)
    snap = LiveSnapshot.of(acc)
    acc.add(Delta("content", "more", (9,)))  # later tokens do not change the snapshot
    data = live_capture(snap)
    assert data.key == LIVE_KEY and data.kind == "continuation" and data.status == "complete"
    assert data.ids == [1, 2, 3, 7, 8] and data.completion_start == 3
    assert data.logprobs == [-0.5, -0.5] and [len(r) for r in data.topk] == [2, 2]
    assert data.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    msgs = [c.message for c in data.checks]
    assert "accounting: 2 completion ids = usage.completion_tokens" in msgs
    assert any("student prompt unknown" in n for n in data.notes) and any("attestation: attested" in n for n in data.notes)


def test_student_prompt_gives_the_hint_span():
    student = [10, 11, 12, 13]
    teacher = [10, 11, 12, 50, 51, 52, 13]  # the hint went between 12 and 13
    data = live_capture(LiveSnapshot.of(_acc(teacher, [5], done=False), status="streaming"), student_prompt_ids=student)
    assert data.key == LIVE_TEACHER_KEY and data.status == "streaming"
    assert data.highlight == (3, 6) and data.prompt_diff.pure_insertion
    assert data.student_ids == student and data.teacher_ids == teacher
    assert any("still streaming" in n for n in data.notes)
    assert any("teacher prompt ids 3–5 differ" in c.message for c in data.checks)
    same = live_capture(LiveSnapshot.of(_acc(student, [5])), student_prompt_ids=student)
    assert same.highlight is None and any("hint changed nothing" in c.message for c in same.checks)


def test_no_prompt_ids_and_empty():
    acc = StreamAccumulator()
    assert LiveSnapshot.of(acc).empty
    acc.add(Delta("content", "x", (4,)))
    data = live_capture(LiveSnapshot.of(acc), student_prompt_ids=[1, 2])
    assert data.ids == [4] and data.student_ids is None
    assert any("no prompt_token_ids" in n for n in data.notes)


def test_source_step_prompt_ids_tolerates_missing_parts():
    steps = [{"stage": "a"}, {"metadata": {"policy_token_capture": {"prompt_token_ids": [1, 2]}}},
             {"metadata": {"policy_token_capture": {"prompt_token_ids": [1, "x"]}}}]
    case = SyntheticCase(SourceTrace({"state": {"all_steps": steps}}))
    assert source_step_prompt_ids(case, 1) == [1, 2]
    assert source_step_prompt_ids(case, 0) is None and source_step_prompt_ids(case, 2) is None
    assert source_step_prompt_ids(case, 9) is None and source_step_prompt_ids(case, None) is None
    # no case, or a case whose source trace cannot be read
    assert source_step_prompt_ids(None, 1) is None and source_step_prompt_ids(SyntheticCase(None), 1) is None
