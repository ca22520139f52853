"""Reading a gate sidecar (``<root>.eviscene-gate/``) from the app's side.

:func:`read_status` never writes, never blocks and never raises for bad content:
unreadable, hand-edited or foreign files (a FIFO, nested JSON, a truncated gate)
become ``problems``. The file protocol (names, digests, declared decisions) is
:mod:`eviscene_tui.gate.protocol`, which the driver speaks too.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.gate import protocol as P


@dataclass(frozen=True)
class DriverStatus:
    present: bool  # a heartbeat file exists
    pid: int | None
    host: str | None
    alive: bool
    last_seen: str | None
    state: str | None  # starting / running / waiting / streaming / exited
    waiting: str | None  # gate name the driver waits on
    exit_code: int | None
    argv: tuple[str, ...] = ()
    age_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "alive": self.alive, "last_seen": self.last_seen, "state": self.state,
                "waiting": self.waiting}

    @property
    def gone(self) -> bool:
        """The driver was gated here, is not alive and did not exit cleanly."""
        return self.present and not self.alive and self.state != "exited"


@dataclass(frozen=True)
class GateRequest:
    """A gate a driver declared (``gates/<name>.json``)."""

    name: str
    kind: P.GateKind
    round: int
    hint_index: int | None  # the hint / attempt index (None for a round gate)
    doc: dict[str, Any]
    path: Path
    sha256: str

    @property
    def feedback(self) -> dict[str, Any]:
        fb = self.doc.get("feedback")
        return fb if isinstance(fb, dict) else {}

    @property
    def offers(self) -> list[dict[str, Any]]:
        """The decisions this gate offers, as the driver declared them."""
        return P.offered(self.doc, self.kind)

    def offer_of(self, action: str) -> dict[str, Any] | None:
        return next((o for o in self.offers if o["action"] == action), None)

    @property
    def streaming(self) -> bool:
        return self.doc.get("phase") == "streaming"

    @property
    def hint(self) -> dict[str, Any] | None:
        """The hint a hint gate (or an attempt gate) is about; None when it has none yet."""
        hint = self.doc.get("hint")
        if self.kind == "round" or not isinstance(hint, dict):
            return None
        out = dict(hint)
        out["hint_index"] = self.hint_index
        out["revision_rejection"] = self.doc.get("revision_rejection")
        return out

    @property
    def attempt(self) -> dict[str, Any] | None:
        value = self.doc.get("attempt")
        return value if self.kind == "attempt" and isinstance(value, dict) else None

    def as_pending(self) -> dict[str, Any]:
        return {"kind": self.kind, "round": self.round, "index": self.hint_index, "name": self.name,
                "actions": [o["action"] for o in self.offers], "offers": self.offers, "streaming": self.streaming,
                "driver": self.doc.get("driver"), "feedback": self.feedback, "hint": self.hint, "attempt": self.attempt}


@dataclass(frozen=True)
class GateDecision:
    name: str
    kind: str
    round: int
    hint_index: int | None
    action: str
    operator: str
    at: str
    reason: str
    step: int | None
    decision_id: str
    consumed: bool  # a one-shot decision the driver took (not replayed)
    doc: dict[str, Any]
    path: Path

    @property
    def text(self) -> str:
        return str(self.doc.get("text") or "")

    @property
    def checker(self) -> dict[str, bool]:
        value = self.doc.get("checker")
        return {k: v for k, v in value.items() if type(v) is bool} if isinstance(value, dict) else {}

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "round": self.round, "index": self.hint_index, "action": self.action, "operator": self.operator,
                "at": self.at, "step": self.step, "reason": self.reason, "text": self.text or None, "decision_id": self.decision_id}

    def describe(self) -> str:
        where = f"round {self.round}" + (f", {self.kind} {self.hint_index}" if self.hint_index is not None else "")
        step = f" at step {self.step}" if self.step is not None else ""
        return f"{self.action}{step} ({where}) by {self.operator} at {self.at}"


@dataclass(frozen=True)
class Applied:
    """What the driver did with a decision (``applied/…``)."""

    gate: str
    decision_id: str
    action: str
    doc: dict[str, Any]


@dataclass(frozen=True)
class GateStatus:
    root: Path
    gate_dir: Path
    exists: bool
    driver: DriverStatus
    pending: tuple[GateRequest, ...]
    decisions: tuple[GateDecision, ...]
    problems: tuple[str, ...]
    session: dict[str, Any] = field(default_factory=dict)
    applied: tuple[Applied, ...] = ()
    damaged: tuple[str, ...] = ()  # gate files that cannot be read (names), each also in problems

    @property
    def awaiting_operator(self) -> bool:
        return bool(self.pending)

    def as_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "driver": self.driver.as_dict(),
            "pending": [p.as_pending() for p in self.pending],
            "decisions": [d.as_dict() for d in self.decisions],
            "problems": list(self.problems),
        }

    def pending_offering(self, action: str, round_index: int) -> list[GateRequest]:
        """The pending gates of ``round_index`` that offer ``action`` (in gate order)."""
        return [p for p in self.pending if p.round == round_index and p.offer_of(action) is not None]


def gate_dir_for(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None) -> Path:
    return Path(gate_dir).absolute() if gate_dir else P.sidecar_for(root)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    # a zombie (killed, not yet reaped) is not alive either
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[-1].split()
        return not (fields and fields[0] == b"Z")
    except OSError:
        return True


def read_driver(gate_dir: Path, problems: list[str], *, now: float | None = None) -> DriverStatus:
    doc, problem = P.read_document(gate_dir / P.HEARTBEAT_FILE)
    if problem:
        problems.append(f"heartbeat: {problem}")
    if doc is None:
        return DriverStatus(False, None, None, False, None, None, None, None)
    pid = doc.get("pid") if type(doc.get("pid")) is int else None
    host = doc.get("host") if isinstance(doc.get("host"), str) else None
    epoch = doc.get("last_seen_epoch")
    now = time.time() if now is None else now
    age = now - float(epoch) if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) else None
    state = doc.get("state") if isinstance(doc.get("state"), str) else None
    alive = state != "exited" and age is not None and age <= P.HEARTBEAT_STALE_SECONDS
    if alive and pid is not None and host == socket.gethostname():
        alive = pid_alive(pid)
    raw_problems = doc.get("problems")
    for p in raw_problems if isinstance(raw_problems, list) else []:
        problems.append(f"driver: {p}")
    raw_argv = doc.get("argv")
    argv = tuple(str(a) for a in raw_argv if isinstance(a, (str, int, float))) if isinstance(raw_argv, list) else ()
    exit_code = doc.get("exit_code") if type(doc.get("exit_code")) is int else None
    waiting = doc.get("waiting") if isinstance(doc.get("waiting"), str) else None
    last_seen = doc.get("last_seen") if isinstance(doc.get("last_seen"), str) else None
    return DriverStatus(True, pid, host, alive, last_seen, state, waiting, exit_code, argv, age)


def decision_from(doc: dict[str, Any], name: str, path: Path, consumed: bool) -> GateDecision:
    hint_index = doc.get("hint_index") if type(doc.get("hint_index")) is int else None
    step = doc.get("step") if type(doc.get("step")) is int else None
    round_index = doc.get("round")
    return GateDecision(
        name=name, kind=str(doc.get("kind")), round=round_index if type(round_index) is int else 0, hint_index=hint_index,
        action=str(doc.get("action")), operator=str(doc.get("operator") or ""), at=str(doc.get("at") or ""),
        reason=str(doc.get("reason") or ""), step=step, decision_id=str(doc.get("decision_id") or ""), consumed=consumed,
        doc=doc, path=path,
    )


def read_decision(path: Path, name: str) -> tuple[GateDecision | None, str | None]:
    """A usable decision, or (None, problem) for an unreadable/edited file, or (None, None)."""
    doc, problem = P.read_document(path)
    if doc is None:
        return None, problem
    problem = P.decision_problem(doc, name)
    if problem:
        return None, problem
    return decision_from(doc, name, path, consumed=False), None


def sorted_json(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.name.endswith(".json") and not p.name.startswith("."))
    except OSError:
        return []


CONSUMED_MARKERS = (".decision-consumed.", ".stop-consumed.")  # the second: files of earlier versions


def consumed_decisions(gate_dir: Path) -> list[GateDecision]:
    """One-shot decisions the driver took (``consumed/<name>.decision-consumed.*.json``)."""
    out = []
    for path in sorted_json(gate_dir / P.CONSUMED_DIR):
        for marker in CONSUMED_MARKERS:
            name, _, rest = path.name.partition(marker)
            if rest:
                doc, _problem = P.read_document(path)
                if doc is not None and P.decision_problem(doc, name) is None:
                    out.append(decision_from(doc, name, path, consumed=True))
                break
    return out


def read_applied(gate_dir: Path) -> list[Applied]:
    out = []
    for path in sorted_json(gate_dir / P.APPLIED_DIR):
        doc, _ = P.read_document(path)
        if doc is not None and isinstance(doc.get("decision_id"), str):
            gate = doc.get("gate") if isinstance(doc.get("gate"), str) else path.name.split(".json")[0]
            out.append(Applied(str(gate), doc["decision_id"], str(doc.get("action") or ""), doc))
    return out


def request_from(path: Path, name: str, problems: list[str] | None = None) -> GateRequest | None:
    """The gate request in ``path`` (None, with a problem, when it is not one)."""
    parsed = P.parse_gate_name(name)
    if parsed is None:
        return None
    try:
        data = P.read_regular(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if problems is not None:
            problems.append(f"gate file {path.name}: cannot read: {getattr(exc, 'strerror', None) or exc}")
        return None
    doc, problem = P.parse_document(data, path.name)
    if doc is None or doc.get("schema_version") != P.REQUEST_SCHEMA:
        if problems is not None:
            problems.append(f"gate file {path.name}: {problem or 'not a gate request'} "
                            "(damaged: a running driver writes it again; a decision waits for that)")
        return None
    round_index, kind, index = parsed
    return GateRequest(name, kind, round_index, index, doc, path, P.sha256_bytes(data))


def read_status(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None) -> GateStatus:
    root_path = Path(os.path.abspath(os.fspath(root)))
    gdir = gate_dir_for(root_path, gate_dir)
    problems: list[str] = []
    session, problem = P.read_document(gdir / P.SESSION_FILE)
    if problem:
        problems.append(f"gate.json: {problem}")
    driver = read_driver(gdir, problems)
    decisions: list[GateDecision] = []
    decided: set[str] = set()
    for path in sorted_json(gdir / P.DECISIONS_DIR):
        name = path.name[:-5]
        if P.parse_gate_name(name) is None:
            continue
        decision, problem = read_decision(path, name)
        if decision is not None:
            decisions.append(decision)
            decided.add(name)
        elif problem:
            problems.append(f"decision file {path.name}: {problem} (the gate keeps waiting; it is set aside)")
    decisions.extend(consumed_decisions(gdir))
    pending: list[GateRequest] = []
    damaged: list[str] = []
    for path in sorted_json(gdir / P.GATES_DIR):
        name = path.name[:-5]
        if P.parse_gate_name(name) is None or name in decided:
            continue
        before = len(problems)
        request = request_from(path, name, problems)
        if request is not None:
            pending.append(request)
        elif len(problems) > before:
            damaged.append(name)
    pending.sort(key=gate_order)
    decisions.sort(key=lambda d: (d.at, d.name))
    return GateStatus(root=root_path, gate_dir=gdir, exists=gdir.is_dir(), driver=driver, pending=tuple(pending),
                      decisions=tuple(decisions), problems=tuple(problems), session=session or {},
                      applied=tuple(read_applied(gdir)), damaged=tuple(damaged))


KIND_ORDER = {"round": 0, "hint": 1, "attempt": 2}


def gate_order(request: GateRequest) -> tuple[int, int, int]:
    return (request.round, KIND_ORDER.get(request.kind, 3), -1 if request.hint_index is None else request.hint_index)


def gate_request(gate_dir: Path, name: str) -> GateRequest | None:
    """The gate file ``name`` whether decided or not (None when absent/unreadable)."""
    return request_from(gate_dir / P.GATES_DIR / f"{name}.json", name)
