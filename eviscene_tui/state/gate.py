"""The operator gate of one driver search, for the app (Textual-free).

- :func:`load_snapshot` does the file reading (run it in a worker thread): the
  sidecar status, the card (the first pending gate), what changed in the
  feedback since the previous round's request, the source trace's steps (for
  relocalize), and the live progress of the round the driver is running, read
  from the files as the driver writes them (localization, proposal, audit rows,
  the runtime ``events.jsonl`` growing, with a torn last line being normal, and
  the verdict).
- :class:`GateSession` holds the latest :class:`GateSnapshot`, notifies
  subscribers when its fingerprint changes, and takes decisions through
  :func:`eviscene_tui.gate.decide.decide` (also file I/O: call it from a worker).
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from eviscene_tui.artifacts.fileio import outside_refusal
from eviscene_tui.artifacts.jsonio import jsonl_lines, read_bound, read_json
from eviscene_tui.gate import INPROC_PATH
from eviscene_tui.gate import protocol as proto
from eviscene_tui.gate.launch import log_stamp, start_detached
from eviscene_tui.gate.decide import DecideResult, DecideUsage, bound_trace_path, decide
from eviscene_tui.gate.review import JournalCheck, StepCheck, journal_check, pinned_site, resume_note, step_checks
from eviscene_tui.gate.sidecar import GateRequest, GateStatus, gate_request, read_status
from eviscene_tui.safe_text import safe_text
from eviscene_tui.policy.events import Delta, PolicyEvent
from eviscene_tui.state.live import LiveCall, LiveCalls, LiveEntry
from eviscene_tui.state.observable import Observable
from eviscene_tui.tokens.capture import CaptureData, Check, from_policy_capture, from_stream
from eviscene_tui.tokens.diff import prompt_diff


@dataclass(frozen=True)
class TraceStep:
    index: int
    stage: str
    label: str  # one line: tool / action and the start of the thought


@dataclass(frozen=True)
class ToolEvent:
    """A tool call of the running round, from its runtime ``events.jsonl``
    (``tool_result_archived`` / ``tool_result_reused``): which tool, and the policy call
    (``after_request``: the last request completed before it in the same archive) it follows."""

    tool: str
    event_type: str
    after_request: str | None
    archive_started: float | None  # when the archive's first event was recorded (epoch), to tell archives apart
    sequence: int


@dataclass(frozen=True)
class RoundProgress:
    """What the driver has written so far for the round it runs."""

    round: int
    directory: Path
    localization_step: int | None = None
    proposals: tuple[str, ...] = ()
    audits: tuple[str, ...] = ()  # "passed" or the rejection reason, per audit row
    events: int = 0  # complete lines in the round's hint runtime events.jsonl files
    last_event: str = ""
    torn_tail: bool = False  # a partly written last line (normal while the driver writes)
    status: str = ""  # the round manifest's status
    verdict: str = ""  # accepted / not accepted / pending verification / ""
    problems: tuple[str, ...] = ()
    recent_events: tuple[str, ...] = ()  # the last few runtime events, one line each
    teacher_steps: tuple[str, ...] = ()  # the hinted teacher episode's steps, once the continuation is stored
    tool_events: tuple[ToolEvent, ...] = ()  # the tool calls of the round's runtime archives, in archive order


@dataclass(frozen=True)
class GateSnapshot:
    status: GateStatus
    card: GateRequest | None
    changes: tuple[str, ...] = ()
    steps: tuple[TraceStep, ...] = ()
    progress: RoundProgress | None = None
    search_status: str = ""
    message: str = ""  # the last decision's outcome, for the screen (only while no newer gate is pending)
    history: tuple[dict[str, Any], ...] = ()  # the latest round gate's history summary
    stopped_by_operator: bool = False  # paused_execution_error with execution_error.type OperatorStoppedSearch
    pinned: str | None = None  # why a relocalize cannot move this real-driver search's site (review.pinned_site)
    step_checks: tuple[StepCheck, ...] = ()  # each relocalize step against the step the driver used
    journal: JournalCheck | None = None
    resume_note: str | None = None  # a round the gate changed: resume only under the gate (the command)

    @property
    def step_notes(self) -> dict[str, str]:
        """decision id -> the mismatch between the step asked and the step used."""
        return {c.decision_id: c.describe() for c in self.step_checks if c.mismatch}

    @property
    def untrusted(self) -> frozenset[str]:
        return self.journal.untrusted if self.journal is not None else frozenset()

    @property
    def journal_problems(self) -> tuple[str, ...]:
        notes = tuple(c.describe() for c in self.step_checks if c.mismatch)
        return (self.journal.lines if self.journal is not None else ()) + notes

    @property
    def search_label(self) -> str:
        """The search status in words: an operator's stop reads as the supervised search and
        the runs rows say it ("stopped by operator"), not as an execution error."""
        return "stopped by operator" if self.stopped_by_operator else self.search_status

    @property
    def fingerprint(self) -> tuple[Any, ...]:
        st = self.status
        return (
            st.driver.alive, st.driver.state, st.driver.waiting, st.driver.exit_code,
            tuple(p.name + p.sha256 for p in st.pending), tuple(d.decision_id for d in st.decisions), st.problems,
            self.progress, self.search_status, self.stopped_by_operator, self.message, len(self.steps),
            tuple(row.get("round") for row in self.history), self.pinned, self.step_checks, self.journal, self.resume_note,
        )


# ---------------------------------------------------------------------- reading
def _quoted(text: Any, limit: int = 160) -> str:
    """A hint in quotes, cut at a word boundary with an ellipsis (never a Python repr)."""
    value = " ".join(str(text or "").split())
    if len(value) > limit:
        value = value[:limit].rsplit(" ", 1)[0] + " …"
    return f"\u201c{value}\u201d"


def _checker_words(checker: Any) -> str:
    if not isinstance(checker, dict) or not checker:
        return "no checker values"
    return ", ".join(f"{k} {'true' if v is True else 'false' if v is False else v}" for k, v in checker.items())


def feedback_changes(previous: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """What changed in the feedback since the previous round's request (plain lines, in words)."""
    if previous is None:
        return ["first round: no earlier feedback"]
    out: list[str] = []
    if previous.get("needs_relocalization") != current.get("needs_relocalization"):
        out.append(f"needs_relocalization: {previous.get('needs_relocalization')} -> {current.get('needs_relocalization')}")
    if (previous.get("locked_hint") or "") != (current.get("locked_hint") or ""):
        out.append("locked hint: " + (_quoted(current.get("locked_hint")) if current.get("locked_hint") else "released"))
    before = set(previous.get("excluded_hints") or [])
    for hint in current.get("excluded_hints") or []:
        if hint not in before:
            out.append(f"newly excluded hint: {_quoted(hint)}")
    if (previous.get("anchor_feedback") or {}) != (current.get("anchor_feedback") or {}):
        anchor = current.get("anchor_feedback") or {}
        out.append(f"anchor: selected step {anchor.get('selected_source_step')}, earliest error step {anchor.get('earliest_error_step')}, "
                   f"{_checker_words(anchor.get('checker'))}")
    rounds = current.get("previous_rounds") or []
    if rounds:
        last = rounds[-1] if isinstance(rounds[-1], dict) else {}
        reasons = last.get("rejected_proposal_reasons") or []
        attempts = last.get("attempts") or []
        out.append(
            f"last round: {last.get('status') or '?'}, {len(attempts)} attempt(s)"
            + (f", rejected proposals: {', '.join(str(r) for r in reasons)}" if reasons else "")
        )
    return out or ["no change"]


_T = TypeVar("_T")

_STAT_CACHE: dict[tuple[str, str], tuple[tuple[int, int], Any]] = {}


def _by_stat(kind: str, path: Path, load: Callable[[Path], _T]) -> _T | None:
    """``load(path)``, re-run only when the file's mtime or size changed (big files
    such as ``search-state.json`` or a continuation are polled every half second)."""
    try:
        st = path.stat()
    except OSError:
        _STAT_CACHE.pop((kind, str(path)), None)
        return load(path)
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _STAT_CACHE.get((kind, str(path)))
    if hit is not None and hit[0] == stamp:
        return cast(_T, hit[1])
    value = load(path)
    if len(_STAT_CACHE) > 256:
        _STAT_CACHE.clear()
    _STAT_CACHE[(kind, str(path))] = (stamp, value)
    return value


def _trace_path(root: Path) -> Path | None:
    path: Path | None = _by_stat("trace-path", root / "search-state.json", lambda state: bound_trace_path(state.parent))
    return path


_STEPS_CACHE: dict[tuple[str, float], tuple[TraceStep, ...]] = {}


def trace_steps(path: Path | None) -> tuple[TraceStep, ...]:
    """One light row per source trace step (cached by path and mtime)."""
    if path is None:
        return ()
    try:
        key = (str(path), path.stat().st_mtime)
    except OSError:
        return ()
    if key in _STEPS_CACHE:
        return _STEPS_CACHE[key]
    doc, problems = read_json(path)
    steps = ((doc or {}).get("state") or {}).get("all_steps") if isinstance(doc, dict) and not problems else None
    out = []
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(step, dict):
            continue
        stage = str(step.get("stage") or step.get("stage_name") or "")
        what = step.get("tool_name") or step.get("action_type") or ""
        thought = str(step.get("thought") or step.get("output") or "")
        out.append(TraceStep(index, safe_text(stage, single_line=True), safe_text(f"{what}: {thought}", single_line=True, limit=100)))
    _STEPS_CACHE.clear()
    _STEPS_CACHE[key] = tuple(out)
    return _STEPS_CACHE[key]


RECENT_EVENTS = 6


def _event_line(row: dict[str, Any]) -> str:
    payload = _v if isinstance(_v := row.get("payload"), dict) else {}
    details = " ".join(f"{k}={v}" for k, v in list(payload.items())[:3] if isinstance(v, (str, int, float, bool)))
    return safe_text(f"#{row.get('sequence')} {row.get('event_type')} {details}".rstrip(), single_line=True, limit=120)


@dataclass
class _EventsTail:
    """What was read of one append-only ``events.jsonl`` up to its last complete line."""

    offset: int = 0
    count: int = 0
    last: str = ""
    recent: tuple[str, ...] = ()
    started: float | None = None  # the first event's recorded_at
    last_request: str | None = None  # the last request completed so far
    tools: tuple[ToolEvent, ...] = ()


TOOL_EVENT_TYPES = ("tool_result_archived", "tool_result_reused")
MAX_TOOL_EVENTS = 200  # per archive: the card lists the newest


def _epoch(value: Any) -> float | None:
    """``recorded_at`` (ISO 8601, ``Z`` or an offset) as epoch seconds, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _tool_of(row: dict[str, Any], tail: _EventsTail, started: float | None) -> ToolEvent | None:
    payload = _v if isinstance(_v := row.get("payload"), dict) else {}
    tool = payload.get("tool_name") or payload.get("tool")
    if row.get("event_type") not in TOOL_EVENT_TYPES or not isinstance(tool, str):
        return None
    sequence = row.get("sequence")
    return ToolEvent(safe_text(tool, single_line=True, limit=60), str(row.get("event_type")), tail.last_request, started,
                     sequence if type(sequence) is int else 0)


_TAILS: dict[str, _EventsTail] = {}


#: at most this much of an events log is read per poll (a huge log is caught up over several polls)
EVENTS_READ_BYTES = 8 << 20


def _read_events(path: Path, inside: list[str]) -> tuple[_EventsTail, bool]:
    """Read only the bytes appended since the last poll; a torn last line (the writer
    is mid-line) is left for the next poll and reported as torn. A path whose symlinks
    lead out of the root is never opened."""
    tail = _TAILS.get(str(path)) or _EventsTail()
    if outside_refusal(str(path), inside) is not None:
        return tail, False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO in its place never blocks
    except OSError:
        return tail, False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return tail, False
        if st.st_size < tail.offset:  # replaced or truncated: start again
            tail = _EventsTail()
        data = os.pread(fd, min(max(st.st_size - tail.offset, 0), EVENTS_READ_BYTES), tail.offset)
    except OSError:
        return tail, False
    finally:
        os.close(fd)
    complete = data.rfind(b"\n") + 1
    if complete == 0 and len(data) == EVENTS_READ_BYTES:
        complete = len(data)  # one line longer than a poll reads is no event: passed over, never held whole
    count, last, recent = tail.count, tail.last, list(tail.recent)
    started, last_request, tools = tail.started, tail.last_request, list(tail.tools)
    for _number, row, error, _at_tail in jsonl_lines(data[:complete]):
        if error is None:
            count += 1
            if isinstance(row, dict):
                last = str(row.get("event_type") or "")
                recent.append(_event_line(row))
                started = started if started is not None else _epoch(row.get("recorded_at"))
                raw = row.get("payload")
                payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
                if last == "context_request_completed" and isinstance(payload.get("request_id"), str):
                    last_request = payload["request_id"]
                tool = _tool_of(row, _EventsTail(last_request=last_request), started)
                if tool is not None:
                    tools.append(tool)
        # a broken complete line is skipped, as every reader of the archive does
    tail = _EventsTail(tail.offset + complete, count, last, tuple(recent[-RECENT_EVENTS:]), started, last_request,
                       tuple(tools[-MAX_TOOL_EVENTS:]))
    if len(_TAILS) > 256:
        _TAILS.clear()
    _TAILS[str(path)] = tail
    return tail, bool(data[complete:].strip())


def _events(run_dir: Path, inside: list[str], recent: list[str] | None = None,
            tools: list[ToolEvent] | None = None) -> tuple[int, str, bool]:
    count, last, torn = 0, "", False
    runtime = run_dir / "runtime"
    if not runtime.is_dir():
        return 0, "", False
    for events in sorted(runtime.glob("*/hint-*/events.jsonl"), key=lambda p: p.stat().st_mtime if p.exists() else 0):
        tail, torn_here = _read_events(events, inside)
        count += tail.count
        torn = torn or torn_here
        if tail.last:
            last = tail.last
        if recent is not None:
            recent.extend(tail.recent)
            del recent[:-RECENT_EVENTS]
        if tools is not None:
            tools.extend(tail.tools)
    return count, last, torn


def _teacher_lines(path: Path, inside: list[str]) -> tuple[str, ...]:
    cont = read_bound(path, verify=False, inside=inside)
    steps = cont.payload.get("teacher_steps") if isinstance(cont.payload, dict) else None
    out = []
    for row in steps if isinstance(steps, list) else []:
        if isinstance(row, dict):
            what = row.get("tool_name") or row.get("action_type") or ""
            said = row.get("thought") or row.get("output") or ""
            out.append(safe_text(f"{row.get('stage_name') or row.get('stage')}: {what}: {said}", single_line=True, limit=140))
    return tuple(out)


def round_progress(root: Path, round_index: int) -> RoundProgress:
    directory = root / "rounds" / f"round-{round_index:02d}"
    inside = _inside(root)  # the root's files only: a symlink out of it is never followed
    problems: list[str] = []
    step = None
    loc, probs = read_json(directory / "semantic-localization.json", inside=inside)
    if isinstance(loc, dict):
        for c in loc.get("candidates") or []:
            if isinstance(c, dict) and c.get("selected") and type(c.get("source_step_index")) is int:
                step = c["source_step_index"]
    proposals: list[str] = []
    bound = read_bound(directory / "hint-proposals.json", verify=False, inside=inside)
    if isinstance(bound.payload, list):
        proposals = [safe_text(str(h.get("text") or ""), single_line=True, limit=160) for h in bound.payload if isinstance(h, dict)]
    audits: list[str] = []
    doc, probs = read_json(directory / "proposer-hint-audits.json", inside=inside)
    if isinstance(doc, dict):
        for row in doc.get("proposals") or []:
            if isinstance(row, dict):
                audits.append("passed" if row.get("passed") is True else safe_text(str(row.get("reason") or "hint_audit_failed"), single_line=True))
    elif probs and probs[0].code != "missing_artifact":
        problems.append(f"proposer-hint-audits.json: {probs[0].message}")
    recent: list[str] = []
    tools: list[ToolEvent] = []
    events, last, torn = _events(directory, inside, recent, tools)
    teacher = _by_stat("teacher", directory / "continuations" / "hint-00.json", lambda p: _teacher_lines(p, inside)) or ()
    manifest, probs = read_json(directory / "manifest.json", inside=inside)
    status = str(manifest.get("status") or "") if isinstance(manifest, dict) else ""
    if probs and probs[0].code != "missing_artifact":
        problems.append(f"manifest.json: {probs[0].message} (the driver may be writing it)")
    verdict = ""
    try:  # never a FIFO, never through a symlink out of the root
        attempts = directory / "repair_attempts.jsonl"
        refused = outside_refusal(str(attempts), inside)
        if refused is not None:
            raise refused
        raw = proto.read_regular(attempts, limit=proto.MAX_JOURNAL_BYTES)
    except (OSError, ValueError):
        raw = b""
    for _n, row, error, _tail in jsonl_lines(raw):
        if error is None and isinstance(row, dict):
            if not row.get("local_verification"):
                verdict = "pending verification"
            else:
                verdict = "accepted" if row.get("accepted") is True else "not accepted"
    return RoundProgress(round_index, directory, step, tuple(proposals), tuple(audits), events, safe_text(last, single_line=True),
                         torn, safe_text(status, single_line=True), verdict, tuple(problems), tuple(recent), teacher, tuple(tools))


def _inside(root: Path) -> list[str]:
    """The boundary of a search root's own files (``fileio.outside_refusal``)."""
    return [os.path.normpath(os.path.abspath(root))]


def _latest_round(root: Path) -> int | None:
    try:
        names = [p.name for p in (root / "rounds").iterdir() if p.is_dir() and p.name.startswith("round-")]
    except OSError:
        return None
    numbers = [int(n[6:]) for n in names if n[6:].isdigit()]
    return max(numbers) if numbers else None


def _request_payload(root: Path, round_index: int) -> dict[str, Any] | None:
    bound = read_bound(root / "requests" / f"round-{round_index:02d}.json", verify=False, inside=_inside(root))
    return bound.payload if isinstance(bound.payload, dict) else None


def _closed_round_gate(gate_dir: Path, round_index: int) -> GateRequest | None:
    """The round gate of ``round_index`` as the operator last saw it: the open gate file,
    or, after a stop the driver consumed, the closed copy set aside in ``consumed/``."""
    name = proto.gate_name(round_index)
    request = gate_request(gate_dir, name)
    if request is not None:
        return request
    try:
        closed = sorted(p for p in (gate_dir / proto.CONSUMED_DIR).glob(f"{name}.gate-closed.*.json") if p.is_file())
    except OSError:
        return None
    for path in reversed(closed):  # the newest first (the names carry a UTC stamp)
        doc, _ = proto.read_document(path)
        if isinstance(doc, dict):
            try:
                data = proto.read_regular(path)
            except (OSError, ValueError):
                continue
            return GateRequest(name, "round", round_index, None, doc, path, proto.sha256_bytes(data))
    return None


def load_snapshot(root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None, *, message: str = "",
                  message_gate: str | None = None) -> GateSnapshot:
    """Read everything the gate screen shows (file I/O; never raises for bad content).
    ``message`` (the last decision's outcome, taken at ``message_gate``) is kept only
    while no other gate is pending: once the driver asks again it is stale."""
    status = read_status(root, gate_dir)
    root_path = status.root
    card = status.pending[0] if status.pending else None
    changes: tuple[str, ...] = ()
    if card is not None:
        previous = _request_payload(root_path, card.round - 1) if card.round > 0 else None
        changes = tuple(safe_text(c, single_line=True, limit=400) for c in feedback_changes(previous, card.feedback))
    history: tuple[dict[str, Any], ...] = ()
    rounds = sorted(d.round for d in status.decisions if d.kind == "round") + ([card.round] if card is not None else [])
    for round_index in sorted(set(rounds), reverse=True):
        # the latest round gate still on disk holds the history; a stop closes its gate,
        # and the history then comes from the closed copy (it stays visible while paused)
        request = _closed_round_gate(status.gate_dir, round_index)
        rows = request.doc.get("history") if request is not None else None
        if isinstance(rows, list):
            history = tuple(r for r in rows if isinstance(r, dict))
            break
    latest = _latest_round(root_path)
    progress = round_progress(root_path, latest) if latest is not None else None
    manifest, _ = read_json(root_path / "manifest.json", inside=_inside(root_path))
    search_status = str(manifest.get("status") or "") if isinstance(manifest, dict) else ""
    error = manifest.get("execution_error") if isinstance(manifest, dict) else None
    stopped = search_status == "paused_execution_error" and isinstance(error, dict) and error.get("type") == "OperatorStoppedSearch"
    if card is not None and message_gate is not None and card.name != message_gate:
        message = ""
    journal = _by_stat("journal", status.gate_dir / proto.JOURNAL_FILE, lambda _p: journal_check(status.gate_dir))
    pinned = _by_stat("pinned", root_path / "search-state.json", lambda _p: pinned_site(root_path, status.session))
    return GateSnapshot(status, card, changes, trace_steps(_trace_path(root_path)), progress,
                        safe_text(search_status, single_line=True), message, history, stopped, pinned=pinned,
                        step_checks=tuple(step_checks(status)), journal=journal, resume_note=resume_note(root_path))


# ---------------------------------------------------------------------- the running round's calls
@dataclass(frozen=True)
class CallEntry:
    """One line of the running round's call list: a policy call, or a tool call between them.
    ``first_teacher``: the first ``psd_teacher_repair`` call of its hint (its prompt is where
    the hint went: the token inspector marks the hint span in it)."""

    call: LiveCall | None = None
    tool: ToolEvent | None = None
    first_teacher: bool = False

    @property
    def key(self) -> str:
        if self.call is not None:
            return "call:" + self.call.call
        tool = self.tool
        return f"tool:{tool.archive_started}:{tool.sequence}:{tool.after_request}" if tool is not None else "none"


def round_entries(calls: list[LiveCall], progress: RoundProgress | None) -> list[CallEntry]:
    """The policy calls of the running round (``progress.round``, else the newest call's
    round) in the order they started, each followed by the tool calls its answer led to
    (the runtime archive's tool events after that call's request, in the same archive).
    A tool call no listed call accounts for is listed at the end: nothing is dropped."""
    round_index = progress.round if progress is not None else (calls[-1].round if calls else None)
    mine = [c for c in calls if c.round == round_index]
    tools = list(progress.tool_events) if progress is not None and progress.round == round_index else []
    archives = sorted({t.archive_started for t in tools if t.archive_started is not None})
    placed: set[int] = set()
    teachers: set[tuple[int | None, int | None]] = set()
    out: list[CallEntry] = []
    for call in mine:
        first = call.stage == proto.TEACHER_REPAIR_STAGE and (call.round, call.hint) not in teachers
        if call.stage == proto.TEACHER_REPAIR_STAGE:
            teachers.add((call.round, call.hint))
        out.append(CallEntry(call=call, first_teacher=first))
        if call.request_id is None:
            continue
        # the archive this call wrote to: the newest one started by then (recorded_at has second resolution)
        archive = next((a for a in reversed(archives) if a <= call.started_at + 1.0), None)
        for i, tool in enumerate(tools):
            if i not in placed and tool.after_request == call.request_id and tool.archive_started in (archive, None):
                placed.add(i)
                out.append(CallEntry(tool=tool))
    out.extend(CallEntry(tool=tool) for i, tool in enumerate(tools) if i not in placed)
    return out


def call_capture(entry: CallEntry, student_ids: list[int] | None = None) -> CaptureData | None:
    """The token capture of a completed policy call, for the token inspector (None: the
    call has no ids to show). The first teacher call of a hint carries the hint: its span
    is found in the prompt from the hint's text; ``student_ids`` (the failure step's own
    prompt ids) add the student-vs-teacher diff."""
    call = entry.call
    if call is None or not call.has_capture:
        return None
    end = call.end
    where = f"round {call.round}" + (f" · hint {call.hint}" if call.hint is not None else "")
    label = safe_text(f"{call.stage or 'policy call'} call · {where}" + (f" · {call.request_id}" if call.request_id else ""),
                      single_line=True, limit=160)
    key = f"live-call:{call.call}"
    usage = end.get("usage") if isinstance(end.get("usage"), dict) else None
    prompt = list(call.prompt_ids or ())
    if call.streaming:  # the bundled driver's streamed continuation: logprobs came with its deltas
        logprobs = [lp.to_json() for ev in call.events if isinstance(ev, Delta) for lp in ev.logprobs]
        data = from_stream(prompt or None, list(call.completion_ids or ()), logprobs=logprobs or None, usage=usage,
                           status=str(end.get("status") or call.status), key=key, label=label)
    else:  # the real driver's policy_token_capture (psd-run-format §3.3), as the call returned it
        capture = {"status": end.get("capture_status"), "prompt_token_ids": prompt, "completion_token_ids": list(call.completion_ids or ()),
                   "completion_logprobs": end.get("completion_logprobs"), "missing": end.get("capture_missing") or []}
        data = from_policy_capture(capture, key=key, label=label, usage=usage)
        if type(end.get("topk")) is int and end["topk"] > 0:
            data.notes.append(f"the live view carries no top-{end['topk']} alternatives: they are in the episode the driver saves")
    data.round_index = call.round
    if entry.first_teacher and call.hint_text and prompt:
        data.hint_text = call.hint_text
        data.hint_prompt_len = len(prompt)
        if student_ids:
            data.student_ids, data.teacher_ids = list(student_ids), prompt
            data.prompt_diff = prompt_diff(student_ids, prompt)
            data.checks.append(Check("info", "student prompt: the failure step's policy_token_capture"))
    return data


# ---------------------------------------------------------------------- session
class GateSession(Observable[GateSnapshot]):
    """One gated search as the app sees it."""

    def __init__(self, root: str | os.PathLike[str], gate_dir: str | os.PathLike[str] | None = None, *, operator: str | None = None) -> None:
        super().__init__()
        self.root = Path(os.path.abspath(os.fspath(root)))
        self.gate_dir = Path(gate_dir) if gate_dir else None
        self.operator = proto.operator_identity(operator)  # the one identity rule of every surface
        self._snapshot: GateSnapshot | None = None
        self._message = ""
        self._message_gate: str | None = None
        self.live = LiveCalls()  # the live channel's policy calls, as the tail has read them

    def take_live(self, records: Sequence[LiveEntry], reset: bool) -> list[tuple[LiveCall, list[PolicyEvent], bool]]:
        """Fold records the live tail read, or its batches (``reset``: the channel was replaced: start over);
        per call touched: (call, its new stream events, whether it started here)."""
        if reset:
            self.live = LiveCalls()
        return self.live.add(records)

    def call_entries(self) -> list[CallEntry]:
        """The running round's policy calls with the tool calls between them."""
        return round_entries(self.live.in_order(), self._snapshot.progress if self._snapshot is not None else None)

    def snapshot(self) -> GateSnapshot | None:
        return self._snapshot

    @property
    def gate_dir_path(self) -> Path:
        return self.gate_dir if self.gate_dir is not None else proto.sidecar_for(self.root)

    def load(self) -> GateSnapshot:
        """File I/O: build a fresh snapshot (from a worker thread)."""
        return load_snapshot(self.root, self.gate_dir, message=self._message, message_gate=self._message_gate)

    def apply(self, snapshot: GateSnapshot) -> bool:
        """Take a snapshot loaded by a worker; notify when it differs. True when changed."""
        if self._snapshot is not None and self._snapshot.fingerprint == snapshot.fingerprint:
            return False
        self._snapshot = snapshot
        self._notify(snapshot)
        return True

    def decide(self, action: str, *, step: int | None = None, reason: str = "", text: str = "", checker: dict[str, Any] | None = None,
               card: GateRequest | None = None) -> DecideResult:
        """File I/O: take a decision on ``card`` (the card the operator saw when asking;
        default the current one) from a worker thread. A gate that changed since is refused."""
        card = card or (self._snapshot.card if self._snapshot else None)
        if card is None:
            return DecideResult(False, "no gate pending")
        try:
            result = decide(self.root, action, card.round, step=step, text=text, reason=reason, checker=checker, operator=self.operator,
                            gate_dir=self.gate_dir, expect_gate_sha256=card.sha256)
        except DecideUsage as exc:
            result = DecideResult(False, str(exc))
        self._message = result.message if result.taken else f"refused: {result.message}"
        self._message_gate = card.name
        return result

    def clear_message(self) -> None:
        """Forget the last decision's outcome (the driver was resumed: it is no longer news)."""
        self._message = ""
        self._message_gate = None

    def resume_refusal(self) -> str:
        """Why R cannot resume the search now ("" when it can); see :func:`resume_refusal`."""
        return resume_refusal(self._snapshot)

    def resume_argv(self) -> list[str] | None:
        """The command that resumes this search under the gate (None when
        :meth:`resume_refusal` gives a reason)."""
        snap = self._snapshot
        if snap is None or self.resume_refusal():
            return None
        session = snap.status.session
        declared = session.get("resume_argv")
        if isinstance(declared, list) and declared and all(isinstance(a, str) for a in declared):
            return list(declared)  # a driver that says how it resumes itself (the bundled driver)
        argv = [str(a) for a in session.get("argv") or []]
        python = str(session.get("python"))
        if "--resume" not in argv:
            argv.append("--resume")
        gate_opts = ["--gate-dir", str(snap.status.gate_dir)]
        if session.get("hint_gate") is False:
            gate_opts.append("--no-hint-gate")
        return [python, str(INPROC_PATH), *gate_opts, "--", *argv]

    def resume_driver(self, argv: list[str]) -> DriverStart:
        """Process start (from a worker thread): run ``argv`` (:meth:`resume_argv`'s) detached,
        its output in a log in the sidecar."""
        log = self.gate_dir_path / f"driver-resume-{log_stamp()}.log"
        try:
            proc = start_detached(argv, log)
        except OSError as exc:
            return DriverStart(None, f"cannot start the driver: {exc}")
        return DriverStart(proc, f"driver resumed under the gate (pid {proc.pid}; log {log})")


@dataclass(frozen=True)
class DriverStart:
    """A driver started again (``process``), or why not (``process`` None), as one line."""

    process: subprocess.Popen[bytes] | None
    message: str


def gate_marker(root: str | os.PathLike[str]) -> str:
    """The runs-screen marker of a case root: ``awaiting operator``, ``driver gone``,
    ``gated`` (a gated driver runs), or "" (no gate sidecar, or the gated driver exited)."""
    gdir = proto.sidecar_for(root)
    if not (gdir / proto.SESSION_FILE).is_file():
        return ""
    status = read_status(root, gdir)
    if resume_note(Path(root)) is not None:
        return "resume under the gate (a plain --resume fails)"
    if status.pending:
        return "awaiting operator" if status.driver.alive else "awaiting operator · driver gone"
    if status.driver.gone:
        return "driver gone"
    if status.driver.alive:
        return "gated"
    return ""


def resume_refusal(snap: GateSnapshot | None) -> str:
    """Why R cannot resume the search of ``snap`` ("" when it can). Resuming applies only
    once the gated driver is gone (it exited after a stop or pause, or its heartbeat went
    stale): never while it runs, nor after the search ended."""
    if snap is None:
        return "the gate has not been read yet"
    driver = snap.status.driver
    if not driver.present:
        return "no gated driver has run here yet (no heartbeat)"
    if driver.alive:
        return f"the driver is still running (pid {driver.pid}, {driver.state or 'alive'}); R resumes it only once it is gone after a stop"
    if driver.state == "exited" and not snap.search_status.startswith("paused_"):
        return f"the search has ended ({snap.search_label or 'no status'}); there is nothing to resume"
    session = snap.status.session
    if not session.get("argv") or not isinstance(session.get("python"), str):
        return "the gate does not know how the driver was started (no argv in its session file)"
    return ""
