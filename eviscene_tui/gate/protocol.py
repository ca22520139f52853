"""The operator gate's protocol: one standard-library module every driver speaks.

It runs in three places: in the app (``eviscene_tui.gate.protocol``), inside a
driver's own interpreter (Python >= 3.10, this app not installed there: the
in-driver gate ``inproc.py`` loads this file by path, as
``eviscene_gate_protocol``), and in the bundled driver (``eviscene-tui repair``).
So it imports only the standard library, and it is the one place that spells:

- the gate kinds (:data:`GateKind`) and the decision kinds (:data:`Action`), with
  what each decision takes (:data:`SPECS`) and its name in the journal;
- the sidecar's file names and schemas, and how its files are read and written
  (regular files only, opened without blocking; bounded; atomic or exclusive);
- the feedback and revision rules a feedback search applies (psd-run-format §4):
  :func:`revision_context`, :func:`revision_rejection`, :func:`public_attempt_feedback`,
  :func:`next_stop`, and the gate's relocalize rule :func:`effective_feedback`;
- the live stream channel's records (:class:`LiveChannel`);
- who the operator is (:func:`operator_identity`).

A driver *declares* each gate it opens: the request file lists the decisions it
offers (``actions``), and the deciders and the app's card take that list as it is.
Adding a decision kind is one entry here, one handler in the driver that offers it.
"""

from __future__ import annotations

import copy
import getpass
import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

# ---------------------------------------------------------------------- schemas and files
GATE_SCHEMA = "eviscene-tui-gate-v1"
REQUEST_SCHEMA = "eviscene-tui-gate-request-v1"
DECISION_SCHEMA = "eviscene-tui-gate-decision-v1"
HEARTBEAT_SCHEMA = "eviscene-tui-gate-heartbeat-v1"
APPLIED_SCHEMA = "eviscene-tui-gate-applied-v1"
LIVE_SCHEMA = "eviscene-tui-live-v1"
HEAD_SCHEMA = "eviscene-tui-journal-head-v1"

SIDECAR_SUFFIX = ".eviscene-gate"
GATES_DIR = "gates"  # gates/<gate name>.json: what a waiting driver asks
DECISIONS_DIR = "decisions"  # decisions/<gate name>.json: created exclusively, one winner
CONSUMED_DIR = "consumed"  # one-shot decisions taken, closed gates, files set aside
APPLIED_DIR = "applied"  # applied/<gate name>.json: what the driver did with a decision
HEARTBEAT_FILE = "heartbeat.json"
SESSION_FILE = "gate.json"
JOURNAL_FILE = "decisions.jsonl"  # the hash-chained journal, written by the deciders
HEAD_FILE = "journal-head.json"  # the journal's last event, anchored outside the journal
LIVE_FILE = "live.jsonl"  # the live channel: policy calls and streamed deltas, appended

HEARTBEAT_SECONDS = 0.5
HEARTBEAT_STALE_SECONDS = 5.0  # an older heartbeat means the driver is gone, also across hosts
MAX_SIDECAR_BYTES = 64 << 20  # no real gate, decision or heartbeat file is this big
MAX_JOURNAL_BYTES = 1 << 30  # nor a decision journal this big

# ---------------------------------------------------------------------- gate and decision kinds
GateKind = Literal["round", "hint", "attempt"]
GATE_KINDS: tuple[GateKind, ...] = get_args(GateKind)

Action = Literal[
    "approve-round", "relocalize", "stop",
    "approve-hint", "reject-hint", "add-hint",
    "accept-attempt", "reject-attempt", "cancel-continuation",
]
ACTIONS: tuple[Action, ...] = get_args(Action)
# one name each, for code that takes or offers a decision (typed: a misspelling fails under mypy)
APPROVE_ROUND: Final[Action] = "approve-round"
RELOCALIZE: Final[Action] = "relocalize"
STOP: Final[Action] = "stop"
APPROVE_HINT: Final[Action] = "approve-hint"
REJECT_HINT: Final[Action] = "reject-hint"
ADD_HINT: Final[Action] = "add-hint"
ACCEPT_ATTEMPT: Final[Action] = "accept-attempt"
REJECT_ATTEMPT: Final[Action] = "reject-attempt"
CANCEL_CONTINUATION: Final[Action] = "cancel-continuation"

# what the card's keys name (one key per verb; the gate's declared actions say which applies)
Verb = Literal["approve", "relocalize", "stop", "reject", "add", "cancel"]
VERBS: tuple[Verb, ...] = get_args(Verb)


@dataclass(frozen=True)
class ActionSpec:
    """What a decision kind takes. ``reason`` / ``text``: "required", "optional" or
    "no" (a reason is always journaled when given; "no": the card does not ask for one);
    ``step`` / ``checker``: whether the decision may carry them. ``consumed``:
    a one-shot decision (moved to ``consumed/`` once applied, never replayed on resume)."""

    action: Action
    kinds: tuple[GateKind, ...]
    verb: Verb
    journal: str
    label: str
    reason: str = "optional"
    text: str = "no"
    step: bool = False
    checker: bool = False
    consumed: bool = False
    default_reason: str = ""


SPECS: dict[Action, ActionSpec] = {
    "approve-round": ActionSpec("approve-round", ("round",), "approve", "approve_round", "approve the round (feedback unchanged)",
                                reason="no"),
    "relocalize": ActionSpec("relocalize", ("round",), "relocalize", "relocalize", "relocalize the round (optionally at step K)",
                             step=True, default_reason="relocalize requested at the round gate"),
    "stop": ActionSpec("stop", ("round", "hint", "attempt"), "stop", "stop_search", "stop the search (resumable)", consumed=True),
    "approve-hint": ActionSpec("approve-hint", ("hint",), "approve", "approve_hint", "approve the hint (its continuation runs)",
                               reason="no"),
    "reject-hint": ActionSpec("reject-hint", ("hint",), "reject", "reject_hint", "reject the hint", reason="required"),
    "add-hint": ActionSpec("add-hint", ("hint",), "add", "add_hint", "add a hint (typed or edited; audited, then asked again)",
                           text="required"),
    "accept-attempt": ActionSpec("accept-attempt", ("attempt",), "approve", "approve_attempt", "accept the attempt (the search converges)",
                                 checker=True),
    "reject-attempt": ActionSpec("reject-attempt", ("attempt",), "reject", "reject_attempt", "reject the attempt (checker values)",
                                 reason="required", checker=True),
    "cancel-continuation": ActionSpec("cancel-continuation", ("attempt",), "cancel", "cancel_continuation",
                                      "cancel the streaming continuation", reason="no", consumed=True),
}

def spec_of(action: Any) -> ActionSpec | None:
    """The spec of a decision kind named by a string from a file or a command line."""
    for name, spec in SPECS.items():
        if name == action:
            return spec
    return None


# what a gate offers when its request file does not say (files of earlier versions)
DEFAULT_OFFERS: dict[GateKind, tuple[Action, ...]] = {
    "round": ("approve-round", "relocalize", "stop"),
    "hint": ("approve-hint", "reject-hint"),
    "attempt": ("accept-attempt", "reject-attempt"),
}

# the journal's action names: one per decision kind (above), and the journal's own
JOURNAL_DECISION_ACTIONS: tuple[str, ...] = tuple(SPECS[a].journal for a in ACTIONS)
TRIAGE_LABEL = "triage_label"
TRIAGE_CLEAR = "triage_clear"
COMMENT = "comment"
UNDO = "undo"
# written by the app's in-app search of earlier versions; read, never written any more
LEGACY_JOURNAL_ACTIONS = ("accept_site", "resume_search")
JOURNAL_ACTIONS: tuple[str, ...] = (*JOURNAL_DECISION_ACTIONS, TRIAGE_LABEL, TRIAGE_CLEAR, COMMENT, UNDO, *LEGACY_JOURNAL_ACTIONS)
HINT_JOURNAL_ACTIONS = (SPECS["approve-hint"].journal, SPECS["reject-hint"].journal)
ATTEMPT_JOURNAL_ACTIONS = (SPECS["accept-attempt"].journal, SPECS["reject-attempt"].journal)
REASON_REQUIRED_JOURNAL_ACTIONS = tuple(SPECS[a].journal for a in ACTIONS if SPECS[a].reason == "required") + (
    SPECS["relocalize"].journal,)

# ---------------------------------------------------------------------- statuses and checks
OPERATOR_STOPPED = "OperatorStoppedSearch"  # the exception type a stop pauses the search with
PAUSED_EXECUTION_ERROR = "paused_execution_error"
OPERATOR_REJECTED = "operator_rejected"  # the audit row of a hint the operator rejected
TERMINAL_STATUSES = ("converged", "attempt_budget_exhausted", "proposal_budget_exhausted", "time_budget_exhausted",
                     "no_further_grounded_hint")
PAUSED_STATUSES = ("paused_pending_verifier", PAUSED_EXECUTION_ERROR, "paused_storage_budget")
CHECK_NAMES = ("source_error_confirmed", "repaired_at_selected_step", "grounded_episode", "procedural_hint",
               "anchor_matches", "episode_complete")
LOCK_CHECKS = ("source_error_confirmed", "repaired_at_selected_step", "procedural_hint", "anchor_matches")
TRACE_STEP_KEYS = ("stage", "action_type", "tool_name", "tool_args", "tool_result", "thought", "output", "index",
                   "policy_action", "function_call_id")
STORAGE_BUDGET = 2 << 30
# the driver's "search child input changed on resume" check: a round the gate changed
CHANGED_ON_RESUME = "search child input changed on resume"


class OperatorStoppedSearch(Exception):
    """The operator stopped the search at a gate (persisted by the driver as
    ``paused_execution_error`` with this type)."""


# ---------------------------------------------------------------------- who decides
def operator_identity(explicit: str | None = None) -> str:
    """The operator's name, by one rule on every surface: ``--operator NAME``, else
    ``$EVISCENE_OPERATOR``, else the login name, else ``operator``."""
    for value in (explicit, os.environ.get("EVISCENE_OPERATOR")):
        if value and value.strip():
            return value.strip()
    try:
        return getpass.getuser() or "operator"
    except (KeyError, OSError):
        return "operator"


# ---------------------------------------------------------------------- names
def sidecar_path(root: str | os.PathLike[str]) -> str:
    """``<root>.eviscene-gate`` beside the search root, absolute, as a string (a scan asks
    this of each of 10,000 cases: no path objects)."""
    return os.path.abspath(os.fspath(root)) + SIDECAR_SUFFIX


def sidecar_for(root: str | os.PathLike[str]) -> Path:
    """``<root>.eviscene-gate`` beside the search root (:func:`sidecar_path`)."""
    return Path(sidecar_path(root))


def gate_name(round_index: int, kind: GateKind = "round", index: int | None = None) -> str:
    """``round-03``, ``round-03.hint-01``, ``round-03.attempt-00``."""
    name = f"round-{round_index:02d}"
    if kind == "round":
        return name
    return f"{name}.{kind}-{(index or 0):02d}"


def parse_gate_name(name: str) -> tuple[int, GateKind, int | None] | None:
    """``round-03`` -> (3, "round", None); ``round-03.hint-01`` -> (3, "hint", 1); else None."""
    stem = name[:-5] if name.endswith(".json") else name
    head, _, tail = stem.partition(".")
    if not head.startswith("round-") or not head[6:].isdigit():
        return None
    if not tail:
        return int(head[6:]), "round", None
    kind, _, number = tail.partition("-")
    if kind in ("hint", "attempt") and number.isdigit():
        return int(head[6:]), "hint" if kind == "hint" else "attempt", int(number)
    return None


# ---------------------------------------------------------------------- digests and time
def canonical_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    return sha256_bytes(canonical_bytes(value))


def hint_sha256(text: str) -> str:
    """sha256 of the stripped hint text (psd-run-format §6)."""
    return sha256_bytes((text or "").strip().encode("utf-8"))


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
    return utc_iso(time.time())


def utc_iso(t: float) -> str:
    """An epoch time as the sidecar writes times (UTC, milliseconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def poll_seconds() -> float:
    """How often a waiting driver looks for its decision (``EVISCENE_GATE_POLL``, 0.01..1 s)."""
    try:
        value = float(os.environ.get("EVISCENE_GATE_POLL", "0.1"))
    except ValueError:
        value = 0.1
    return min(max(value, 0.01), 1.0)


# ---------------------------------------------------------------------- reading sidecar files
class NotRegularFile(OSError):
    """A sidecar path that is a FIFO, a device, a socket or a directory: never opened for reading."""


def read_regular(path: str | os.PathLike[str], *, limit: int = MAX_SIDECAR_BYTES) -> bytes:
    """The bytes of a regular file, never blocking on what is not one: the path is
    checked before it is opened (``lstat``: a FIFO, a device, a socket or a symlink
    to one is refused), opened non-blocking, and checked again on the open descriptor.
    :class:`NotRegularFile` for anything else; :class:`ValueError` past ``limit``
    bytes (nothing of that kind is ever that big)."""
    p = os.fspath(path)
    st = os.stat(p)  # follows a symlink: what it points at must be a regular file
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(f"{p} is not a regular file")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{p} is not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{Path(p).name} is {st.st_size} bytes (more than any such file holds: {limit})")
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise ValueError(f"{Path(p).name} grew past {limit} bytes while it was read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_document(data: bytes, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None), or (None, problem) for any bytes that are not one JSON object
    (undecodable, torn, nested past the parser's depth, ...)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"{name} is not valid JSON ({len(data)} bytes; truncated or hand-edited?): {exc}"
    except RecursionError:
        return None, f"{name} is nested too deeply to be a gate file ({len(data)} bytes)"
    if not isinstance(value, dict):
        return None, f"{name} is not a JSON object"
    return value, None


def read_document(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None), or (None, None) when the file does not exist, or (None, problem).
    Never raises and never blocks for what a sidecar file holds or is."""
    name = Path(path).name
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None, None
    except NotRegularFile:
        return None, f"{name} is not a regular file (a FIFO, device or directory?); it is never opened"
    except ValueError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"cannot read {name}: {exc.strerror or exc}"
    return parse_document(data, name)


def sha256_file(path: str | os.PathLike[str]) -> str | None:
    """sha256 of a regular file's bytes; None when it is absent, unreadable or not a regular file."""
    try:
        p = os.fspath(path)
        if not stat.S_ISREG(os.stat(p).st_mode):
            return None
        digest = hashlib.sha256()
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            while block := os.read(fd, 1 << 20):
                digest.update(block)
        finally:
            os.close(fd)
        return digest.hexdigest()
    except OSError:
        return None


# ---------------------------------------------------------------------- writing sidecar files
def fsync_dir(directory: Path) -> None:
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


def write_tmp(path: Path, data: bytes) -> Path:
    """``data`` written and fsynced to a new temporary file beside ``path``; the
    temporary file is removed again when the write fails (a full disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    return tmp


def atomic_replace(path: str | os.PathLike[str], data: bytes) -> None:
    """tmp + fsync + rename (state files: heartbeat, gate files, applied records)."""
    p = Path(path)
    tmp = write_tmp(p, data)
    try:
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(p.parent)


def create_exclusive(path: str | os.PathLike[str], data: bytes) -> bool:
    """Atomically create ``path`` with ``data`` (tmp + fsync + ``link``): True when
    this call created it, False when it already existed. Of two racing callers
    exactly one gets True; the file never exists half-written."""
    p = Path(path)
    tmp = write_tmp(p, data)
    try:
        os.link(tmp, p)
    except FileExistsError:
        return False
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    fsync_dir(p.parent)
    return True


def set_aside_name(name: str, why: str) -> str:
    """The name a file takes in ``consumed/`` (``<gate>.<why>.<UTC stamp>.<6 hex>.json``)."""
    return f"{name}.{why}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.{secrets.token_hex(3)}.json"


# ---------------------------------------------------------------------- declared gates
def offered(doc: dict[str, Any], kind: GateKind) -> list[dict[str, Any]]:
    """The decisions a gate request offers: its declared ``actions`` (unknown or
    misplaced kinds dropped), else the kind's defaults (request files of earlier
    versions). Each entry is ``{"action": ..., …driver's notes}``."""
    declared = doc.get("actions")
    if not isinstance(declared, list):
        return [{"action": a} for a in DEFAULT_OFFERS[kind]]
    out = []
    for entry in declared:
        entry = {"action": entry} if isinstance(entry, str) else entry
        action = entry.get("action") if isinstance(entry, dict) else None
        if isinstance(action, str) and action in SPECS and kind in SPECS[action].kinds:
            out.append(dict(entry))
    return out


def offer(action: Action, **notes: Any) -> dict[str, Any]:
    """One entry of a request's ``actions`` (the driver's notes: ``step_range``, ``why``, …)."""
    return {"action": action, **{k: v for k, v in notes.items() if v is not None}}


def step_range_problem(step: int, offer_entry: dict[str, Any]) -> str | None:
    """Why ``step`` is outside the range a relocalize offer declares, or None."""
    rng = offer_entry.get("step_range")
    if isinstance(rng, list) and len(rng) == 2 and all(type(v) is int for v in rng) and not rng[0] <= step <= rng[1]:
        return f"step {step} is outside the source trace (valid steps: {rng[0]}..{rng[1]})"
    return None


def decision_problem(doc: dict[str, Any], name: str) -> str | None:
    """Why a decision document is not usable for the gate ``name``, or None."""
    parsed = parse_gate_name(name)
    if doc.get("schema_version") != DECISION_SCHEMA:
        return f"decision {name}: schema_version is not {DECISION_SCHEMA}"
    if not digest_ok(doc):
        return f"decision {name}: its digest does not match its content (hand-edited?)"
    if parsed is None:
        return f"decision {name}: not a gate name"
    round_index, kind, index = parsed
    if doc.get("kind") != kind or doc.get("round") != round_index or doc.get("hint_index") != index:
        return f"decision {name}: its kind/round/index do not name this gate"
    action = doc.get("action")
    if action not in SPECS or kind not in SPECS[action].kinds:
        allowed = ", ".join(a for a in ACTIONS if kind in SPECS[a].kinds)
        return f"decision {name}: action {action!r} is not one of {allowed}"
    return field_problem(SPECS[action], doc)


def field_problem(spec: ActionSpec, doc: dict[str, Any]) -> str | None:
    """Why the fields of a decision do not fit its kind (step, text, reason, checker), or None."""
    step, text, checker = doc.get("step"), doc.get("text"), doc.get("checker")
    if step is not None and (type(step) is not int or step < 0 or not spec.step):
        return f"{spec.action}: step must be a non-negative integer, and only for relocalize"
    if spec.text == "required" and not (isinstance(text, str) and text.strip()):
        return f"{spec.action} needs a text"
    if spec.text == "no" and text not in (None, ""):
        return f"{spec.action} takes no text"
    if spec.reason == "required" and not str(doc.get("reason") or "").strip():
        return f"{spec.action} needs a reason"
    if checker not in (None, {}):
        if not spec.checker:
            return f"{spec.action} takes no checker values"
        if not isinstance(checker, dict) or any(k not in CHECK_NAMES or type(v) is not bool for k, v in checker.items()):
            return f"{spec.action}: checker values are {', '.join(CHECK_NAMES)} = true|false"
    return None


# ---------------------------------------------------------------------- the feedback rules (§4)
def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def checker_values(local_verification: Any) -> dict[str, bool]:
    """The six check values that are real booleans (never explanations or evidence):
    ``checks`` rows ``{name, passed}`` first, then the same key in ``review``."""
    lv = _map(local_verification)
    out: dict[str, bool] = {}
    checks = lv.get("checks")
    for row in checks if isinstance(checks, list) else []:
        row = _map(row)
        name, passed = row.get("name"), row.get("passed")
        if name in CHECK_NAMES and type(passed) is bool and name not in out:
            out[name] = passed
    review = _map(lv.get("review"))
    for name in CHECK_NAMES:
        if name not in out and type(review.get(name)) is bool:
            out[name] = review[name]
    return {name: out[name] for name in CHECK_NAMES if name in out}


def trace_step(step: Any, index: int) -> dict[str, Any]:
    """One step as the ``trace_steps`` projection (ten fields, no token captures)."""
    step = _map(step)
    meta = _map(step.get("metadata"))
    return {
        "stage": step.get("stage") or step.get("stage_name"), "action_type": step.get("action_type"),
        "tool_name": step.get("tool_name"), "tool_args": step.get("tool_args"), "tool_result": step.get("tool_result"),
        "thought": step.get("thought"), "output": step.get("output"), "index": index,
        "policy_action": meta.get("policy_action"), "function_call_id": meta.get("function_call_id"),
    }


def trace_steps(episode: Any, *, suffix_only: bool = True) -> list[dict[str, Any]]:
    """The projection of an episode's steps; ``suffix_only``: the teacher's
    (``metadata.psd_suffix_step``) only. ``index`` is the place in ``all_steps``."""
    steps = _map(_map(episode).get("state")).get("all_steps")
    out = []
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        if suffix_only and _map(_map(step).get("metadata")).get("psd_suffix_step") is not True:
            continue
        out.append(trace_step(step, index))
    return out


def public_attempt_feedback(record: Any, episode: Any = None) -> dict[str, Any]:
    """One attempt as the next round's proposer sees it (no private material)."""
    record = _map(record)
    lv = _map(record.get("local_verification"))
    earliest = _map(lv.get("review")).get("earliest_error_step")
    return {
        "hint": str(_map(record.get("hint_record")).get("text") or ""),
        "selected_source_step": _map(record.get("repair_site")).get("source_step_index"),
        "checker": checker_values(lv),
        "earliest_error_step": earliest if type(earliest) is int else -1,
        "task_passed": record.get("hinted_episode_pass") is True,
        "strict_trace_passed": record.get("hinted_strict_trace_audit_pass") is True,
        "accepted": record.get("accepted") is True,
        "repaired_steps": trace_steps(episode),
    }


def rejected_reasons(audit_rows: Any) -> list[str]:
    out = []
    for row in audit_rows if isinstance(audit_rows, list) else []:
        row = _map(row)
        if row.get("passed") is True:
            continue
        reason = row.get("reason")
        out.append(reason if isinstance(reason, str) and reason else "hint_audit_failed")
    return out


def round_feedback(records: list[Any], audit_rows: list[Any], status: str, episodes: list[Any]) -> dict[str, Any]:
    """The ``feedback`` block of a search-state round row."""
    eps = list(episodes) + [None] * (len(records) - len(episodes))
    return {"attempts": [public_attempt_feedback(r, e) for r, e in zip(records, eps)],
            "rejected_proposal_reasons": rejected_reasons(audit_rows), "status": status}


def no_further_hint(records: list[Any], audit_rows: list[Any], status: str) -> bool:
    """No records and no audit rows (an explicit empty proposal), or ``no_recoverable_site``."""
    return status == "no_recoverable_site" or (not records and not audit_rows)


def revision_context(history: Any) -> dict[str, Any]:
    """The feedback object for the next round (§4.1), from the search-state round rows."""
    previous = [copy.deepcopy(_map(_map(row).get("feedback"))) for row in (history if isinstance(history, list) else [])]
    attempts = [_map(a) for fb in previous for a in (fb.get("attempts") or []) if isinstance(a, dict)]
    lock = ""
    for attempt in attempts:
        if all(_map(attempt.get("checker")).get(name) is True for name in LOCK_CHECKS):
            hint = str(attempt.get("hint") or "")
            if not lock or hint == lock or hint.startswith(lock + "\n"):
                lock = hint
    excluded: list[str] = []
    for attempt in attempts:
        hint = str(attempt.get("hint") or "")
        if hint not in excluded:
            excluded.append(hint)
    last = attempts[-1] if attempts else None
    return {
        "previous_rounds": previous,
        "locked_hint": lock,
        "excluded_hints": excluded,
        "needs_relocalization": bool(attempts) and not lock and _map(last and last.get("checker")).get("anchor_matches") is False,
        "anchor_feedback": ({"selected_source_step": last.get("selected_source_step"), "earliest_error_step": last.get("earliest_error_step"),
                             "checker": dict(_map(last.get("checker")))} if last is not None else {}),
    }


def revision_rejection(hint: str, feedback: Any) -> str:
    """§4.2.3: ``repeated_completed_hint`` / ``changed_verified_hint`` / ``""`` (admitted)."""
    feedback = _map(feedback)
    stripped = (hint or "").strip()
    if any(isinstance(h, str) and h.strip() == stripped for h in feedback.get("excluded_hints") or []):
        return "repeated_completed_hint"
    lock = feedback.get("locked_hint") or ""
    if lock and not (hint or "").startswith(lock + "\n"):
        return "changed_verified_hint"
    return ""


def validate_budgets(max_attempts: Any, max_proposals: Any, max_seconds: Any) -> None:
    """As the driver, before any call: attempts 1..32; proposals max_attempts..64; seconds 1..86400."""
    if type(max_attempts) is not int or not 1 <= max_attempts <= 32:
        raise ValueError(f"max_attempts must be an integer between 1 and 32, got {max_attempts!r}")
    if type(max_proposals) is not int or not max_attempts <= max_proposals <= 64:
        raise ValueError(f"max_proposals must be an integer between max_attempts ({max_attempts}) and 64, got {max_proposals!r}")
    if type(max_seconds) not in (int, float) or not 1 <= max_seconds <= 86400:
        raise ValueError(f"max_seconds must be between 1 and 86400, got {max_seconds!r}")


def next_stop(state: Any, max_attempts: int, max_proposals: int, max_seconds: float, tree_bytes: int | None = None) -> str | None:
    """The status that stops the search before the next round, in ``run_search``'s
    order (§4.3), or None to go on. ``tree_bytes``: the size of the search root."""
    rows = [r for r in (_map(state).get("rounds") or []) if isinstance(r, dict)]
    records = [rec for row in rows for rec in (row.get("records") or []) if isinstance(rec, dict)]
    if any(rec.get("accepted") is True for rec in records):
        return "converged"
    if len(records) >= max_attempts:
        return "attempt_budget_exhausted"
    if len(rows) >= max_proposals:
        return "proposal_budget_exhausted"
    elapsed = _map(state).get("elapsed_seconds") or 0
    if isinstance(elapsed, (int, float)) and elapsed >= max_seconds:
        return "time_budget_exhausted"
    if rows and rows[-1].get("no_further_hint") is True:
        return "no_further_grounded_hint"
    if tree_bytes is not None and tree_bytes >= STORAGE_BUDGET:
        return "paused_storage_budget"
    return None


def current_site(history: Any, feedback: Any) -> int | None:
    """The failure site the search is at: the latest round's localized candidate
    (``repair_site.source_step_index``), else the driver's anchor."""
    for row in reversed(history if isinstance(history, list) else []):
        for key in ("candidates", "records"):
            for item in reversed(_map(row).get(key) or []):
                step = _map(_map(item).get("repair_site")).get("source_step_index")
                if type(step) is int:
                    return step
    step = _map(_map(feedback).get("anchor_feedback")).get("selected_source_step")
    return step if type(step) is int else None


def effective_feedback(feedback: dict[str, Any], action: str, step: int | None, site: int | None) -> dict[str, Any]:
    """The feedback object the round runs with after a round decision. approve: the
    driver's, unchanged. relocalize: ``needs_relocalization: true`` and
    ``anchor_feedback`` naming the current site (``selected_source_step``,
    ``earliest_error_step: K`` when given, ``checker.anchor_matches: false``, the
    operator's disagreement): what the driver's localizer reads."""
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
        fb = _map(_map(row).get("feedback"))
        attempts = []
        for attempt in fb.get("attempts") or []:
            if not isinstance(attempt, dict):
                continue
            attempts.append({
                "hint": str(attempt.get("hint") or ""),
                "selected_source_step": attempt.get("selected_source_step"),
                "earliest_error_step": attempt.get("earliest_error_step"),
                "checker": {k: v for k, v in _map(attempt.get("checker")).items() if type(v) is bool},
                "task_passed": attempt.get("task_passed") is True,
                "accepted": attempt.get("accepted") is True,
                "verdict": "accepted" if attempt.get("accepted") is True else "not accepted",
            })
        out.append({"round": index, "directory": str(_map(row).get("directory") or ""), "status": str(fb.get("status") or ""),
                    "rejected_proposal_reasons": [str(r) for r in fb.get("rejected_proposal_reasons") or []], "attempts": attempts})
    return out


# ---------------------------------------------------------------------- the live channel
LiveType = Literal["call_started", "delta", "call_complete", "call_failed", "live_unavailable"]
LIVE_TYPES: tuple[LiveType, ...] = get_args(LiveType)
CallStatus = Literal["running", "complete", "failed"]  # a policy call of the channel, as gate-status and the card say it
CALL_STATUSES: tuple[CallStatus, ...] = get_args(CallStatus)
LIVE_RECORD_PREFIX = b'{"schema_version":"' + LIVE_SCHEMA.encode() + b'","type":"'  # how every record written here begins
TEACHER_REPAIR_STAGE = "psd_teacher_repair"  # the stage of a hinted teacher continuation's own calls

# The real driver's policy calls (psd-run-format §3.3a): every call of a stage goes through
# ``StageRunner._call_llm`` of ``…orchestrator.stage_runner`` (any package path). The in-driver
# gate wraps it only when it has exactly this signature; otherwise the method is left alone
# and the live view says why (gating is not affected). Each parameter: (name, kind, default);
# ``REQUIRED`` marks a parameter without a default.
STAGE_RUNNER_MODULE = "orchestrator.stage_runner"
REQUIRED = "<required>"
CALL_LLM_SIGNATURE: tuple[tuple[str, str, Any], ...] = (
    ("self", "POSITIONAL_OR_KEYWORD", REQUIRED), ("messages", "POSITIONAL_OR_KEYWORD", REQUIRED),
    ("require_tool", "KEYWORD_ONLY", False), ("max_tokens", "KEYWORD_ONLY", None), ("generation_config", "KEYWORD_ONLY", None),
    ("lifecycle_kind", "KEYWORD_ONLY", ""), ("parent_context_request_id", "KEYWORD_ONLY", ""), ("suppress_tools", "KEYWORD_ONLY", False),
    ("active_steps", "KEYWORD_ONLY", None),
)
CALL_LLM_CHANGED = "live view unavailable: `StageRunner._call_llm` changed"


def is_stage_runner(fullname: str) -> bool:
    """``eviscene.orchestrator.stage_runner``, ``src.orchestrator.stage_runner``, … (any package path)."""
    return fullname == STAGE_RUNNER_MODULE or fullname.endswith("." + STAGE_RUNNER_MODULE)


class LiveChannel:
    """The sidecar's live channel (``live.jsonl``): one JSON record a line, appended
    with one ``write`` each, never fsynced (a live view, not evidence: what a driver
    records for good is in its own files). Every record names its ``call`` (one
    policy call) and the gate's ``round`` / ``hint``; ``call_started`` says who
    makes it (``stage``, ``lifecycle_kind``, ``messages``) and whether it ``streams``;
    a streaming call appends one ``delta`` record per streamed event (its ``event``,
    in ``stream --json`` shape: text, token ids, logprobs, tool calls, usage, finish)
    as the server sends it; every call ends with ``call_complete`` (ids, text, finish
    reason, ``request_id``, timings) or ``call_failed`` (the exception's type only).
    ``live_unavailable`` (``call`` "") says the live view of this driver cannot be
    given (``message``). A writer that cannot write (the path is not a regular file,
    a full or vanished disk) stops writing, says so once (``problem``) and never
    raises into the driver; it never blocks on what is not a regular file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.problem: str | None = None
        self._fd: int | None = None

    def _open(self) -> int | None:
        if self._fd is None and self.problem is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # non-blocking: a FIFO in its place fails or is refused below, never waited on
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0),
                             0o644)
            except OSError as exc:
                self.problem = f"live view unavailable: cannot open {self.path.name}: {exc.strerror or exc}"
                return None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                self.problem = f"live view unavailable: {self.path.name} is not a regular file"
                return None
            self._fd = fd
        return self._fd

    def write(self, kind: LiveType, call: str, **fields: Any) -> bool:
        """Append one record (``t``: now, unless given); False once the channel cannot be written."""
        fd = self._open()
        if fd is None:
            return False
        record = {"schema_version": LIVE_SCHEMA, "type": kind, "call": call, "t": time.time(), **fields}
        try:
            os.write(fd, json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n")
        except (OSError, ValueError) as exc:  # ValueError: a value json cannot encode (a circular one)
            self.problem = f"live view unavailable: cannot write {self.path.name}: {getattr(exc, 'strerror', None) or exc}"
            self.close()
            return False
        return True

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def parse_live(data: bytes, *, deltas: bool = True, loads: Callable[[bytes], Any] = json.loads) -> tuple[list[dict[str, Any]], int]:
    """The complete records of live-channel bytes and how many bytes they took (a
    torn last line is left for the next read; a broken complete line is skipped).
    ``deltas=False``: streamed ``delta`` records are skipped unparsed (a summary of the calls).
    ``loads``: one line's JSON parse (a reader may bring a faster one; it raises ``ValueError``
    on a broken line, as ``json.loads`` does)."""
    end = data.rfind(b"\n") + 1
    out = []
    skip = LIVE_RECORD_PREFIX + b'delta"'
    for line in data[:end].split(b"\n"):
        if not line.strip() or (not deltas and line.startswith(skip)):
            continue
        try:
            value = loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and value.get("type") in LIVE_TYPES and isinstance(value.get("call"), str):
            out.append(value)
    return out, end
