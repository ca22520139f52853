"""The "why no site" panel: the candidate's failure basis and observed step, the
localizer's model and provenance, and each quote or named event of its explanation that
no step of the trace holds marked "not found in the trace"."""

from __future__ import annotations

from pathlib import Path

import pytest

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.models import LocalizationCandidate, SemanticLocalization
from eviscene_tui.state.case_view import build_case_view, claims_lines
from eviscene_tui.state.claims import check_claims, explanation_claims
from eviscene_tui.state.trace_search import TraceSearch
from eviscene_tui.state.triage import localizer_reasons, no_site_details

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="sample_runs not generated")


def _text(lines) -> str:
    return "\n".join("".join(seg.text for seg in line) for line in lines)


def test_the_panel_says_what_the_candidate_and_the_localizer_recorded():
    bundle = load_case(SAMPLES / "search-no-recoverable-site")
    view = build_case_view(bundle, key="search-no-recoverable-site", base=SAMPLES)
    assert view.no_site and view.case_id == "case-rally-tbilisi-0042" and view.candidate_id.startswith("psd-candidate:")
    text = _text(view.localization)
    why = text.index("Why no recoverable site was found")
    assert why < text.index("Failure site")  # first: the tab opens on it
    assert "failure basis: terminal_outcome_mismatch" in text and "status: requires_localization" in text
    assert "observed failure step: 3" in text
    assert "the localizer: gemini-3-pro-preview" in text and "interaction: int-" in text and "response sha256:" in text
    assert "failure status: failed" in text and "unknown" not in text.split("Source rollout", 1)[1].split("\n")[1]
    assert view.title.endswith("case-rally-tbilisi-0042")


def test_claims_of_the_explanation_are_checked_against_the_trace():
    bundle = load_case(SAMPLES / "search-no-recoverable-site")
    view = build_case_view(bundle, key="k", base=SAMPLES)
    trace, _ = bundle.trace()
    results = check_claims(view.claims, TraceSearch(trace))
    by_text = {r.claim.text: r for r in results}
    assert not by_text["timeout"].found and by_text["timeout"].claim.kind == "event"  # no step times out
    assert by_text["Date and place agree."].steps == (3,)
    lines = _text(claims_lines(results, view.claims))
    assert "1 of 2 quotes / named events of the localizer are not found in the trace" in lines
    assert "names a timeout" in lines and "not found in the trace" in lines.splitlines()[1]
    # the quotes themselves are privileged (masked until v), the verdict next to them is not
    marked = [seg for line in claims_lines(results, view.claims) for seg in line if "timeout" in seg.text]
    assert marked and all(seg.privileged for seg in marked)


def test_quotes_and_events_are_taken_from_every_explanation():
    sl = SemanticLocalization(
        passed=False,
        explanation='The tool hit a rate limit; it said \u201cno archive copy exists\u201d.',
        candidates=[LocalizationCandidate(source_step_index=1, explanation='A "connection reset" ended step 1.')],
    )
    claims = {(c.kind, c.text, c.source) for c in explanation_claims(sl)}
    assert ("event", "rate limit", "localizer explanation") in claims
    assert ("quote", "no archive copy exists", "localizer explanation") in claims
    assert ("quote", "connection reset", "candidate 0 explanation") in claims
    assert ("event", "connection error", "candidate 0 explanation") in claims


def test_no_site_reasons_are_codes_of_the_one_rule():
    assert [c for c, _ in localizer_reasons(None)] == ["no_localization"]
    got = no_site_details(SAMPLES / "search-no-recoverable-site")
    assert got.reasons == ("localizer_failed", "not_recoverable") and got.category == "evidence_interpretation_error"
    valid = {"schema_version": "ifv-psd-semantic-localization-v1", "passed": True, "candidates": [
        {"selected": True, "category": "wrong_search_direction", "verifier": {"kind": "task"}, "observed_basis": [{"quote": "q"}]}]}
    assert localizer_reasons(valid) == []
