"""A capture's id list is accepted exactly when every item is an int and none a bool (the
fast check agrees with the item-by-item rule on any mix of JSON values and huge ints)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eviscene_tui.tokens.capture import _int_list


def _reference(value: Any) -> list[int] | None:
    if not isinstance(value, (list, tuple)):
        return None
    if any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        return None
    return list(value)


_json = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.text(max_size=3) | st.integers(-(2**70), 2**70),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4,
)
_items = st.integers(-(2**63), 2**64) | _json


@given(st.lists(st.integers(0, 300_000), max_size=50), st.lists(_items, max_size=3), st.integers(0, 50), st.booleans())
def test_the_fast_check_agrees_with_the_item_by_item_rule(ids: list[int], extra: list[Any], at: int, as_tuple: bool) -> None:
    value: list[Any] = ids[:at] + extra + ids[at:]
    got = _int_list(tuple(value) if as_tuple else value)
    assert got == _reference(value)
    if got is not None and not as_tuple:
        assert got is value  # a capture's id list is not copied


def test_floats_bools_and_none_are_not_ids() -> None:
    for bad in (1.0, True, False, None, "1", [1], {"id": 1}, 1e16):
        assert _int_list([5, bad, 7]) is None, bad
    assert _int_list([-3, 0, 2**63 + 5]) == [-3, 0, 2**63 + 5]  # beyond orjson's 64 bits: the slow path
