"""The one operator scenario, headless: ``eviscene-tui repair`` (the bundled driver) as a
real subprocess, every decision taken with ``eviscene-tui decide``; the bundled fake vLLM
streams the continuations and the demo hint constructor proposes hints, over loopback.

approve round 0 -> add-hint -> approve-hint -> the stream in the live channel ->
reject-attempt -> relocalize round 1 at step 5 -> approve-hint -> cancel-continuation ->
stop -> resume -> accept-attempt -> converged; then ``check`` finds no problem and
``decisions --json`` lists every decision in one chain."""

from __future__ import annotations

import json

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.hints import LEAKY, POOL, DemoHintServer
from eviscene_tui.gate.sidecar import read_status

from gate_fixtures import finish, output_of, run_cli, wait_until
from repair_fixtures import Repair, live_records, start_repair, waiting, write_driver_case

ADDED = "Search the caption text in quotes on news sites before you search the event."


def _decide(repair: Repair, action: str, round_index: int, *args: str) -> str:
    done = run_cli("decide", str(repair.root), action, "--round", str(round_index), "--operator", "alice", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_operator_scenario_headless(tmp_path):
    case = write_driver_case(tmp_path / "exp")
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as vllm, DemoHintServer() as hints:
        repair = Repair(case, tmp_path / "work", vllm.v1_url, vllm.profile_dict()["profile_id"], hint_url=hints.v1_url)
        proc = start_repair(repair)
        root = repair.root
        assert root == tmp_path / "work" / "repairs" / root.name and case not in root.parents
        gate0 = wait_until(waiting(root, "round", 0), "the round-0 gate")
        assert gate0["actions"] == ["approve-round", "relocalize", "stop"] and gate0["driver"] == "bundled"
        _decide(repair, "approve-round", 0)

        # the constructor's proposals: the leaky one failed its audit before the gate
        hint0 = wait_until(waiting(root, "hint", 0), "the round-0 hint gate")
        assert hint0["hint"]["text"] == POOL[0] and hint0["actions"] == ["approve-hint", "reject-hint", "add-hint", "stop"]
        assert read_status(root).pending[0].doc["rejected_before"] == ["binary_verdict_leak"] and LEAKY
        _decide(repair, "add-hint", 0, "--text", ADDED)
        hint1 = wait_until(waiting(root, "hint", 0), "the added hint's gate")
        assert hint1["index"] == 1 and hint1["hint"]["text"] == ADDED and hint1["hint"]["provider"] == "operator"
        _decide(repair, "approve-hint", 0)

        # the continuation streams into the live channel, then the attempt gate asks
        attempt0 = wait_until(waiting(root, "attempt", 0, phase="judge"), "the round-0 attempt gate")
        records = live_records(repair)
        assert records[0]["type"] == "call_started" and records[0]["hint_text"] == ADDED
        assert any(r["type"] == "delta" and r["event"]["type"] == "delta" and r["event"]["token_ids"] for r in records)
        assert records[-1]["type"] == "call_complete" and records[-1]["completion_token_ids"]
        assert attempt0["attempt"]["completion_tokens"] == len(records[-1]["completion_token_ids"])
        _decide(repair, "reject-attempt", 0, "--checker", "anchor_matches=false", "--reason", "the site is later")

        # round 1: the feedback asks for relocalization; the operator names step 5
        gate1 = wait_until(waiting(root, "round", 1), "the round-1 gate")
        assert gate1["feedback"]["needs_relocalization"] is True and gate1["feedback"]["excluded_hints"] == [ADDED]
        out_of_range = run_cli("decide", str(root), "relocalize", "--round", "1", "--step", "99")
        assert out_of_range.returncode == 1 and "valid steps: 0..5" in out_of_range.stderr
        not_policy = run_cli("decide", str(root), "relocalize", "--round", "1", "--step", "4")
        assert not_policy.returncode == 1 and "not a policy step" in not_policy.stderr
        _decide(repair, "relocalize", 1, "--step", "5", "--reason", "the verdict step is where it goes wrong")
        hint10 = wait_until(waiting(root, "hint", 1), "the round-1 hint gate")
        assert hint10["hint"]["text"] == POOL[0]
        site = read_status(root).pending[0].doc["site"]
        assert site["source_step_index"] == 5 and site["action_type"] == "output"  # what the agent did there

        # a slow stream: cancel it while it streams; its hint is offered again; stop there
        vllm.set_scenario(tokens_per_second=3)
        _decide(repair, "approve-hint", 1)
        wait_until(waiting(root, "attempt", 1, phase="streaming"), "the streaming attempt gate")
        wait_until(lambda: any(r["type"] == "delta" and r["round"] == 1 for r in live_records(repair)), "a round-1 delta")
        _decide(repair, "cancel-continuation", 1)
        again = wait_until(waiting(root, "hint", 1), "the cancelled hint offered again")
        assert again["index"] == 1 and again["hint"]["text"] == POOL[0] and "cancelled" in again["hint"]["note"]
        assert live_records(repair)[-1]["type"] == "call_failed"
        _decide(repair, "stop", 1, "--reason", "lunch")
        assert finish(proc) == 0
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["status"] == "paused_execution_error"
        assert manifest["execution_error"] == {"round": 1, "type": "OperatorStoppedSearch"}

        # resume (the same arguments): the relocalize and the approval are replayed; the continuation runs again
        vllm.set_scenario(tokens_per_second=None)
        proc = start_repair(repair, resume=True)
        attempt1 = wait_until(waiting(root, "attempt", 1, phase="judge"), "the round-1 attempt gate after resume")
        assert attempt1["hint"]["text"] == POOL[0]
        _decide(repair, "accept-attempt", 1)
        assert finish(proc) == 0
    out, _err = output_of(proc)
    assert json.loads(out.split("\n", 1)[1])["status"] == "converged"

    check = run_cli("check", str(root), "--json")
    assert check.returncode == 0, check.stdout
    export = run_cli("decisions", str(root), "--json")
    assert export.returncode == 0, export.stderr
    doc = json.loads(export.stdout)
    assert [j["ok"] for j in doc["journals"]] == [True] and len(doc["journals"]) == 1
    assert [r["action"] for r in doc["decisions"]] == [
        "approve_round", "add_hint", "approve_hint", "reject_attempt", "relocalize", "approve_hint", "cancel_continuation",
        "stop_search", "approve_attempt",
    ]
    assert {r["operator"] for r in doc["decisions"]} == {"alice"}


def test_sigkill_of_the_bundled_driver_then_resume_replays_its_decisions(tmp_path):
    """Killed at a hint gate, a decision taken while it is gone is applied on resume; the
    resumed driver replays the round gate and converges; the root checks clean."""
    import signal

    case = write_driver_case(tmp_path / "exp")
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as vllm:
        repair = Repair(case, tmp_path / "work", vllm.v1_url, vllm.profile_dict()["profile_id"])
        proc = start_repair(repair)
        root = repair.root
        wait_until(waiting(root, "round", 0), "the round-0 gate")
        _decide(repair, "approve-round", 0)
        empty = wait_until(waiting(root, "hint", 0), "the hint gate, no hint yet (no hint constructor)")
        assert empty["hint"] is None and empty["actions"] == ["reject-hint", "add-hint", "stop"]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        said = _decide(repair, "add-hint", 0, "--text", ADDED)
        assert "driver not running: applied when it is resumed under the gate" in said
        proc = start_repair(repair, resume=True)
        hint = wait_until(waiting(root, "hint", 0), "the added hint's gate after the resume")
        assert hint["index"] == 1 and hint["hint"]["text"] == ADDED
        _decide(repair, "approve-hint", 0)
        wait_until(waiting(root, "attempt", 0, phase="judge"), "the attempt gate")
        _decide(repair, "accept-attempt", 0)
        assert finish(proc) == 0
    assert json.loads((root / "manifest.json").read_text(encoding="utf-8"))["status"] == "converged"
    assert run_cli("check", str(root)).returncode == 0
