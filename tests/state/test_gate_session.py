"""GateSession without Textual: what changed in the feedback, the live round
progress read from partly written files, the runs-screen marker, notifications."""

from __future__ import annotations

import json

from eviscene_tui.state.gate import GateSession, feedback_changes, gate_marker, load_snapshot, round_progress


def test_feedback_changes_names_what_moved():
    assert feedback_changes(None, {}) == ["first round: no earlier feedback"]
    before = {"needs_relocalization": False, "locked_hint": "", "excluded_hints": ["A"], "anchor_feedback": {}, "previous_rounds": []}
    after = {
        "needs_relocalization": True, "locked_hint": "", "excluded_hints": ["A", "B"],
        "anchor_feedback": {"selected_source_step": 3, "earliest_error_step": 5, "checker": {"anchor_matches": False}},
        "previous_rounds": [{"attempts": [{}], "rejected_proposal_reasons": ["operator_rejected"], "status": "generated"}],
    }
    changes = feedback_changes(before, after)
    assert "needs_relocalization: False -> True" in changes
    assert "newly excluded hint: \u201cB\u201d" in changes
    assert "anchor: selected step 3, earliest error step 5, anchor_matches false" in changes
    assert not any("{'" in c or "'" in c for c in changes), changes  # words, never a Python repr
    assert "last round: generated, 1 attempt(s), rejected proposals: operator_rejected" in changes
    assert feedback_changes(before, before) == ["no change"]
    long = feedback_changes(before, {**before, "excluded_hints": ["A", "word " * 60]})
    assert long[0].endswith("word \u2026\u201d")  # cut at a word, marked


def test_the_last_decision_line_goes_once_the_driver_asks_again(tmp_path):
    """The card's status line says what the last decision did only until the next gate is
    pending: at round 1 it no longer says "decided approve-round for round 0"."""
    from eviscene_tui.gate import protocol as P

    root = tmp_path / "search"
    root.mkdir()
    gdir = P.sidecar_for(root)
    for sub in ("gates", "decisions", "consumed", "applied"):
        (gdir / sub).mkdir(parents=True)
    (gdir / "gate.json").write_text("{}")

    def gate(n: int) -> None:
        doc = {"schema_version": P.REQUEST_SCHEMA, "kind": "round", "round": n, "hint_index": None, "feedback": {}, "history": []}
        (gdir / "gates" / f"round-{n:02d}.json").write_bytes(P.document_bytes(doc))

    gate(0)
    session = GateSession(root, operator="ann")
    session.apply(session.load())
    assert session.decide(P.APPROVE_ROUND).taken
    assert "decided approve-round for round 0" in session.load().message  # no newer gate yet
    gate(1)
    assert session.load().message == ""

def test_round_progress_reads_partly_written_files(tmp_path):
    root = tmp_path / "search"
    run = root / "rounds" / "round-00"
    events = run / "runtime" / "case" / "hint-00-abc" / "events.jsonl"
    events.parent.mkdir(parents=True)
    lines = [json.dumps({"sequence": i, "event_type": t}) for i, t in enumerate(("case_attempt_started", "context_request_started"), 1)]
    events.write_text("\n".join(lines) + "\n" + '{"sequence": 3, "event_ty', encoding="utf-8")  # torn last line
    (run / "semantic-localization.json").write_text(json.dumps({"candidates": [{"selected": True, "source_step_index": 5}]}))
    (run / "proposer-hint-audits.json").write_text(json.dumps({"proposals": [{"passed": True}, {"passed": False, "reason": "operator_rejected"}]}))
    (run / "manifest.json").write_text('{"status": "generat')  # the driver is rewriting it
    p = round_progress(root, 0)
    assert (p.localization_step, p.events, p.last_event, p.torn_tail) == (5, 2, "context_request_started", True)
    assert p.audits == ("passed", "operator_rejected")
    assert p.recent_events == ("#1 case_attempt_started", "#2 context_request_started")
    assert p.status == "" and any("manifest.json" in x for x in p.problems)
    # the writer completes the line and appends another: only the new bytes are read
    with open(events, "a", encoding="utf-8") as handle:
        handle.write('pe": "tool_result_archived"}\n' + json.dumps({"sequence": 4, "event_type": "snapshot_committed"}) + "\n")
    p = round_progress(root, 0)
    assert (p.events, p.last_event, p.torn_tail) == (4, "snapshot_committed", False)
    assert p.recent_events[-2:] == ("#3 tool_result_archived", "#4 snapshot_committed")
    (run / "manifest.json").write_text(json.dumps({"status": "generated"}))
    (run / "repair_attempts.jsonl").write_text(json.dumps({"local_verification": {"passed": True}, "accepted": True}) + "\n")
    assert round_progress(root, 0).verdict == "accepted"



def test_round_progress_never_reads_through_a_symlink_out_of_the_root(tmp_path):
    """The gate card reads the round's files as the integrity check does: a symlink that
    leads out of the search root is never opened (its outside content never shows)."""
    root = tmp_path / "search"
    run = root / "rounds" / "round-00"
    events = run / "runtime" / "case" / "hint-00-abc" / "events.jsonl"
    events.parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "loc.json").write_text(json.dumps({"candidates": [{"selected": True, "source_step_index": 7}]}))
    (outside / "audits.json").write_text(json.dumps({"proposals": [{"passed": False, "reason": "SECRET-AUDIT"}]}))
    (outside / "manifest.json").write_text(json.dumps({"status": "SECRET-STATUS"}))
    (outside / "events.jsonl").write_text(json.dumps({"sequence": 1, "event_type": "SECRET-EVENT"}) + "\n")
    (outside / "attempts.jsonl").write_text(json.dumps({"local_verification": {"passed": True}, "accepted": True}) + "\n")
    for name, target in (("semantic-localization.json", "loc.json"), ("proposer-hint-audits.json", "audits.json"),
                         ("manifest.json", "manifest.json"), ("repair_attempts.jsonl", "attempts.jsonl")):
        (run / name).symlink_to(outside / target)
    events.symlink_to(outside / "events.jsonl")
    p = round_progress(root, 0)
    assert (p.localization_step, p.audits, p.status, p.events, p.verdict) == (None, (), "", 0, "")
    assert "SECRET" not in repr(p)
    for name in ("semantic-localization.json", "manifest.json"):  # the same files inside the root are read
        (run / name).unlink()
    (run / "semantic-localization.json").write_text(json.dumps({"candidates": [{"selected": True, "source_step_index": 5}]}))
    (run / "manifest.json").write_text(json.dumps({"status": "generated"}))
    p = round_progress(root, 0)
    assert (p.localization_step, p.status) == (5, "generated")


def test_a_huge_events_log_is_read_a_bounded_piece_per_poll(tmp_path, monkeypatch):
    """An events log far bigger than a poll reads is caught up over several polls, and a
    line longer than a poll reads is passed over rather than held whole."""
    import eviscene_tui.state.gate as G

    monkeypatch.setattr(G, "EVENTS_READ_BYTES", 256)
    root = tmp_path / "search"
    events = root / "rounds" / "round-00" / "runtime" / "case" / "hint-00-abc" / "events.jsonl"
    events.parent.mkdir(parents=True)
    lines = [json.dumps({"sequence": i, "event_type": f"e{i}"}) for i in range(1, 41)]
    events.write_text("\n".join(lines[:20]) + "\n" + "x" * 1000 + "\n" + "\n".join(lines[20:]) + "\n")
    seen = [round_progress(root, 0).events for _ in range(12)]
    assert seen[0] < 40 and seen == sorted(seen)  # a bounded piece per poll, never going back
    assert seen[-1] == 40 and round_progress(root, 0).last_event == "e40"

def test_marker_and_session_without_a_gate(tmp_path):
    root = tmp_path / "plain-search"
    root.mkdir()
    assert gate_marker(root) == ""
    snap = load_snapshot(root)
    assert snap.card is None and not snap.status.exists and not snap.status.driver.present
    session = GateSession(root)
    seen = []
    session.subscribe(seen.append)
    assert session.apply(session.load()) is True
    assert session.apply(session.load()) is False  # same fingerprint: no notification
    assert len(seen) == 1
    assert session.decide("approve-round").taken is False
    assert session.resume_argv() is None  # the gate does not know how a driver was started


def test_the_step_picker_lists_the_trace_of_a_moved_tree(tmp_path):
    """The trace is an input outside the root, recorded by its absolute path; after the
    experiment folder is copied elsewhere (and the original removed) the relocalize step
    list still comes from it, found through the moved-tree rule."""
    import shutil

    written = tmp_path / "cluster" / "exp"
    trace = written / "inputs" / "case-a" / "source-trace.json"
    trace.parent.mkdir(parents=True)
    steps = [{"stage": "search", "tool_name": "reverse_image_search", "thought": f"look {i}"} for i in range(4)]
    trace.write_text(json.dumps({"state": {"all_steps": steps}}), encoding="utf-8")
    root = written / "repairs" / "search-0001"
    root.mkdir(parents=True)
    identity = {"version": 1, "inputs": {"trace": {"path": str(trace), "sha256": "0" * 64}, "output_dir": str(root)}}
    payload = {"status": "searching", "rounds": [{"directory": str(root / "rounds" / "round-00"), "status": "generated"}]}
    (root / "search-state.json").write_text(json.dumps({"identity": identity, "payload": payload, "payload_sha256": "x"}), encoding="utf-8")
    assert [s.index for s in load_snapshot(root).steps] == [0, 1, 2, 3]

    moved = tmp_path / "laptop" / "copy-of-exp"
    moved.parent.mkdir(parents=True)
    shutil.move(str(written), str(moved))
    assert not trace.exists()
    snap = load_snapshot(moved / "repairs" / "search-0001")
    assert [s.index for s in snap.steps] == [0, 1, 2, 3]
    assert snap.steps[1].label.startswith("reverse_image_search: look 1")
