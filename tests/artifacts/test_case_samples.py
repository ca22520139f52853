"""Smoke test of the artifact layer over the committed sample_runs/ (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.layout import discover
from eviscene_tui.artifacts.profile import load_profile

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"

pytestmark = pytest.mark.skipif(not (SAMPLES / "feedback-converged-3-rounds").is_dir(), reason="sample_runs not generated")


def _cases() -> list[Path]:
    # the real discovery: sample_runs/inputs/ (the driver inputs beside the roots) is no case
    refs, problems = discover(SAMPLES)
    assert problems == []
    return sorted(Path(r.path) for r in refs)


def test_every_sample_loads_without_raising() -> None:
    roots = _cases()
    assert SAMPLES / "inputs" not in roots and not any("inputs" in r.relative_to(SAMPLES).parts for r in roots)
    for root in roots:
        case = load_case(root)
        assert case.layout in ("feedback_search", "single_run"), root
        case.all_problems()
        case.failure_site()
        trace, _ = case.trace()
        if root.name == "single-copied-without-inputs":
            assert trace is None
            assert any(p.code == "missing_artifact" and "source trace not found" in p.message for p in case.problems)
            continue
        assert trace is not None and trace.step_count > 0, root
        assert not trace.path.is_relative_to(root)  # the source trace is an input outside the root
        for i in range(trace.step_count):
            trace.brief(i)
            trace.step_detail(i)


def test_converged_sample() -> None:
    case = load_case(SAMPLES / "feedback-converged-3-rounds")
    assert case.status == "converged"
    assert [r.index for r in case.rounds] == [0, 1, 2]
    assert [a.state for a in case.attempts][-1] == "accepted"
    assert case.rounds[1].relocalized and not case.rounds[0].relocalized
    site = case.failure_site()
    assert site is not None and site.source_step_index is not None
    req, problems = case.source_step_request(site.source_step_index)
    assert req is not None and req.source == "archive" and req.images and req.system_prompt
    assert case.problems == []


def test_pending_is_not_rejected() -> None:
    case = load_case(SAMPLES / "search-paused-pending-verifier")
    assert case.status == "paused_pending_verifier"
    states = [a.state for r in case.rounds for a in (r.attempts or [])]
    assert states and set(states) == {"pending"}


def test_sample_profile() -> None:
    prof, problems = load_profile(SAMPLES / "serving-profile.json")
    assert prof is not None and problems == [] and prof.base_urls() and prof.expected_root()
