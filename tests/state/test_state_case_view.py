"""Case view models built from generated sample cases (no Textual)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import generate_samples

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.state.case_view import build_case_view, build_compare, closest_step, pick_teacher_step


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("state-samples") / "runs"
    generate_samples(root)
    return root


def text_of(lines) -> str:
    return "\n".join("".join(seg.text for seg in line) for line in lines)


def privileged_text(lines) -> str:
    return "\n".join(seg.text for line in lines for seg in line if seg.privileged)


def test_converged_case_has_failure_site_rounds_and_states(samples: Path) -> None:
    bundle = load_case(samples / "feedback-converged-3-rounds")
    view = build_case_view(bundle, key="feedback-converged-3-rounds", base=samples)
    assert view.failure_index is not None
    assert not view.no_site
    rounds = text_of(view.rounds)
    assert "Round 00" in rounds and "Round 01" in rounds and "Round 02" in rounds
    assert "relocalized" in rounds
    assert "ACCEPTED" in rounds and "REJECTED" in rounds
    assert "locked_hint" in rounds and "excluded_hints" in rounds
    assert view.quotes and all(q.step_index is not None for q in view.quotes)
    # explanations and expected verdicts are flagged privileged
    assert "expected verdict" in rounds
    assert privileged_text(view.localization)


def test_pending_is_not_rejected(samples: Path) -> None:
    bundle = load_case(samples / "search-paused-pending-verifier")
    view = build_case_view(bundle, key="p", base=samples)
    rounds = text_of(view.rounds)
    assert "PENDING verification (not rejected)" in rounds


def test_no_site_case_explains_why(samples: Path) -> None:
    bundle = load_case(samples / "search-no-recoverable-site")
    view = build_case_view(bundle, key="n", base=samples)
    assert view.no_site and view.failure_index is None
    loc = text_of(view.localization)
    assert "Why no recoverable site was found" in loc
    assert "strict-audit" in loc
    assert "protocol rejection" in loc
    assert "semantic localization" in loc
    sl = bundle.rounds[-1].semantic_localization
    assert view.closest_step == closest_step(sl)


def test_compare_marks_differences(samples: Path) -> None:
    bundle = load_case(samples / "feedback-converged-3-rounds")
    site = bundle.failure_site()
    trace, _ = bundle.trace()
    teacher, label = pick_teacher_step(bundle, site.source_step_index)
    assert teacher is not None
    source = trace.step(site.source_step_index)
    compare = build_compare(source, teacher, source_index=site.source_step_index, teacher_label=label)

    def fields(lines, style):  # the field names on lines that start with ``style`` (≠ marks a difference)
        return [line[1].text for line in lines if len(line) > 1 and line[0].style == style and line[1].style == "key"]

    def words(lines, style):
        return {seg.text for line in lines for seg in line if seg.style == style}

    # the teacher searched nothing: it fetched the older 2019 page instead (the sample's repair)
    assert fields(compare.left, "mark") == fields(compare.right, "mark") == ["thought", "tool_name", "tool_args"]
    assert fields(compare.left, "dim") == fields(compare.right, "dim") == ["action_type", "output"]
    assert {"web_search", "Search"} <= words(compare.left, "del") and {"fetch_page", "Open"} <= words(compare.right, "ins")
    # a step beside itself marks nothing
    same = build_compare(source, source, source_index=site.source_step_index, teacher_label=label)
    assert fields(same.left, "mark") == [] and not words(same.left, "del") and not words(same.right, "ins")


def test_hostile_case_strings_are_sanitised(samples: Path) -> None:
    bundle = load_case(samples / "hostile-strings")
    view = build_case_view(bundle, key="hostile-strings", base=samples)
    for lines in (view.localization, view.rounds):
        for line in lines:
            for seg in line:
                assert "\x1b" not in seg.text and "\u202e" not in seg.text and "\x07" not in seg.text
