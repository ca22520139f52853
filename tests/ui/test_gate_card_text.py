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
