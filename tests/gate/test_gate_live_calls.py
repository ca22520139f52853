"""The real driver's round, live: the in-driver gate wraps the orchestrator's
``StageRunner._call_llm`` (the stand-in's, same signature and capture shape) and
every policy call shows in ``gate-status --json`` as it starts and as it returns,
while the driver's own results stay exactly what they were. A changed signature
leaves the method unwrapped and says so while the rounds stay gated; a live
channel that cannot be written stops the live view, never the driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui.gate import protocol as P
from eviscene_tui.scaffold.standin import DRIVER_PATH

from gate_fixtures import ENV, EXIT_TIMEOUT, Case, decide, finish, gated, make_case, output_of, pending, status, wait_until
from gate_fixtures import fake_vllm  # noqa: F401 - a fixture (used by name)

ONE_ROUND = ["--repair-attempts", "1", "--proposal-rounds", "1"]
STAGES = ["psd_teacher_repair", "psd_teacher_repair", "psd_teacher_judgment"]  # two teacher actions, then the judgment


def _approve_round_and_hint(case: Case) -> dict:
    wait_until(pending(case, "round", 0), "the round-0 gate")
    assert decide(case, "approve-round", 0).returncode == 0
    hint = wait_until(pending(case, "hint", 0), "the round-0 hint gate")
    assert decide(case, "approve-hint", 0).returncode == 0
    return hint


def _suffix_steps(root: Path) -> list[dict]:
    episode = json.loads((root / "rounds" / "round-00" / "episodes" / "hint-00-teacher.json").read_text(encoding="utf-8"))
    return [s for s in episode["state"]["all_steps"] if (s.get("metadata") or {}).get("psd_suffix_step")]


def _live_records(case: Case) -> list[dict]:
    records, _used = P.parse_live((case.gate_dir / P.LIVE_FILE).read_bytes())
    return records


def test_policy_calls_show_in_gate_status_as_they_start_and_return(tmp_path, fake_vllm):  # noqa: F811 - the fixture
    case = make_case(tmp_path, policy_url=fake_vllm.v1_url, policy_model=fake_vllm.profile_dict()["profile_id"])
    fake_vllm.hold(after=1)  # the continuation's second policy call stays in flight until released
    with gated(case, extra=ONE_ROUND) as proc:
        hint = _approve_round_and_hint(case)

        def first_done_second_running():
            calls = status(case)["policy_calls"]
            return calls if len(calls) == 2 and calls[0]["status"] == "complete" and calls[1]["status"] == "running" else None

        first, second = wait_until(first_done_second_running, "the first call returned and the second in flight")
        assert proc.poll() is None  # the round is still running
        assert first["round"] == 0 and first["hint"] == 0 and first["stage"] == "psd_teacher_repair"
        assert first["finish_reason"] == "tool_calls" and first["request_id"] == "req-000001"
        assert first["prompt_tokens"] > 0 and first["completion_tokens"] > 0 and first["finished_at"] >= first["started_at"]
        assert second == {"round": 0, "hint": 0, "stage": "psd_teacher_repair", "status": "running", "started_at": second["started_at"],
                          "finished_at": None, "prompt_tokens": None, "completion_tokens": None, "finish_reason": None, "request_id": None}
        text = subprocess.run([sys.executable, "-m", "eviscene_tui", "gate-status", str(case.root)], capture_output=True, text=True,
                              env=ENV, timeout=EXIT_TIMEOUT)
        assert "policy calls: 2" in text.stdout and "psd_teacher_repair: running since" in text.stdout, text.stdout
        fake_vllm.release()
        assert finish(proc) == 0
    calls = status(case)["policy_calls"]
    assert [c["stage"] for c in calls] == STAGES and {c["status"] for c in calls} == {"complete"}
    assert calls[-1]["finish_reason"] == "stop" and [c["request_id"] for c in calls] == ["req-000001", "req-000002", "req-000003"]
    # what the live view shows is what the driver stored: the same ids, finish reasons and request ids
    steps = _suffix_steps(case.root)
    ends = [r for r in _live_records(case) if r["type"] == "call_complete"]
    assert len(steps) == len(ends) == 3
    for step, end in zip(steps, ends):
        capture = step["metadata"]["policy_token_capture"]
        assert end["prompt_token_ids"] == capture["prompt_token_ids"] and end["completion_token_ids"] == capture["completion_token_ids"]
        assert end["completion_logprobs"] == capture["completion_logprobs"]
        assert end["finish_reason"] == step["metadata"]["finish_reason"] and end["request_id"] == step["metadata"]["context_request_id"]
    starts = [r for r in _live_records(case) if r["type"] == "call_started"]
    assert starts[0]["hint_text"] == hint["hint"]["text"] and starts[0]["lifecycle_kind"] == "psd_teacher_action"
    assert starts[0]["messages"] == 3 and starts[1]["messages"] == 5  # the tool call and its result went into the history


def _comparable(steps: list[dict]) -> bytes:
    """The teacher steps as the driver received them, without the one value it measures
    itself (``llm_duration_ms``: a clock reading, different in any two runs)."""
    out = []
    for step in steps:
        meta = {k: v for k, v in step["metadata"].items() if k != "llm_duration_ms"}
        out.append({**step, "metadata": meta})
    return P.canonical_bytes(out)


def test_the_driver_receives_the_same_results_with_and_without_the_gate(tmp_path):
    gated_case = make_case(tmp_path / "gated")
    with gated(gated_case, extra=ONE_ROUND) as proc:
        _approve_round_and_hint(gated_case)
        assert finish(proc) == 0
    plain = make_case(tmp_path / "plain")
    done = subprocess.run([sys.executable, *plain.argv(extra=ONE_ROUND)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert len(status(gated_case)["policy_calls"]) == 3  # the calls were wrapped and recorded
    assert _comparable(_suffix_steps(gated_case.root)) == _comparable(_suffix_steps(plain.root))
    for rel in ("repair_attempts.jsonl",):
        gated_rows = [json.loads(line) for line in (gated_case.root / "rounds" / "round-00" / rel).read_text(encoding="utf-8").splitlines()]
        plain_rows = [json.loads(line) for line in (plain.root / "rounds" / "round-00" / rel).read_text(encoding="utf-8").splitlines()]
        keys = ("teacher_prompt_ids", "completion_ids", "repair_rollout_token_capture", "accepted")
        assert [{k: r[k] for k in keys} for r in gated_rows] == [{k: r[k] for k in keys} for r in plain_rows]


@dataclass
class CopiedCase(Case):
    """A case run by a copy of the stand-in driver (its orchestrator edited by the test)."""

    driver: Path = DRIVER_PATH

    def argv(self, *, resume: bool = False, extra: list[str] | None = None) -> list[str]:
        return [str(self.driver), *super().argv(resume=resume, extra=extra)[1:]]


def test_a_changed_signature_is_left_unwrapped_and_said_while_rounds_stay_gated(tmp_path):
    copy = tmp_path / "driver"
    shutil.copytree(DRIVER_PATH.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    runner = copy / "eviscene" / "orchestrator" / "stage_runner.py"
    source = runner.read_text(encoding="utf-8")
    assert "suppress_tools=False, active_steps=None):" in source
    runner.write_text(source.replace("suppress_tools=False, active_steps=None):", "suppress_tools=False, active_steps=None, response_format=None):"),
                      encoding="utf-8")
    base = make_case(tmp_path)
    case = CopiedCase(base.base, base.inputs, base.root, driver=copy / DRIVER_PATH.name)
    with gated(case, extra=ONE_ROUND) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")  # still gated
        problems = status(case)["problems"]
        assert any(P.CALL_LLM_CHANGED in p and "response_format=None" in p for p in problems), problems
        _approve_round_and_hint(case)
        assert finish(proc) == 0
    _out, err = output_of(proc)
    assert P.CALL_LLM_CHANGED in err
    st = status(case)
    assert st["policy_calls"] == [] and [d["action"] for d in st["decisions"]] == ["approve-round", "approve-hint"]
    assert len(_suffix_steps(case.root)) == 3  # the driver made its calls, unwrapped
    assert [r["type"] for r in _live_records(case)] == ["live_unavailable"]


def test_an_unwritable_live_channel_neither_stops_nor_blocks_the_driver(tmp_path):
    case = make_case(tmp_path)
    case.gate_dir.mkdir(parents=True)
    os.mkfifo(case.gate_dir / P.LIVE_FILE)  # a FIFO nobody reads: an open for writing would wait forever
    with gated(case, extra=ONE_ROUND) as proc:
        _approve_round_and_hint(case)
        assert finish(proc) == 0
    st = status(case)
    assert any("live view unavailable" in p and "live.jsonl" in p for p in st["problems"]), st["problems"]
    assert st["policy_calls"] == []
    assert len(_suffix_steps(case.root)) == 3 and json.loads(output_of(proc)[0])["status"] == "attempt_budget_exhausted"
