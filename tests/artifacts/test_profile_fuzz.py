"""Hypothesis: random bytes and mutated profiles into load_profile."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_profile_loading import PROFILE

from eviscene_tui.artifacts.profile import load_profile

LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                     max_leaves=8)


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "p.json").write_bytes(data)
        prof, problems = load_profile(Path(d) / "p.json")
        assert prof is not None or problems


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(PROFILE) + ["base_urls", "extra"]), VALUE, max_size=5))
def test_mutated_profile(changes: dict) -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "p.json").write_bytes(json.dumps(dict(PROFILE, **changes)).encode("utf-8", "surrogatepass"))
        prof, problems = load_profile(Path(d) / "p.json")
        assert prof is not None
        assert all(isinstance(u, str) for u in prof.base_urls())
        prof.expected_root()
