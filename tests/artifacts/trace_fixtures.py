"""Hypothesis strategies for trace documents whose steps make a byte scan's life hard, and
the JSON writers they are dumped with (shared by the chunked-parse and step-index tests).

Every step starts with the same key, as the driver's serializer writes them; nested
objects may start with it too (a scan must not cut between those); strings look like
boundaries or hold unbalanced brackets.
"""

from __future__ import annotations

import json

import orjson
from hypothesis import strategies as st

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
