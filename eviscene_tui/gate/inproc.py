"""The operator gate, the part that runs INSIDE the EviScene driver's process.

Started by path, in the driver's own interpreter (any Python >= 3.10, this app
not installed there), so it imports only the standard library::

    PY /…/eviscene_tui/gate/inproc.py [--gate-dir DIR] [--operator NAME] [--no-hint-gate] -- DRIVER.py ARGS…

What it does:

1. refuses ``--search-mode`` other than ``feedback`` (no rounds to gate);
2. installs an import hook (a ``sys.meta_path`` finder wrapping the real
   loader). When the driver imports ``eviscene_training.psd_repair_search`` (or
   upstream's ``ifv_training.…``, or the module under any other package path, so
   no import route runs the search ungated) the hook checks and wraps ``run_search`` (its
   ``execute_round`` keyword); for ``…psd_repair_runtime`` it wraps
   ``QwenContinuationAdapter.propose_hints``. A module without the seam fails
   to import, with a message naming what is missing;
3. runs the driver as ``__main__`` (``runpy.run_path``) with its argv; the exit
   code and stdout/stderr are the driver's. A driver that never entered
   ``run_search`` exits non-zero: nothing was gated.

The gate's files live in a sidecar directory beside the search root, never in
it (default ``<root>.eviscene-gate/``)::

    gate.json                       this invocation (root, argv, pid, host, options)
    heartbeat.json                  pid, host, argv, last_seen, state, waiting, problems (every 0.5 s)
    gates/round-NN.json             a round gate (driver feedback, history summary)
    gates/round-NN.hint-KK.json     a hint gate (hint, audit, the driver's revision_rejection)
    decisions/<gate name>.json      the decision for a gate, created exclusively (one winner)
    consumed/…                      stop decisions taken (not replayed) and their closed gates,
                                    decisions set aside (for another gate, or unreadable)
    applied/<gate name>.json        what the gate did with a decision (effective feedback sha)
    decisions.jsonl                 the app's hash-chained journal (written by the deciders)

The wait is a poll of the decision file (``EVISCENE_GATE_POLL`` seconds,
default 0.2), so a decider on another host sharing the filesystem works.
Inside the search root the gate writes only the operator's rejection row into
the round's ``proposer-hint-audits.json``, the driver's own file, before the
driver appends its rows. It never takes ``search.lock``.

The app side (``eviscene_tui.gate``) imports this module for the file protocol
(names, digests, the relocalize rule), so both sides share one definition.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import hashlib
import importlib.abc
import importlib.machinery
import inspect
import json
import os
import runpy
import secrets
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GATE_SCHEMA = "eviscene-tui-gate-v1"
REQUEST_SCHEMA = "eviscene-tui-gate-request-v1"
DECISION_SCHEMA = "eviscene-tui-gate-decision-v1"
HEARTBEAT_SCHEMA = "eviscene-tui-gate-heartbeat-v1"

SIDECAR_SUFFIX = ".eviscene-gate"
GATES_DIR = "gates"
DECISIONS_DIR = "decisions"
CONSUMED_DIR = "consumed"
APPLIED_DIR = "applied"
HEARTBEAT_FILE = "heartbeat.json"
SESSION_FILE = "gate.json"
JOURNAL_FILE = "decisions.jsonl"

ROUND_ACTIONS = ("approve-round", "relocalize", "stop")
HINT_ACTIONS = ("approve-hint", "reject-hint")
OPERATOR_REJECTED = "operator_rejected"

PACKAGES = ("eviscene_training", "ifv_training")
SEARCH_MODULE = "psd_repair_search"
RUNTIME_MODULE = "psd_repair_runtime"

HEARTBEAT_SECONDS = 0.5
# A heartbeat older than this (seconds) means the driver is gone, also across hosts.
HEARTBEAT_STALE_SECONDS = 5.0


def poll_seconds() -> float:
    try:
        value = float(os.environ.get("EVISCENE_GATE_POLL", "0.2"))
    except ValueError:
        value = 0.2
    return min(max(value, 0.01), 1.0)


class OperatorStoppedSearch(Exception):
    """The operator stopped the search at a round gate (persisted by the driver as
    ``paused_execution_error`` with this type)."""


class GateSeamMissing(ImportError):
    """A driver module lacks the seam the gate attaches to."""


class GateError(RuntimeError):
    """The gate cannot gate this driver safely (it refuses rather than run ungated)."""


# ---------------------------------------------------------------------- file protocol
def canonical_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str | None:
    try:
        with open(path, "rb") as handle:
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
            return digest.hexdigest()
    except OSError:
        return None


def document_bytes(doc: dict[str, Any]) -> bytes:
    """How every gate file is written: canonical JSON plus a newline."""
    return canonical_bytes(doc) + b"\n"


def with_digest(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` plus ``digest`` = sha256 of its canonical JSON without ``digest``
    (so a hand-edited decision is detected)."""
    body = {k: v for k, v in doc.items() if k != "digest"}
    return {**body, "digest": sha256_bytes(canonical_bytes(body))}


def digest_ok(doc: dict[str, Any]) -> bool:
    body = {k: v for k, v in doc.items() if k != "digest"}
    return doc.get("digest") == sha256_bytes(canonical_bytes(body))


def utc_now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def sidecar_for(root: str | os.PathLike[str]) -> Path:
    """``<root>.eviscene-gate`` beside the search root."""
    r = Path(os.path.abspath(os.fspath(root)))
    return r.parent / (r.name + SIDECAR_SUFFIX)


def gate_name(round_index: int, hint_index: int | None = None) -> str:
    name = f"round-{round_index:02d}"
    return name if hint_index is None else f"{name}.hint-{hint_index:02d}"


def parse_gate_name(name: str) -> tuple[int, int | None] | None:
    """``round-03`` -> (3, None); ``round-03.hint-01`` -> (3, 1); else None."""
    stem = name[:-5] if name.endswith(".json") else name
    head, _, tail = stem.partition(".")
    if not head.startswith("round-") or not head[6:].isdigit():
        return None
    if not tail:
        return int(head[6:]), None
    if tail.startswith("hint-") and tail[5:].isdigit():
        return int(head[6:]), int(tail[5:])
    return None


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_tmp(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def atomic_replace(path: str | os.PathLike[str], data: bytes) -> None:
    """tmp + fsync + rename (state files: heartbeat, gate files)."""
    p = Path(path)
    tmp = _write_tmp(p, data)
    os.replace(tmp, p)
    _fsync_dir(p.parent)


def create_exclusive(path: str | os.PathLike[str], data: bytes) -> bool:
    """Atomically create ``path`` with ``data`` (tmp + fsync + ``link``): True when
    this call created it, False when it already existed. Of two racing callers
    exactly one gets True; the file never exists half-written."""
    p = Path(path)
    tmp = _write_tmp(p, data)
    try:
        os.link(tmp, p)
    except FileExistsError:
        return False
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    _fsync_dir(p.parent)
    return True


def read_document(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None), or (None, None) when the file does not exist, or (None, problem)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"{Path(path).name} is not valid JSON ({len(data)} bytes; truncated or hand-edited?): {exc}"
    if not isinstance(value, dict):
        return None, f"{Path(path).name} is not a JSON object"
    return value, None


def decision_problem(doc: dict[str, Any], name: str) -> str | None:
    """Why a decision document is not usable for the gate ``name``, or None."""
    parsed = parse_gate_name(name)
    if doc.get("schema_version") != DECISION_SCHEMA:
        return f"decision {name}: schema_version is not {DECISION_SCHEMA}"
    if not digest_ok(doc):
        return f"decision {name}: its digest does not match its content (hand-edited?)"
    if parsed is None:
        return f"decision {name}: not a gate name"
    round_index, hint_index = parsed
    kind = "round" if hint_index is None else "hint"
    if doc.get("kind") != kind or doc.get("round") != round_index or doc.get("hint_index") != hint_index:
        return f"decision {name}: its kind/round/hint_index do not name this gate"
    allowed = ROUND_ACTIONS if kind == "round" else HINT_ACTIONS
    if doc.get("action") not in allowed:
        return f"decision {name}: action {doc.get('action')!r} is not one of {', '.join(allowed)}"
    step = doc.get("step")
    if step is not None and (type(step) is not int or step < 0 or doc.get("action") != "relocalize"):
        return f"decision {name}: step must be a non-negative integer, and only for relocalize"
    return None


def current_site(history: Any, feedback: Any) -> int | None:
    """The failure site the search is at: the latest round's localized candidate
    (``repair_site.source_step_index``), else the driver's anchor."""
    rows = history if isinstance(history, list) else []
    for row in reversed(rows):
        if not isinstance(row, dict):
            continue
        for candidate in reversed(row.get("candidates") or []):
            site = candidate.get("repair_site") if isinstance(candidate, dict) else None
            step = site.get("source_step_index") if isinstance(site, dict) else None
            if type(step) is int:
                return step
        for record in reversed(row.get("records") or []):
            site = record.get("repair_site") if isinstance(record, dict) else None
            step = site.get("source_step_index") if isinstance(site, dict) else None
            if type(step) is int:
                return step
    anchor = feedback.get("anchor_feedback") if isinstance(feedback, dict) else None
    step = anchor.get("selected_source_step") if isinstance(anchor, dict) else None
    return step if type(step) is int else None


def effective_feedback(feedback: dict[str, Any], action: str, step: int | None, site: int | None) -> dict[str, Any]:
    """The feedback object the round runs with after a round decision.

    approve: the driver's, unchanged. relocalize: ``needs_relocalization: true``
    and ``anchor_feedback`` naming the current site (``selected_source_step``,
    ``earliest_error_step: K`` when given, and ``checker.anchor_matches: false``,
    the operator's disagreement) -- what the driver's localizer reads.
    """
    if action != "relocalize":
        return feedback
    out = copy.deepcopy(feedback)
    out["needs_relocalization"] = True
    anchor: dict[str, Any] = {"selected_source_step": site, "checker": {"anchor_matches": False}}
    if step is not None:
        anchor["earliest_error_step"] = step
    out["anchor_feedback"] = anchor
    return out


def history_summary(history: Any) -> list[dict[str, Any]]:
    """Each earlier round: its status, rejected proposal reasons, and each attempt's
    hint, site, checker values and verdict (from the rows' public ``feedback``)."""
    out: list[dict[str, Any]] = []
    for index, row in enumerate(history if isinstance(history, list) else []):
        fb = row.get("feedback") if isinstance(row, dict) else None
        fb = fb if isinstance(fb, dict) else {}
        attempts = []
        for attempt in fb.get("attempts") or []:
            if not isinstance(attempt, dict):
                continue
            checker = _v if isinstance(_v := attempt.get("checker"), dict) else {}
            attempts.append(
                {
                    "hint": str(attempt.get("hint") or ""),
                    "selected_source_step": attempt.get("selected_source_step"),
                    "earliest_error_step": attempt.get("earliest_error_step"),
                    "checker": {k: v for k, v in checker.items() if type(v) is bool},
                    "task_passed": attempt.get("task_passed") is True,
                    "accepted": attempt.get("accepted") is True,
                    "verdict": "accepted" if attempt.get("accepted") is True else "not accepted",
                }
            )
        out.append(
            {
                "round": index,
                "directory": str(row.get("directory") or "") if isinstance(row, dict) else "",
                "status": str(fb.get("status") or ""),
                "rejected_proposal_reasons": [str(r) for r in fb.get("rejected_proposal_reasons") or []],
                "attempts": attempts,
            }
        )
    return out


def search_mode_of(argv: list[str]) -> str:
    """The driver's ``--search-mode`` (argparse forms: ``--search-mode X``,
    ``--search-mode=X``, unique prefixes ``--search-mo…``); default ``feedback``."""
    mode = "feedback"
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            break
        key, eq, value = token.partition("=")
        if len(key) >= len("--search-mo") and "--search-mode".startswith(key):
            if eq:
                mode = value
            elif i + 1 < len(argv):
                mode = argv[i + 1]
                i += 1
        i += 1
    return mode


def output_dir_of(argv: list[str]) -> str | None:
    out = None
    for i, token in enumerate(argv):
        key, eq, value = token.partition("=")
        if len(key) >= len("--ou") and "--output-dir".startswith(key):
            out = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return out


# ---------------------------------------------------------------------- the gate
_ROUND: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("eviscene_gate_round", default=None)


class SearchGate:
    """The gate of one search root (its sidecar, heartbeat and waits). A driver
    process may run several searches (a multi-case wrapper): one each."""

    def __init__(self, gate: "Gate", root: Path, gate_dir: Path) -> None:
        self.gate = gate
        self.root = root
        self.gate_dir = gate_dir
        self.state = "starting"
        self.waiting: str | None = None
        self.problems: dict[str, str] = {}
        self.exit_code: int | None = None
        self._lock = threading.Lock()
        # one heartbeat write at a time, so an older state never lands after a newer one
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ heartbeat
    def heartbeat_doc(self) -> dict[str, Any]:
        with self._lock:
            return {
                "schema_version": HEARTBEAT_SCHEMA,
                "pid": os.getpid(),
                "host": self.gate.host,
                "argv": self.gate.argv,
                "python": sys.executable,
                "root": str(self.root),
                "started_at": self.gate.started_at,
                "last_seen": utc_now(),
                "last_seen_epoch": time.time(),
                "state": self.state,
                "waiting": self.waiting,
                "problems": sorted(self.problems.values()),
                "exit_code": self.exit_code,
            }

    def beat(self) -> None:
        try:
            with self._write_lock:
                atomic_replace(self.gate_dir / HEARTBEAT_FILE, document_bytes(self.heartbeat_doc()))
        except OSError as exc:  # a full or vanished disk must not kill the driver's search
            sys.stderr.write(f"eviscene-tui gate: cannot write the heartbeat: {exc}\n")

    def _beat_loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            self.beat()

    def set_state(self, state: str, waiting: str | None = None) -> None:
        with self._lock:
            self.state, self.waiting = state, waiting
        self.beat()

    def finish(self, exit_code: int | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self.state, self.waiting, self.exit_code = "exited", None, exit_code
        self.beat()

    def start(self) -> None:
        for sub in (GATES_DIR, DECISIONS_DIR, CONSUMED_DIR, APPLIED_DIR):
            (self.gate_dir / sub).mkdir(parents=True, exist_ok=True)
        g = self.gate
        session = {
            "schema_version": GATE_SCHEMA,
            "root": str(self.root),
            "gate_dir": str(self.gate_dir),
            "argv": g.argv,
            "pid": os.getpid(),
            "host": g.host,
            "python": sys.executable,
            "started_at": g.started_at,
            "started_by": g.operator,
            "hint_gate": g.hint_gate_enabled,
            "search_module": getattr(g.search_module, "__name__", None),
            "poll_seconds": poll_seconds(),
        }
        atomic_replace(self.gate_dir / SESSION_FILE, document_bytes(session))
        self.set_state("running")
        self._thread = threading.Thread(target=self._beat_loop, name="eviscene-gate-heartbeat", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ waiting
    def _publish(self, name: str, doc: dict[str, Any]) -> bytes:
        data = document_bytes(doc)
        path = self.gate_dir / GATES_DIR / f"{name}.json"
        try:
            same = path.read_bytes() == data
        except OSError:
            same = False
        if not same:
            atomic_replace(path, data)
        return data

    def _set_aside(self, path: Path, name: str, why: str) -> None:
        target = self.gate_dir / CONSUMED_DIR / f"{name}.{why}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.{secrets.token_hex(3)}.json"
        try:
            os.replace(path, target)
        except FileNotFoundError:
            pass

    async def wait_for(self, name: str, gate_bytes: bytes) -> dict[str, Any]:
        """Poll ``decisions/<name>.json`` until a usable decision is there.

        A decision taken for another gate content (``gate_sha256`` differs: the
        gate was re-opened with other content on resume) is set aside and the gate
        waits for a new one. An unreadable or hand-edited file is reported in the
        heartbeat's ``problems`` and the gate keeps waiting.
        """
        path = self.gate_dir / DECISIONS_DIR / f"{name}.json"
        gate_sha = sha256_bytes(gate_bytes)
        self.set_state("waiting", name)
        interval = poll_seconds()
        try:
            while True:
                doc = self._usable_decision(path, name, gate_sha)
                if doc is not None:
                    return doc
                await asyncio.sleep(interval)
        finally:
            self.set_state("running")

    def _usable_decision(self, path: Path, name: str, gate_sha: str) -> dict[str, Any] | None:
        """The decision in ``path`` when it is usable for this gate content, else None
        (a problem with the file is noted for the heartbeat; one for another gate
        content is set aside)."""
        doc, problem = read_document(path)
        if doc is not None:
            problem = decision_problem(doc, name)
            if problem is None and doc.get("gate_sha256") != gate_sha:
                self._set_aside(path, name, "other-gate")
                doc = None
        with self._lock:
            if problem is None and doc is not None:
                self.problems.pop(name, None)
                return doc
            if problem:
                self.problems[name] = problem
            else:
                self.problems.pop(name, None)
        return None

    def _applied(self, name: str, decision: dict[str, Any], extra: dict[str, Any]) -> None:
        doc = {
            "decision_id": decision.get("decision_id"),
            "action": decision.get("action"),
            "applied_at": utc_now(),
            "pid": os.getpid(),
            **extra,
        }
        atomic_replace(self.gate_dir / APPLIED_DIR / f"{name}.json", document_bytes(doc))

    # ------------------------------------------------------------ round gate
    async def round_gate(self, directory: Any, feedback: Any, history: Any) -> dict[str, Any]:
        directory = Path(os.fspath(directory))
        try:
            round_index = int(directory.name.split("-", 1)[1])
        except (IndexError, ValueError):
            raise GateError(f"execute_round was given {directory}, not a rounds/round-NN directory") from None
        request = self.root / "requests" / f"round-{round_index:02d}.json"
        site = current_site(history, feedback)
        doc = {
            "schema_version": REQUEST_SCHEMA,
            "kind": "round",
            "round": round_index,
            "hint_index": None,
            "root": str(self.root),
            "round_directory": str(directory),
            "request_file": f"requests/round-{round_index:02d}.json",
            "request_sha256": sha256_file(request),
            "feedback": feedback,
            "current_site": site,
            "history": history_summary(history),
        }
        name = gate_name(round_index)
        data = self._publish(name, doc)
        decision = await self.wait_for(name, data)
        action = decision["action"]
        if action == "stop":
            # consumed, not replayed: the gate and then its decision move to consumed/,
            # so a resume asks again for this round. Gate first: a decider that finds
            # the decision slot free always finds the gate closed too (see decide.py)
            self._set_aside(self.gate_dir / GATES_DIR / f"{name}.json", name, "gate-closed")
            self._set_aside(self.gate_dir / DECISIONS_DIR / f"{name}.json", name, "stop-consumed")
            raise OperatorStoppedSearch(
                f"operator {decision.get('operator')} stopped the search before round {round_index}"
                + (f": {decision.get('reason')}" if decision.get("reason") else "")
            )
        effective = effective_feedback(feedback, action, decision.get("step"), site)
        self._applied(name, decision, {"feedback_sha256": sha256_bytes(canonical_bytes(effective))})
        return {"round": round_index, "directory": directory, "feedback": effective, "search": self}

    # ------------------------------------------------------------ hint gate
    async def hint_gate(self, ctx: dict[str, Any], adapter: Any, proposals: list[Any]) -> list[Any]:
        round_index, directory, feedback = ctx["round"], ctx["directory"], ctx["feedback"]
        cache = getattr(adapter, "proposer_cache_path", None)
        output_dir = Path(os.fspath(cache)).parent if cache else directory
        rejection = getattr(self.gate.search_module, "revision_rejection", None)
        kept = []
        for index, hint in enumerate(proposals):
            text = str(getattr(hint, "text", "") or "")
            audit = getattr(hint, "audit", None)
            rule = None
            if callable(rejection):
                try:
                    rule = str(rejection(text, feedback) or "")
                except Exception as exc:  # noqa: BLE001 - the driver's own rule failing is shown, not hidden
                    rule = f"revision_rejection raised {type(exc).__name__}"
            files = {}
            for rel in ("proposer-response.json",):
                digest = sha256_file(output_dir / rel)
                if digest:
                    files[os.path.relpath(output_dir / rel, self.root)] = digest
            doc = {
                "schema_version": REQUEST_SCHEMA,
                "kind": "hint",
                "round": round_index,
                "hint_index": index,
                "root": str(self.root),
                "round_directory": str(output_dir),
                "request_file": f"requests/round-{round_index:02d}.json",
                "request_sha256": sha256_file(self.root / "requests" / f"round-{round_index:02d}.json"),
                "feedback": feedback,
                "hint": {
                    "text": text,
                    "level": getattr(hint, "level", None),
                    "proposal_id": getattr(hint, "proposal_id", None),
                    "provider": getattr(hint, "provider", None),
                    "model": getattr(hint, "model", None),
                    "audit": dict(audit) if isinstance(audit, Mapping) else audit,
                    "hint_sha256": sha256_bytes(text.strip().encode("utf-8")),
                },
                "revision_rejection": rule,
                "files": files,
            }
            name = gate_name(round_index, index)
            data = self._publish(name, doc)
            decision = await self.wait_for(name, data)
            if decision["action"] == "approve-hint":
                kept.append(hint)
                self._applied(name, decision, {})
                continue
            self._write_rejection(output_dir, name, decision)
        return kept

    def _write_rejection(self, output_dir: Path, name: str, decision: dict[str, Any]) -> None:
        """Append ``{"passed": false, "reason": "operator_rejected"}`` to the round's
        ``proposer-hint-audits.json`` (written as the driver writes its JSON), once
        per decision even when the round is re-entered on resume."""
        path = output_dir / "proposer-hint-audits.json"
        existing, problem = read_document(path)
        if problem:
            raise GateError(f"cannot add the operator's rejection: {problem}")
        rows = list((existing or {}).get("proposals") or [])
        applied, _ = read_document(self.gate_dir / APPLIED_DIR / f"{name}.json")
        if (
            applied
            and applied.get("decision_id") == decision.get("decision_id")
            and isinstance(applied.get("audit_row_index"), int)
            and applied["audit_row_index"] < len(rows)
            and rows[applied["audit_row_index"]] == {"passed": False, "reason": OPERATOR_REJECTED}
        ):
            return  # this decision's row is already in the file
        position = len(rows)
        rows.append({"passed": False, "reason": OPERATOR_REJECTED})
        output_dir.mkdir(parents=True, exist_ok=True)
        writer = self._driver_write_json()
        if writer is not None:
            writer(path, {**(existing or {}), "proposals": rows})
        else:
            path.write_text(json.dumps({**(existing or {}), "proposals": rows}, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        self._applied(name, decision, {"audit_row_index": position, "audit_file": str(path)})

    def _driver_write_json(self) -> Any:
        package = getattr(self.gate.search_module, "__name__", "").rpartition(".")[0]
        module = sys.modules.get(f"{package}.io") if package else None
        writer = getattr(module, "write_json", None)
        return writer if callable(writer) else None

class Gate:
    """The gate in this driver process: the import-hook wrappers and one
    :class:`SearchGate` per search root the driver enters."""

    def __init__(self, *, gate_dir: str | None, operator: str, hint_gate: bool, argv: list[str]) -> None:
        self.requested_dir = Path(gate_dir).absolute() if gate_dir else None
        self.operator = operator
        self.hint_gate_enabled = hint_gate
        self.argv = list(argv)
        self.search_module: Any = None
        self.runtime_patched = False
        self.started_at = utc_now()
        self.host = socket.gethostname()
        self.searches: dict[Path, SearchGate] = {}

    @property
    def entered(self) -> bool:
        return bool(self.searches)

    def enter_search(self, root: Any) -> SearchGate:
        if root is None:
            raise GateError("run_search was called without root=; the gate cannot find the search root")
        root_path = Path(os.path.abspath(os.fspath(root)))
        if self.hint_gate_enabled and not self.runtime_patched:
            raise GateError(
                "the driver entered run_search but never imported "
                + " or ".join(f"{p}.{RUNTIME_MODULE}" for p in PACKAGES)
                + ", so QwenContinuationAdapter.propose_hints could not be gated (use --no-hint-gate to gate rounds only)"
            )
        if root_path in self.searches:
            return self.searches[root_path]
        if self.requested_dir is not None and self.searches:
            raise GateError("--gate-dir names one sidecar but this driver runs several searches; omit --gate-dir")
        gate_dir = self.requested_dir or sidecar_for(root_path)
        if gate_dir == root_path or root_path in gate_dir.parents:
            raise GateError(f"the gate directory {gate_dir} is inside the search root {root_path}; it must be beside it")
        search = SearchGate(self, root_path, gate_dir)
        search.start()
        self.searches[root_path] = search
        return search

    def finish(self, exit_code: int | None) -> None:
        for search in self.searches.values():
            search.finish(exit_code)

    async def hint_gate(self, adapter: Any, proposals: Any) -> Any:
        ctx = _ROUND.get()
        if ctx is None:
            raise GateError("propose_hints was called outside a gated round; refusing to continue ungated")
        if not isinstance(proposals, list):
            raise GateError(f"propose_hints returned {type(proposals).__name__}, not a list; cannot gate its hints")
        return await ctx["search"].hint_gate(ctx, adapter, proposals)

    # ------------------------------------------------------------ wrapping
    def wrap_search(self, module: Any) -> None:
        run_search = getattr(module, "run_search", None)
        if run_search is None or not callable(run_search):
            raise GateSeamMissing(f"eviscene-tui gate: {module.__name__} has no run_search; the gate cannot attach")
        if getattr(run_search, "__eviscene_gate__", False):
            return
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(run_search).parameters
        except (TypeError, ValueError):
            params = {}
        if "execute_round" not in params:
            raise GateSeamMissing(
                f"eviscene-tui gate: {module.__name__}.run_search has no execute_round keyword; the gate cannot attach"
            )
        if not inspect.iscoroutinefunction(run_search):
            raise GateSeamMissing(f"eviscene-tui gate: {module.__name__}.run_search is not an async function; the gate cannot attach")
        self.search_module = module
        gate = self

        @functools.wraps(run_search)
        async def gated_run_search(*args: Any, **kwargs: Any) -> Any:
            bound = inspect.signature(run_search).bind_partial(*args, **kwargs)
            execute_round = bound.arguments.get("execute_round")
            if execute_round is None or not callable(execute_round):
                raise GateError("run_search was called without execute_round; nothing to gate")
            search = gate.enter_search(bound.arguments.get("root"))

            async def gated_execute_round(directory: Any, feedback: Any, history: Any, *rest: Any, **kw: Any) -> Any:
                ctx = await search.round_gate(directory, feedback, history)
                token = _ROUND.set(ctx)
                try:
                    return await execute_round(directory, ctx["feedback"], history, *rest, **kw)
                finally:
                    _ROUND.reset(token)

            bound.arguments["execute_round"] = gated_execute_round
            return await run_search(*bound.args, **bound.kwargs)

        gated_run_search.__eviscene_gate__ = True  # type: ignore[attr-defined]  # a marker attribute on the wrapper
        module.run_search = gated_run_search

    def wrap_runtime(self, module: Any) -> None:
        cls = getattr(module, "QwenContinuationAdapter", None)
        if cls is None:
            raise GateSeamMissing(f"eviscene-tui gate: {module.__name__} has no QwenContinuationAdapter; the hint gate cannot attach")
        propose = getattr(cls, "propose_hints", None)
        if propose is None or not callable(propose):
            raise GateSeamMissing(
                f"eviscene-tui gate: {module.__name__}.QwenContinuationAdapter has no propose_hints; the hint gate cannot attach"
            )
        if getattr(propose, "__eviscene_gate__", False):
            self.runtime_patched = True
            return
        gate = self

        @functools.wraps(propose)
        async def gated_propose_hints(adapter: Any, *args: Any, **kwargs: Any) -> Any:
            result = propose(adapter, *args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return await gate.hint_gate(adapter, result)

        gated_propose_hints.__eviscene_gate__ = True  # type: ignore[attr-defined]  # a marker attribute on the wrapper
        cls.propose_hints = gated_propose_hints
        self.runtime_patched = True

    def attach(self, fullname: str, module: Any) -> None:
        tail = fullname.rpartition(".")[2]
        if tail == SEARCH_MODULE:
            self.wrap_search(module)
        elif tail == RUNTIME_MODULE and self.hint_gate_enabled:
            self.wrap_runtime(module)


TARGETS = tuple(f"{p}.{m}" for p in PACKAGES for m in (SEARCH_MODULE, RUNTIME_MODULE))


def is_target(fullname: str) -> bool:
    """The search and runtime modules under any package path (``eviscene_training.…``,
    ``ifv_training.…``, or e.g. ``training.ifv_training.…``), so no import route leaves
    the search ungated."""
    return fullname.rpartition(".")[2] in (SEARCH_MODULE, RUNTIME_MODULE)


class _GatedLoader(importlib.abc.Loader):
    """Runs the real loader, then attaches the gate (or fails the import)."""

    def __init__(self, gate: Gate, inner: Any) -> None:
        self.gate = gate
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec) if hasattr(self.inner, "create_module") else None

    def __getattr__(self, name: str) -> Any:  # get_data, get_resource_reader, … of the real loader
        return getattr(self.inner, name)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        try:
            self.gate.attach(module.__name__, module)
        except GateSeamMissing:
            sys.modules.pop(module.__name__, None)
            raise


class GateFinder(importlib.abc.MetaPathFinder):
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not is_target(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    raise GateSeamMissing(f"eviscene-tui gate: cannot wrap the loader of {fullname}")
                spec.loader = _GatedLoader(self.gate, spec.loader)
                return spec
        return None


def install(gate: Gate) -> GateFinder:
    finder = GateFinder(gate)
    sys.meta_path.insert(0, finder)
    for name, module in list(sys.modules.items()):  # imported before the hook (e.g. by sitecustomize)
        if is_target(name) and module is not None:
            gate.attach(name, module)
    return finder


# ---------------------------------------------------------------------- entry point
USAGE = "usage: inproc.py [--gate-dir DIR] [--operator NAME] [--no-hint-gate] -- DRIVER.py [DRIVER-ARGS...]"


def _parse(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    opts: dict[str, Any] = {"gate_dir": None, "operator": os.environ.get("USER") or "operator", "hint_gate": True}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return opts, argv[i + 1 :]
        if token in ("--gate-dir", "--operator") and i + 1 < len(argv):
            opts[token[2:].replace("-", "_")] = argv[i + 1]
            i += 2
            continue
        if token == "--no-hint-gate":
            opts["hint_gate"] = False
            i += 1
            continue
        raise SystemExit(f"eviscene-tui gate: unexpected argument {token!r}\n{USAGE}")
    raise SystemExit(f"eviscene-tui gate: missing '--' before the driver script\n{USAGE}")


def main(argv: list[str] | None = None) -> None:
    opts, driver = _parse(list(sys.argv[1:] if argv is None else argv))
    if not driver:
        raise SystemExit(f"eviscene-tui gate: no driver script given\n{USAGE}")
    mode = search_mode_of(driver[1:])
    if mode != "feedback":
        sys.stderr.write(f"eviscene-tui gate: --search-mode {mode} has no feedback rounds to gate; refusing to run the driver\n")
        raise SystemExit(2)
    script = os.path.abspath(driver[0])
    if not os.path.isfile(script):
        sys.stderr.write(f"eviscene-tui gate: driver script {driver[0]} does not exist\n")
        raise SystemExit(2)
    gate = Gate(gate_dir=opts["gate_dir"], operator=opts["operator"], hint_gate=opts["hint_gate"], argv=[script, *driver[1:]])
    sys.modules.setdefault("eviscene_gate_inproc", sys.modules[__name__])
    install(gate)
    sys.argv = [script, *driver[1:]]
    sys.path[0] = os.path.dirname(script)  # as `python DRIVER.py` would
    code: Any = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        gate.finish(1)
        raise
    gate.finish(code if isinstance(code, int) else (0 if code is None else 1))
    if not gate.entered:
        sys.stderr.write(
            "eviscene-tui gate: the driver exited without entering run_search under the gate; nothing was gated\n"
        )
        raise SystemExit(code if isinstance(code, int) and code != 0 else 3)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
