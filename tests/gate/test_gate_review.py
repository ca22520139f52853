"""What the record says the driver did (``gate/review.py``): the real driver's site a
relocalize cannot move, the step each relocalized round used."""

from __future__ import annotations

import json

from eviscene_tui.artifacts.jsonio import encode_bound
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.review import pinned_site, used_step
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.state.gate import load_snapshot


def _search(tmp_path, steps, audit=None):
    inputs = tmp_path / "inputs"
    inputs.mkdir(parents=True)
    trace = inputs / "trace.json"
    trace.write_text(json.dumps({"state": {"all_steps": steps}}))
    bound = {"trace": {"path": str(trace), "sha256": "x"}}
    if audit is not None:
        (inputs / "audit.json").write_text(json.dumps(audit))
        bound["audit"] = {"path": str(inputs / "audit.json"), "sha256": "y"}
    root = tmp_path / "search"
    root.mkdir()
    for name, data in encode_bound(root / "search-state.json", {"inputs": bound}, {"status": "searching", "rounds": []}).items():
        (root / name).write_bytes(data)
    return root


def _policy(action="tool_call"):
    return {"stage": "unified_react", "action_type": action, "metadata": {"policy_input": {}, "policy_action": {}}}


def test_a_strict_audit_failure_pins_the_real_drivers_site(tmp_path):
    root = _search(tmp_path, [_policy(), _policy()], audit={"failures": [{"location": "state.all_steps[1].tool_args", "code": "x"}]})
    note = pinned_site(root, {})
    assert note and "all_steps[1]" in note and "cannot move the site" in note
    assert pinned_site(root, {"driver": "bundled"}) is None  # the bundled driver takes the operator's step


def test_a_protocol_rejection_pins_it_too(tmp_path):
    root = _search(tmp_path, [_policy(), _policy("format_error"), _policy()])
    note = pinned_site(root, {})
    assert note and "step 1 is a protocol rejection (format_error)" in note
    assert pinned_site(_search(tmp_path / "plain", [_policy(), _policy()]), {}) is None


def test_the_relocalize_dialog_context_names_the_pin(tmp_path):
    root = _search(tmp_path, [_policy(), _policy("policy_replan")])
    gdir = P.sidecar_for(root)
    (gdir / "gates").mkdir(parents=True)
    (gdir / "gate.json").write_text("{}")
    doc = {"schema_version": P.REQUEST_SCHEMA, "kind": "round", "round": 0, "hint_index": None, "feedback": {}, "history": []}
    (gdir / "gates" / "round-00.json").write_bytes(P.document_bytes(doc))
    snap = load_snapshot(root)
    assert snap.pinned and "protocol rejection" in snap.pinned and read_status(root).pending


def test_used_step_reads_the_candidate_else_the_localization(tmp_path):
    rdir = tmp_path / "rounds" / "round-01"
    rdir.mkdir(parents=True)
    assert used_step(tmp_path, 1) is None
    (rdir / "semantic-localization.json").write_text(json.dumps({"candidates": [{"selected": True, "source_step_index": 6}]}))
    assert used_step(tmp_path, 1) == 6
    (rdir / "repair_candidates.jsonl").write_text(json.dumps({"repair_site": {"source_step_index": 4}}) + "\n")
    assert used_step(tmp_path, 1) == 4
