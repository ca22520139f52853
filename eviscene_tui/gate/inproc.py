"""The operator gate, the part that runs INSIDE a driver's process.

For the real EviScene driver it is started by path, in the driver's own
interpreter (any Python >= 3.10, this app not installed there), so it imports
only the standard library and loads its sibling :mod:`protocol` by path::

    PY /…/eviscene_tui/gate/inproc.py [--gate-dir DIR] [--operator NAME] [--no-hint-gate] -- DRIVER.py ARGS…

What it does there:

1. refuses ``--search-mode`` other than ``feedback`` (no rounds to gate);
2. installs an import hook (a ``sys.meta_path`` finder wrapping the real loader).
   Every module that defines a feedback search -- ``run_search`` with an
   ``execute_round`` keyword, whatever the module is called -- has ``run_search``
   wrapped, so no round runs before its decision; ``…psd_repair_search`` (under
   any package path) must have that seam, and for ``…psd_repair_runtime`` it wraps
   ``QwenContinuationAdapter.propose_hints``. A module without its seam fails to
   import, with a message naming what is missing. For ``…orchestrator.stage_runner``
   (any package path) it wraps ``StageRunner._call_llm``, pass-through, for the live
   view: every policy call's start and end go to the sidecar's live channel (from a
   thread of their own; the call, its arguments and what it returns or raises are
   untouched). A ``_call_llm`` of another signature is left unwrapped and the live
   view says "live view unavailable: `StageRunner._call_llm` changed": the rounds
   stay gated;
3. runs the driver as ``__main__`` (``runpy.run_path``) with its argv; the exit
   code and stdout/stderr are the driver's. A driver that never entered
   ``run_search`` exits non-zero: nothing was gated.

The bundled driver (``eviscene-tui repair``) uses :class:`SearchGate` directly:
every round and every hint and attempt of its search is a gate it declares.

The gate's files live in a sidecar directory beside the search root, never in
it (default ``<root>.eviscene-gate/``; the names are the protocol's)::

    gate.json                       this invocation (root, argv, pid, host, options, how to resume)
    heartbeat.json                  pid, host, argv, last_seen, state, waiting, problems (every 0.5 s)
    gates/<gate name>.json          a gate the driver waits on, with the decisions it offers
    decisions/<gate name>.json      the decision for a gate, created exclusively (one winner)
    consumed/…                      one-shot decisions taken (stop, cancel) and their closed gates,
                                    and files set aside (for another gate, unreadable)
    applied/<gate name>[.<id>].json what the driver did with a decision
    live.jsonl                      the live channel (policy calls as they start and end, streamed deltas)
    decisions.jsonl                 the hash-chained journal (written by the deciders)

The wait is a poll of the decision file (``EVISCENE_GATE_POLL`` seconds,
default 0.1), so a decider on another host sharing the filesystem works.
Inside the search root the gate writes only the operator's rejection row into
the round's ``proposer-hint-audits.json``, the driver's own file, before the
driver appends its rows. It never takes ``search.lock``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import importlib.abc
import importlib.util
import inspect
import itertools
import json
import os
import queue
import runpy
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any


def _load_protocol() -> Any:
    """The protocol module: the package's when this file is imported as part of the
    app, else its sibling file loaded by path (this file run in a foreign interpreter)."""
    if __package__:
        return importlib.import_module(__package__ + ".protocol")
    name = "eviscene_gate_protocol"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.py"))
        if spec is None or spec.loader is None:
            raise ImportError("eviscene-tui gate: cannot load protocol.py beside inproc.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


if TYPE_CHECKING:
    from eviscene_tui.gate import protocol as P
else:
    P = _load_protocol()

PACKAGES = ("eviscene_training", "ifv_training")
SEARCH_MODULE = "psd_repair_search"
RUNTIME_MODULE = "psd_repair_runtime"
SEARCH_MARKERS = (b"run_search", b"execute_round")  # a module's source that may define a feedback search


class GateSeamMissing(ImportError):
    """A driver module lacks the seam the gate attaches to."""


class GateError(RuntimeError):
    """The gate cannot gate this driver safely (it refuses rather than run ungated)."""


OperatorStoppedSearch = P.OperatorStoppedSearch


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


# ---------------------------------------------------------------------- the gate of one search
_ROUND: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("eviscene_gate_round", default=None)


def current_round() -> dict[str, Any] | None:
    """The gated round this task runs in (set by the ``run_search`` wrapper after the round
    gate), or None: a driver that finds None runs no round (fail closed)."""
    return _ROUND.get()


def _say(line: str) -> None:
    """One line on the driver's stderr (its own output stays the driver's)."""
    try:
        sys.stderr.write(f"eviscene-tui gate: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class SearchGate:
    """The gate of one search root (its sidecar, heartbeat and waits). A driver
    process may run several searches (a multi-case wrapper): one each."""

    def __init__(self, gate: Gate, root: Path, gate_dir: Path) -> None:
        self.gate = gate
        self.root = root
        self.gate_dir = gate_dir
        self.state = "starting"
        self.waiting: str | None = None
        self.problems: dict[str, str] = {}
        self.exit_code: int | None = None
        self.live = P.LiveChannel(gate_dir / P.LIVE_FILE)
        self.calls = CallRecorder(self.live)  # the real driver's policy calls, written off the driver's thread
        self._lock = threading.Lock()
        # one heartbeat write at a time, so an older state never lands after a newer one
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ heartbeat
    def heartbeat_doc(self) -> dict[str, Any]:
        with self._lock:
            problems = sorted(self.problems.values())
            if self.live.problem:
                problems.append(self.live.problem)
            return {
                "schema_version": P.HEARTBEAT_SCHEMA, "pid": os.getpid(), "host": self.gate.host, "argv": self.gate.argv,
                "python": sys.executable, "root": str(self.root), "started_at": self.gate.started_at,
                "last_seen": P.utc_now(), "last_seen_epoch": time.time(), "state": self.state, "waiting": self.waiting,
                "problems": problems, "exit_code": self.exit_code,
            }

    def beat(self) -> None:
        try:
            with self._write_lock:
                P.atomic_replace(self.gate_dir / P.HEARTBEAT_FILE, P.document_bytes(self.heartbeat_doc()))
        except OSError as exc:  # a full or vanished disk must not kill the driver's search
            _say(f"cannot write the heartbeat: {exc}")

    def _beat_loop(self) -> None:
        while not self._stop.wait(P.HEARTBEAT_SECONDS):
            self.beat()

    def set_state(self, state: str, waiting: str | None = None) -> None:
        with self._lock:
            self.state, self.waiting = state, waiting
        self.beat()

    def note(self, key: str, problem: str | None) -> None:
        """A problem the heartbeat reports until cleared (``problem`` None)."""
        with self._lock:
            if problem:
                self.problems[key] = problem
            else:
                self.problems.pop(key, None)

    def finish(self, exit_code: int | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self.state, self.waiting, self.exit_code = "exited", None, exit_code
        self.calls.close()
        self.beat()
        self.live.close()

    def start(self) -> None:
        for sub in (P.GATES_DIR, P.DECISIONS_DIR, P.CONSUMED_DIR, P.APPLIED_DIR):
            (self.gate_dir / sub).mkdir(parents=True, exist_ok=True)
        g = self.gate
        session = {
            "schema_version": P.GATE_SCHEMA, "root": str(self.root), "gate_dir": str(self.gate_dir), "argv": g.argv,
            "pid": os.getpid(), "host": g.host, "python": sys.executable, "started_at": g.started_at, "started_by": g.operator,
            "hint_gate": g.hint_gate_enabled, "search_module": getattr(g.search_module, "__name__", None),
            "poll_seconds": P.poll_seconds(), "driver": g.driver, "resume_argv": g.resume_argv,
        }
        P.atomic_replace(self.gate_dir / P.SESSION_FILE, P.document_bytes(session))
        if g.live_problem:
            self.live_unavailable(g.live_problem)
        self.set_state("running")
        self._thread = threading.Thread(target=self._beat_loop, name="eviscene-gate-heartbeat", daemon=True)
        self._thread.start()

    def live_unavailable(self, message: str) -> None:
        """The live view of this driver's policy calls cannot be given: said in the heartbeat
        (``gate-status`` problems, the card) and in the live channel."""
        self.note("live", message)
        self.calls.put("live_unavailable", "", {"message": message})

    # ------------------------------------------------------------ publishing and waiting
    def _publish(self, name: str, doc: dict[str, Any]) -> bytes:
        data = P.document_bytes(doc)
        path = self.gate_dir / P.GATES_DIR / f"{name}.json"
        try:
            same = P.read_regular(path) == data
        except (OSError, ValueError):
            same = False
        if not same:
            P.atomic_replace(path, data)
        return data

    def set_aside(self, path: Path, name: str, why: str) -> str | None:
        """Move ``path`` into ``consumed/``; the name it took, or None when it was gone."""
        target = self.gate_dir / P.CONSUMED_DIR / P.set_aside_name(name, why)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.note(f"aside:{name}", f"cannot set {path.name} aside: {exc.strerror or exc}")
            return None
        return target.name

    def _keep_gate(self, name: str, data: bytes) -> None:
        """A gate file that is missing, truncated or changed while the driver waits on it
        is written again (a decider must always see what the driver waits for)."""
        path = self.gate_dir / P.GATES_DIR / f"{name}.json"
        try:
            intact = P.read_regular(path) == data
        except (OSError, ValueError):
            intact = False
        if not intact:
            try:
                P.atomic_replace(path, data)
                self.note(f"gate:{name}", f"the gate file {name}.json was damaged or removed while waiting; written again")
            except OSError as exc:
                self.note(f"gate:{name}", f"the gate file {name}.json is damaged and cannot be written again: {exc.strerror or exc}")

    def _announce(self, name: str, doc: dict[str, Any], *, streaming: bool = False) -> None:
        """One line on stderr per gate the operator has to decide (``gate`` and ``repair`` print it)."""
        parsed = P.parse_gate_name(name)
        kind = parsed[1] if parsed else "round"
        offers = " | ".join(o["action"] for o in P.offered(doc, kind))
        what = f"round {doc.get('round')}" + (f", {kind} {doc.get('hint_index')}" if kind != "round" else "")
        how = f"eviscene-tui decide {self.root} ACTION --round {doc.get('round')}, or the app (G on its row)"
        if streaming:
            _say(f"round {doc.get('round')}'s continuation streams; {offers}: {how}")
        else:
            _say(f"waiting for {'an' if kind == 'attempt' else 'a'} {kind} decision on {what} ({offers}): {how}")

    async def wait_for(self, name: str, doc: dict[str, Any], data: bytes) -> dict[str, Any]:
        """Poll ``decisions/<name>.json`` until a usable decision is there (one the gate
        offers, for this gate content). Anything else found there is set aside and
        reported in the heartbeat's ``problems``; the gate keeps waiting."""
        path = self.gate_dir / P.DECISIONS_DIR / f"{name}.json"
        gate_sha = P.sha256_bytes(data)
        parsed = P.parse_gate_name(name)
        offers = {o["action"] for o in P.offered(doc, parsed[1] if parsed else "round")}
        self.set_state("waiting", name)
        interval = P.poll_seconds()
        announced = False
        try:
            while True:
                found = self.usable_decision(path, name, gate_sha, offers)
                if found is not None:
                    return found
                if not announced:  # one line per gate the operator has to decide (not one a resume replays)
                    self._announce(name, doc)
                    announced = True
                self._keep_gate(name, data)
                await asyncio.sleep(interval)
        finally:
            self.set_state("running")

    def usable_decision(self, path: Path, name: str, gate_sha: str, offers: set[str]) -> dict[str, Any] | None:
        """The decision in ``path`` when it is usable for this gate content, else None;
        an unusable file is set aside and reported (the driver never acts on it)."""
        doc, problem = P.read_document(path)
        if doc is None and problem is None:
            return None
        why = "unreadable"
        if doc is not None:
            problem = P.decision_problem(doc, name)
            if problem is None and doc.get("gate_sha256") != gate_sha:
                problem, why = f"decision {name} was taken for another content of this gate", "other-gate"
            elif problem is None and doc.get("action") not in offers:
                problem, why = f"decision {name}: this gate does not offer {doc.get('action')}", "not-offered"
        if problem is None:
            self.note(name, None)
            return doc
        aside = self.set_aside(path, name, why)
        self.note(name, f"{problem}" + (f"; set aside as consumed/{aside} (the gate keeps waiting)" if aside else ""))
        return None

    def applied(self, name: str, decision: dict[str, Any], extra: dict[str, Any]) -> None:
        """What the driver did with ``decision`` (``applied/<name>.json``; a one-shot
        decision's own ``applied/<name>.<id>.json``, so a later decision of the same
        gate name never replaces it)."""
        doc = {"schema_version": P.APPLIED_SCHEMA, "decision_id": decision.get("decision_id"), "action": decision.get("action"),
               "gate": name, "applied_at": P.utc_now(), "pid": os.getpid(), **extra}
        action = decision.get("action")
        one_shot = action in P.SPECS and P.SPECS[action].consumed
        target = f"{name}.{str(decision.get('decision_id'))[:16]}.json" if one_shot else f"{name}.json"
        try:
            P.atomic_replace(self.gate_dir / P.APPLIED_DIR / target, P.document_bytes(doc))
        except OSError as exc:
            self.note(f"applied:{name}", f"cannot record what was applied for {name}: {exc.strerror or exc}")

    def consume(self, name: str, decision: dict[str, Any]) -> None:
        """A one-shot decision was taken: what was applied is recorded first (a decider that
        finds the gate closed right after its create knows its own decision closed it),
        then the gate, then its decision, move to ``consumed/`` (gate first: a decider that
        finds the decision slot free always finds the gate closed too), so a resume asks again."""
        self.applied(name, decision, {"consumed": True})
        self.set_aside(self.gate_dir / P.GATES_DIR / f"{name}.json", name, "gate-closed")
        self.set_aside(self.gate_dir / P.DECISIONS_DIR / f"{name}.json", name, "decision-consumed")

    def request(self, kind: P.GateKind, round_index: int, index: int | None, actions: list[dict[str, Any]],
                **body: Any) -> tuple[str, dict[str, Any]]:
        """A gate request document (the name and the document)."""
        doc = {"schema_version": P.REQUEST_SCHEMA, "kind": kind, "round": round_index, "hint_index": index,
               "root": str(self.root), "actions": actions, "driver": self.gate.driver, **body}
        return P.gate_name(round_index, kind, index), doc

    async def ask(self, kind: P.GateKind, round_index: int, index: int | None, actions: list[dict[str, Any]],
                  **body: Any) -> dict[str, Any]:
        """Declare a gate offering ``actions`` and wait for its decision. A stop (at any
        gate that offers it) is consumed and raised as :class:`OperatorStoppedSearch`."""
        name, doc = self.request(kind, round_index, index, actions, **body)
        decision = await self.wait_for(name, doc, self._publish(name, doc))
        if P.SPECS[decision["action"]].consumed:
            self.consume(name, decision)
        if decision["action"] == P.STOP:
            raise OperatorStoppedSearch(
                f"operator {decision.get('operator')} stopped the search at {name}"
                + (f": {decision.get('reason')}" if decision.get("reason") else ""))
        return decision

    def open_watch(self, kind: P.GateKind, round_index: int, index: int | None, actions: list[dict[str, Any]],
                   **body: Any) -> GateWatch:
        """A gate declared while the driver goes on (a streaming continuation): poll it
        with :meth:`GateWatch.poll`, close it with :meth:`GateWatch.close`."""
        name, doc = self.request(kind, round_index, index, actions, **body)
        data = self._publish(name, doc)
        self.set_state("streaming", name)
        self._announce(name, doc, streaming=True)
        return GateWatch(self, name, doc, data)

    # ------------------------------------------------------------ the round gate (every feedback search)
    async def round_gate(self, directory: Any, feedback: Any, history: Any, *, step_range: list[int] | None = None,
                         extra: dict[str, Any] | None = None) -> dict[str, Any]:
        directory = Path(os.fspath(directory))
        try:
            round_index = int(directory.name.split("-", 1)[1])
        except (IndexError, ValueError):
            raise GateError(f"execute_round was given {directory}, not a rounds/round-NN directory") from None
        site = P.current_site(history, feedback)
        if self.gate.round_offers is not None:  # the bundled driver says what its round gate offers
            actions = self.gate.round_offers(round_index, feedback, history)
        else:
            actions = [P.offer(P.APPROVE_ROUND), P.offer(P.RELOCALIZE, step_range=step_range), P.offer(P.STOP)]
        decision = await self.ask(
            "round", round_index, None, actions, round_directory=str(directory),
            request_file=f"requests/round-{round_index:02d}.json",
            request_sha256=P.sha256_file(self.root / "requests" / f"round-{round_index:02d}.json"),
            feedback=feedback, current_site=site, history=P.history_summary(history), **(extra or {}))
        effective = P.effective_feedback(feedback, decision["action"], decision.get("step"), site)
        self.applied(P.gate_name(round_index), decision, {"feedback_sha256": P.canonical_sha256(effective), "site": site,
                                                          "step": decision.get("step")})
        return {"round": round_index, "directory": directory, "feedback": effective, "search": self, "decision": decision}

    # ------------------------------------------------------------ the real driver's hint gate
    async def hint_gate(self, ctx: dict[str, Any], adapter: Any, proposals: list[Any]) -> list[Any]:
        round_index, directory, feedback = ctx["round"], ctx["directory"], ctx["feedback"]
        cache = getattr(adapter, "proposer_cache_path", None)
        output_dir = Path(os.fspath(cache)).parent if cache else directory
        rejection = getattr(self.gate.search_module, "revision_rejection", None)
        kept = []
        for index, hint in enumerate(proposals):
            text = str(getattr(hint, "text", "") or "")
            rule = None
            if callable(rejection):
                try:
                    rule = str(rejection(text, feedback) or "")
                except Exception as exc:  # noqa: BLE001 - the driver's own rule failing is shown, not hidden
                    rule = f"revision_rejection raised {type(exc).__name__}"
            audit = getattr(hint, "audit", None)
            digest = P.sha256_file(output_dir / "proposer-response.json")
            files = {os.path.relpath(output_dir / "proposer-response.json", self.root): digest} if digest else {}
            decision = await self.ask(
                "hint", round_index, index, [P.offer(P.APPROVE_HINT), P.offer(P.REJECT_HINT)],
                round_directory=str(output_dir), request_file=f"requests/round-{round_index:02d}.json",
                request_sha256=P.sha256_file(self.root / "requests" / f"round-{round_index:02d}.json"), feedback=feedback,
                hint={"text": text, "level": getattr(hint, "level", None), "proposal_id": getattr(hint, "proposal_id", None),
                      "provider": getattr(hint, "provider", None), "model": getattr(hint, "model", None),
                      "audit": dict(audit) if isinstance(audit, Mapping) else audit, "hint_sha256": P.hint_sha256(text)},
                revision_rejection=rule, files=files)
            name = P.gate_name(round_index, "hint", index)
            if decision["action"] == P.APPROVE_HINT:
                kept.append(hint)
                ctx.setdefault("hints", []).append((index, text))
                self.applied(name, decision, {})
                continue
            self.write_rejection(output_dir, name, decision)
        return kept

    def write_rejection(self, output_dir: Path, name: str, decision: dict[str, Any]) -> None:
        """Append ``{"passed": false, "reason": "operator_rejected"}`` to the round's
        ``proposer-hint-audits.json`` (written as the driver writes its JSON), once
        per decision even when the round is re-entered on resume."""
        path = output_dir / "proposer-hint-audits.json"
        existing, problem = P.read_document(path)
        if problem:
            raise GateError(f"cannot add the operator's rejection: {problem}")
        rows = list((existing or {}).get("proposals") or [])
        applied, _ = P.read_document(self.gate_dir / P.APPLIED_DIR / f"{name}.json")
        row = {"passed": False, "reason": P.OPERATOR_REJECTED}
        at = applied.get("audit_row_index") if applied else None
        if applied and applied.get("decision_id") == decision.get("decision_id") and type(at) is int and at < len(rows) and rows[at] == row:
            return  # this decision's row is already in the file
        rows.append(row)
        output_dir.mkdir(parents=True, exist_ok=True)
        writer = self._driver_write_json()
        if writer is not None:
            writer(path, {**(existing or {}), "proposals": rows})
        else:
            path.write_text(json.dumps({**(existing or {}), "proposals": rows}, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        self.applied(name, decision, {"audit_row_index": len(rows) - 1, "audit_file": str(path)})

    def _driver_write_json(self) -> Any:
        package = getattr(self.gate.search_module, "__name__", "").rpartition(".")[0]
        module = sys.modules.get(f"{package}.io") if package else None
        writer = getattr(module, "write_json", None)
        return writer if callable(writer) else None


class GateWatch:
    """A gate the driver declared while it goes on (see :meth:`SearchGate.open_watch`)."""

    def __init__(self, search: SearchGate, name: str, doc: dict[str, Any], data: bytes) -> None:
        self.search, self.name, self.doc, self.data = search, name, doc, data
        self.path = search.gate_dir / P.DECISIONS_DIR / f"{name}.json"
        self.offers = {o["action"] for o in P.offered(doc, doc["kind"])}
        self.sha = P.sha256_bytes(data)

    def poll(self) -> dict[str, Any] | None:
        """The decision taken so far (consumed when one-shot), or None."""
        found = self.search.usable_decision(self.path, self.name, self.sha, self.offers)
        if found is not None and P.SPECS[found["action"]].consumed:
            self.search.consume(self.name, found)
        return found

    def close(self, outcome: str) -> dict[str, Any] | None:
        """The gate ends (the continuation finished): a decision that arrived too late
        to act on is consumed and recorded as not applied; the gate file is closed."""
        late = self.search.usable_decision(self.path, self.name, self.sha, self.offers)
        if late is not None:
            self.search.set_aside(self.search.gate_dir / P.DECISIONS_DIR / f"{self.name}.json", self.name, "decision-consumed")
            self.search.applied(self.name, late, {"consumed": True, "not_applied": f"arrived after the continuation {outcome}"})
        self.search.set_aside(self.search.gate_dir / P.GATES_DIR / f"{self.name}.json", self.name, "gate-closed")
        self.search.set_state("running")
        return late


# ---------------------------------------------------------------------- the real driver's policy calls, live
class CallRecorder:
    """The live records of a driver's policy calls, written by one daemon thread, so
    the driver's event loop only puts a record on a queue (no file I/O, no await on
    its path). A channel that cannot be written stops the records (its ``problem`` is
    in the heartbeat); a write that hangs (a dead mount) holds only this thread."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self._queue: queue.SimpleQueue[tuple[str, str, dict[str, Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def stopped(self) -> bool:
        return self._closed or self.channel.problem is not None

    def put(self, kind: str, call: str, fields: dict[str, Any]) -> None:
        if self.stopped:
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="eviscene-gate-live", daemon=True)
                    self._thread.start()
        self._queue.put((kind, call, fields))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            kind, call, fields = item
            if self.channel.problem is not None:
                continue  # stopped: what is still queued is dropped
            try:
                self.channel.write(kind, call, **fields)
            except Exception as exc:  # noqa: BLE001 - a live record never fails the driver
                self.channel.problem = f"live view unavailable: cannot write {P.LIVE_FILE}: {type(exc).__name__}"

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued (for at most ``timeout`` s), then stop."""
        self._closed = True
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)


def call_llm_mismatch(method: Any) -> str | None:
    """Why ``StageRunner._call_llm`` is not the method the live view wraps (None: it is):
    an async function with exactly :data:`protocol.CALL_LLM_SIGNATURE`."""
    if method is None or not callable(method):
        return "StageRunner has no _call_llm" if method is None else "_call_llm is not callable"
    if not inspect.iscoroutinefunction(method):
        return "_call_llm is not an async function"
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return "its signature cannot be read"
    found = tuple((p.name, p.kind.name, P.REQUIRED if p.default is inspect.Parameter.empty else p.default) for p in params)
    if found == P.CALL_LLM_SIGNATURE:
        return None
    shown = ", ".join(p.name + ("" if p.default is inspect.Parameter.empty else f"={p.default!r}") for p in params)
    return f"it takes ({shown[:300]})"


_CALL_NUMBERS = itertools.count(1)
_PROCESS_TAG = f"{os.getpid():x}.{os.urandom(3).hex()}"


def _hint_of(ctx: dict[str, Any], messages: Any) -> tuple[int | None, str]:
    """The approved hint of the round whose text the call's messages carry (a teacher
    continuation's prompt holds its hint), else the round's only approved hint."""
    hints = ctx.get("hints") or []
    for index, text in hints:
        if text and _mentions(messages, text):
            return index, text
    return (hints[0][0], hints[0][1]) if len(hints) == 1 else (None, "")


def _mentions(messages: Any, text: str) -> bool:
    """Whether a message's text (a string, or the text parts of a list) holds ``text``."""
    return any(text in part for message in (messages if isinstance(messages, (list, tuple)) else ()) for part in _texts(message))


def _texts(message: Any) -> list[str]:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, str):
        return [content]
    parts = content if isinstance(content, list) else []
    return [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _ids(value: Any) -> list[Any] | tuple[Any, ...] | None:
    """A capture's list as it is (referenced, not copied: copying 30,000 ids would cost the
    driver's loop more than the whole record; the writer encodes it as it is then, and
    nothing here ever changes it)."""
    return value if isinstance(value, (list, tuple)) else None


def _tool_names(raw: Any) -> list[str]:
    choices = raw.get("choices") if isinstance(raw, dict) else None
    message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [str((c.get("function") or {}).get("name") or "") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def call_outcome(result: Any) -> dict[str, Any]:
    """What the live view shows of ``(LLMResponse, metadata)``: the capture's ids and
    logprobs, finish reason, request id, duration, the
    response text and the tool calls it names. Reads only; never raises. The top-k rows
    are left out (``topk`` says how many the capture holds): twenty objects per token
    would make one record megabytes, and encoding it holds the interpreter's lock, so the
    driver's loop would wait for it; they are in the episode the driver saves."""
    response, metadata = (result[0], result[1]) if isinstance(result, tuple) and len(result) == 2 else (result, None)
    meta = metadata if isinstance(metadata, dict) else {}
    capture = meta.get("policy_token_capture")
    capture = capture if isinstance(capture, dict) else {}
    text = getattr(response, "text", None)
    counts = {k: v for k in ("prompt_tokens", "completion_tokens") if type(v := getattr(response, k, None)) is int}
    return {
        "prompt_token_ids": _ids(capture.get("prompt_token_ids")), "completion_token_ids": _ids(capture.get("completion_token_ids")),
        "completion_logprobs": _ids(capture.get("completion_logprobs")),
        "capture_status": capture.get("status"), "capture_missing": _ids(capture.get("missing")), "topk": capture.get("topk"),
        "finish_reason": meta.get("finish_reason"), "request_id": meta.get("context_request_id"),
        "llm_duration_ms": meta.get("llm_duration_ms"), "text": text if isinstance(text, str) else None,
        "tool_calls": _tool_names(getattr(response, "raw", None)), **counts,
    }


class LiveCalls:
    """The pass-through wrapper of ``StageRunner._call_llm``: a ``call_started`` record
    before the await, ``call_complete`` / ``call_failed`` after it. It returns exactly
    what the method returned and re-raises exactly what it raised; the records are put
    on the search's :class:`CallRecorder` (no file I/O, no await of its own)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def search_of(self) -> tuple[SearchGate | None, dict[str, Any]]:
        ctx = _ROUND.get()
        if ctx is not None:
            return ctx["search"], ctx
        searches = list(self.gate.searches.values())
        return (searches[0], {}) if len(searches) == 1 else (None, {})

    def started(self, runner: Any, messages: Any, kwargs: dict[str, Any]) -> tuple[SearchGate, str, dict[str, Any], float] | None:
        try:
            search, ctx = self.search_of()
            if search is None or search.calls.stopped:
                return None
            hint, text = _hint_of(ctx, messages)
            call = f"{_PROCESS_TAG}.{next(_CALL_NUMBERS):05d}"
            stage = getattr(runner, "stage_name", None)
            where = {"round": ctx.get("round"), "hint": hint, "stage": str(stage) if stage is not None else ""}
            fields = {**where, "streaming": False, "lifecycle_kind": str(kwargs.get("lifecycle_kind") or ""),
                      "parent_request_id": str(kwargs.get("parent_context_request_id") or ""),
                      "messages": len(messages) if isinstance(messages, (list, tuple)) else None, "t": time.time()}
            if text:
                fields["hint_text"] = text
            search.calls.put("call_started", call, fields)
            return search, call, where, time.monotonic()
        except Exception:  # noqa: BLE001 - the live view never fails the driver
            return None

    def ended(self, started: tuple[SearchGate, str, dict[str, Any], float] | None, result: Any, error: BaseException | None) -> None:
        if started is None:
            return
        search, call, where, t0 = started
        try:
            elapsed = round((time.monotonic() - t0) * 1000.0, 3)
            if error is not None:  # the type only: a provider's message can hold credentials
                search.calls.put("call_failed", call, {**where, "status": "failed", "error_type": type(error).__name__, "wall_ms": elapsed})
            else:
                search.calls.put("call_complete", call, {**where, "status": "complete", "wall_ms": elapsed, **call_outcome(result)})
        except Exception:  # noqa: BLE001 - the live view never fails the driver
            search.calls.channel.problem = search.calls.channel.problem or "live view unavailable: a call's record could not be built"

    def wrap(self, call_llm: Any) -> Any:
        live = self

        @functools.wraps(call_llm)
        async def live_call_llm(runner: Any, messages: Any, *args: Any, **kwargs: Any) -> Any:
            started = live.started(runner, messages, kwargs)
            try:
                result = await call_llm(runner, messages, *args, **kwargs)
            except BaseException as exc:
                live.ended(started, None, exc)
                raise
            live.ended(started, result, None)
            return result

        live_call_llm.__eviscene_gate__ = True  # type: ignore[attr-defined]  # a marker attribute on the wrapper
        return live_call_llm


class Gate:
    """The gate in this driver process: the import-hook wrappers and one
    :class:`SearchGate` per search root the driver enters."""

    def __init__(self, *, gate_dir: str | None, operator: str, hint_gate: bool, argv: list[str], driver: str = "eviscene",
                 resume_argv: list[str] | None = None) -> None:
        self.requested_dir = Path(gate_dir).absolute() if gate_dir else None
        self.operator = operator
        self.hint_gate_enabled = hint_gate
        self.argv = list(argv)
        self.driver = driver
        self.resume_argv = resume_argv
        self.search_module: Any = None
        self.runtime_patched = False
        # (round, feedback, history) -> the round gate's offers, when the driver declares them
        self.round_offers: Callable[[int, Any, Any], list[dict[str, Any]]] | None = None
        self.started_at = P.utc_now()
        self.host = socket.gethostname()
        self.searches: dict[Path, SearchGate] = {}
        self.live_calls = LiveCalls(self)
        self.live_problem: str | None = None  # why the live view of the policy calls is unavailable

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
        gate_dir = self.requested_dir or P.sidecar_for(root_path)
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
    def wrap_search(self, module: Any, *, required: bool = True) -> None:
        """Wrap ``module.run_search``. ``required`` (the module is called
        ``psd_repair_search``): a missing seam fails the import; otherwise a module
        whose ``run_search`` is not a feedback search is left alone."""
        run_search = getattr(module, "run_search", None)
        try:
            params = inspect.signature(run_search).parameters if callable(run_search) else {}
        except (TypeError, ValueError):
            params = {}
        if not required and "execute_round" not in params:
            return
        if run_search is None or not callable(run_search):
            raise GateSeamMissing(f"eviscene-tui gate: {module.__name__} has no run_search; the gate cannot attach")
        if getattr(run_search, "__eviscene_gate__", False):
            return
        if "execute_round" not in params:
            raise GateSeamMissing(f"eviscene-tui gate: {module.__name__}.run_search has no execute_round keyword; the gate cannot attach")
        if not inspect.iscoroutinefunction(run_search):
            raise GateSeamMissing(f"eviscene-tui gate: {module.__name__}.run_search is not an async function; the gate cannot attach")
        if self.search_module is None or required:
            self.search_module = module
        module.run_search = self.gated_search(run_search)

    def gated_search(self, run_search: Any) -> Any:
        """``run_search`` with every round behind its round gate (the round runs with the
        effective feedback, inside :func:`current_round`)."""
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
        return gated_run_search

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

    def wrap_stage_runner(self, module: Any) -> None:
        """Wrap ``module.StageRunner._call_llm`` for the live view when it has the signature
        the view knows; otherwise leave it alone and say "live view unavailable" (the
        rounds stay gated: this seam is not a gate)."""
        cls = getattr(module, "StageRunner", None)
        method = getattr(cls, "_call_llm", None) if isinstance(cls, type) else None
        if getattr(method, "__eviscene_gate__", False):
            return
        why = "it has no StageRunner class" if not isinstance(cls, type) else call_llm_mismatch(method)
        if why is not None:
            self.set_live_problem(f"{P.CALL_LLM_CHANGED} in {module.__name__} ({why}); its calls are not shown, the rounds are still gated")
            return
        cls._call_llm = self.live_calls.wrap(method)  # type: ignore[union-attr]  # a class checked above

    def set_live_problem(self, message: str) -> None:
        self.live_problem = message
        _say(message)
        for search in self.searches.values():
            search.live_unavailable(message)

    def attach(self, fullname: str, module: Any) -> None:
        tail = fullname.rpartition(".")[2]
        if P.is_stage_runner(fullname):
            try:
                self.wrap_stage_runner(module)
            except Exception as exc:  # noqa: BLE001 - the live view's seam never fails the driver's import
                self.set_live_problem(f"{P.CALL_LLM_CHANGED} ({module.__name__}: {type(exc).__name__})")
        elif tail == SEARCH_MODULE:
            self.wrap_search(module)
        elif tail == RUNTIME_MODULE:
            if self.hint_gate_enabled:
                self.wrap_runtime(module)
        elif callable(getattr(module, "run_search", None)):
            self.wrap_search(module, required=False)


def is_target(fullname: str) -> bool:
    """The search and runtime modules under any package path (``eviscene_training.…``,
    ``ifv_training.…``, or e.g. ``training.ifv_training.…``), and the orchestrator's
    stage runner (``eviscene.orchestrator.stage_runner``, ``src.orchestrator.…``)."""
    return fullname.rpartition(".")[2] in (SEARCH_MODULE, RUNTIME_MODULE) or P.is_stage_runner(fullname)


def may_define_search(origin: str | None) -> bool:
    """Whether a module's file may define a feedback search (its bytes name both
    ``run_search`` and ``execute_round``): such a module is wrapped whatever it is called.
    A file that cannot be read is wrapped too (fail closed)."""
    if not origin or not origin.endswith((".py", ".pyc", ".pyw")):
        return False
    try:
        with open(origin, "rb") as handle:
            data = handle.read()
    except OSError:
        return True
    return all(marker in data for marker in SEARCH_MARKERS)


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
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            if not (is_target(fullname) or may_define_search(spec.origin)):
                return spec  # what the next finder would have given the import system
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                if P.is_stage_runner(fullname):  # the live view's seam only: the import goes on, unwrapped
                    self.gate.set_live_problem(f"{P.CALL_LLM_CHANGED} ({fullname} has a loader the gate cannot wrap)")
                    return spec
                raise GateSeamMissing(f"eviscene-tui gate: cannot wrap the loader of {fullname}")
            spec.loader = _GatedLoader(self.gate, spec.loader)
            return spec
        return None


def install(gate: Gate) -> GateFinder:
    finder = GateFinder(gate)
    sys.meta_path.insert(0, finder)
    for name, module in list(sys.modules.items()):  # imported before the hook (e.g. by sitecustomize)
        if module is not None and (is_target(name) or callable(getattr(module, "run_search", None))):
            gate.attach(name, module)
    return finder


# ---------------------------------------------------------------------- entry point
USAGE = "usage: inproc.py [--gate-dir DIR] [--operator NAME] [--no-hint-gate] -- DRIVER.py [DRIVER-ARGS...]"


def _parse(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    opts: dict[str, Any] = {"gate_dir": None, "operator": None, "hint_gate": True}
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
    gate = Gate(gate_dir=opts["gate_dir"], operator=P.operator_identity(opts["operator"]), hint_gate=opts["hint_gate"],
                argv=[script, *driver[1:]])
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
        sys.stderr.write("eviscene-tui gate: the driver exited without entering run_search under the gate; nothing was gated\n")
        raise SystemExit(code if isinstance(code, int) and code != 0 else 3)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
