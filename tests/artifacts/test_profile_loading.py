"""load_profile: valid, replicas, schema, hostile and broken files."""

from __future__ import annotations

from pathlib import Path

from test_case_builders import HOSTILE, write_json

from eviscene_tui.artifacts.problems import ProblemCode
from eviscene_tui.artifacts.profile import load_profile, profile_from_dict

PROFILE = {
    "schema_version": "ifv-qwen-serving-profile-v1",
    "profile_id": "ifv-qwen3.5-9b",
    "model_path": "/ckpt/round-3",
    "engine_model_path": "/models/Qwen3.5-9B",
    "adapter_path": "/ckpt/round-3",
    "deployment_mode": "lora_adapter",
    "engine": "vllm",
    "base_url": "http://127.0.0.1:8901/v1/",
    "wire_api": "chat_completions",
    "tool_call_parser": "qwen3_coder",
    "reasoning_parser": "qwen3",
    "thinking_enabled": False,
    "multimodal": True,
    "context_length": 131072,
    "tensor_parallel_size": 2,
    "dtype": "bfloat16",
    "quantization": None,
    "health_probe": {"method": "GET", "path": "/v1/models"},
    "checkpoint_manifest_sha256": None,
}


def test_valid_profile(tmp_path: Path) -> None:
    prof, problems = load_profile(write_json(tmp_path / "serving-profile.json", PROFILE))
    assert problems == []
    assert prof.profile_id == "ifv-qwen3.5-9b" and prof.context_length == 131072
    assert prof.base_urls() == ["http://127.0.0.1:8901/v1"]
    assert prof.expected_root() == "/models/Qwen3.5-9B"
    assert prof.health_probe.path == "/v1/models"


def test_replicas_and_model_path_fallback() -> None:
    raw = dict(PROFILE, base_urls=["http://a:1/v1", "http://b:2/v1/", "http://a:1/v1", "  "], engine_model_path=None)
    prof, problems = profile_from_dict(raw)
    assert problems == []
    assert prof.base_urls() == ["http://a:1/v1", "http://b:2/v1", "http://127.0.0.1:8901/v1"]
    assert prof.expected_root() == "/ckpt/round-3"
    assert prof.model_dump(by_alias=True)["base_urls"][0] == "http://a:1/v1"


def test_bad_profiles(tmp_path: Path) -> None:
    prof, problems = load_profile(tmp_path / "missing.json")
    assert prof is None and problems[0].code == ProblemCode.MISSING_ARTIFACT
    (tmp_path / "cut.json").write_text('{"schema_version": "ifv-qwen')
    prof, problems = load_profile(tmp_path / "cut.json")
    assert prof is None and problems[0].code == ProblemCode.JSON_INVALID
    prof, problems = load_profile(write_json(tmp_path / "list.json", [PROFILE]))
    assert prof is None and problems[0].code == ProblemCode.JSON_INVALID
    prof, problems = load_profile(write_json(tmp_path / "old.json", dict(PROFILE, schema_version="ifv-qwen-serving-profile-v0")))
    assert prof is not None and [p.code for p in problems] == [ProblemCode.SCHEMA_UNKNOWN]
    prof, problems = load_profile(write_json(tmp_path / "types.json", dict(PROFILE, context_length="big", base_url=None)))
    assert prof is not None and prof.context_length is None
    assert {p.code for p in problems} == {ProblemCode.JSON_INVALID}
    assert "context_length" in prof.invalid_fields


def test_hostile_strings_kept_raw(tmp_path: Path) -> None:
    prof, problems = load_profile(write_json(tmp_path / "p.json", dict(PROFILE, profile_id=HOSTILE)))
    assert problems == [] and prof.profile_id == HOSTILE
