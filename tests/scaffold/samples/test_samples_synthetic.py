"""Synthetic data for benchmarks: valid small cases, a big trace, a big capture."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import orjson

from eviscene_tui.artifacts.jsonio import BOUND_GZIP_SCHEMA, pretty_json_bytes, read_bound
from eviscene_tui.scaffold.samples.synthetic import (
    expected_kind,
    make_big_capture_ids,
    make_big_case,
    make_big_trace,
    make_many_cases,
)
from eviscene_tui.scaffold.tiny import decode, special_id

N = 30


def _report(root: Path) -> dict:
    from eviscene_tui.artifacts.report import build_check_report

    return build_check_report(root, str(root), workers=1)


def test_many_cases_are_valid_and_mixed(tmp_path: Path) -> None:
    make_many_cases(tmp_path, N)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"case-{i:05d}" for i in range(N)]
    report = _report(tmp_path)
    assert report["summary"]["cases"] == N
    assert report["summary"]["problems"] == 0, [p for c in report["cases"] for p in c["problems"]][:5]
    want = Counter()
    for i in range(N):
        kind = expected_kind(i)
        want[kind.split("_", 1)[1]] += 1
    assert Counter(c["status"] for c in report["cases"]) == want
    layouts = Counter(c["layout"] for c in report["cases"])
    assert layouts["feedback_search"] > 0 and layouts["single_run"] > 0
    by_path = {c["path"]: c for c in report["cases"]}
    assert by_path["case-00001"]["accepted"] == 1  # a converged search
    assert by_path["case-00005"]["pending"] == 1  # a generating run with a pending attempt


def test_many_cases_use_the_driver_byte_format(tmp_path: Path) -> None:
    """orjson is used for speed; the bytes must equal the driver's json.dumps writers."""
    make_many_cases(tmp_path, 10)
    checked = 0
    for path in tmp_path.rglob("*.json"):
        data = path.read_bytes()
        if path.name == "source-trace.json":
            continue
        assert pretty_json_bytes(json.loads(data)) == data, path
        doc = json.loads(data)
        if isinstance(doc, dict) and (set(doc) == {"identity", "payload", "payload_sha256"} or doc.get("schema_version") == BOUND_GZIP_SCHEMA):
            assert read_bound(path).ok, path
        checked += 1
    assert checked > 50


def test_many_cases_are_deterministic(tmp_path: Path) -> None:
    make_many_cases(tmp_path / "a", 12)
    make_many_cases(tmp_path / "b", 12)
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert a == b


def test_big_trace_shape(tmp_path: Path) -> None:
    info = make_big_trace(tmp_path / "t.json", 3_000_000)
    data = (tmp_path / "t.json").read_bytes()
    assert info["bytes"] == len(data)
    assert 2_500_000 < len(data) < 3_600_000
    trace = orjson.loads(data)
    steps = trace["state"]["all_steps"]
    assert len(steps) == info["steps"] > 100
    assert steps[-1]["stage"] == "unified_judgment" and steps[0]["action_type"] == "tool_call"
    assert 0 < info["failure_step_index"] < len(steps) - 1
    assert len(steps[1]["tool_result"]) > 3000
    json.loads(steps[1]["tool_result"])  # tool results are JSON strings


def test_big_case_checks_clean(tmp_path: Path) -> None:
    info = make_big_case(tmp_path / "big", 1_000_000)
    # the trace is an input beside the root, recorded at the cluster location
    assert Path(info["path"]) == tmp_path / "inputs" / "big" / "trace.json"
    from eviscene_tui.artifacts.case import load_case

    case = load_case(tmp_path / "big")
    assert case.source_trace_path == Path(info["path"])
    assert {p.key: p for p in case.input_provenance()}["trace"].rule == "moved tree"
    report = _report(tmp_path / "big")
    assert report["summary"]["problems"] == 0
    assert report["cases"][0]["status"] == "no_admissible_hints"
    loc = json.loads((tmp_path / "big/semantic-localization.json").read_bytes())
    assert loc["candidates"][0]["source_step_index"] == info["failure_step_index"]


def test_big_capture_ids() -> None:
    ids = make_big_capture_ids(200_000)
    assert len(ids) == 200_000
    pad, vs, ve = special_id("<|image_pad|>"), special_id("<|vision_start|>"), special_id("<|vision_end|>")
    first = ids.index(pad)
    assert ids[first - 1] == vs and ids[first : first + 1024] == [pad] * 1024 and ids[first + 1024] == ve
    assert "<|im_start|>system" in decode(ids[:40])
    assert make_big_capture_ids(1000) == ids[:1000]


def test_slate_case_is_unsupported(tmp_path: Path) -> None:
    from eviscene_tui.scaffold.samples.expected import SLATE_EXPECTED
    from eviscene_tui.scaffold.samples.synthetic import make_slate_case

    make_slate_case(tmp_path / "slate-root")
    report = _report(tmp_path)
    (row,) = report["cases"]
    assert row["path"] == "slate-root"
    assert {k: row[k] for k in ("layout", "status", "rounds", "attempts", "accepted", "pending")} == {
        k: SLATE_EXPECTED[k] for k in ("layout", "status", "rounds", "attempts", "accepted", "pending")
    }
    assert sorted({p["code"] for p in row["problems"]}) == SLATE_EXPECTED["problems"]
