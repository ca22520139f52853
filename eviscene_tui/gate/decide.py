"""Taking a gate decision (headless ``decide`` and the app share this).

1. find the gate the decision is for (``gates/round-NN.json``, or the first
   undecided hint gate of round N); nothing pending -> refused, naming who
   decided what and when when it was decided already;
2. build the decision (operator, reason, step, sha256 of the gate file and of
   the round's ``requests/round-NN.json``, a digest over the whole) and create
   ``decisions/<gate>.json`` exclusively: of two racing deciders exactly one
   wins, the other is told who won. When the driver consumed a winner's stop in
   between (gate closed, slot free again), the late decision is set aside
   (``consumed/<gate>.orphan.*``) and refused the same way;
3. append the decision to the gate's hash-chained journal
   (``<gate dir>/decisions.jsonl``, ``eviscene_tui.journal``) with the evidence
   the operator saw. A decider that died between 2 and 3 is caught up by
   :func:`reconcile_journal` (every decision file has a journal event).
"""

from __future__ import annotations

import getpass
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eviscene_tui.gate import inproc as proto
from eviscene_tui.gate.sidecar import GateDecision, GateRequest, GateStatus, consumed_decisions, gate_dir_for, gate_request, read_decision, read_status
from eviscene_tui.journal import Journal, JournalError, parse_journal_bytes
from eviscene_tui.storage import write_new_file

JOURNAL_ACTIONS = {
    "approve-round": "approve_round",
    "relocalize": "relocalize",
    "stop": "stop_search",
    "approve-hint": "approve_hint",
    "reject-hint": "reject_hint",
}
DEFAULT_REASONS = {"relocalize": "relocalize requested at the round gate", "reject-hint": "rejected at the hint gate"}
JOURNAL_LOCK_WAIT_SECONDS = 10.0


class DecideUsage(ValueError):
    """Bad usage (exit 2)."""


@dataclass
class DecideResult:
    taken: bool
    message: str
    decision: dict[str, Any] | None = None
    winner: GateDecision | None = None
    journal_event: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()


def default_operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def journal_path(gate_dir: Path) -> Path:
    return gate_dir / proto.JOURNAL_FILE


def _kind(action: str) -> str:
    if action in proto.ROUND_ACTIONS:
        return "round"
    if action in proto.HINT_ACTIONS:
        return "hint"
    raise DecideUsage(f"unknown action {action!r}; expected one of {', '.join(proto.ROUND_ACTIONS + proto.HINT_ACTIONS)}")


def _refused_already(decisions: list[GateDecision], what: str) -> str:
    last = decisions[-1]
    return f"{what} was already decided: {last.describe()}" + (f" (reason: {last.reason})" if last.reason else "")


def _set_aside_unreadable(gate_dir: Path, path: Path, name: str, *, why: str = "unreadable") -> str:
    target = gate_dir / proto.CONSUMED_DIR / f"{name}.{why}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.{uuid.uuid4().hex[:6]}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return ""
    return f"an unreadable decision file {path.name} was set aside as {target.name}"


def evidence_for_gate(root: Path, request: GateRequest) -> dict[str, str]:
    """{path relative to the search root: sha256} of what the operator saw."""
    out: dict[str, str] = {}
    req = root / "requests" / f"round-{request.round:02d}.json"
    digest = proto.sha256_file(req)
    if digest:
        out[os.path.relpath(req, root)] = digest
    out[os.path.relpath(request.path, root)] = request.sha256
    files = request.doc.get("files")
    if isinstance(files, dict):
        for rel, sha in files.items():
            if isinstance(rel, str) and isinstance(sha, str):
                out[rel] = sha
    return out


def decide(
    root: str | os.PathLike[str],
    action: str,
    round_index: int,
    *,
    step: int | None = None,
    reason: str = "",
    operator: str | None = None,
    gate_dir: str | os.PathLike[str] | None = None,
    expect_gate_sha256: str | None = None,
) -> DecideResult:
    """Take a decision for the gate of ``round_index`` (module doc). With
    ``expect_gate_sha256`` (the app: the card the operator looked at) a gate whose
    content changed since is refused rather than decided unseen."""
    kind = _kind(action)
    _check_usage(action, round_index, step)
    operator = (operator or "").strip() or default_operator()
    root_path = Path(os.path.abspath(os.fspath(root)))
    gdir = gate_dir_for(root_path, gate_dir)
    if not gdir.is_dir():
        return DecideResult(False, f"no gate directory {gdir}: no driver was gated for {root_path}")
    status = read_status(root_path, gdir)
    notes: list[str] = []
    what = f"round {round_index}" if kind == "round" else f"the hint of round {round_index}"
    candidates = status.pending_for(kind, round_index)
    if not candidates:
        return _nothing_pending(status, kind, round_index, what)
    request = candidates[0]
    if expect_gate_sha256 is not None and request.sha256 != expect_gate_sha256:
        return DecideResult(False, f"the gate for {what} changed since it was shown; look again before deciding")
    path = gdir / proto.DECISIONS_DIR / f"{request.name}.json"
    if path.exists():
        existing, problem = read_decision(path, request.name)
        if existing is not None:
            return DecideResult(False, _refused_already([existing], what), winner=existing)
        note = _set_aside_unreadable(gdir, path, request.name)
        if note:
            notes.append(note + (f" ({problem})" if problem else ""))
    doc = _decision_doc(request, kind, action, step, (reason or "").strip() or DEFAULT_REASONS.get(action, ""), operator)
    lost = _create_or_lose(root_path, gdir, path, request, doc, what, notes)
    if lost is not None:
        return lost
    event = None
    try:
        event = journal_decision(root_path, gdir, doc, request)
        reconcile_journal(root_path, gdir)
    except JournalError as exc:
        notes.append(f"the decision is taken but could not be journaled yet: {exc}")
    message = f"decided {action} for {what}" + (f" at step {step}" if step is not None else "") + f" ({operator})"
    return DecideResult(True, message, decision=doc, journal_event=event, notes=tuple(notes))


def _check_usage(action: str, round_index: int, step: int | None) -> None:
    if type(round_index) is not int or round_index < 0:
        raise DecideUsage("--round must be a non-negative integer")
    if step is not None and action != "relocalize":
        raise DecideUsage("--step is only for relocalize")
    if step is not None and (type(step) is not int or step < 0):
        raise DecideUsage("--step must be a non-negative integer")


def _nothing_pending(status: GateStatus, kind: str, round_index: int, what: str) -> DecideResult:
    """The refusal when no gate of that kind waits for that round: who already decided it, or what is pending."""
    prefix = proto.gate_name(round_index)
    earlier = [d for d in status.decisions if d.kind == kind and d.round == round_index and (kind == "hint" or d.name == prefix)]
    if earlier:
        return DecideResult(False, _refused_already(earlier, what), winner=earlier[-1])
    pending = ", ".join(f"{p.kind} gate of round {p.round}" for p in status.pending) or "nothing"
    return DecideResult(False, f"nothing pending for {what} (pending: {pending})")


def _decision_doc(request: GateRequest, kind: str, action: str, step: int | None, reason: str, operator: str) -> dict[str, Any]:
    """The decision file's content (with its digest), bound to the gate it answers."""
    hint = _v if isinstance(_v := request.doc.get("hint"), dict) else {}
    return proto.with_digest(
        {
            "schema_version": proto.DECISION_SCHEMA,
            "decision_id": uuid.uuid4().hex,
            "kind": kind,
            "round": request.round,
            "hint_index": request.hint_index,
            "action": action,
            "step": step,
            "reason": reason,
            "operator": operator,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "at": proto.utc_now(),
            "gate": request.name,
            "gate_sha256": request.sha256,
            "request_sha256": request.doc.get("request_sha256"),
            "proposal_id": hint.get("proposal_id"),
            "hint_sha256": hint.get("hint_sha256"),
        }
    )


def _create_or_lose(root: Path, gdir: Path, path: Path, request: GateRequest, doc: dict[str, Any], what: str,
                    notes: list[str]) -> DecideResult | None:
    """Create the decision file exclusively (one winner). None when ours is the decision;
    else the refusal naming the winner (another decider, or the driver that closed the gate)."""
    try:
        write_new_file(path, proto.document_bytes(doc))  # tmp + fsync + link: of two racing deciders exactly one creates it
    except FileExistsError:
        winner, problem = read_decision(path, request.name)
        if winner is not None:
            return DecideResult(False, _refused_already([winner], what), winner=winner, notes=tuple(notes))
        return DecideResult(False, f"another decision file for {what} appeared and cannot be read: {problem}", notes=tuple(notes))
    if proto.sha256_file(request.path) == request.sha256:
        return None
    # the driver consumed another decision (a stop) and closed this gate between our
    # look and our create: ours decides nothing; set it aside and name the winner
    _set_aside_unreadable(gdir, path, request.name, why="orphan")
    earlier = [d for d in read_status(root, gdir).decisions if d.name == request.name]
    if earlier:
        return DecideResult(False, _refused_already(earlier, what), winner=earlier[-1], notes=tuple(notes))
    return DecideResult(False, f"the gate for {what} closed while deciding", notes=tuple(notes))


# ---------------------------------------------------------------------- journal
def _open_journal(gate_dir: Path, operator: str) -> Journal:
    """The gate journal for appending; waits (bounded) while another decider holds its lock."""
    deadline = time.monotonic() + JOURNAL_LOCK_WAIT_SECONDS
    while True:
        journal = Journal(journal_path(gate_dir), operator=operator)
        if not journal.read_only:
            return journal
        journal.close()
        if time.monotonic() >= deadline:
            raise JournalError(journal.read_only_reason or "the gate journal is locked")
        time.sleep(0.05)


def _journaled_ids(gate_dir: Path) -> set[str]:
    try:
        data = journal_path(gate_dir).read_bytes()
    except FileNotFoundError:
        return set()
    events, _bad = parse_journal_bytes(data)
    return {str(e["data"].get("decision_id")) for e in events if isinstance(e.get("data"), dict) and e["data"].get("decision_id")}


def _event_fields(root: Path, gate_dir: Path, doc: dict[str, Any], request: GateRequest | None) -> dict[str, Any]:
    action = str(doc.get("action"))
    evidence = evidence_for_gate(root, request) if request is not None else {}
    if not evidence and isinstance(doc.get("request_sha256"), str):
        evidence[f"requests/round-{int(doc.get('round') or 0):02d}.json"] = doc["request_sha256"]
    step = doc.get("step") if type(doc.get("step")) is int else None
    return {
        "action": JOURNAL_ACTIONS[action],
        "target": {
            "case": str(root),
            "round": doc.get("round"),
            "step_index": step,
            "hint_sha256": doc.get("hint_sha256"),
            "attempt_id": None,
        },
        "reason": str(doc.get("reason") or "") or DEFAULT_REASONS.get(action, ""),
        "evidence": evidence,
        "data": {
            "source": "gate",
            "gate_dir": str(gate_dir),
            "gate": doc.get("gate"),
            "gate_action": action,
            "decision_id": doc.get("decision_id"),
            "decided_at": doc.get("at"),
            "hint_index": doc.get("hint_index"),
            "proposal_id": doc.get("proposal_id"),
            "to_step_index": step,
            "gate_sha256": doc.get("gate_sha256"),
        },
        "operator": str(doc.get("operator") or "operator"),
    }


def journal_decision(root: Path, gate_dir: Path, doc: dict[str, Any], request: GateRequest | None) -> dict[str, Any]:
    fields = _event_fields(root, gate_dir, doc, request)
    journal = _open_journal(gate_dir, fields["operator"])
    try:
        if doc.get("decision_id") in {str(e.get("data", {}).get("decision_id")) for e in journal.events if isinstance(e.get("data"), dict)}:
            return next(e for e in journal.events if isinstance(e.get("data"), dict) and e["data"].get("decision_id") == doc.get("decision_id"))
        return journal.append(**fields)
    finally:
        journal.close()


def reconcile_journal(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None) -> int:
    """Journal every decision file that has no journal event yet (a decider that
    died before journaling). Returns how many were added."""
    root_path = Path(os.path.abspath(os.fspath(root)))
    gdir = gate_dir_for(root_path, gate_dir)
    have = _journaled_ids(gdir)
    missing: list[GateDecision] = []
    for path in sorted((gdir / proto.DECISIONS_DIR).glob("*.json")):
        name = path.name[:-5]
        decision, _ = read_decision(path, name)
        if decision is not None and decision.decision_id not in have:
            missing.append(decision)
    missing.extend(d for d in consumed_decisions(gdir) if d.decision_id not in have)
    added = 0
    for decision in sorted(missing, key=lambda d: d.at):
        request = gate_request(gdir, decision.name)
        if request is not None and request.sha256 != decision.doc.get("gate_sha256"):
            request = None
        doc = dict(decision.doc)
        event_fields = _event_fields(root_path, gdir, doc, request)
        event_fields["data"]["reconciled"] = True
        journal = _open_journal(gdir, event_fields["operator"])
        try:
            journal.append(**event_fields)
        finally:
            journal.close()
        added += 1
    return added
