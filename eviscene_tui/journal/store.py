"""The append-only, hash-chained decision journal on disk.

- One event per line, canonical JSON, ``\\n`` terminated.
- :meth:`Journal.append` builds the event, writes it with **one** ``os.write`` and
  fsyncs (``storage.append_line``) before returning; only then may the UI say
  "saved".
- Exclusive advisory lock per journal: ``fcntl.flock(LOCK_EX | LOCK_NB)`` on
  ``<journal>.lock`` beside the journal, i.e. in the app's work directory, never
  in a run root (and never ``search.lock``). A second instance opens the journal
  read-only, with :attr:`Journal.read_only_reason` saying why.
- A torn tail (bytes after the last ``\\n`` that do not parse, left by a crash
  mid-write or a foreign writer) is reported, never dropped or overwritten.
  Appending is refused until :meth:`Journal.acknowledge_torn_tail` is called; that
  appends a ``comment`` event recording the torn bytes' offset, length and
  sha256, written on a fresh line so it never merges with the torn bytes, which
  stay in the file and keep being reported (as acknowledged).
- The chain's head is anchored outside the journal: after every append the last
  event's seq and hash go to ``<journal>.head`` (atomically). :func:`verify_chain`
  compares them, so a dropped last event, or one edited with its hash recomputed,
  breaks the chain even though what is left verifies.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.jsonio import canonical_json_bytes, sha256_bytes
from eviscene_tui.gate import protocol as P
from eviscene_tui.journal.events import build_event, event_hash, validate_event_shape
from eviscene_tui.storage import append_line

try:  # pragma: no cover - POSIX only; Windows has no flock
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]  # Windows has no flock


class JournalError(RuntimeError):
    """Appending is not possible (read-only, torn tail not acknowledged, ...)."""


class JournalReadOnly(JournalError):
    pass


class TornTailError(JournalError):
    pass


@dataclass(frozen=True)
class BadLine:
    """A line of the journal that is not a valid event."""

    line: int  # 1-based
    offset: int  # byte offset of the line start
    length: int
    sha256: str
    message: str
    tail: bool  # True for bytes after the last newline

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "offset": self.offset,
            "length": self.length,
            "sha256": self.sha256,
            "message": self.message,
            "tail": self.tail,
        }


@dataclass
class ChainReport:
    """What :func:`verify_chain` found."""

    path: str
    events: int = 0
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    acknowledged: list[int] = field(default_factory=list)  # offsets of torn bytes acknowledged in the chain
    head: str | None = None
    # the seq of the first event that does not verify (and every later one is suspect); None when sound
    broken_at: int | None = None
    warnings: list[str] = field(default_factory=list)  # what does not break the chain but is worth saying

    @property
    def torn_tail(self) -> BadLine | None:
        for bad in self.bad_lines:
            if bad.tail:
                return bad
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "events": self.events,
            "head": self.head,
            "broken_at": self.broken_at,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "bad_lines": [b.as_dict() | {"acknowledged": b.offset in self.acknowledged} for b in self.bad_lines],
        }


def parse_journal_bytes(data: bytes) -> tuple[list[dict[str, Any]], list[BadLine]]:
    """Split on ``\\n`` only; return (parsed events, bad lines)."""
    events: list[dict[str, Any]] = []
    bad: list[BadLine] = []
    offset = 0
    number = 0
    n = len(data)
    while offset < n:
        end = data.find(b"\n", offset)
        tail = end == -1
        stop = n if tail else end
        line = data[offset:stop]
        number += 1
        if line.strip():
            message = None
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                value = None
                message = ("torn tail (no trailing newline): " if tail else "does not parse: ") + str(exc)
            if message is None:
                shape = validate_event_shape(value)
                if shape is not None:
                    message = shape
            if message is None and tail:
                # A complete object without its newline: the write was cut exactly
                # before "\n". It is still torn (never acknowledged as written).
                message = "torn tail: complete JSON but no trailing newline"
            if message is None:
                events.append(value)
            else:
                bad.append(BadLine(number, offset, len(line), sha256_bytes(line), message, tail))
        offset = stop + 1
    return events, bad


def _mark_break(report: ChainReport, seq: int) -> None:
    if report.broken_at is None or seq < report.broken_at:
        report.broken_at = seq


def verify_events(events: list[dict[str, Any]], report: ChainReport) -> None:
    prev: str | None = None
    seen: set[str] = set()
    for position, ev in enumerate(events):
        label = f"event seq={ev.get('seq')} id={str(ev.get('id'))[:12]}"
        before = len(report.problems)
        if ev.get("seq") != position:
            report.problems.append(f"{label}: seq {ev.get('seq')} where {position} was expected")
        if ev.get("prev") != prev:
            report.problems.append(f"{label}: prev does not match the previous event's hash (chain broken)")
        actual = event_hash(ev)
        if ev.get("hash") != actual:
            report.problems.append(f"{label}: hash does not match its content (edited?)")
        ident = ev.get("id")
        if isinstance(ident, str) and ident in seen:
            report.problems.append(f"{label}: duplicate id")
        if len(report.problems) > before:
            _mark_break(report, position)
        seen.add(str(ev.get("id")))
        prev = ev.get("hash") if isinstance(ev.get("hash"), str) else actual
    report.head = prev
    report.events = len(events)


def head_path_for(journal: Path) -> Path:
    """Where a journal's head is anchored: ``<journal>.head`` beside it."""
    return journal.with_name(journal.name + ".head")


def head_record(events: list[dict[str, Any]], size: int) -> dict[str, Any]:
    last = events[-1]
    return {"schema_version": P.HEAD_SCHEMA, "seq": last.get("seq"), "id": last.get("id"), "hash": last.get("hash"),
            "events": len(events), "size": size}


def verify_head(path: Path, events: list[dict[str, Any]], report: ChainReport) -> None:
    """Compare the journal's end with its head record (when it has one)."""
    head, problem = P.read_document(head_path_for(path))
    if problem:
        report.problems.append(f"the journal's head record cannot be read: {problem}")
        _mark_break(report, max(len(events) - 1, 0))
        return
    if head is None:
        return
    seq = head.get("seq")
    if type(seq) is not int:
        report.problems.append("the journal's head record names no seq")
        return
    if seq >= len(events):
        report.problems.append(f"the journal ends at seq {len(events) - 1} but its head record names seq {seq} "
                               f"(hash {str(head.get('hash'))[:12]}): the last event(s) were dropped")
        _mark_break(report, len(events))
    elif events[seq].get("hash") != head.get("hash") or events[seq].get("id") != head.get("id"):
        report.problems.append(f"event seq={seq} is not the one its head record anchors (hash {str(head.get('hash'))[:12]}): "
                               "it was rewritten")
        _mark_break(report, seq)
    elif seq < len(events) - 1:
        report.warnings.append(f"the journal's head record anchors seq {seq}; events {seq + 1}..{len(events) - 1} are not anchored "
                               "(their head was not written)")


def verify_chain(path: str | os.PathLike[str]) -> ChainReport:
    """Parse and verify a journal file. Never raises for bad content.

    ``ok`` is False when the chain is broken (seq, prev or hash mismatch, a bad
    line in the middle that no event acknowledged) or the file cannot be read. A
    torn tail is listed in ``bad_lines`` but by itself leaves ``ok`` True: it is
    what a crash mid-write leaves, and it never held an acknowledged decision.
    """
    report = ChainReport(path=str(path))
    try:
        data = P.read_regular(path, limit=P.MAX_JOURNAL_BYTES)  # never a FIFO: a reader must not block
    except FileNotFoundError:
        return report  # an empty journal is a valid, empty chain
    except (OSError, ValueError) as exc:
        report.ok = False
        report.problems.append(f"cannot read journal: {getattr(exc, 'strerror', None) or exc}")
        return report
    events, bad = parse_journal_bytes(data)
    report.bad_lines = bad
    verify_events(events, report)
    acknowledged = {
        int(ev["data"]["torn_tail"]["offset"])
        for ev in events
        if isinstance(ev.get("data"), dict)
        and isinstance(ev["data"].get("torn_tail"), dict)
        and isinstance(ev["data"]["torn_tail"].get("offset"), int)
    }
    report.acknowledged = sorted(o for o in acknowledged if any(b.offset == o for b in bad))
    for b in bad:
        if not b.tail and b.offset not in acknowledged:
            report.problems.append(f"line {b.line}: {b.message}")
            _mark_break(report, len(parse_journal_bytes(data[: b.offset])[0]))  # the events before the bad line
    verify_head(Path(path), events, report)
    report.ok = not report.problems
    return report


def lock_path_for(journal: Path) -> Path:
    return journal.with_name(journal.name + ".lock")


class Journal:
    """One journal file, opened for appending (lock held) or read-only."""

    def __init__(self, path: str | os.PathLike[str], *, operator: str = "operator", read_only: bool = False) -> None:
        self.path = Path(path)
        self.operator = operator
        self.read_only = read_only
        self.read_only_reason: str | None = "opened read-only" if read_only else None
        self._lock_fd: int | None = None
        self.events: list[dict[str, Any]] = []
        self.bad_lines: list[BadLine] = []
        self._size = 0
        if not read_only:
            self._acquire_lock()
        self.reload()

    # ------------------------------------------------------------------ lock
    def _acquire_lock(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = lock_path_for(self.path)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = ""
            try:
                holder = lock.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                pass
            who = f" (pid {holder})" if holder.isdigit() else ""
            self.read_only = True
            self.read_only_reason = (
                f"the decision journal {self.path} is open in another eviscene-tui instance{who}; "
                "this window is read-only until that one closes"
            )
            return
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            pass
        self._lock_fd = fd

    def close(self) -> None:
        if self._lock_fd is not None:
            try:
                if fcntl is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001 - __del__ must not raise, and at collection there is no one to tell
            pass

    # ------------------------------------------------------------------ reading
    def reload(self) -> None:
        try:
            data = P.read_regular(self.path, limit=P.MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            data = b""
        except (OSError, ValueError) as exc:
            raise JournalError(f"cannot read the journal {self.path}: {getattr(exc, 'strerror', None) or exc}") from None
        self.events, self.bad_lines = parse_journal_bytes(data)
        self._size = len(data)

    @property
    def torn_tail(self) -> BadLine | None:
        for bad in self.bad_lines:
            if bad.tail and not self._acknowledged(bad):
                return bad
        return None

    def _acknowledged(self, bad: BadLine) -> bool:
        for ev in self.events:
            torn = ev.get("data", {}).get("torn_tail") if isinstance(ev.get("data"), dict) else None
            if isinstance(torn, dict) and torn.get("offset") == bad.offset:
                return True
        return False

    @property
    def head(self) -> str | None:
        return self.events[-1].get("hash") if self.events else None

    def verify(self) -> ChainReport:
        return verify_chain(self.path)

    # ------------------------------------------------------------------ writing
    def _check_writable(self) -> None:
        if self.read_only:
            raise JournalReadOnly(self.read_only_reason or "journal is read-only")
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size != self._size:  # someone else wrote (should not happen under the lock)
            self.reload()
        if self.torn_tail is not None:
            t = self.torn_tail
            raise TornTailError(
                f"the journal {self.path} ends with {t.length} torn bytes at offset {t.offset} "
                "(a crash mid-write?); acknowledge them before recording new decisions"
            )

    def _write(self, ev: dict[str, Any], *, fresh_line: bool = False) -> dict[str, Any]:
        line = canonical_json_bytes(ev) + b"\n"
        if fresh_line:
            line = b"\n" + line
        append_line(self.path, line)
        self.events.append(ev)
        self._size += len(line)
        self._anchor()
        return ev

    def _anchor(self) -> None:
        """The head record (:func:`head_path_for`). The event is written already: a head
        that cannot be written is a warning of :func:`verify_chain`, never a lost event."""
        try:
            P.atomic_replace(head_path_for(self.path), P.document_bytes(head_record(self.events, self._size)))
        except OSError:
            pass

    def append(
        self,
        action: str,
        *,
        target: dict[str, Any] | None = None,
        reason: str = "",
        evidence: dict[str, str] | None = None,
        data: dict[str, Any] | None = None,
        operator: str | None = None,
    ) -> dict[str, Any]:
        """Build, write (one write + fsync) and return a new event."""
        self._check_writable()
        ev = build_event(
            seq=len(self.events),
            prev=self.head,
            operator=operator or self.operator,
            action=action,
            target=target,
            reason=reason,
            evidence=evidence,
            data=data,
        )
        return self._write(ev)

    def undo(self, event_id: str, *, reason: str = "", operator: str | None = None) -> dict[str, Any]:
        """Append a reversing event for ``event_id`` (history is never rewritten)."""
        original = next((e for e in self.events if e.get("id") == event_id), None)
        if original is None:
            raise JournalError(f"no event with id {event_id} in this journal")
        if original.get("action") == "undo":
            raise JournalError("an undo cannot be undone; record the decision again instead")
        return self.append(
            "undo",
            target=dict(original.get("target") or {}),
            reason=reason,
            data={"undoes": event_id, "undone_action": original.get("action")},
            operator=operator,
        )

    def acknowledge_torn_tail(self, *, operator: str | None = None, note: str = "") -> dict[str, Any]:
        """Record the torn tail in the chain and make appending possible again.

        The acknowledgement starts on a new line, so it never merges with the torn
        bytes; those stay in the file, and readers keep listing them (acknowledged).
        """
        if self.read_only:
            raise JournalReadOnly(self.read_only_reason or "journal is read-only")
        torn = self.torn_tail
        if torn is None:
            raise JournalError("the journal has no torn tail")
        ev = build_event(
            seq=len(self.events),
            prev=self.head,
            operator=operator or self.operator,
            action="comment",
            reason=note or "acknowledged torn journal tail",
            data={"torn_tail": {"offset": torn.offset, "length": torn.length, "sha256": torn.sha256}},
        )
        return self._write(ev, fresh_line=True)
