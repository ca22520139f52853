"""Torn lines are 'being written' during the grace period, then problems."""

from __future__ import annotations

from eviscene_tui.state.transient import TransientProblems


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_torn_line_is_fresh_then_settles() -> None:
    clock = Clock()
    t = TransientProblems(grace=2.0, clock=clock)
    probs = [("jsonl_torn_line", "/r/repair_attempts.jsonl"), ("leftover_tmp", "/r/x.tmp")]
    settled, fresh = t.classify("case", probs)
    assert settled == [("leftover_tmp", "/r/x.tmp")]
    assert fresh == [("jsonl_torn_line", "/r/repair_attempts.jsonl")]
    assert t.pending_cases() == {"case"}
    clock.now += 1.0
    assert t.classify("case", probs)[1] == [("jsonl_torn_line", "/r/repair_attempts.jsonl")]
    clock.now += 1.5
    settled, fresh = t.classify("case", probs)
    assert fresh == [] and ("jsonl_torn_line", "/r/repair_attempts.jsonl") in settled
    assert t.pending_cases() == set()


def test_completed_line_is_forgotten() -> None:
    clock = Clock()
    t = TransientProblems(grace=2.0, clock=clock)
    t.classify("case", [("jsonl_torn_line", "/r/a.jsonl")])
    clock.now += 0.5
    assert t.classify("case", []) == ([], [])
    clock.now += 5
    # a new tear later starts a new grace period
    assert t.classify("case", [("jsonl_torn_line", "/r/a.jsonl")])[1]


def test_seed_old_marks_existing_damage_as_settled() -> None:
    clock = Clock()
    t = TransientProblems(grace=2.0, clock=clock)
    t.seed_old("case", [("jsonl_torn_line", "/r/a.jsonl")])
    settled, fresh = t.classify("case", [("jsonl_torn_line", "/r/a.jsonl")])
    assert settled and not fresh
