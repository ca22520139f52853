"""The record holds: whatever a sidecar file is or holds, nothing hangs or crashes and the
driver keeps waiting; every taken decision is in the journal (a torn tail is set aside,
a full disk is said in one line, the sidecar is cross-checked); a tampered journal is
detected at its tail (the head is anchored outside it) and marked from its break on;
the journal says what the driver did (a step outside the trace is refused, the step the
driver used is compared, a decision for a gone driver says so, a round the gate changed
tells how to resume it); a search module of any name runs no round ungated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eviscene_tui.cli import main as cli_main
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.decide import decide as decide_in_process
from eviscene_tui.gate.review import journal_check
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.journal import event_hash, parse_journal_bytes, verify_chain
from eviscene_tui.state.gate import gate_marker

from gate_fixtures import CLI, ENV, EXIT_TIMEOUT, decide, finish, gated, make_case, manifest, output_of, pending, run_cli, start_gate, status
from gate_fixtures import stop as stop_proc
from gate_fixtures import wait_until


def _beating(case) -> float:
    doc, _ = P.read_document(case.gate_dir / P.HEARTBEAT_FILE)
    return float(doc["last_seen_epoch"]) if doc else 0.0


# ---------------------------------------------------------------------- nothing blocks, nothing crashes
def test_a_fifo_as_a_decision_file_hangs_nothing(tmp_path):
    case = make_case(tmp_path)
    with gated(case) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        os.mkfifo(case.gate_dir / "decisions" / "round-00.json")
        before = _beating(case)
        st = run_cli("gate-status", str(case.root), "--json")  # bounded: a hang fails the test
        assert st.returncode == 0, st.stderr
        wait_until(lambda: _beating(case) > before + 1, "the heartbeat going on")
        assert decide(case, "approve-round", 0).returncode == 0
        wait_until(pending(case, "hint", 0), "the driver past the round gate")
        aside = list((case.gate_dir / "consumed").glob("round-00.unreadable.*.json"))
        assert aside and not any(p.is_file() for p in aside)  # the FIFO itself, set aside (never opened)
        stop_proc(proc)


def test_a_decision_of_nested_arrays_is_reported_and_set_aside(tmp_path):
    case = make_case(tmp_path)
    with gated(case) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        (case.gate_dir / "decisions" / "round-00.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
        seen = wait_until(lambda: (s := status(case)) and any("nested too deeply" in p for p in s["problems"]) and s,
                          "the nested file reported")
        assert seen["driver"]["alive"] and seen["pending"][0]["round"] == 0
        assert decide(case, "approve-round", 0).returncode == 0
        wait_until(pending(case, "hint", 0), "the driver went on")
        assert proc.poll() is None
        stop_proc(proc)


def test_a_truncated_gate_request_is_explained_then_written_again(tmp_path):
    case = make_case(tmp_path)
    with gated(case) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        gate = case.gate_dir / "gates" / "round-00.json"
        whole = gate.read_bytes()
        os.kill(proc.pid, signal.SIGSTOP)  # the driver frozen: the decider sees the damage as it is
        try:
            gate.write_bytes(whole[: len(whole) // 2])
            refused = decide(case, "approve-round", 0)
            assert refused.returncode == 1 and "round-00.json of round 0 is damaged" in refused.stderr
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: gate.read_bytes() == whole, "the driver writing its gate again")
        assert decide(case, "approve-round", 0).returncode == 0
        stop_proc(proc)


# ---------------------------------------------------------------------- every taken decision is journaled
def _gate_without_driver(root: Path) -> Path:
    """A pending round-0 gate and no driver (what a decider finds after the driver died)."""
    gdir = P.sidecar_for(root)
    for sub in ("gates", "decisions", "consumed", "applied"):
        (gdir / sub).mkdir(parents=True)
    (gdir / "gate.json").write_text("{}")
    doc = {"schema_version": P.REQUEST_SCHEMA, "kind": "round", "round": 0, "hint_index": None, "feedback": {}, "history": []}
    (gdir / "gates" / "round-00.json").write_bytes(P.document_bytes(doc))
    return gdir


def test_a_torn_journal_tail_is_set_aside_and_the_next_decision_journaled(tmp_path):
    root = tmp_path / "search"
    root.mkdir()
    gdir = _gate_without_driver(root)
    journal = gdir / "decisions.jsonl"
    journal.write_bytes(b'{"schema_version": "eviscene-tui-decision-v1", "seq": 0, "act')  # a decider died mid-append
    result = decide_in_process(root, "approve-round", 0, operator="alice")
    assert result.taken and result.journaled, result.message
    assert "driver not running: applied when it is resumed under the gate" in result.message
    assert any("torn bytes; set aside" in n for n in result.notes)
    assert verify_chain(journal).ok
    export = run_cli("decisions", str(root), "--json")
    assert export.returncode == 0, export.stderr
    rows = json.loads(export.stdout)["decisions"]
    assert [r["action"] for r in rows] == ["comment", "approve_round"]  # the torn bytes acknowledged in the chain, then the decision
    assert rows[0]["data"]["torn_tail"]["offset"] == 0
    assert len(list((gdir / "consumed").glob("decisions.jsonl.torn-*.bin"))) == 1


@pytest.mark.parametrize("where", ["decision", "journal"])
def test_a_full_disk_during_decide_is_said_in_one_line(tmp_path, monkeypatch, capsys, where):
    root = tmp_path / "search"
    root.mkdir()
    gdir = _gate_without_driver(root)
    full = OSError(28, "No space left on device")
    if where == "decision":  # the decision file's bytes written, its fsync refused: a full disk
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(full))
    else:
        import eviscene_tui.journal.store as store

        monkeypatch.setattr(store, "append_line", lambda path, line: (_ for _ in ()).throw(full))
    code = cli_main(["decide", str(root), "approve-round", "--round", "0", "--operator", "alice"])
    out, err = capsys.readouterr()
    lines = [line for line in (out + err).split("\n") if line]
    assert len(lines) == 1, lines
    if where == "decision":
        assert code == 1 and "not taken" in lines[0] and "No space left on device" in lines[0]
        assert not (gdir / "decisions" / "round-00.json").exists()
    else:
        assert code == 0 and "taken but NOT journaled (No space left on device)" in lines[0]
        assert (gdir / "decisions" / "round-00.json").exists()
        monkeypatch.undo()
        missing = run_cli("decisions", str(root))
        assert missing.returncode == 1 and "lacks a decision" in missing.stderr  # until a decide journals it
    assert not [p for p in gdir.rglob("*") if p.name.endswith(".tmp")]


def _two_decisions(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "search"
    root.mkdir()
    gdir = _gate_without_driver(root)
    assert decide_in_process(root, "approve-round", 0, operator="alice").taken
    doc = {"schema_version": P.REQUEST_SCHEMA, "kind": "round", "round": 1, "hint_index": None, "feedback": {}, "history": []}
    (gdir / "gates" / "round-01.json").write_bytes(P.document_bytes(doc))
    assert decide_in_process(root, "stop", 1, reason="lunch", operator="bob").taken
    return root, gdir / "decisions.jsonl"


def test_a_dropped_or_rewritten_last_event_breaks_the_chain(tmp_path):
    root, journal = _two_decisions(tmp_path)
    assert run_cli("decisions", str(root)).returncode == 0
    whole = journal.read_bytes()
    lines = whole.split(b"\n")
    journal.write_bytes(b"\n".join(lines[:-2]) + b"\n")  # the last event dropped
    dropped = run_cli("decisions", str(root), "--events")
    assert dropped.returncode == 1 and "were dropped" in dropped.stderr
    last = json.loads(lines[-2])
    last["reason"] = "edited"
    last["hash"] = event_hash(last)  # rewritten with its hash recomputed
    journal.write_bytes(b"\n".join(lines[:-2]) + b"\n" + json.dumps(last).encode() + b"\n")
    rewritten = run_cli("decisions", str(root), "--events")
    assert rewritten.returncode == 1 and "it was rewritten" in rewritten.stderr


def test_a_tampered_line_marks_the_decisions_from_the_break_on(tmp_path):
    root, journal = _two_decisions(tmp_path)
    events, _ = parse_journal_bytes(journal.read_bytes())
    events[0]["reason"] = "edited"  # the first event edited, its hash left as it was
    journal.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events))
    table = run_cli("decisions", str(root))
    assert table.returncode == 1
    rows = [line for line in table.stdout.split("\n") if "approve_round" in line or "stop_search" in line]
    assert len(rows) == 2 and all("BROKEN" in line for line in rows), table.stdout
    check = journal_check(journal.parent)
    assert not check.ok and check.broken_at == 0 and len(check.untrusted) == 2
    st = json.loads(run_cli("gate-status", str(root), "--json").stdout)
    assert any("not to be trusted" in p for p in st["problems"]) and st["journal"]["broken_at"] == 0


# ---------------------------------------------------------------------- the journal says what the driver did
def test_an_out_of_range_step_is_refused_and_the_drivers_own_step_is_shown(tmp_path):
    case = make_case(tmp_path)
    with gated(case) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        assert decide(case, "approve-round", 0).returncode == 0
        wait_until(pending(case, "hint", 0), "the round-0 hint gate")
        assert decide(case, "approve-hint", 0).returncode == 0
        wait_until(pending(case, "round", 1), "the round-1 gate")
        far = decide(case, "relocalize", 1, "--step", "99")
        assert far.returncode == 1 and "valid steps: 0..7" in far.stderr
        assert not (case.gate_dir / "decisions" / "round-01.json").exists()
        # step 7 is the judgment: the stand-in's localizer keeps to its react steps and picks step 4
        assert decide(case, "relocalize", 1, "--step", "7", "--reason", "the verdict").returncode == 0
        wait_until(pending(case, "hint", 1), "the round-1 hint gate")
        st = status(case)
        assert st["relocalizations"] == [{"round": 1, "decision_id": st["relocalizations"][0]["decision_id"], "asked_step": 7,
                                          "used_step": 4, "mismatch": True}]
        assert any("the operator asked step 7, the driver used step 4" in p for p in st["problems"])
        table = run_cli("decisions", str(case.root))
        assert "7\u21924" in table.stdout, table.stdout
        stop_proc(proc)
    _out, err = output_of(proc)
    assert "eviscene-tui gate: waiting for a round decision on round 0 (approve-round | relocalize | stop)" in err
    assert err.count("waiting for a round decision on round 1") == 1  # one line per gate


def test_a_round_the_gate_changed_says_how_to_resume_it(tmp_path):
    case = make_case(tmp_path)
    proc = start_gate(case)
    try:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        assert decide(case, "approve-round", 0).returncode == 0
        wait_until(pending(case, "hint", 0), "the round-0 hint gate")
        assert decide(case, "approve-hint", 0).returncode == 0
        wait_until(pending(case, "round", 1), "the round-1 gate")
        assert decide(case, "relocalize", 1, "--step", "5").returncode == 0
        wait_until(pending(case, "hint", 1), "the round-1 hint gate (its inputs written)")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        stop_proc(proc)
    gone = decide(case, "reject-hint", 1, "--reason", "late")
    assert gone.returncode == 0 and "driver not running: applied when it is resumed under the gate" in gone.stdout
    plain = subprocess.run([sys.executable, *case.argv(resume=True)], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert plain.returncode == 0 and "search child input changed on resume" in plain.stderr
    assert manifest(case)["execution_error"] == {"round": 1, "type": "ValueError"}
    check = run_cli("check", str(case.root), "--json")
    problems = [p for c in json.loads(check.stdout)["cases"] for p in c["problems"] if p["code"] == "gate_resume_required"]
    assert len(problems) == 1 and "eviscene-tui gate --gate-dir" in problems[0]["message"] and "--resume" in problems[0]["message"]
    st = status(case)
    assert st["resume"] and "a plain --resume fails" in st["resume"]
    assert gate_marker(case.root) == "resume under the gate (a plain --resume fails)"
    with gated(case, resume=True) as proc:  # the command it names resumes it
        wait_until(pending(case, "round", 2), "the round-2 gate after the resume under the gate")
        stop_proc(proc)


def test_a_search_module_of_any_name_runs_no_round_ungated(tmp_path):
    repo = tmp_path / "driver-repo"
    (repo / "lab").mkdir(parents=True)
    (repo / "lab" / "__init__.py").write_text("")
    (repo / "lab" / "feedback_loop.py").write_text(textwrap.dedent("""
        from pathlib import Path

        async def run_search(*, root, identity, resume, execute_round):
            root = Path(root)
            root.mkdir(parents=True, exist_ok=True)
            await execute_round(root / "rounds" / "round-00", {"previous_rounds": []}, [])
            return {"status": "converged"}
    """))
    (repo / "driver.py").write_text(textwrap.dedent("""
        import asyncio, sys
        from pathlib import Path
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        out = Path(sys.argv[sys.argv.index("--output-dir") + 1])
        async def execute_round(directory, feedback, history):
            directory.mkdir(parents=True)
            (directory / "ran").write_text("a round ran")
        async def main():
            from lab.feedback_loop import run_search
            return await run_search(root=out, identity={}, resume=False, execute_round=execute_round)
        print(asyncio.run(main()))
    """))
    out = tmp_path / "search"
    proc = subprocess.Popen([*CLI, "gate", "--no-hint-gate", "--", str(repo / "driver.py"), "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    try:
        wait_until(lambda: read_status(out).pending or proc.poll() is not None, "the round gate (or an ungated exit)")
        assert proc.poll() is None, proc.communicate()
        assert not (out / "rounds" / "round-00" / "ran").exists()  # no round before its decision
        assert decide_in_process(out, "stop", 0, operator="alice").taken
        assert finish(proc) != 3  # it entered the search under the gate
    finally:
        stop_proc(proc)
    assert not (out / "rounds" / "round-00" / "ran").exists()


def test_a_fifo_as_the_journal_blocks_no_decider(tmp_path):
    root = tmp_path / "search"
    root.mkdir()
    gdir = _gate_without_driver(root)
    os.mkfifo(gdir / "decisions.jsonl")
    done = run_cli("decide", str(root), "approve-round", "--round", "0", "--operator", "alice")  # bounded: a hang fails
    assert done.returncode == 0 and "taken but NOT journaled" in done.stdout and "not a regular file" in done.stdout
    listed = run_cli("decisions", str(root))
    assert listed.returncode == 1
    assert run_cli("gate-status", str(root), "--json").returncode == 0


def test_a_one_shot_decision_the_driver_takes_at_once_is_reported_taken(tmp_path, monkeypatch):
    """The driver consumes a stop (records it applied, closes the gate, moves the decision)
    between the decider's create and its look back: the decider says taken, not refused."""
    import eviscene_tui.gate.decide as decide_module

    root = tmp_path / "search"
    root.mkdir()
    gdir = _gate_without_driver(root)
    real = P.create_exclusive

    def create_then_driver_consumes(path, data):
        created = real(path, data)
        doc = json.loads(data)
        P.atomic_replace(gdir / "applied" / f"round-00.{doc['decision_id'][:16]}.json",
                         P.document_bytes({"decision_id": doc["decision_id"], "action": doc["action"], "gate": "round-00", "consumed": True}))
        os.replace(gdir / "gates" / "round-00.json", gdir / "consumed" / "round-00.gate-closed.x.json")
        os.replace(path, gdir / "consumed" / "round-00.decision-consumed.x.json")
        return created

    monkeypatch.setattr(decide_module.P, "create_exclusive", create_then_driver_consumes)
    result = decide_in_process(root, "stop", 0, operator="alice")
    assert result.taken and result.journaled, result.message
    assert not list((gdir / "consumed").glob("round-00.orphan.*"))


def test_gate_status_json_escapes_what_a_terminal_acts_on_and_stays_lossless(tmp_path):
    root = tmp_path / "search"
    root.mkdir()
    _gate_without_driver(root)
    reason = "bidi \u202eevil\u202c, csi \x9b2J, line\u2028sep"
    assert decide_in_process(root, "stop", 0, reason=reason, operator="alice").taken
    out = run_cli("gate-status", str(root), "--json").stdout
    assert not any(c in out for c in "\u202e\u202c\x9b\u2028")
    assert reason in json.dumps(json.loads(out), ensure_ascii=False)
