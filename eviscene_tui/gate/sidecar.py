"""Reading a gate sidecar (``<root>.eviscene-gate/``) from the app's side.

:func:`read_status` never writes and never raises for bad content: unreadable
or hand-edited files become ``problems``. The file protocol (names, digests)
is the one of :mod:`eviscene_tui.gate.inproc`, which runs in the driver.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.gate import inproc as proto


@dataclass(frozen=True)
class DriverStatus:
    present: bool  # a heartbeat file exists
    pid: int | None
    host: str | None
    alive: bool
    last_seen: str | None
    state: str | None  # starting / running / waiting / exited
    waiting: str | None  # gate name the driver waits on
    exit_code: int | None
    argv: tuple[str, ...] = ()
    age_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "alive": self.alive, "last_seen": self.last_seen}

    @property
    def gone(self) -> bool:
        """The driver was gated here, is not alive and did not exit cleanly."""
        return self.present and not self.alive and self.state != "exited"


@dataclass(frozen=True)
class GateRequest:
    name: str
    kind: str  # round | hint
    round: int
    hint_index: int | None
    doc: dict[str, Any]
    path: Path
    sha256: str

    @property
    def feedback(self) -> dict[str, Any]:
        fb = self.doc.get("feedback")
        return fb if isinstance(fb, dict) else {}

    @property
    def hint(self) -> dict[str, Any] | None:
        if self.kind != "hint":
            return None
        hint = self.doc.get("hint")
        out = dict(hint) if isinstance(hint, dict) else {}
        out["hint_index"] = self.hint_index
        out["revision_rejection"] = self.doc.get("revision_rejection")
        return out

    def as_pending(self) -> dict[str, Any]:
        return {"kind": self.kind, "round": self.round, "feedback": self.feedback, "hint": self.hint}


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
    consumed: bool  # a stop taken by the driver (not replayed)
    doc: dict[str, Any]
    path: Path

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "round": self.round, "action": self.action, "operator": self.operator, "at": self.at}

    def describe(self) -> str:
        what = f"{self.action} (round {self.round}" + (f", hint {self.hint_index}" if self.hint_index is not None else "") + ")"
        return f"{what} by {self.operator} at {self.at}"


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

    def pending_for(self, kind: str, round_index: int) -> list[GateRequest]:
        return [p for p in self.pending if p.kind == kind and p.round == round_index]

    def decisions_for(self, name: str) -> list[GateDecision]:
        return [d for d in self.decisions if d.name == name]


def gate_dir_for(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None) -> Path:
    return Path(gate_dir).absolute() if gate_dir else proto.sidecar_for(root)


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
    doc, problem = proto.read_document(gate_dir / proto.HEARTBEAT_FILE)
    if problem:
        problems.append(f"heartbeat: {problem}")
    if doc is None:
        return DriverStatus(False, None, None, False, None, None, None, None)
    pid = doc.get("pid") if type(doc.get("pid")) is int else None
    host = doc.get("host") if isinstance(doc.get("host"), str) else None
    epoch = doc.get("last_seen_epoch")
    now = time.time() if now is None else now
    age = now - float(epoch) if isinstance(epoch, (int, float)) else None
    state = doc.get("state") if isinstance(doc.get("state"), str) else None
    alive = state != "exited" and age is not None and age <= proto.HEARTBEAT_STALE_SECONDS
    if alive and pid is not None and host == socket.gethostname():
        alive = pid_alive(pid)
    for p in doc.get("problems") or []:
        problems.append(f"driver: {p}")
    argv = tuple(str(a) for a in doc.get("argv") or [] if isinstance(a, (str, int, float)))
    exit_code = doc.get("exit_code") if type(doc.get("exit_code")) is int else None
    waiting = doc.get("waiting") if isinstance(doc.get("waiting"), str) else None
    last_seen = doc.get("last_seen") if isinstance(doc.get("last_seen"), str) else None
    return DriverStatus(True, pid, host, alive, last_seen, state, waiting, exit_code, argv, age)


def _decision_from(doc: dict[str, Any], name: str, path: Path, consumed: bool) -> GateDecision:
    hint_index = doc.get("hint_index") if type(doc.get("hint_index")) is int else None
    step = doc.get("step") if type(doc.get("step")) is int else None
    return GateDecision(
        name=name,
        kind=str(doc.get("kind")),
        round=int(doc.get("round") or 0),
        hint_index=hint_index,
        action=str(doc.get("action")),
        operator=str(doc.get("operator") or ""),
        at=str(doc.get("at") or ""),
        reason=str(doc.get("reason") or ""),
        step=step,
        decision_id=str(doc.get("decision_id") or ""),
        consumed=consumed,
        doc=doc,
        path=path,
    )


def read_decision(path: Path, name: str) -> tuple[GateDecision | None, str | None]:
    """A usable decision, or (None, problem) for an unreadable/edited file, or (None, None)."""
    doc, problem = proto.read_document(path)
    if doc is None:
        return None, problem
    problem = proto.decision_problem(doc, name)
    if problem:
        return None, problem
    return _decision_from(doc, name, path, consumed=False), None


def _sorted_json(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except OSError:
        return []


def consumed_decisions(gate_dir: Path) -> list[GateDecision]:
    """Stop decisions the driver took (``consumed/<name>.stop-consumed.*.json``)."""
    out = []
    for path in _sorted_json(gate_dir / proto.CONSUMED_DIR):
        name, _, rest = path.name.partition(".stop-consumed.")
        if not rest:
            continue
        doc, _problem = proto.read_document(path)
        if doc is not None and proto.decision_problem(doc, name) is None:
            out.append(_decision_from(doc, name, path, consumed=True))
    return out


def read_status(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None) -> GateStatus:
    root_path = Path(os.path.abspath(os.fspath(root)))
    gdir = gate_dir_for(root_path, gate_dir)
    problems: list[str] = []
    session, problem = proto.read_document(gdir / proto.SESSION_FILE)
    if problem:
        problems.append(f"gate.json: {problem}")
    driver = read_driver(gdir, problems)
    decisions: list[GateDecision] = []
    decided: set[str] = set()
    for path in _sorted_json(gdir / proto.DECISIONS_DIR):
        name = path.name[:-5]
        if proto.parse_gate_name(name) is None:
            continue
        decision, problem = read_decision(path, name)
        if decision is not None:
            decisions.append(decision)
            decided.add(name)
        elif problem:
            problems.append(f"decision file {path.name}: {problem} (the gate keeps waiting; `decide` sets it aside)")
    decisions.extend(consumed_decisions(gdir))
    pending: list[GateRequest] = []
    for path in _sorted_json(gdir / proto.GATES_DIR):
        name = path.name[:-5]
        parsed = proto.parse_gate_name(name)
        if parsed is None or name in decided:
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            problems.append(f"gate file {path.name}: cannot read: {exc.strerror}")
            continue
        doc, problem = proto.read_document(path)
        if doc is None or doc.get("schema_version") != proto.REQUEST_SCHEMA:
            problems.append(f"gate file {path.name}: {problem or 'not a gate request'}")
            continue
        round_index, hint_index = parsed
        pending.append(
            GateRequest(name, "round" if hint_index is None else "hint", round_index, hint_index, doc, path, proto.sha256_bytes(data))
        )
    pending.sort(key=lambda p: (p.round, -1 if p.hint_index is None else p.hint_index))
    decisions.sort(key=lambda d: (d.at, d.name))
    return GateStatus(
        root=root_path,
        gate_dir=gdir,
        exists=gdir.is_dir(),
        driver=driver,
        pending=tuple(pending),
        decisions=tuple(decisions),
        problems=tuple(problems),
        session=session or {},
    )


def gate_request(gate_dir: Path, name: str) -> GateRequest | None:
    """The gate file ``name`` whether decided or not (None when absent/unreadable)."""
    path = gate_dir / proto.GATES_DIR / f"{name}.json"
    parsed = proto.parse_gate_name(name)
    if parsed is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    doc, _ = proto.read_document(path)
    if doc is None:
        return None
    round_index, hint_index = parsed
    return GateRequest(name, "round" if hint_index is None else "hint", round_index, hint_index, doc, path, proto.sha256_bytes(data))
