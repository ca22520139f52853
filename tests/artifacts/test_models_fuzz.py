"""Hypothesis: arbitrary JSON into every model via parse_model; never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_case_builders import attempt, candidate, judge_artifact

from eviscene_tui.artifacts import models as m

LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80), st.floats(), st.text(max_size=20))
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                     max_leaves=10)
MODELS = [cls for cls in vars(m).values() if isinstance(cls, type) and issubclass(cls, m.Tolerant) and cls is not m.Tolerant]
SEEDS = {m.AttemptRecord: attempt("h", verified=False), m.Candidate: candidate(), m.LocalVerification: judge_artifact("h")}


@settings(max_examples=150, deadline=None)
@given(cls=st.sampled_from(MODELS), value=VALUE)
def test_any_json_into_any_model(cls: type, value: object) -> None:
    model, problems = m.parse_model(cls, value, "x")
    if isinstance(value, dict):
        assert model is not None
    elif value is not None:
        assert model is None and problems


@settings(max_examples=100, deadline=None)
@given(cls=st.sampled_from(sorted(SEEDS, key=lambda c: c.__name__)), data=st.data())
def test_field_replaced_with_junk(cls: type, data: st.DataObject) -> None:
    raw = dict(SEEDS[cls])
    key = data.draw(st.sampled_from(sorted(raw)))
    raw[key] = data.draw(VALUE)
    model, _ = m.parse_model(cls, raw, "x")
    assert model is not None
    if isinstance(model, m.AttemptRecord):
        assert model.state in ("accepted", "pending", "rejected")
        _ = model.checker  # must not raise
    if isinstance(model, m.LocalVerification):
        assert set(model.checker) == set(m.CHECK_NAMES)
