"""Whatever is in a gate sidecar (torn, hand-edited, foreign files), reading it
never raises: bad files become problems and undecided gates stay pending."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eviscene_tui.gate import protocol as proto
from eviscene_tui.gate.decide import decide
from eviscene_tui.gate.sidecar import read_status

JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
CONTENT = st.one_of(st.binary(max_size=200), JSONISH.map(lambda v: json.dumps(v).encode()))


def _gate(round_index: int) -> dict:
    return {"schema_version": proto.REQUEST_SCHEMA, "kind": "round", "round": round_index, "hint_index": None,
            "feedback": {"needs_relocalization": False}, "history": []}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(heartbeat=CONTENT, decision=CONTENT, junk=CONTENT, gate_bytes=st.one_of(st.none(), CONTENT))
def test_read_status_never_raises(heartbeat, decision, junk, gate_bytes):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "search"
        root.mkdir()
        gdir = proto.sidecar_for(root)
        for sub in ("gates", "decisions", "consumed"):
            (gdir / sub).mkdir(parents=True)
        (gdir / "gate.json").write_text("{}")
        (gdir / "heartbeat.json").write_bytes(heartbeat)
        (gdir / "gates" / "round-00.json").write_bytes(proto.document_bytes(_gate(0)))
        if gate_bytes is not None:
            (gdir / "gates" / "round-01.json").write_bytes(gate_bytes)
        (gdir / "decisions" / "round-00.json").write_bytes(decision)
        (gdir / "decisions" / "not-a-gate.json").write_bytes(junk)
        (gdir / "consumed" / "round-00.stop-consumed.x.json").write_bytes(junk)
        status = read_status(root)
        # random bytes are never a valid, digest-checked decision: the gate stays pending
        # and the decision file is reported
        assert [p.name for p in status.pending][:1] == ["round-00"]
        assert not any(d.name == "round-00" for d in status.decisions)
        assert any(p.startswith("decision file round-00.json") for p in status.problems)
        json.dumps(status.as_json())
        # deciding over an unreadable decision file sets it aside and takes the decision
        result = decide(root, "approve-round", 0, operator="fuzz")
        assert result.taken, result.message
        assert [d.action for d in read_status(root).decisions if d.name == "round-00"] == ["approve-round"]


def test_a_decision_for_a_card_that_changed_is_refused(tmp_path):
    root = tmp_path / "search"
    root.mkdir()
    gdir = proto.sidecar_for(root)
    (gdir / "gates").mkdir(parents=True)
    (gdir / "gate.json").write_text("{}")
    (gdir / "gates" / "round-03.json").write_bytes(proto.document_bytes(_gate(3)))
    shown = read_status(root).pending[0]
    (gdir / "gates" / "round-03.json").write_bytes(proto.document_bytes({**_gate(3), "feedback": {"needs_relocalization": True}}))
    refused = decide(root, "approve-round", 3, expect_gate_sha256=shown.sha256)
    assert not refused.taken and "changed since it was shown" in refused.message
    assert decide(root, "approve-round", 3, expect_gate_sha256=read_status(root).pending[0].sha256).taken


def test_a_decision_racing_a_consumed_stop_is_set_aside(tmp_path, monkeypatch):
    """The driver consumes bob's stop between alice's look and her create: alice's
    decision must not linger as a decision for the closed gate."""
    import eviscene_tui.gate.decide as decide_module

    root = tmp_path / "search"
    root.mkdir()
    gdir = proto.sidecar_for(root)
    for sub in ("gates", "decisions", "consumed"):
        (gdir / sub).mkdir(parents=True)
    (gdir / "gate.json").write_text("{}")
    gate = gdir / "gates" / "round-00.json"
    gate.write_bytes(proto.document_bytes(_gate(0)))
    stop = proto.with_digest({"schema_version": proto.DECISION_SCHEMA, "decision_id": "b" * 32, "kind": "round", "round": 0,
                              "hint_index": None, "action": "stop", "step": None, "reason": "", "operator": "bob",
                              "at": proto.utc_now(), "gate_sha256": proto.sha256_bytes(gate.read_bytes())})
    real = decide_module.read_status
    calls = []

    def racing(root_arg, gdir_arg=None):
        status = real(root_arg, gdir_arg)
        if not calls:  # right after alice looked: the driver takes bob's stop (gate first, then decision)
            gate.rename(gdir / "consumed" / "round-00.gate-closed.x.json")
            (gdir / "consumed" / "round-00.stop-consumed.x.json").write_bytes(proto.document_bytes(stop))
        calls.append(1)
        return status

    monkeypatch.setattr(decide_module, "read_status", racing)
    result = decide_module.decide(root, "approve-round", 0, operator="alice")
    assert not result.taken and "stop (round 0) by bob" in result.message
    assert not (gdir / "decisions" / "round-00.json").exists()
    assert len(list((gdir / "consumed").glob("round-00.orphan.*.json"))) == 1
