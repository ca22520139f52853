"""Taking a gate decision (headless ``decide`` and the app share this).

1. find the gate the decision is for: the first pending gate of round N that
   offers the action (as its driver declared it); nothing offers it -> refused,
   naming what is pending, who decided it already, or what is damaged;
2. check what the gate declares (a relocalize step inside the source trace) and
   build the decision (operator, reason, step, text, checker values, sha256 of the
   gate file and of the round's ``requests/round-NN.json``, a digest over the whole),
   then create ``decisions/<gate>.json`` exclusively: of two racing deciders exactly
   one wins, the other is told who won. When the driver consumed a winner's one-shot
   decision in between (gate closed, slot free again), the late decision is set aside
   (``consumed/<gate>.orphan.*``) and refused the same way;
3. append the decision to the gate's hash-chained journal (``<gate dir>/decisions.jsonl``)
   with the evidence the operator saw. A torn journal tail (a crashed decider, a full
   disk) is set aside first; every decision file without a journal event (a decider that
   died between 2 and 3) is journaled by :func:`reconcile_journal`.

The outcome is one line (:attr:`DecideResult.message`): taken or not, journaled or not.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.paths import PathResolver
from eviscene_tui.artifacts.jsonio import read_bound
from eviscene_tui.artifacts.trace import load_trace
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.sidecar import (
    GateDecision,
    GateRequest,
    GateStatus,
    consumed_decisions,
    gate_dir_for,
    gate_request,
    read_applied,
    read_decision,
    read_status,
    sorted_json,
)
from eviscene_tui.journal import Journal, JournalError, parse_journal_bytes

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
    journaled: bool = False
    notes: tuple[str, ...] = ()


def journal_path(gate_dir: Path) -> Path:
    return gate_dir / P.JOURNAL_FILE


def check_usage(action: str, round_index: int, *, step: int | None, text: str, reason: str, checker: dict[str, Any] | None) -> P.ActionSpec:
    """The action's spec; :class:`DecideUsage` for what no gate of any driver accepts."""
    spec = P.spec_of(action)
    if spec is None:
        raise DecideUsage(f"unknown action {action!r}; expected one of {', '.join(P.ACTIONS)}")
    if type(round_index) is not int or round_index < 0:
        raise DecideUsage("--round must be a non-negative integer")
    if step is not None and not spec.step:
        raise DecideUsage("--step is only for relocalize")
    if step is not None and (type(step) is not int or step < 0):
        raise DecideUsage("--step must be a non-negative integer")
    if text and spec.text == "no":
        raise DecideUsage(f"--text is only for {', '.join(a for a in P.ACTIONS if P.SPECS[a].text != 'no')}")
    if spec.text == "required" and not text.strip():
        raise DecideUsage(f"{action} needs --text TEXT (the hint)")
    if spec.reason == "required" and not reason.strip():
        raise DecideUsage(f"{action} needs --reason TEXT (it goes to the journal)")
    if checker and not spec.checker:
        raise DecideUsage(f"--checker is only for {', '.join(a for a in P.ACTIONS if P.SPECS[a].checker)}")
    bad = [k for k, v in (checker or {}).items() if k not in P.CHECK_NAMES or type(v) is not bool]
    if bad:
        raise DecideUsage(f"unknown or non-boolean checker value(s) {', '.join(bad)}; known: {', '.join(P.CHECK_NAMES)}")
    return spec


def decide(
    root: str | os.PathLike[str],
    action: str,
    round_index: int,
    *,
    step: int | None = None,
    text: str = "",
    reason: str = "",
    checker: dict[str, Any] | None = None,
    operator: str | None = None,
    gate_dir: str | os.PathLike[str] | None = None,
    expect_gate_sha256: str | None = None,
) -> DecideResult:
    """Take a decision for the gate of ``round_index`` that offers ``action`` (module
    doc). With ``expect_gate_sha256`` (the app: the card the operator looked at) a gate
    whose content changed since is refused rather than decided unseen."""
    spec = check_usage(action, round_index, step=step, text=text, reason=reason, checker=checker)
    operator = P.operator_identity(operator)
    root_path = Path(os.path.abspath(os.fspath(root)))
    gdir = gate_dir_for(root_path, gate_dir)
    if not gdir.is_dir():
        return DecideResult(False, f"no gate directory {gdir}: no driver was gated for {root_path}")
    status = read_status(root_path, gdir)
    candidates = status.pending_offering(action, round_index)
    if not candidates:
        return nothing_pending(status, action, round_index)
    request = candidates[0]
    what = describe_gate(request)
    if expect_gate_sha256 is not None and request.sha256 != expect_gate_sha256:
        return DecideResult(False, f"the gate for {what} changed since it was shown; look again before deciding")
    refusal = offer_refusal(root_path, request, action, step)
    if refusal:
        return DecideResult(False, refusal)
    path = gdir / P.DECISIONS_DIR / f"{request.name}.json"
    notes: list[str] = []
    if path.exists() or path.is_symlink():
        existing, problem = read_decision(path, request.name)
        if existing is not None:
            return DecideResult(False, refused_already([existing], what), winner=existing)
        note = set_aside(gdir, path, request.name, why="unreadable")
        if note:
            notes.append(note + (f" ({problem})" if problem else ""))
    doc = decision_doc(request, spec, step, text, reason, checker, operator)
    try:
        lost = create_or_lose(root_path, gdir, path, request, doc, what, notes)
    except OSError as exc:
        return DecideResult(False, f"not taken: the decision for {what} cannot be written ({exc.strerror or exc}); nothing was decided",
                            notes=tuple(notes))
    if lost is not None:
        return lost
    return journal_taken(root_path, gdir, doc, request, status, what, notes)


def describe_gate(request: GateRequest) -> str:
    if request.kind == "round":
        return f"round {request.round}"
    return f"the {request.kind} gate of round {request.round} ({request.kind} {request.hint_index})"


def journal_taken(root: Path, gdir: Path, doc: dict[str, Any], request: GateRequest, status: GateStatus, what: str,
                  notes: list[str]) -> DecideResult:
    """Journal a taken decision; the one line says whether it was journaled and whether
    the driver is there to apply it."""
    step = doc.get("step")
    said = f"decided {doc['action']} for {what}" + (f" at step {step}" if step is not None else "") + f" ({doc['operator']})"
    if not status.driver.alive:
        said += "; driver not running: applied when it is resumed under the gate"
    event = None
    try:
        notes.extend(recover_torn_tail(gdir, doc["operator"]))
        event = journal_decision(root, gdir, doc, request)
        reconcile_journal(root, gdir)
    except (JournalError, OSError) as exc:
        said += f"; taken but NOT journaled ({getattr(exc, 'strerror', None) or exc}): the next decide journals it"
    return DecideResult(True, said, decision=doc, journal_event=event, journaled=event is not None, notes=tuple(notes))


def offer_refusal(root: Path, request: GateRequest, action: str, step: int | None) -> str | None:
    """Why the gate's declaration refuses this decision (a step outside the trace), or None."""
    offer = request.offer_of(action) or {}
    if action != P.RELOCALIZE:
        return None
    if step is None:
        return "refused: this relocalize needs --step K: " + str(offer.get("why") or "the driver cannot choose one") if offer.get("step_required") else None
    problem = P.step_range_problem(step, offer)
    steps = offer.get("steps")
    if problem is None and isinstance(steps, list) and steps and step not in steps:
        problem = f"step {step} is not a policy step (the policy acted at steps {', '.join(str(s) for s in steps[:40])})"
    if problem is None and not isinstance(offer.get("step_range"), list):
        count = trace_step_count(root)
        if count is not None and step >= count:
            problem = f"step {step} is outside the source trace (valid steps: 0..{count - 1})"
    return f"refused: {problem}; nothing was decided" if problem else None


def refused_already(decisions: list[GateDecision], what: str) -> str:
    last = decisions[-1]
    return f"{what} was already decided: {last.describe()}" + (f" (reason: {last.reason})" if last.reason else "")


def nothing_pending(status: GateStatus, action: str, round_index: int) -> DecideResult:
    """The refusal when no gate of that round offers the action: who decided it already,
    what the round's pending gates offer instead, or which gate file is damaged."""
    spec = P.spec_of(action)
    kinds = spec.kinds if spec is not None else P.GATE_KINDS
    earlier = [d for d in status.decisions if d.round == round_index and d.action == action and d.kind in kinds]
    # else what decided the gate this action is first offered at (a round gate approved meanwhile)
    earlier = earlier or [d for d in status.decisions if d.round == round_index and d.kind == kinds[0]]
    what = f"round {round_index}"
    if earlier:
        return DecideResult(False, refused_already(earlier, what), winner=earlier[-1])
    here = [p for p in status.pending if p.round == round_index]
    if here:
        offers = "; ".join(f"{describe_gate(p)} offers {', '.join(o['action'] for o in p.offers) or 'nothing'}" for p in here)
        return DecideResult(False, f"nothing pending for {what} offers {action} ({offers})")
    damaged = [name for name in status.damaged if (P.parse_gate_name(name) or (None,))[0] == round_index]
    if damaged:
        alive = "the driver writes it again within a second" if status.driver.alive else "the driver is not running to write it again"
        return DecideResult(False, f"the gate file {damaged[0]}.json of {what} is damaged ({alive}); nothing was decided")
    pending = ", ".join(f"{p.kind} gate of round {p.round}" for p in status.pending) or "nothing"
    return DecideResult(False, f"nothing pending for {what} (pending: {pending})")


def decision_doc(request: GateRequest, spec: P.ActionSpec, step: int | None, text: str, reason: str,
                 checker: dict[str, Any] | None, operator: str) -> dict[str, Any]:
    """The decision file's content (with its digest), bound to the gate it answers."""
    hint = request.hint or {}
    return P.with_digest({
        "schema_version": P.DECISION_SCHEMA, "decision_id": uuid.uuid4().hex, "kind": request.kind, "round": request.round,
        "hint_index": request.hint_index, "action": spec.action, "step": step, "text": text.strip() or None,
        "checker": dict(checker or {}) or None, "reason": (reason or "").strip() or spec.default_reason, "operator": operator,
        "host": socket.gethostname(), "pid": os.getpid(), "at": P.utc_now(), "gate": request.name, "gate_sha256": request.sha256,
        "request_sha256": request.doc.get("request_sha256"), "proposal_id": hint.get("proposal_id"),
        "hint_sha256": hint.get("hint_sha256"),
    })


def set_aside(gate_dir: Path, path: Path, name: str, *, why: str) -> str:
    target = gate_dir / P.CONSUMED_DIR / P.set_aside_name(name, why)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return ""
    return f"an unreadable decision file {path.name} was set aside as {target.name}"


def create_or_lose(root: Path, gdir: Path, path: Path, request: GateRequest, doc: dict[str, Any], what: str,
                   notes: list[str]) -> DecideResult | None:
    """Create the decision file exclusively (one winner). None when ours is the decision;
    else the refusal naming the winner (another decider, or the driver that closed the gate)."""
    if not P.create_exclusive(path, P.document_bytes(doc)):
        winner, problem = read_decision(path, request.name)
        if winner is not None:
            return DecideResult(False, refused_already([winner], what), winner=winner, notes=tuple(notes))
        return DecideResult(False, f"another decision file for {what} appeared and cannot be read: {problem}", notes=tuple(notes))
    if P.sha256_file(request.path) == request.sha256:
        return None
    if any(a.decision_id == doc["decision_id"] for a in read_applied(gdir)):
        return None  # ours, a one-shot decision the driver took at once (it records what it applied before it closes the gate)
    # the driver consumed another decision (a stop) and closed this gate between our
    # look and our create: ours decides nothing; set it aside and name the winner
    set_aside(gdir, path, request.name, why="orphan")
    earlier = [d for d in read_status(root, gdir).decisions if d.name == request.name]
    if earlier:
        return DecideResult(False, refused_already(earlier, what), winner=earlier[-1], notes=tuple(notes))
    return DecideResult(False, f"the gate for {what} closed while deciding", notes=tuple(notes))


# ---------------------------------------------------------------------- the trace a step must be in
def bound_trace_path(root: Path) -> Path | None:
    """The source trace bound in the search identity (``search-state.json``), found by the
    path rules of :mod:`eviscene_tui.artifacts.paths` (a moved tree finds it where it is now)."""
    state = read_bound(root / "search-state.json", verify=False)
    identity = state.identity if isinstance(state.identity, dict) else {}
    inputs = _v if isinstance(_v := identity.get("inputs"), dict) else {}
    trace = _t if isinstance(_t := inputs.get("trace"), dict) else {}
    recorded = trace.get("path")
    if not isinstance(recorded, str):
        return None
    resolver = PathResolver(str(root))
    resolver.add_written(inputs.get("output_dir"), str(root))
    rows = state.payload.get("rounds") if isinstance(state.payload, dict) else None
    for row in rows if isinstance(rows, list) else []:
        directory = row.get("directory") if isinstance(row, dict) else None
        if isinstance(directory, str):
            resolver.add_written(directory, str(root / "rounds" / directory.rstrip("/").rsplit("/", 1)[-1]))
    found = resolver.bound_input(recorded, bases=[root], want="file")
    return Path(found.path) if found.ok and found.path else Path(recorded)


def trace_step_count(root: Path) -> int | None:
    """How many steps the search's source trace has (None when it cannot be read)."""
    path = bound_trace_path(root)
    if path is None:
        return None
    trace, _problems = load_trace(path, lazy=True)
    return trace.step_count if trace is not None else None


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


def recover_torn_tail(gate_dir: Path, operator: str) -> list[str]:
    """A torn journal tail (bytes after the last newline that are no event: a decider
    that crashed or ran out of disk mid-append) is copied aside into ``consumed/`` and
    acknowledged in the chain, so decisions are journaled again. Returns notes."""
    path = journal_path(gate_dir)
    if not path.is_file():
        return []
    journal = _open_journal(gate_dir, operator)
    try:
        torn = journal.torn_tail
        if torn is None:
            return []
        data = P.read_regular(path, limit=P.MAX_JOURNAL_BYTES)[torn.offset : torn.offset + torn.length]
        keep = gate_dir / P.CONSUMED_DIR / f"{P.JOURNAL_FILE}.torn-{torn.offset}-{torn.sha256[:12]}.bin"
        P.create_exclusive(keep, data)
        journal.acknowledge_torn_tail(operator=operator, note=f"torn tail of {torn.length} bytes set aside as consumed/{keep.name}")
        return [f"the gate journal ended with {torn.length} torn bytes; set aside as consumed/{keep.name}"]
    finally:
        journal.close()


def journaled_ids(gate_dir: Path) -> set[str]:
    try:
        data = P.read_regular(journal_path(gate_dir), limit=P.MAX_JOURNAL_BYTES)
    except (OSError, ValueError):
        return set()
    events, _bad = parse_journal_bytes(data)
    return {str(e["data"].get("decision_id")) for e in events if isinstance(e.get("data"), dict) and e["data"].get("decision_id")}


def event_fields(root: Path, gate_dir: Path, doc: dict[str, Any], request: GateRequest | None) -> dict[str, Any]:
    action = str(doc.get("action"))
    spec = P.spec_of(action)
    if spec is None:  # decision files are checked by decision_problem before they get here
        raise JournalError(f"decision {doc.get('decision_id')} has no known action ({action!r})")
    evidence = evidence_for_gate(root, request) if request is not None else {}
    if not evidence and isinstance(doc.get("request_sha256"), str):
        evidence[f"requests/round-{int(doc.get('round') or 0):02d}.json"] = doc["request_sha256"]
    step = doc.get("step") if type(doc.get("step")) is int else None
    data = {
        "source": "gate", "gate_dir": str(gate_dir), "gate": doc.get("gate"), "gate_kind": doc.get("kind"), "gate_action": action,
        "decision_id": doc.get("decision_id"), "decided_at": doc.get("at"), "hint_index": doc.get("hint_index"),
        "proposal_id": doc.get("proposal_id"), "to_step_index": step, "gate_sha256": doc.get("gate_sha256"),
    }
    if doc.get("text"):
        data["text"] = doc["text"]
    if isinstance(doc.get("checker"), dict):
        data["checker"] = doc["checker"]
    return {
        "action": spec.journal,
        "target": {"case": str(root), "round": doc.get("round"), "step_index": step, "hint_sha256": doc.get("hint_sha256"),
                   "attempt_id": None},
        "reason": str(doc.get("reason") or "") or spec.default_reason or action,
        "evidence": evidence,
        "data": data,
        "operator": str(doc.get("operator") or "operator"),
    }


def evidence_for_gate(root: Path, request: GateRequest) -> dict[str, str]:
    """{path relative to the search root: sha256} of what the operator saw."""
    out: dict[str, str] = {}
    req = root / "requests" / f"round-{request.round:02d}.json"
    digest = P.sha256_file(req)
    if digest:
        out[os.path.relpath(req, root)] = digest
    out[os.path.relpath(request.path, root)] = request.sha256
    files = request.doc.get("files")
    if isinstance(files, dict):
        for rel, sha in files.items():
            if isinstance(rel, str) and isinstance(sha, str):
                out[rel] = sha
    return out


def journal_decision(root: Path, gate_dir: Path, doc: dict[str, Any], request: GateRequest | None) -> dict[str, Any]:
    fields = event_fields(root, gate_dir, doc, request)
    journal = _open_journal(gate_dir, fields["operator"])
    try:
        for event in journal.events:
            if isinstance(event.get("data"), dict) and event["data"].get("decision_id") == doc.get("decision_id"):
                return event
        return journal.append(**fields)
    finally:
        journal.close()


def every_decision(gate_dir: Path) -> list[GateDecision]:
    """Every decision file of the sidecar: waiting or applied in ``decisions/``, and the
    one-shot ones the driver consumed."""
    out: list[GateDecision] = []
    for path in sorted_json(gate_dir / P.DECISIONS_DIR):
        decision, _ = read_decision(path, path.name[:-5])
        if decision is not None:
            out.append(decision)
    return out + consumed_decisions(gate_dir)


def unjournaled(gate_dir: Path) -> list[str]:
    """What the sidecar says was decided or applied that the journal lacks (one line each)."""
    have = journaled_ids(gate_dir)
    out = [f"decision {d.decision_id[:12]} ({d.describe()}, {d.path.parent.name}/{d.path.name}) is not in the journal"
           for d in every_decision(gate_dir) if d.decision_id not in have]
    seen = {d.decision_id for d in every_decision(gate_dir)}
    out += [f"the driver applied decision {a.decision_id[:12]} ({a.action} at {a.gate}) that is neither in the journal nor in the sidecar"
            for a in read_applied(gate_dir) if a.decision_id not in have and a.decision_id not in seen]
    return out


def reconcile_journal(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None) -> int:
    """Journal every decision file that has no journal event yet (a decider that
    died or ran out of disk before journaling). Returns how many were added."""
    root_path = Path(os.path.abspath(os.fspath(root)))
    gdir = gate_dir_for(root_path, gate_dir)
    have = journaled_ids(gdir)
    missing = [d for d in every_decision(gdir) if d.decision_id not in have]
    for decision in sorted(missing, key=lambda d: d.at):
        request = gate_request(gdir, decision.name)
        if request is not None and request.sha256 != decision.doc.get("gate_sha256"):
            request = None
        fields = event_fields(root_path, gdir, dict(decision.doc), request)
        fields["data"]["reconciled"] = True
        journal = _open_journal(gdir, fields["operator"])
        try:
            journal.append(**fields)
        finally:
            journal.close()
    return len(missing)
