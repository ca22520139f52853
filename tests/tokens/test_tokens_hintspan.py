"""The hint span from the hint's own text, and differences beyond the hint."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.decode import LocalTokenizerDecoder, RawDecoder
from eviscene_tui.tokens.hintspan import compare_beyond, hint_span, locate_text

DEC = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="tiny-test")
S = tiny.special_id
enc = tiny.encode


def _chat(system: str, user: str, hint: str | None = None) -> list[int]:
    ids = [S("<|im_start|>")] + enc("system\n" + system) + [S("<|im_end|>")] + enc("\n")
    ids += [S("<|im_start|>")] + enc("user\n" + user) + [S("<|im_end|>")] + enc("\n")
    if hint is not None:
        ids += [S("<|im_start|>")] + enc("user\nHint: " + hint) + [S("<|im_end|>")] + enc("\n")
    return ids + [S("<|im_start|>")] + enc("assistant\n")


TOOLS_LIST = "You check photos.\n# Tools\n- reverse_image_search(image_id): Find earlier copies.\n- web_search(query): Search."
TOOLS_JSON = 'You check photos.\n# Tools\n{"function":{"name":"reverse_image_search"}}\n{"function":{"name":"web_search"}}'
HINT = "Open the oldest reverse-image match first.\nQuote its date."


def test_a_rebuilt_prompt_finds_the_hint_not_the_first_difference():
    """The live prompt renders the tools differently from the archive: the student/teacher
    difference starts in the tool schema, the hint is where its text is."""
    student = _chat(TOOLS_LIST, "Claim: flooded street.")
    archived_teacher = _chat(TOOLS_LIST, "Claim: flooded street.", HINT)
    live = _chat(TOOLS_JSON, "Claim: flooded street.", HINT)
    span = hint_span(live, DEC.piece_bytes, HINT, student=student, archived_hinted=archived_teacher,
                     archived_label="the archived hinted prompt of round 2")
    a, b = span.range
    assert tiny.decode(live[a:b]).strip() == HINT and span.basis == "hint text"
    # the old answer, the difference from the student prompt, starts long before the hint
    diff_start = next(i for i, (x, y) in enumerate(zip(student, live)) if x != y)
    assert diff_start < a - 20
    assert span.same_beyond_hint is False and span.difference is not None
    assert span.difference.offset == diff_start and "round 2 (" in span.reference
    assert tiny.decode(list(span.difference.prompt_ids)).startswith('{"function"')
    assert tiny.decode(list(span.difference.ref_ids)).startswith("- reverse_image")
    # against the archived prompt of the same rendering, nothing differs beyond the hint
    same = hint_span(archived_teacher, DEC.piece_bytes, HINT, student=student, archived_hinted=archived_teacher)
    assert same.same_beyond_hint is True and same.difference is None
    # against only the student prompt: the hint and its framing are the one insertion
    own = hint_span(archived_teacher, DEC.piece_bytes, HINT, student=student)
    assert own.same_beyond_hint is True and own.range == same.range


def test_without_the_text_the_difference_is_the_fallback_and_says_so():
    student = _chat(TOOLS_LIST, "Claim.")
    teacher = _chat(TOOLS_LIST, "Claim.", HINT)
    span = hint_span(teacher, None, HINT, student=student, decoder_label="raw ids")
    assert span.basis == "prompt difference" and span.found
    assert "hint text not located" in span.message and any("cannot be looked up" in n for n in span.notes)
    # a hint the prompt does not hold
    span = hint_span(teacher, DEC.piece_bytes, "something else entirely", student=student, decoder_label="tiny")
    assert span.basis == "prompt difference" and any("not found in the decoded prompt (tiny)" in n for n in span.notes)
    # identical prompts and no hint: no span, said plainly
    span = hint_span(student, DEC.piece_bytes, None, student=student)
    assert not span.found and "equals" in span.message
    assert RawDecoder().piece_bytes(5) is None


def test_a_difference_after_the_hint_is_reported():
    student = _chat(TOOLS_LIST, "Claim.") + enc("tail one")
    teacher = _chat(TOOLS_LIST, "Claim.", HINT) + enc("tail two, rendered differently")
    span = hint_span(teacher, DEC.piece_bytes, HINT, student=student)
    assert span.same_beyond_hint is False and span.difference.offset >= span.range[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.text(min_size=0, max_size=40),
    hint=st.text(min_size=1, max_size=40).filter(lambda t: t.strip()),
    after=st.text(min_size=0, max_size=40),
)
def test_located_span_holds_the_hint_and_nothing_it_can_lose(before, hint, after):
    ids = enc(before) + [S("<|im_end|>")] + enc("\n" + hint + "\n") + [S("<|im_start|>")] + enc(after)
    got = locate_text(ids, DEC.piece_bytes, hint, prefer=None)
    assert got is not None
    a, b = got
    joined = b"".join(DEC.piece_bytes(t) or b"" for t in ids[a:b])
    needle = hint.strip().encode()
    assert needle in joined
    # minimal: dropping the first or the last id loses part of the hint
    assert needle not in b"".join(DEC.piece_bytes(t) or b"" for t in ids[a + 1:b])
    assert needle not in b"".join(DEC.piece_bytes(t) or b"" for t in ids[a:b - 1])


def test_whitespace_differences_still_locate():
    ids = enc("context\nHint: look   at\n\nthe  date\n")
    a, b = locate_text(ids, DEC.piece_bytes, "look at the date")
    assert tiny.decode(ids[a:b]).split() == ["look", "at", "the", "date"]


def test_compare_beyond_hinted_reference_is_exact():
    same, diff = compare_beyond([1, 2, 3], (1, 2), [1, 2, 3], reference_label="r", reference_hinted=True)
    assert same and diff is None
    same, diff = compare_beyond([1, 2, 3, 4], (1, 2), [1, 9, 3, 4], reference_label="r", reference_hinted=True)
    assert not same and diff.offset == 1 and diff.ref_offset == 1 and diff.reference == "r"
