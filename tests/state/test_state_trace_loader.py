"""The low-memory trace path gives the same SourceTrace as the artifact layer."""

from __future__ import annotations

from pathlib import Path

import orjson

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.samples import generate
from eviscene_tui.state import trace_loader


def test_lowmem_trace_matches_artifact_loader(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "runs"
    generate(root)
    case = root / "feedback-converged-3-rounds"
    monkeypatch.setattr(trace_loader, "LOWMEM_MIN_BYTES", 0)
    bundle = load_case(case)
    trace, problems = trace_loader.load_source_trace(bundle)
    reference, ref_problems = load_case(case).trace()
    assert problems == [] and ref_problems == []
    assert trace.step_count == reference.step_count
    assert trace.policy_step_indices() == reference.policy_step_indices()
    for i in range(trace.step_count):
        assert trace.brief(i).to_dict() == reference.brief(i).to_dict()
    assert bundle.trace()[0] is trace  # cached on the bundle


def test_lowmem_falls_back_on_bad_files(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "runs"
    generate(root)
    case = root / "feedback-converged-3-rounds"
    monkeypatch.setattr(trace_loader, "LOWMEM_MIN_BYTES", 0)
    bundle = load_case(case)
    path = bundle.source_trace_path
    path.write_bytes(orjson.dumps({"state": {"all_steps": "nope"}}))
    trace, problems = trace_loader.load_source_trace(bundle)
    assert problems and "all_steps" in problems[0].message
    path.write_bytes(b'{"state": {"all_steps": [')
    trace, problems = trace_loader.load_source_trace(load_case(case))
    assert trace is None and problems
