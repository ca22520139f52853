"""load_trace / SourceTrace: lazy steps, briefs, details, hashes, bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from test_case_builders import HOSTILE, make_trace, write_json

from eviscene_tui.artifacts.jsonio import canonical_sha256, sha256_file
from eviscene_tui.artifacts.problems import ProblemCode
from eviscene_tui.artifacts.trace import SourceTrace, load_trace, load_trace_bytes, one_line


def _write(tmp_path: Path, value: object, name: str = "trace.json") -> Path:
    return write_json(tmp_path / name, value)


def test_valid_trace_identity_and_steps(tmp_path: Path) -> None:
    raw = make_trace(6)
    trace, problems = load_trace(_write(tmp_path, raw))
    assert problems == [] and isinstance(trace, SourceTrace)
    assert trace.step_count == 6 and len(trace) == 6
    assert trace.episode_id == "episode-1" and trace.case_id == "case-1"
    assert trace.runtime_store is not None and trace.runtime_store.attempt_id == "src-attempt"
    assert trace.policy_step_indices() == [1, 3, 5]
    assert trace.next_policy_step(1) == 3 and trace.previous_policy_step(3) == 1
    assert trace.next_policy_step(5) is None and trace.previous_policy_step(1) is None
    step = trace.step(1)
    assert step.stage == "unified_react" and step.is_policy_step
    assert step.token_capture is not None and step.token_capture.is_complete
    assert trace.step(1) is step  # cached
    assert trace.step(-1).stage == "unified_judgment"
    with pytest.raises(IndexError):
        trace.step(6)
    assert trace.canonical_sha256() == canonical_sha256(raw)
    assert trace.file_sha256() == sha256_file(tmp_path / "trace.json")
    assert trace.index_for_step_id("episode-1:react:iid-3") == 3
    assert trace.index_for_step_id("episode-1:react:5") == 4
    assert trace.index_for_step_id(None) is None


def test_brief_fields(tmp_path: Path) -> None:
    trace, _ = load_trace(_write(tmp_path, make_trace(6)))
    b = trace.brief(1)
    assert (b.index, b.stage, b.action_type, b.tool_name) == (1, "unified_react", "tool_call", "web_search")
    assert b.is_policy_step and b.has_token_capture and b.token_capture_status == "complete"
    assert b.context_request_id == "req-000001"
    assert "\n" not in b.text_preview and b.text_preview == "thinking about it"
    assert b.tool_args_preview == '{"query":"q1"}'
    assert b.tool_result_preview.startswith('{"results"')
    assert trace.brief(1) is b
    b0 = trace.brief(0)
    assert not b0.is_policy_step and not b0.has_token_capture
    assert set(b.to_dict()) >= {"index", "stage", "args_preview", "result_preview"}


def test_stage_name_legacy_and_non_object_steps(tmp_path: Path) -> None:
    raw = make_trace(3, stage_key="stage_name")
    raw["state"]["all_steps"].append("not a step")
    raw["state"]["all_steps"].append({"stage": 5, "metadata": "bad", "action_type": "format_error"})
    trace, problems = load_trace(_write(tmp_path, raw))
    assert problems == []
    assert trace.step(0).stage == "unified_react" and trace.brief(0).stage == "unified_react"
    assert trace.brief(3).is_object is False and trace.step(3).stage is None
    assert trace.brief(4).is_protocol_rejection and trace.step(4).is_protocol_rejection
    assert trace.step(4).stage is None and not trace.step(4).is_policy_step


def test_step_detail(tmp_path: Path) -> None:
    trace, _ = load_trace(_write(tmp_path, make_trace(6)))
    d = trace.step_detail(1)
    assert d["tool_result_is_json"] is True
    assert '"results": [' in d["tool_result_pretty"]
    assert d["policy_input"]["system_instruction"] == "sys"
    assert d["token_capture"]["prompt_tokens"] == 6 and d["token_capture"]["status"] == "complete"
    assert d["token_capture"]["missing"] == []
    d0 = trace.step_detail(0)
    assert d0["token_capture"] is None and d0["policy_input"] is None


def test_step_detail_incomplete_capture_and_plain_result(tmp_path: Path) -> None:
    raw = make_trace(2)
    md = raw["state"]["all_steps"][1]["metadata"]
    md["policy_token_capture"]["status"] = "incomplete"
    md["policy_token_capture"]["missing"] = ["completion_logprobs"]
    raw["state"]["all_steps"][1]["tool_result"] = "plain {text"
    trace, _ = load_trace(_write(tmp_path, raw))
    d = trace.step_detail(1)
    assert d["token_capture"]["is_complete"] is False and d["token_capture"]["missing"] == ["completion_logprobs"]
    assert d["tool_result_is_json"] is False and d["tool_result_pretty"] == "plain {text"


def test_hostile_strings_stay_raw(tmp_path: Path) -> None:
    trace, _ = load_trace(_write(tmp_path, make_trace(2, hostile=True)))
    assert HOSTILE in trace.step(0).thought
    assert "\x1b" in trace.brief(0).text_preview  # previews are raw; safe_text is the UI's job


def test_missing_truncated_and_wrong_shapes(tmp_path: Path) -> None:
    t, p = load_trace(tmp_path / "nope.json")
    assert t is None and p[0].code == ProblemCode.MISSING_ARTIFACT
    full = orjson.dumps(make_trace(4))
    (tmp_path / "cut.json").write_bytes(full[: len(full) // 2])
    t, p = load_trace(tmp_path / "cut.json")
    assert t is None and p[0].code == ProblemCode.JSON_INVALID and "truncated" in p[0].message
    t, p = load_trace(_write(tmp_path, [1, 2], "list.json"))
    assert t is None and p[0].code == ProblemCode.JSON_INVALID
    t, p = load_trace(_write(tmp_path, {"state": {"all_steps": "x"}}, "bad.json"))
    assert t is not None and t.step_count == 0 and p[0].code == ProblemCode.JSON_INVALID
    t, p = load_trace(_write(tmp_path, {"verdict": "real"}, "nostate.json"))
    assert t is not None and t.step_count == 0 and p
    t, p = load_trace(tmp_path)
    assert t is None and p


def test_gzip_trace(tmp_path: Path) -> None:
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(orjson.dumps(make_trace(3))))
    t, p = load_trace(path)
    assert p == [] and t is not None and t.step_count == 3
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    t, p = load_trace(tmp_path / "bad.json.gz")
    assert t is None and p[0].code == ProblemCode.JSON_INVALID


def test_load_trace_bytes_and_one_line() -> None:
    t, p = load_trace_bytes(orjson.dumps(make_trace(2)))
    assert t is not None and t.path is None and t.file_sha256() is None
    assert one_line("a\n\tb  c") == "a b c"
    assert one_line("x" * 500, 10) == "x" * 9 + "…"
    assert one_line(None) == "" and one_line({"a": 1}) == '{"a":1}'
