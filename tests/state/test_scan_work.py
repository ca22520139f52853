"""The pool's gate marker looks for the same sidecar file as the gate's own services."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eviscene_tui.gate.protocol import SESSION_FILE, sidecar_for
from eviscene_tui.state import gate as gate_state
from eviscene_tui.state import scan_work


@pytest.mark.parametrize("spelling", ["absolute", "relative", "trailing slash", "path"])
def test_the_pool_gate_marker_finds_the_sidecar_the_gate_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str) -> None:
    case = tmp_path / "runs" / "case-1"
    case.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    root: str | Path = {"absolute": str(case), "relative": os.path.join("runs", "case-1"), "trailing slash": str(case) + "/", "path": case}[spelling]
    assert scan_work.gate_marker(root) == ""  # no sidecar: the gate's services are never asked
    asked: list[object] = []
    monkeypatch.setattr(gate_state, "gate_marker", lambda r: (asked.append(r), "awaiting operator")[1])
    sidecar = sidecar_for(case)
    sidecar.mkdir()
    assert scan_work.gate_marker(root) == ""  # a sidecar folder without its session file
    (sidecar / SESSION_FILE).write_text("{}")
    assert scan_work.gate_marker(root) == "awaiting operator" and asked == [root]
