"""Typed messages posted by workers (file reading, parsing, watching) to the UI.

Workers never touch widgets: they post one of these and the App / Screen handler
mutates state and widgets.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.scan import Activity
from eviscene_tui.state.scan_work import CheckResult
if TYPE_CHECKING:
    from eviscene_tui.artifacts.case import CaseBundle
    from eviscene_tui.state.case_session import CaseEvent, CaseSession
    from eviscene_tui.state.case_view import Line
    from eviscene_tui.state.triage import TriageMarks
    import subprocess

    from eviscene_tui.gate.decide import DecideResult
    from eviscene_tui.policy.accumulate import StreamAccumulator
    from eviscene_tui.policy.client import ServerStatus
    from eviscene_tui.policy.request import TeacherRequest
    from eviscene_tui.state.gate import GateSnapshot
    from eviscene_tui.state.live import LiveEntry
    from eviscene_tui.tokens.capture import CaptureData
    from eviscene_tui.tokens.decode import TokenDecoder
    from eviscene_tui.tokens.hintspan import HintSpan
    from eviscene_tui.tokens.layout import CellLayout
    from eviscene_tui.tokens.sources import CaptureRef
    from eviscene_tui.tokens.vision import VisionIds


class SummariesBatch(Message):
    """A batch of case rows from the scan (or a re-summary after a change)."""

    def __init__(self, rows: list[CaseRow], *, done: int, initial: bool) -> None:
        super().__init__()
        self.rows = rows
        self.done = done
        self.initial = initial


class ScanFinished(Message):
    def __init__(self, count: int, seconds: float, problems: list[str]) -> None:
        super().__init__()
        self.count = count
        self.seconds = seconds
        self.problems = problems


class IntegrityChecked(Message):
    """Full integrity results for some cases of scan ``scan``; ``done`` of ``total`` checked so far."""

    def __init__(self, scan: int, results: list[CheckResult], *, done: int, total: int) -> None:
        super().__init__()
        self.scan = scan
        self.results = results
        self.done = done
        self.total = total


class IntegrityFinished(Message):
    def __init__(self, scan: int, count: int, seconds: float, error: str | None = None) -> None:
        super().__init__()
        self.scan = scan
        self.count = count
        self.seconds = seconds
        self.error = error


class ActivityChecked(Message):
    """Supervised-search status and staleness of every case (``state.scan.Activity`` by key)."""

    def __init__(self, marks: dict[str, Activity]) -> None:
        super().__init__()
        self.marks = marks


class SupervisedStamp(Message):
    """The fingerprint of the work directory's supervised search state files
    (``state.scan.supervised_stamp``); a change means a search wrote its state."""

    def __init__(self, stamp: tuple[tuple[str, int, int], ...]) -> None:
        super().__init__()
        self.stamp = stamp


class SupervisedChanged(Message):
    """A supervised search of this app wrote its state (a round, a decision, a stop): the
    runs rows re-read the work directory at once."""


class CasesRemoved(Message):
    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys


class FilesChanged(Message):
    """The watcher saw changes under these directories (absolute paths)."""

    def __init__(self, paths: set[str]) -> None:
        super().__init__()
        self.paths = paths


class CaseShown(Message):
    """A case screen opened (``shown``) or closed on the case at ``path``: the app looks
    at the files of the open cases itself when its watcher polls."""

    def __init__(self, path: str, shown: bool) -> None:
        super().__init__()
        self.path = path
        self.shown = shown


class PolicyStatusChanged(Message):
    """The policy server's status line: ``label`` (attested / unattested / no policy) and text."""

    def __init__(self, label: str, text: str) -> None:
        super().__init__()
        self.label = label
        self.text = text


class CaseStepDone(Message):
    """An event a step of a case session posted from its worker (``state.case_session``:
    the case read, the trace's rows, the comparison, the integrity check, a search hit):
    the screen hands it to ``session``, which drops it if it is stale."""

    def __init__(self, session: CaseSession, event: CaseEvent) -> None:
        super().__init__()
        self.session = session
        self.event = event


class StepDetailReady(Message):
    def __init__(self, index: int, detail: list[Line], painted: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.index = index
        self.detail = detail
        self.painted = painted  # to call once the detail is on screen


class LabelsLoaded(Message):
    """The current triage label of every listed case (``state.triage.load_triage``)."""

    def __init__(self, marks: TriageMarks | None, error: str | None, asked: int = 0) -> None:
        super().__init__()
        self.marks = marks
        self.error = error
        self.asked = asked  # which read (the app keeps only the newest asked for)


class LabelWritten(Message):
    """A triage change reached the review journal (fsynced), or ``error`` says why not.
    ``what``: "label", "clear" or "undo"; ``keys``: the runs rows it was for."""

    def __init__(self, what: str, label: str | None, keys: list[str], *, journal: str = "", error: str | None = None,
                 events: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.events = events or []  # the events written (a label / clear applies at once, before the journals are read again)
        self.what = what
        self.label = label
        self.keys = keys
        self.journal = journal
        self.error = error


# ---------------------------------------------------------------- stream screen
class RequestReady(Message):
    """The failure step's request was rebuilt (or ``error`` says why not); ``run_hint`` is
    the hint the run used at that round, to prefill the editor."""

    def __init__(self, request: TeacherRequest | None, error: str | None, run_hint: str | None = None) -> None:
        super().__init__()
        self.request, self.error, self.run_hint = request, error, run_hint


class DraftLoaded(Message):
    """The stream screen's saved draft of its hint was read (``text`` None: there is none,
    or ``error`` says why it could not be used)."""

    def __init__(self, text: str | None, saved_at: str, error: str | None) -> None:
        super().__init__()
        self.text, self.saved_at, self.error = text, saved_at, error


class StreamEnded(Message):
    def __init__(self, status: str, acc: StreamAccumulator) -> None:
        super().__init__()
        self.status, self.acc = status, acc


class LiveCaptureReady(Message):
    def __init__(self, capture: CaptureData | None, error: str | None = None) -> None:
        super().__init__()
        self.capture, self.error = capture, error


class StatusPolled(Message):
    def __init__(self, statuses: list[ServerStatus]) -> None:
        super().__init__()
        self.statuses = statuses


# ---------------------------------------------------------------- the bundled driver
class RepairPlanned(Message):
    """``g`` on a case: the bundled driver's search at ``root`` was attached to or started
    (``note``), or cannot be (``refusal``)."""

    def __init__(self, root: Path, refusal: str, note: str) -> None:
        super().__init__()
        self.root, self.refusal, self.note = root, refusal, note


class LiveRecords(Message):
    """A batch of a gate's live channel (``gate.protocol.LiveChannel``), read and folded by
    the tail worker (``state.live.LiveBatcher``): the calls' own records and runs of their
    stream events."""

    def __init__(self, records: list[LiveEntry], reset: bool = False) -> None:
        super().__init__()
        self.records, self.reset = records, reset


# ---------------------------------------------------------------- token inspector
class DecoderReady(Message):
    def __init__(self, decoder: TokenDecoder) -> None:
        super().__init__()
        self.decoder = decoder


class CapturesListed(Message):
    def __init__(self, refs: list[CaptureRef], error: str | None = None) -> None:
        super().__init__()
        self.refs = refs
        self.error = error


class CaptureLoaded(Message):
    def __init__(self, data: CaptureData, layout: LayoutReady | None = None, decoder: TokenDecoder | None = None) -> None:
        super().__init__()
        self.data = data
        self.layout = layout  # built in the same worker (with guessed vision ids when no decoder was known)
        self.decoder = decoder  # a tokenizer already parsed, found by the load worker


class TokensPrepared(Message):
    """The capture a case screen's ``k`` asked for, read and laid out before the token screen
    is pushed (or why it could not be): ``request`` tells a stale answer from the last one."""

    def __init__(self, request: int, source: str, answer: CaptureLoaded | CaptureFailed) -> None:
        super().__init__()
        self.request = request
        self.source = source
        self.answer = answer


class CaptureFailed(Message):
    def __init__(self, key: str, message: str) -> None:
        super().__init__()
        self.key = key
        self.message = message


class LayoutReady(Message):
    def __init__(self, data: CaptureData, cells: CellLayout, vision: VisionIds | None, target: str = "main") -> None:
        super().__init__()
        self.data = data
        self.cells = cells
        self.vision = vision
        self.target = target  # "main" | "pair"


class PiecesFetched(Message):
    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count


class SpanDecoded(Message):
    def __init__(self, key: str, which: str, text: str) -> None:
        super().__init__()
        self.key = key
        self.which = which
        self.text = text


class ImageReady(Message):
    def __init__(self, key: str, index: int, image: Any, info: dict[str, Any]) -> None:
        super().__init__()
        self.key = key
        self.index = index
        self.image = image
        self.info = info


class HintLocated(Message):
    """The hint span of a hinted-prompt capture (``tokens.hintspan``), with display texts."""

    def __init__(self, key: str, span: HintSpan) -> None:
        super().__init__()
        self.key = key
        self.span = span


class TokenSearchProgress(Message):
    """A text search over a capture has scanned ``done`` of ``total`` ids."""

    def __init__(self, query: str, done: int, total: int, what: str = "searching") -> None:
        super().__init__()
        self.query = query
        self.done = done
        self.total = total
        self.what = what


class TokenSearchDone(Message):
    """A text search's answer: the match span (None: no match) and the ids whose own piece
    holds the text (None when not computed)."""

    def __init__(self, query: str, span: tuple[int, int] | None, members: set[int] | None, target: str = "main") -> None:
        super().__init__()
        self.query = query
        self.span = span
        self.members = members
        self.target = target
# ---------------------------------------------------------------------- operator gate (ui/screens/gate.py)
class GateSnapshotLoaded(Message):
    """A worker read the gate sidecar and the running round's files."""

    def __init__(self, snapshot: "GateSnapshot") -> None:
        super().__init__()
        self.snapshot = snapshot


class GateDecisionDone(Message):
    """A worker took (or was refused) a gate decision."""

    def __init__(self, result: "DecideResult") -> None:
        super().__init__()
        self.result = result


class GateDecisionRequested(Message):
    """The focused gate card asks for a decision (approve-round, relocalize, stop, approve-hint, reject-hint)."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action


class GateCallRequested(Message):
    """Enter on a policy call of the gate card's call list (its entry key)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class GateCallCapture(Message):
    """A worker built the token capture of a completed policy call (or could not: ``error``)."""

    def __init__(self, capture: "CaptureData | None", case: "CaseBundle | None", error: str = "") -> None:
        super().__init__()
        self.capture, self.case, self.error = capture, case, error


class GateResumed(Message):
    """A worker started the gated driver again with --resume (or could not)."""

    def __init__(self, message: str, ok: bool, process: "subprocess.Popen[bytes] | None" = None) -> None:
        super().__init__()
        self.message = message
        self.ok = ok
        self.process = process

