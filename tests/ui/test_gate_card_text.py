"""The gate card's text offers R exactly when the gate session would resume (one rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eviscene_tui.gate.sidecar import DriverStatus, GateStatus
from eviscene_tui.state.gate import GateSnapshot, resume_refusal
from eviscene_tui.ui.widgets.gate_panel import render_card

SESSION = {"argv": ["driver.py", "--mode", "feedback"], "python": "/usr/bin/python3"}


def _snap(*, alive: bool, state: str, status: str, session: dict | None = None) -> GateSnapshot:
    driver = DriverStatus(present=True, pid=42, host="node", alive=alive, last_seen="now", state=state, waiting=None,
                          exit_code=0 if state == "exited" else None)
    gate = GateStatus(root=Path("/r"), gate_dir=Path("/r.eviscene-gate"), exists=True, driver=driver, pending=(),
                      decisions=(), problems=(), session=SESSION if session is None else session)
    return GateSnapshot(status=gate, card=None, search_status=status)


@pytest.mark.parametrize(
    ("snap", "offered"),
    [
        (_snap(alive=True, state="running", status="paused_execution_error"), False),  # the driver still runs
        (_snap(alive=False, state="exited", status="paused_execution_error"), True),  # stopped, driver gone
        (_snap(alive=False, state="exited", status="converged"), False),  # ended: nothing to resume
        (_snap(alive=False, state="running", status="running"), True),  # the driver died mid-round
        (_snap(alive=False, state="exited", status="paused_execution_error", session={}), False),  # unknown argv
    ],
)
def test_the_card_offers_R_only_when_resume_applies(snap: GateSnapshot, offered: bool) -> None:
    text = render_card(snap).plain
    assert ("R resumes" in text) is offered
    assert (resume_refusal(snap) == "") is offered


def test_the_card_marks_untrusted_decisions_and_says_what_the_driver_did() -> None:
    """Decisions at and after a journal break are marked; a step the driver did not use is
    shown beside its decision; the header says both; a hint card says what the agent did."""
    from eviscene_tui.gate import protocol as P
    from eviscene_tui.gate.review import JournalCheck, StepCheck
    from eviscene_tui.gate.sidecar import GateDecision, GateRequest
    from eviscene_tui.ui.widgets.gate_panel import render_header, render_history

    decision = GateDecision(name="round-01", kind="round", round=1, hint_index=None, action="relocalize", operator="ann", at="t",
                            reason="", step=7, decision_id="d1", consumed=False, doc={}, path=Path("/x"))
    base = _snap(alive=True, state="waiting", status="searching")
    status = GateStatus(root=base.status.root, gate_dir=base.status.gate_dir, exists=True, driver=base.status.driver, pending=(),
                        decisions=(decision,), problems=(), session=SESSION)
    journal = JournalCheck(False, 2, 1, ("event seq=1: hash does not match its content (edited?)",), frozenset({"d1"}), ())
    snap = GateSnapshot(status=status, card=None, search_status="searching", step_checks=(StepCheck(1, "d1", 7, 4),), journal=journal)
    history = render_history(snap).plain
    assert "! relocalize at step 7" in history and "the operator asked step 7, the driver used step 4" in history
    header = render_header(snap).plain
    assert "not to be trusted" in header and "the driver used step 4" in header
    doc = {"schema_version": P.REQUEST_SCHEMA, "kind": "hint", "round": 1, "hint_index": 0, "feedback": {},
           "actions": [{"action": "approve-hint"}, {"action": "add-hint"}],
           "hint": {"text": "Look again.", "audit": {"passed": True}},
           "site": {"source_step_index": 3, "stage": "unified_react", "tool_name": "web_search", "tool_args": {"q": "x"},
                    "thought": "search again"}}
    card = GateRequest("round-01.hint-00", "hint", 1, 0, doc, Path("/g"), "sha")
    text = render_card(GateSnapshot(status=status, card=card, search_status="searching")).plain
    assert "at step 3 (unified_react) the agent did: web_search" in text and "thought: search again" in text
    assert "a approve-hint · n add-hint" in text  # the keys of the decisions the gate declared, nothing else
