"""Faults: SIGKILL of the waiting driver then resume (decisions replayed exactly),
two concurrent deciders, a hand-edited decision file, a driver without the
seams, a non-feedback mode, a driver that never enters its search, and the
in-driver module in an interpreter without this app."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from eviscene_tui.gate import INPROC_PATH
from eviscene_tui.scaffold.standin import DRIVER_PATH

from gate_fixtures import CLI, ENV, EXIT_TIMEOUT, decide, finish, make_case, manifest, pending, start_gate, status, stop, wait_until


def test_sigkill_while_waiting_then_resume_replays_decisions(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # the driver is gone; the gate is still pending, and a decision taken now is used on resume
        st = wait_until(lambda: (s := status(case)) and not s["driver"]["alive"] and s, "the driver reported gone")
        assert [(p["kind"], p["round"]) for p in st["pending"]] == [("round", 0)]
        assert decide(case, "approve-round", 0).returncode == 0
    finally:
        stop(proc)

    proc = start_gate(case, resume=True)
    try:
        wait_until(pending(case, "hint", 0), "the round-0 hint gate (round 0 replayed without asking)")
        assert decide(case, "approve-hint", 0).returncode == 0
        wait_until(pending(case, "round", 1), "the round-1 gate")
        assert decide(case, "relocalize", 1, "--step", "5").returncode == 0
        wait_until(pending(case, "hint", 1), "the round-1 hint gate")
        public = (case.root / "round-inputs" / "round-01" / "public.json").read_bytes()
        proc.send_signal(signal.SIGKILL)  # killed inside round 1, after its inputs were written
        proc.wait()
    finally:
        stop(proc)

    proc = start_gate(case, resume=True)
    try:
        # round 1 is re-entered: the relocalize decision is replayed with the same feedback
        # object, so the driver's "search child input changed on resume" check passes
        wait_until(pending(case, "hint", 1), "the round-1 hint gate after the second resume")
        assert (case.root / "round-inputs" / "round-01" / "public.json").read_bytes() == public
        assert [d["action"] for d in status(case)["decisions"]] == ["approve-round", "approve-hint", "relocalize"]
        assert decide(case, "approve-hint", 1).returncode == 0
        assert finish(proc) == 0
    finally:
        stop(proc)
    assert manifest(case)["status"] == "converged"
    assert manifest(case)["execution_error"] is None


def test_two_concurrent_deciders_exactly_one_wins(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        racers = [
            subprocess.Popen([*CLI, "decide", str(case.root), action, "--round", "0", "--operator", who],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
            for action, who in (("approve-round", "alice"), ("stop", "bob"))
        ]
        results = [(r.wait(timeout=EXIT_TIMEOUT), *r.communicate()) for r in racers]
        codes = sorted(code for code, _o, _e in results)
        assert codes == [0, 1]
        winner = "alice" if results[0][0] == 0 else "bob"
        loser_err = next(err for code, _o, err in results if code == 1)
        assert f"by {winner} at " in loser_err and "already decided" in loser_err
        events = (case.gate_dir / "decisions.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(events) == 1 and json.loads(events[0])["operator"] == winner
        # a decision for a round that is not pending is refused, naming what is pending
        refused = decide(case, "approve-round", 7)
        assert refused.returncode == 1 and "nothing pending for round 7" in refused.stderr
        bad = decide(case, "approve-round", 0, "--step", "3")
        assert bad.returncode == 2 and "--step is only for relocalize" in bad.stderr
    finally:
        stop(proc)


def test_hand_edited_decision_file_is_reported_and_the_gate_keeps_waiting(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        target = case.gate_dir / "decisions" / "round-00.json"
        target.write_bytes(b'{"schema_version": "eviscene-tui-gate-decision-v1", "action": "appr')  # truncated
        # the driver reports it, sets it aside and keeps waiting
        st = wait_until(lambda: (s := status(case)) and any("round-00" in p and "driver:" in p and "set aside" in p for p in s["problems"])
                        and s, "the driver to report the unreadable decision")
        assert st["driver"]["alive"] is True and st["pending"][0]["round"] == 0
        assert not target.exists()
        good = decide(case, "stop", 0)
        assert good.returncode == 0, good.stderr
        assert finish(proc) == 0
    finally:
        stop(proc)
    assert manifest(case)["execution_error"]["type"] == "OperatorStoppedSearch"
    aside = list((case.gate_dir / "consumed").glob("round-00.unreadable.*.json"))
    assert len(aside) == 1


def test_edited_decision_with_valid_json_is_detected(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        done = decide(case, "approve-round", 0)
        assert done.returncode == 0
        wait_until(pending(case, "hint", 0), "the round-0 hint gate")
        path = case.gate_dir / "decisions" / "round-00.hint-00.json"
        doc = json.loads((case.gate_dir / "decisions" / "round-00.json").read_text(encoding="utf-8"))
        forged = {**doc, "kind": "hint", "hint_index": 0, "action": "approve-hint", "operator": "mallory"}
        path.write_text(json.dumps(forged), encoding="utf-8")  # digest now wrong
        wait_until(lambda: any("digest" in p for p in status(case)["problems"]), "the forged decision reported")
        assert status(case)["driver"]["alive"] is True
        assert decide(case, "reject-hint", 0, "--reason", "forged approval seen").returncode == 0
        wait_until(pending(case, "round", 1), "the round-1 gate")
    finally:
        stop(proc)


def _driver_repo(tmp_path: Path, search_src: str, runtime_src: str) -> Path:
    repo = tmp_path / "fake-eviscene"
    pkg = repo / "eviscene_training"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "psd_repair_search.py").write_text(textwrap.dedent(search_src))
    (pkg / "psd_repair_runtime.py").write_text(textwrap.dedent(runtime_src))
    script = repo / "driver.py"
    script.write_text(textwrap.dedent("""
        import asyncio, sys
        from pathlib import Path
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from eviscene_training.psd_repair_runtime import QwenContinuationAdapter
        out = Path(sys.argv[sys.argv.index("--output-dir") + 1])
        async def execute_round(directory, feedback, history):
            pass
        async def main():
            from eviscene_training.psd_repair_search import run_search
            out.mkdir(parents=True)
            return await run_search(root=out, identity={}, resume=False, execute_round=execute_round)
        print(asyncio.run(main()))
    """))
    return script


def test_driver_without_the_execute_round_seam_is_refused(tmp_path):
    script = _driver_repo(
        tmp_path,
        "async def run_search(*, root, identity, resume, max_attempts=6):\n    return {}\n",
        "class QwenContinuationAdapter:\n    async def propose_hints(self, **kw):\n        return []\n",
    )
    out = tmp_path / "search"
    done = subprocess.run([*CLI, "gate", "--", str(script), "--output-dir", str(out)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode != 0
    assert "psd_repair_search.run_search has no execute_round keyword" in done.stderr
    assert not out.exists()  # refused before the search wrote anything


def test_driver_without_propose_hints_is_refused(tmp_path):
    script = _driver_repo(
        tmp_path,
        "async def run_search(*, root, identity, resume, execute_round):\n    return {}\n",
        "class QwenContinuationAdapter:\n    pass\n",
    )
    out = tmp_path / "search"
    done = subprocess.run([*CLI, "gate", "--", str(script), "--output-dir", str(out)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode != 0
    assert "QwenContinuationAdapter has no propose_hints" in done.stderr
    assert not out.exists()


def test_non_feedback_mode_is_refused_up_front(tmp_path):
    case = make_case(tmp_path)
    for mode_args in (["--search-mode", "single"], ["--search-mode=slate"]):
        argv = [a for a in case.argv() if a not in ("--search-mode", "feedback")] + mode_args
        done = subprocess.run([*CLI, "gate", "--", *argv], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
        assert done.returncode == 2, done.stderr
        assert "no feedback rounds to gate" in done.stderr
        # the in-driver module refuses too, when started directly
        direct = subprocess.run([sys.executable, str(INPROC_PATH), "--", *argv], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
        assert direct.returncode == 2 and "no feedback rounds to gate" in direct.stderr
    assert not case.root.exists()


def test_a_driver_that_never_enters_its_search_exits_non_zero(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text("print('hello from a driver that never searches')\n")
    done = subprocess.run([*CLI, "gate", "--", str(script)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode == 3
    assert done.stdout == "hello from a driver that never searches\n"  # the driver's stdout unchanged
    assert "nothing was gated" in done.stderr
    script.write_text("import sys\nsys.exit(5)\n")
    done = subprocess.run([*CLI, "gate", "--", str(script)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode == 5 and "nothing was gated" in done.stderr


def test_inproc_runs_in_an_interpreter_without_this_app(tmp_path):
    """``-I -S``: no site-packages, so eviscene_tui is not importable; the gate still works."""
    probe = subprocess.run([sys.executable, "-I", "-S", "-c", "import eviscene_tui"], capture_output=True, text=True)
    assert probe.returncode != 0
    case = make_case(tmp_path)
    with open(tmp_path / "iso.out", "wb") as out, open(tmp_path / "iso.err", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(INPROC_PATH), "--no-hint-gate", "--", *case.argv(extra=["--repair-attempts", "1", "--proposal-rounds", "1"])],
                                stdout=out, stderr=err, env={**ENV, "PYTHONPATH": ""}, cwd=tmp_path)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        assert decide(case, "approve-round", 0).returncode == 0
        assert proc.wait(timeout=EXIT_TIMEOUT) == 0, (tmp_path / "iso.err").read_text()
    finally:
        stop(proc)
    assert manifest(case)["status"] == "attempt_budget_exhausted"
    assert DRIVER_PATH.is_file()
    assert "OperatorStoppedSearch" not in (tmp_path / "iso.err").read_text()


def test_a_decider_that_died_before_journaling_is_caught_up(tmp_path):
    """The decision file is the commitment; the next decide journals what is missing."""
    import uuid

    from eviscene_tui.gate import protocol as proto
    from eviscene_tui.gate.sidecar import read_status
    from eviscene_tui.journal import parse_journal_bytes, verify_chain

    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        request = read_status(case.root).pending[0]
        doc = proto.with_digest({
            "schema_version": proto.DECISION_SCHEMA, "decision_id": uuid.uuid4().hex, "kind": "round", "round": 0,
            "hint_index": None, "action": "approve-round", "step": None, "reason": "", "operator": "crashed-decider",
            "host": "elsewhere", "pid": 1, "at": proto.utc_now(), "gate": request.name, "gate_sha256": request.sha256,
            "request_sha256": request.doc.get("request_sha256"), "proposal_id": None, "hint_sha256": None,
        })
        assert proto.create_exclusive(case.gate_dir / "decisions" / "round-00.json", proto.document_bytes(doc))
        wait_until(pending(case, "hint", 0), "the hint gate (the unjournaled decision was used)")
        assert decide(case, "approve-hint", 0).returncode == 0
    finally:
        stop(proc)
    journal = case.gate_dir / "decisions.jsonl"
    events, _ = parse_journal_bytes(journal.read_bytes())
    assert verify_chain(journal).ok
    assert [(e["action"], e["data"].get("reconciled", False)) for e in events] == [("approve_hint", False), ("approve_round", True)]
    assert events[1]["operator"] == "crashed-decider"
    assert events[1]["evidence"]["requests/round-00.json"] == request.doc["request_sha256"]
