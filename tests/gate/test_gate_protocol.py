"""The gate protocol module (``eviscene_tui/gate/protocol.py``): the decision and gate kinds
are spelled there and nowhere else; its readers never block or crash on what a sidecar
file is or holds; its rules are the driver's (§4)."""

from __future__ import annotations

import ast
import json
import os
import threading
from pathlib import Path

import pytest

from eviscene_tui.gate import protocol as P

PACKAGE = Path(P.__file__).resolve().parents[1]
# decision names that are also plain English words: only the distinctive spellings are
# checked everywhere; these two are checked in the gate's own modules
COMMON_WORDS = {"stop", "relocalize"}


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_the_decision_and_gate_kinds_are_defined_once():
    names = set(P.ACTIONS) | set(P.JOURNAL_DECISION_ACTIONS)
    distinctive = names - COMMON_WORDS
    gate_modules = ("gate/", "state/gate.py", "state/repair.py", "ui/widgets/gate_panel.py", "ui/screens/gate.py", "commands/decide.py")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("gate/protocol.py",) or rel.startswith("scaffold/standin/"):
            continue
        watched = distinctive | (COMMON_WORDS if rel.startswith(gate_modules) else set())
        found += [f"{rel}:{line} spells {value!r}" for line, value in _literals(path) if value in watched]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # a second Literal / tuple of the gate kinds
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if {"round", "hint", "attempt"} <= values:
                    found.append(f"{rel}:{node.lineno} lists the gate kinds")
    assert not found, "\n".join(found)


def test_the_checker_sees_a_decision_name(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text('ACTION = "approve-hint"\nKINDS = ("round", "hint", "attempt")\n')
    assert ("approve-hint" in {v for _, v in _literals(bad)})


def test_every_decision_kind_has_one_spec_and_a_journal_name():
    assert set(P.SPECS) == set(P.ACTIONS) and len(set(P.JOURNAL_DECISION_ACTIONS)) == len(P.ACTIONS)
    for action, spec in P.SPECS.items():
        assert spec.action == action and set(spec.kinds) <= set(P.GATE_KINDS) and spec.verb in P.VERBS
    for kind, offers in P.DEFAULT_OFFERS.items():
        assert all(kind in P.SPECS[a].kinds for a in offers)


def test_gate_names_round_trip():
    for kind, index in (("round", None), ("hint", 0), ("hint", 12), ("attempt", 3)):
        assert P.parse_gate_name(P.gate_name(4, kind, index)) == (4, kind, index)
    assert P.parse_gate_name("round-01.stream-02") is None and P.parse_gate_name("nope") is None


def test_a_fifo_is_never_opened_and_never_blocks(tmp_path):
    fifo = tmp_path / "round-00.json"
    os.mkfifo(fifo)
    done = []

    def read() -> None:
        done.append(P.read_document(fifo))
        done.append(P.sha256_file(fifo))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "reading a FIFO blocked"
    (doc, problem), digest = done
    assert doc is None and "not a regular file" in problem and digest is None


def test_any_bytes_are_a_problem_never_an_exception(tmp_path):
    path = tmp_path / "decision.json"
    for data in (b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe", b'{"a": ', b"[1, 2]", b"null"):
        path.write_bytes(data)
        doc, problem = P.read_document(path)
        assert doc is None and problem, data[:10]
    path.write_bytes(b"x" * 10)
    with pytest.raises(ValueError, match="more than any such file holds"):
        P.read_regular(path, limit=5)


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        P.create_exclusive(tmp_path / "d.json", b"{}\n")
    with pytest.raises(OSError):
        P.atomic_replace(tmp_path / "e.json", b"{}\n")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_the_feedback_rules_are_the_drivers():
    attempt = {"hint": "h1", "selected_source_step": 3, "earliest_error_step": -1, "checker": {"anchor_matches": False}}
    history = [{"feedback": {"attempts": [attempt], "rejected_proposal_reasons": [], "status": "generated"}}]
    fb = P.revision_context(history)
    assert fb["needs_relocalization"] is True and fb["excluded_hints"] == ["h1"] and fb["locked_hint"] == ""
    assert P.revision_rejection(" h1 ", fb) == "repeated_completed_hint"
    locked = {**fb, "locked_hint": "keep"}
    assert P.revision_rejection("other", locked) == "changed_verified_hint" and P.revision_rejection("keep\nmore", locked) == ""
    reloc = P.effective_feedback(fb, "relocalize", 5, 3)
    assert reloc["anchor_feedback"] == {"selected_source_step": 3, "earliest_error_step": 5, "checker": {"anchor_matches": False}}
    assert P.effective_feedback(fb, "approve-round", None, 3) is fb
    assert P.next_stop({"rounds": [{"records": [{"accepted": True}]}]}, 6, 12, 60) == "converged"


def test_the_live_channel_round_trips_and_stops_writing_when_it_cannot(tmp_path):
    channel = P.LiveChannel(tmp_path / "live.jsonl")
    assert channel.write("call_started", "c1", round=0, stage="psd_teacher_repair", streaming=True)
    assert channel.write("delta", "c1", event={"type": "delta", "kind": "content", "text": "hi", "token_ids": [5]})
    data = (tmp_path / "live.jsonl").read_bytes() + b'{"type": "delta", "call": "c1", "t'  # a torn last line
    records, used = P.parse_live(data)
    assert [r["type"] for r in records] == ["call_started", "delta"] and used == len(data) - len(b'{"type": "delta", "call": "c1", "t')
    channel.close()
    blocked = P.LiveChannel(tmp_path / "live.jsonl" / "nested" / "live.jsonl")  # a file where a folder should be
    assert not blocked.write("delta", "c1") and "live view unavailable" in (blocked.problem or "")
    assert json.loads((tmp_path / "live.jsonl").read_bytes().split(b"\n")[0])["schema_version"] == P.LIVE_SCHEMA


def test_one_operator_identity_rule(monkeypatch):
    monkeypatch.setenv("EVISCENE_OPERATOR", "erin")
    assert P.operator_identity(None) == "erin" and P.operator_identity(" dana ") == "dana"
    monkeypatch.delenv("EVISCENE_OPERATOR")
    assert P.operator_identity(None)  # the login name
