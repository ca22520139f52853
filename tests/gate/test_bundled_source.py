"""The bundled driver reads its source trace lazily (``gate/bundled/source.py``): the steps
stay on disk behind the step index, the lookups over every step use a light projection,
and everything the driver derives from the trace - sites, step ids, candidates, the
operator's localization, the teacher episode's bytes, the trace's sha - is what the whole
parse gave. A range that is not one object sends the load to the whole parse, which
says precisely what is wrong."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from eviscene_tui.artifacts.jsonio import encode_bound, pretty_json_bytes, sha256_file
from eviscene_tui.artifacts.trace import LazySteps
from eviscene_tui.gate.bundled import records as R
from eviscene_tui.gate.bundled import source
from eviscene_tui.gate.bundled import stages as S
from eviscene_tui.gate.bundled.source import InputError, inputs_from_files

from repair_fixtures import make_trace


def _trace_file(tmp_path: Path, style: str) -> tuple[Path, dict]:
    doc = make_trace()
    # more steps, one with a nested object that starts with the steps' first key
    doc["state"]["all_steps"][2]["tool_args"] = {"calls": [{"round": 9, "x": "}, {\"round\": ["}]}
    doc["state"]["runtime_store"] = {"runtime_path": "/abs/source/runtime", "sha256": "0" * 64}
    path = tmp_path / f"trace-{style}.json"
    path.write_bytes(pretty_json_bytes(doc) if style == "pretty" else orjson.dumps(doc))
    return path, orjson.loads(path.read_bytes())


def _episode_bytes(trace: dict, site: dict) -> tuple[bytes, dict[str, bytes]]:
    suffix = {"round": 9, "stage_name": "psd_teacher_judgment", "output": '{"verdict": "fake"}', "metadata": {"x": 1}}
    episode = R.build_episode(trace, site, [suffix], source_runtime_store_path=S.source_runtime_store(trace), attempt_store=None)
    payload = S.continuation_payload(suffix, "a hint", episode["stop_reason"], episode)
    return pretty_json_bytes(episode), encode_bound(Path("hint-00.json"), {"run": "r", "hint": "h"}, payload)


@pytest.mark.parametrize("style", ["compact", "pretty"])
def test_the_lazy_trace_gives_what_the_whole_parse_gave(tmp_path: Path, style: str) -> None:
    path, whole = _trace_file(tmp_path, style)
    inputs = inputs_from_files(path)
    lazy = inputs.trace
    assert isinstance(lazy["state"]["all_steps"], LazySteps)  # the steps stay on disk
    assert inputs.trace_sha256 == sha256_file(path)
    assert R.policy_step_indices(lazy) == R.policy_step_indices(whole) == [1, 3, 5]
    steps = len(whole["state"]["all_steps"])
    assert len(R.trace_steps_of(lazy)) == steps
    for i in range(steps):
        assert R.step_id_for(lazy, i) == R.step_id_for(whole, i)
        assert R.projected_step_index(lazy, i) == R.projected_step_index(whole, i)
    for i in (1, 3, 5):
        site = R.site_from_trace(lazy, i, localization_kind="operator", localization_verifier="operator:alice", basis={"n": i})
        assert site == R.site_from_trace(whole, i, localization_kind="operator", localization_verifier="operator:alice", basis={"n": i})
        candidate = R.bind_candidate({"case_id": "case-42"}, lazy, site, source_trace_sha256=inputs.trace_sha256)
        assert candidate == R.bind_candidate({"case_id": "case-42"}, whole, site, source_trace_sha256=inputs.trace_sha256)
        loc = R.operator_localization(lazy, i, note="n", operator="alice", category=None)
        assert loc == R.operator_localization(whole, i, note="n", operator="alice", category=None)
        # the teacher episode and the continuation holding it: the same bytes (prefix steps byte-equal)
        assert _episode_bytes(lazy, site) == _episode_bytes(copy.deepcopy(whole), site)
    with pytest.raises(ValueError, match="not a policy step"):
        R.site_from_trace(lazy, 2, localization_kind="operator")


def test_a_range_that_is_not_one_object_goes_to_the_whole_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = _trace_file(tmp_path, "compact")
    real = source.load_source_trace

    def load_then_damage(p, **kwargs):
        trace, problems = real(p, **kwargs)
        if kwargs.get("lazy"):
            # after the index: a step's bytes change in place (same size), as a disk or a
            # writer could do; its range no longer parses as one object
            steps = trace.raw["state"]["all_steps"]
            start, _end = steps.step_index.span(3)
            data = bytearray(path.read_bytes())
            data[start] = ord("[")
            path.write_bytes(bytes(data))
        return trace, problems

    monkeypatch.setattr(source, "load_source_trace", load_then_damage)
    with pytest.raises(InputError, match="cannot be read: trace: invalid JSON"):
        inputs_from_files(path)


def test_a_trace_without_steps_is_refused_as_before(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps({"image_id": "e", "state": {"all_steps": []}}))
    with pytest.raises(InputError, match="has no state.all_steps"):
        inputs_from_files(path)
    path.write_bytes(b'{"image_id": "e", "state": {"all_steps": [{"round": 1}, ')
    with pytest.raises(InputError, match="cannot be read"):
        inputs_from_files(path)
