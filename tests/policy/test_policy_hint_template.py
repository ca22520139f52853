"""Learning the driver's hint placement from a run's own hinted request, and applying it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eviscene_tui.policy.hint_template import (
    APPEND_TEXT,
    NEW_MESSAGE,
    NEW_PART,
    PREPEND_TEXT,
    HintTemplate,
    apply_template,
    infer_hint_template,
)
from eviscene_tui.policy.request import TeacherRequest, apply_hint, with_hint

SOURCE = [
    {"role": "system", "content": "You are EviScene."},
    {"role": "user", "content": [{"type": "text", "text": "Claim: a flood."}, {"type": "image_ref", "sha256": "ab"}]},
    {"role": "assistant", "content": "searching", "tool_calls": [{"id": "c1"}]},
    {"role": "tool", "content": "{\"n\": 1}", "tool_call_id": "c1"},
]
HINT = "Compare the dates."


def _hinted(change) -> list[dict]:
    msgs = copy.deepcopy(SOURCE)
    change(msgs)
    return msgs


@pytest.mark.parametrize(
    "change,mode,which",
    [
        (lambda m: m.append({"role": "user", "content": [{"type": "text", "text": "Hint: " + HINT}]}), NEW_MESSAGE, "last"),
        (lambda m: m.append({"role": "user", "content": "<hint>" + HINT + "</hint>"}), NEW_MESSAGE, "last"),
        (lambda m: m.insert(3, {"role": "user", "content": HINT}), NEW_MESSAGE, "last"),
        (lambda m: m[0].update(content=m[0]["content"] + "\n\nHint: " + HINT), APPEND_TEXT, "last"),  # the only system message: first and last
        (lambda m: m[1]["content"][0].update(text="[" + HINT + "]\n" + m[1]["content"][0]["text"]), PREPEND_TEXT, "last"),
        (lambda m: m[1]["content"].append({"type": "text", "text": "Hint: " + HINT}), NEW_PART, "last"),
    ],
)
def test_infer_then_apply_reproduces_the_hinted_request(change, mode, which) -> None:
    hinted = _hinted(change)
    template = infer_hint_template(SOURCE, hinted, HINT, evidence="round 0, hint 00")
    assert template is not None and template.mode == mode and template.which == which
    again, loc = apply_template(SOURCE, HINT, template)
    assert again == hinted
    assert loc["placement"] == "as_run"
    # another hint goes to the same place with the same words around it
    other, _ = apply_template(SOURCE, "Open the oldest match.", template)
    assert infer_hint_template(SOURCE, other, "Open the oldest match.") == HintTemplate(**{**template.__dict__, "evidence": ""})


@pytest.mark.parametrize(
    "hinted",
    [
        SOURCE,  # nothing added
        _hinted(lambda m: m.append({"role": "user", "content": "no hint text here"})),
        _hinted(lambda m: m.append({"role": "user", "content": HINT + " " + HINT})),  # twice: ambiguous
        _hinted(lambda m: (m.append({"role": "user", "content": HINT}), m.append({"role": "user", "content": "x"}))),
        _hinted(lambda m: m[3].update(content="changed " + HINT)),  # a replacement, not an insertion
        _hinted(lambda m: (m[0].update(content=m[0]["content"] + HINT), m[3].update(content="x"))),  # two changes
    ],
)
def test_unclear_differences_teach_nothing(hinted) -> None:
    assert infer_hint_template(SOURCE, hinted, HINT) is None


def test_apply_hint_as_run_uses_the_template_and_falls_back_without_one() -> None:
    template = infer_hint_template(SOURCE, _hinted(lambda m: m.append({"role": "user", "content": "Hint: " + HINT})), HINT)
    msgs, loc = apply_hint(SOURCE, "Look again.", "as_run", template)
    assert msgs[-1] == {"role": "user", "content": "Hint: Look again."} and loc["mode"] == NEW_MESSAGE
    msgs, loc = apply_hint(SOURCE, "Look again.", "as_run", None)
    assert loc["placement"] == "user_suffix" and len(msgs) == len(SOURCE)
    # a template with no place in these messages (no user message to append to) falls back too
    no_user = [m for m in SOURCE if m["role"] != "user"]
    appender = HintTemplate(APPEND_TEXT, "user", "", "", which="last")
    msgs, loc = apply_hint(no_user, "Look again.", "as_run", appender)
    assert loc["placement"] == "user_suffix"


def test_with_hint_replaces_a_learned_new_message() -> None:
    template = infer_hint_template(SOURCE, _hinted(lambda m: m.append({"role": "user", "content": [{"type": "text", "text": "Hint: " + HINT}]})), HINT)
    msgs, loc = apply_hint(SOURCE, "first", "as_run", template)
    req = TeacherRequest(messages=msgs, hint="first", hint_placement="as_run", hint_location=loc, hint_template=template)
    assert "as in this run" in req.hint_rule()
    second = with_hint(req, "second")
    assert second.messages == SOURCE + [{"role": "user", "content": [{"type": "text", "text": "Hint: second"}]}]
    assert with_hint(second, "").messages == SOURCE  # no hint: the source request exactly


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    mode=st.sampled_from([NEW_MESSAGE, APPEND_TEXT, PREPEND_TEXT, NEW_PART]),
    before=TEXT,
    after=TEXT,
    hint=st.text(min_size=3, max_size=20).filter(lambda h: h.strip() == h and h.strip()),
    from_end=st.integers(0, 2),
    list_content=st.booleans(),
)
def test_apply_then_infer_round_trips(mode, before, after, hint, from_end, list_content) -> None:
    template = HintTemplate(mode, "user", before, after, which="last", from_end=from_end if mode in (NEW_MESSAGE, NEW_PART) else 0,
                            list_content=list_content and mode == NEW_MESSAGE, part_from_end=1 if mode in (APPEND_TEXT, PREPEND_TEXT) else None)
    applied = apply_template(SOURCE, hint, template)
    assert applied is not None
    hinted, loc = applied
    learned = infer_hint_template(SOURCE, hinted, hint)
    if learned is None:
        # only when the words around the hint make it ambiguous (the hint occurs twice)
        assert (before + hint + after).count(hint) > 1 or any(hint in str(m) for m in SOURCE)
        return
    assert apply_template(SOURCE, hint, learned)[0] == hinted


def test_rebuild_for_a_sample_case_learns_the_runs_placement_and_falls_back_without_tries(tmp_path) -> None:
    import shutil

    from eviscene_tui.artifacts.case import load_case
    from eviscene_tui.policy.casefile import observed_hint_template, rebuild_for_case
    from conftest import generate_samples

    root = tmp_path / "runs"
    generate_samples(root, cases=["feedback-converged-3-rounds"])
    case_dir = root / "feedback-converged-3-rounds"
    case = load_case(case_dir)
    template = observed_hint_template(case, 1)
    assert template is not None and template.mode == NEW_MESSAGE and template.before == "Hint: "
    assert template.evidence.startswith("round 1, hint 00, ")  # the asked round first
    req = rebuild_for_case(case, round_index=1, hint="Check the caption.")
    assert req.messages[-1] == {"role": "user", "content": [{"type": "text", "text": "Hint: Check the caption."}]}
    assert req.hint_rule().startswith("as in this run (round 1")
    configured = rebuild_for_case(load_case(case_dir), round_index=1, hint="Check the caption.", placement="user_suffix")
    assert configured.hint_rule() == "user_suffix (configured)" and configured.hint_template is None
    # without any hint try there is nothing to learn from: the default rule, said so
    for rnd in (case_dir / "rounds").iterdir():
        shutil.rmtree(rnd / "continuations", ignore_errors=True)
    bare = rebuild_for_case(load_case(case_dir), round_index=1, hint="Check the caption.")
    assert bare.hint_location["placement"] == "user_suffix"
    assert "no hinted teacher request" in bare.hint_rule()
    assert not any("hint placement" in p for p in bare.problems)  # nothing to learn from: nothing to note


def test_hint_where_reads_like_a_sentence() -> None:
    template = infer_hint_template(SOURCE, _hinted(lambda m: m.append({"role": "user", "content": [{"type": "text", "text": "Hint: " + HINT}]})), HINT)
    msgs, loc = apply_hint(SOURCE, "Look.", "as_run", template)
    req = TeacherRequest(messages=msgs, hint="Look.", hint_placement="as_run", hint_location=loc, hint_template=template)
    assert req.hint_where() == "new message 4 (user), text part 0, characters 0-11"
    msgs, loc = apply_hint(SOURCE, "Look.", "system_suffix")
    assert TeacherRequest(messages=msgs, hint_location=loc).hint_where().startswith("message 0 (system), characters 17-")
    assert TeacherRequest(messages=SOURCE).hint_where() == "no hint"


def test_a_hinted_request_that_is_not_one_insertion_is_noted(tmp_path, monkeypatch) -> None:
    from eviscene_tui.artifacts.case import load_case
    from eviscene_tui.policy import casefile
    from conftest import generate_samples

    root = tmp_path / "runs"
    generate_samples(root, cases=["feedback-converged-3-rounds"])
    case_dir = root / "feedback-converged-3-rounds"
    seen: list[tuple] = []

    def unclear(source, hinted, hint, *, evidence=""):
        seen.append((source, hinted, hint, evidence))
        return None  # as for a driver that also rewrote the prompt (inference is tested above)

    monkeypatch.setattr(casefile, "infer_hint_template", unclear)
    req = casefile.rebuild_for_case(load_case(case_dir), round_index=1, hint="Check the caption.")
    assert seen and all(len(h) == len(s) + 1 for s, h, _, _ in seen)  # the real archived requests were compared
    assert req.hint_location["placement"] == "user_suffix"
    notes = [p for p in req.problems if p.startswith("hint placement:")]
    assert len(notes) == len(seen) and "round 1, hint 00" in notes[0]


def test_the_placement_names_the_request_where_it_was_read_in_a_moved_copy(tmp_path) -> None:
    """A copy of a run (its files recorded at /data/eviscene/...): the hint placement line
    names the archived request this copy read, inside it, not the recorded path."""
    from eviscene_tui.artifacts.case import load_case
    from eviscene_tui.policy.casefile import rebuild_for_case
    from eviscene_tui.scaffold.samples import copy_case

    repo = Path(__file__).resolve().parents[2] / "sample_runs"
    case_dir = copy_case(repo, "feedback-converged-3-rounds", tmp_path / "copy")
    req = rebuild_for_case(load_case(case_dir), round_index=1, hint="Check the caption.")
    rule = req.hint_rule()
    assert "/data/eviscene" not in rule, rule
    assert "round 1, hint 00, rounds/round-01/runtime/case-flood-valencia-0007/hint-00-" in rule and "/context/req-000001.json" in rule
    store = next((case_dir / "rounds" / "round-01" / "runtime" / "case-flood-valencia-0007").glob("hint-00-*"))
    assert (store / "context" / "req-000001.json").is_file()
