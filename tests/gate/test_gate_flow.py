"""The stand-in driver as a real subprocess under ``eviscene-tui gate``, driven by
``decide``: approve round 0 -> relocalize round 1 -> reject its hint -> stop
round 2 -> resume under the gate -> converge. The teacher step is served by the
bundled fake vLLM over real loopback HTTP."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys

from eviscene_tui.journal import parse_journal_bytes, verify_chain

from gate_fixtures import ENV, EXIT_TIMEOUT, decide, finish, gated, make_case, manifest, output_of, pending, run_cli, status, wait_until
from gate_fixtures import fake_vllm  # noqa: F401 - a fixture (used by name)


def test_approve_relocalize_reject_stop_resume_converge(tmp_path, fake_vllm):  # noqa: F811 - the fixture
    case = make_case(tmp_path, policy_url=fake_vllm.v1_url, policy_model=fake_vllm.profile_dict()["profile_id"])
    with gated(case, gate_opts=["--operator", "carol"]) as proc:
        # round 0: the gate shows the driver's own feedback before anything of round 0 is written
        gate0 = wait_until(pending(case, "round", 0), "the round-0 gate")
        assert gate0["feedback"]["previous_rounds"] == [] and gate0["feedback"]["needs_relocalization"] is False
        assert (case.root / "requests" / "round-00.json").is_file()
        assert not (case.root / "rounds" / "round-00").exists()
        assert not (case.root / "round-inputs" / "round-00").exists()
        assert case.gate_dir.is_dir() and case.root not in case.gate_dir.parents

        assert decide(case, "approve-round", 0, "--operator", "alice").returncode == 0
        hint0 = wait_until(pending(case, "hint", 0), "the round-0 hint gate")
        assert hint0["hint"]["text"].startswith("At step 3:")
        assert hint0["hint"]["revision_rejection"] == ""
        assert hint0["hint"]["audit"]["passed"] is True
        assert not (case.root / "rounds" / "round-00" / "continuations").exists()  # no continuation before the decision
        assert decide(case, "approve-hint", 0, "--operator", "alice").returncode == 0

        # round 1: relocalize to step 5; the round runs with the operator's anchor
        gate1 = wait_until(pending(case, "round", 1), "the round-1 gate")
        assert gate1["feedback"]["needs_relocalization"] is False
        assert len(gate1["feedback"]["excluded_hints"]) == 1
        done = decide(case, "relocalize", 1, "--step", "5", "--reason", "the agent stops searching at step 5", "--operator", "bob")
        assert done.returncode == 0, done.stderr
        hint1 = wait_until(pending(case, "hint", 1), "the round-1 hint gate")
        public = json.loads((case.root / "round-inputs" / "round-01" / "public.json").read_text(encoding="utf-8"))
        assert public["repair_search"]["needs_relocalization"] is True
        assert public["repair_search"]["anchor_feedback"]["selected_source_step"] == 3
        assert public["repair_search"]["anchor_feedback"]["earliest_error_step"] == 5
        assert "the agent stops" not in json.dumps(public)  # the note goes to the journal only
        assert hint1["hint"]["text"].startswith("At step 5:")

        # reject the hint: the round ends with no attempt and an operator_rejected audit row
        assert decide(case, "reject-hint", 1, "--reason", "too generic", "--operator", "bob").returncode == 0
        gate2 = wait_until(pending(case, "round", 2), "the round-2 gate")
        audits = json.loads((case.root / "rounds" / "round-01" / "proposer-hint-audits.json").read_text(encoding="utf-8"))
        assert {"passed": False, "reason": "operator_rejected"} in audits["proposals"]
        assert not (case.root / "rounds" / "round-01" / "continuations").exists()
        assert gate2["feedback"]["previous_rounds"][1]["rejected_proposal_reasons"] == ["operator_rejected"]
        assert gate2["feedback"]["previous_rounds"][1]["status"] == "no_admissible_hints"

        # stop before round 2: the driver persists paused_execution_error and exits as it would
        assert decide(case, "stop", 2, "--reason", "lunch").returncode == 0
        assert finish(proc) == 0
    m = manifest(case)
    assert m["status"] == "paused_execution_error"
    assert m["execution_error"] == {"round": 2, "type": "OperatorStoppedSearch"}
    assert not (case.root / "round-inputs" / "round-02").exists() and not (case.root / "rounds" / "round-02").exists()
    st = status(case)
    assert st["pending"] == [] and st["driver"]["alive"] is False
    assert [d["action"] for d in st["decisions"]] == ["approve-round", "approve-hint", "relocalize", "reject-hint", "stop"]

    # resume under the gate: round 2 is asked again (the stop was consumed), then converges at step 5
    with gated(case, resume=True) as proc:
        wait_until(pending(case, "round", 2), "the round-2 gate after resume")
        assert decide(case, "approve-round", 2).returncode == 0
        hint2 = wait_until(pending(case, "hint", 2), "the round-2 hint gate")
        assert hint2["hint"]["text"].startswith("At step 5:")
        assert decide(case, "approve-hint", 2).returncode == 0
        assert finish(proc) == 0
    out, _err = output_of(proc)
    assert json.loads(out)["status"] == "converged"
    # the teacher steps came from the fake vLLM, with the approved hints in the requests (rounds 0 and 2 only):
    # per continuation two teacher actions (the tool call's result back in the history) and the judgment
    bodies = [r["body"] for r in fake_vllm.recorder.requests if r["path"] == "/v1/chat/completions"]
    assert len(bodies) == 6 and not any(b.get("stream") for b in bodies)
    assert bodies[3]["messages"][-1]["content"] == "Hint: " + hint2["hint"]["text"]
    assert [bool(b.get("tools")) for b in bodies[3:]] == [True, True, False]
    episode = json.loads((case.root / "rounds" / "round-02" / "episodes" / "hint-00-teacher.json").read_text(encoding="utf-8"))
    assert episode["state"]["all_steps"][5]["tool_name"] == "reverse_image_search"
    assert manifest(case)["status"] == "converged"

    # one journal, hash-chained, every decision with operator, reason and evidence
    journal = case.gate_dir / "decisions.jsonl"
    assert verify_chain(journal).ok
    events, bad = parse_journal_bytes(journal.read_bytes())
    assert bad == []
    assert [e["action"] for e in events] == [
        "approve_round", "approve_hint", "relocalize", "reject_hint", "stop_search", "approve_round", "approve_hint",
    ]
    reloc = events[2]
    assert reloc["operator"] == "bob" and reloc["reason"] == "the agent stops searching at step 5"
    assert reloc["target"]["round"] == 1 and reloc["data"]["to_step_index"] == 5
    req = (case.root / "requests" / "round-01.json").read_bytes()
    assert reloc["evidence"]["requests/round-01.json"] == hashlib.sha256(req).hexdigest()
    assert any(key.endswith("gates/round-01.json") for key in reloc["evidence"])

    # `decisions` exports the gate journal from the search root
    export = run_cli("decisions", str(case.root), "--json")
    assert export.returncode == 0, export.stderr
    rows = json.loads(export.stdout)["decisions"]
    assert [r["action"] for r in rows][:3] == ["approve_round", "approve_hint", "relocalize"]
    assert all(r["stale"] is False for r in rows)


def test_sigterm_of_gate_stops_the_driver_as_it_would(tmp_path):
    case = make_case(tmp_path)
    with gated(case) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        proc.send_signal(signal.SIGTERM)
        assert finish(proc) == -signal.SIGTERM  # the gate process is the driver (exec): default SIGTERM action
    st = wait_until(lambda: (s := status(case)) and not s["driver"]["alive"] and s, "the driver to be reported gone")
    assert st["pending"][0]["round"] == 0  # still pending: a later decision is used on resume


def test_sigint_of_gate_interrupts_the_driver_as_it_would(tmp_path):
    case = make_case(tmp_path)
    with gated(case) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        proc.send_signal(signal.SIGINT)
        code = finish(proc)
    _out, err = output_of(proc)
    assert code == -signal.SIGINT and "KeyboardInterrupt" in err  # Python's own reaction, unchanged
    st = status(case)
    assert st["driver"]["alive"] is False and st["pending"][0]["round"] == 0


def test_the_gate_writes_nothing_in_the_root(tmp_path):
    """An all-approve gated run leaves exactly the files an ungated run leaves."""
    extra = ["--repair-attempts", "1", "--proposal-rounds", "1"]
    gated_case = make_case(tmp_path / "gated")
    with gated(gated_case, extra=extra) as proc:
        wait_until(pending(gated_case, "round", 0), "the round-0 gate")
        assert decide(gated_case, "approve-round", 0).returncode == 0
        wait_until(pending(gated_case, "hint", 0), "the hint gate")
        assert decide(gated_case, "approve-hint", 0).returncode == 0
        assert finish(proc) == 0
    plain = make_case(tmp_path / "plain")
    done = subprocess.run([sys.executable, *plain.argv(extra=extra)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode == 0, done.stderr

    def files(root):
        return sorted(re.sub(r"-[0-9a-f]{12}\b", "-<id>", str(p.relative_to(root))) for p in root.rglob("*") if p.is_file())

    assert files(gated_case.root) == files(plain.root)
    assert not (plain.root.parent / (plain.root.name + ".eviscene-gate")).exists()
    for rel in ("round-inputs/round-00/public.json", "rounds/round-00/proposer-hint-audits.json"):
        assert (gated_case.root / rel).read_bytes() == (plain.root / rel).read_bytes(), rel
    # the request is bound to the search identity (whose input paths differ here); its feedback is the same
    payload = [json.loads((c.root / "requests" / "round-00.json").read_text(encoding="utf-8"))["payload"] for c in (gated_case, plain)]
    assert payload[0] == payload[1]
