"""Scanning helpers run in worker threads: discovery + summaries -> CaseRows, and
mapping changed paths to cases. Textual-free.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import islice
from multiprocessing import resource_tracker
from pathlib import Path

from eviscene_tui import pace
from eviscene_tui.artifacts.integrity import safe_read_bound
from eviscene_tui.artifacts.layout import CaseRef, discover_cases
from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.artifacts.report import PARALLEL_MIN_CASES, checked_case
from eviscene_tui.artifacts.summary import summarize_case
from eviscene_tui.gate.bundled import REPAIRS_DIR
from eviscene_tui.gate.protocol import GATES_DIR, SIDECAR_SUFFIX
from eviscene_tui.journal.paths import SUPERVISED_DIR
from eviscene_tui.journal.records import RecordKey, find_search_root
from eviscene_tui.state.gate import gate_marker
from eviscene_tui.state.rows import CaseRow, last_round_status, problem_pairs, row_from_summary, row_key
from eviscene_tui.state.scan_work import (
    CheckResult,
    _pool_worker_start,
    add_no_site_details,
    check_refs,
    checked_rows,
    worker_ready,
)
from eviscene_tui.state.transient import TransientProblems



class LockedTransient(TransientProblems):
    """TransientProblems shared between worker threads and the UI thread."""

    def __init__(self, grace: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(grace, clock)
        self._lock = threading.Lock()

    def classify(self, case_key: str, problems: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        with self._lock:
            return super().classify(case_key, problems)

    def pending_cases(self) -> set[str]:
        with self._lock:
            return super().pending_cases()

    def seed_old(self, case_key: str, problems: Iterable[tuple[str, str]]) -> None:
        with self._lock:
            return super().seed_old(case_key, problems)


def build_row(ref: CaseRef, root: Path, transient: TransientProblems | None, *, initial: bool = False, full: bool = False,
              path_map: PathMap | None = None) -> CaseRow:
    """The row of one case. ``full``: run the whole integrity check (as ``check`` does)
    so the row's problem count is final; otherwise the cheap summary's problems stand
    in until the integrity pass reaches the case."""
    problems = None
    # a case outside the opened folder (a gated search in the work directory) is keyed
    # by extra_base, whoever rebuilds its row (scan, watcher, recheck, gate refresh)
    base = extra_base(root, Path(ref.path)) if outside(root, [Path(ref.path)]) else root
    if full:
        summary, problems = checked_case(ref, base, fingerprint=True, path_map=path_map)
    else:
        summary = summarize_case(ref, base=base, path_map=path_map)
    last = last_round_status(summary.path) if summary.status == "no_further_grounded_hint" else None
    if transient is not None and initial:
        # files last written before the grace period are not being written now
        if summary.mtime and time.time() - summary.mtime > transient.grace:
            transient.seed_old(row_key(summary), problem_pairs(summary.problems if problems is None else problems))
    row = row_from_summary(summary, transient=transient, last_round=last, ref=ref, problems=problems)
    row.gate = gate_marker(summary.path)
    # the record key (journal.records) is read with the labels, after the scan (state.triage)
    add_no_site_details(row, summary.path)
    return row


POOL_CHUNK = 100
THREAD_CHUNK = 10
def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with a real stderr.

    The tracker is started once per process and passes ``sys.stderr``'s descriptor to
    its child; inside the Textual app ``sys.stderr`` is Textual's capture object, whose
    ``fileno()`` is no descriptor, and spawning then fails ("bad value(s) in
    fds_to_keep"). The interpreter's own stderr is put back for that one call."""
    current = sys.stderr
    try:
        usable = current is not None and current.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        usable = False
    if usable or sys.__stderr__ is None:
        resource_tracker.ensure_running()
        return
    sys.stderr = sys.__stderr__
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = current


class ScanPool:
    """The process pool of one scan of a large folder, shared by its parts: started as
    soon as the folder is known to be large (its processes start and import the checkers
    while the first rows are read in the app), used by the scan's reads
    (:func:`scan_large`) and then by the integrity pass of the first rows
    (:func:`integrity_pass`), and shut down by whoever owns it (:meth:`close`). Spawning
    a pool costs each process more than checking a few hundred cases, so one scan spawns
    it once. The app runs threads: forking it is unsafe, so the processes are spawned."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._unusable = False  # could not start, broke or closed: the work is done in threads

    def executor(self) -> ProcessPoolExecutor | None:
        """The pool, started at the first call (None when it cannot start or is closed)."""
        with self._lock:
            if self._pool is None and not self._unusable:
                try:
                    _start_resource_tracker()
                    pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=_pool_worker_start)
                    for _ in range(self.workers):  # one task each: every process starts now
                        pool.submit(worker_ready)
                except (OSError, RuntimeError, ValueError):  # no semaphores, no process
                    self._unusable = True
                    return None
                self._pool = pool
            return self._pool

    def start(self) -> bool:
        """Start the pool's processes now; False when there is no pool."""
        return self.executor() is not None

    def broken(self) -> None:
        """A worker died (killed, out of memory): nothing more is sent to this pool."""
        self.close()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._unusable = True
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def integrity_pass(
    items: list[tuple[str, CaseRef]],
    base: str,
    *,
    cancelled: Callable[[], bool] = lambda: False,
    workers: int | None = None,
    path_map: PathMap | None = None,
    pool: ScanPool | None = None,
    run: Callable[..., list[CheckResult] | None] | None = None,
) -> Iterator[list[CheckResult]]:
    """Run the full integrity check over ``items``, yielding results in small batches
    as they complete. Large folders use a process pool (the check hashes files and
    parses ledgers: CPU-bound work the UI thread must not share a GIL with): ``pool``,
    the scan's own, when given (it stays open), else one started and shut down here. A
    smaller one is checked in batches through ``run`` (``run(check_refs, batch, base,
    path_map, cancelled=...)``, None when cancelled: the app's check process), else here."""
    n_workers = workers if workers is not None else (pool.workers if pool is not None else (os.cpu_count() or 1))
    if n_workers <= 1 or len(items) < PARALLEL_MIN_CASES:
        for start in range(0, len(items), THREAD_CHUNK):
            if cancelled():
                return
            chunk = items[start : start + THREAD_CHUNK]
            batch = check_refs(chunk, base, path_map) if run is None else run(check_refs, chunk, base, path_map, cancelled=cancelled)
            if batch is None:
                return
            yield batch
        return
    own = pool is None
    shared = ScanPool(n_workers) if pool is None else pool
    chunks = [items[i : i + POOL_CHUNK] for i in range(0, len(items), POOL_CHUNK)]
    executor = shared.executor()
    pending: dict[Future[list[CheckResult]], list[tuple[str, CaseRef]]] = {}
    left: list[list[tuple[str, CaseRef]]] = []
    try:
        if executor is None:
            left = chunks
        else:
            for n, chunk in enumerate(chunks):
                try:
                    pending[executor.submit(check_refs, chunk, base, path_map)] = chunk
                except (BrokenProcessPool, RuntimeError):  # broken or closed meanwhile: the rest is checked here
                    shared.broken()
                    left.extend(chunks[n:])
                    break
        while pending:
            if cancelled():
                return
            done, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for future in done:
                chunk = pending.pop(future)
                try:
                    result = future.result()
                except (BrokenProcessPool, CancelledError):  # a worker died (killed, out of memory): finish here
                    shared.broken()
                    left.append(chunk)
                    continue
                yield result
    finally:
        for future in pending:
            future.cancel()
        if own:
            shared.close()
    if left:
        yield from integrity_pass([item for chunk in left for item in chunk], base, cancelled=cancelled, workers=1, path_map=path_map)


def scan_large(
    refs: Iterator[CaseRef],
    base: str,
    *,
    cancelled: Callable[[], bool] = lambda: False,
    workers: int | None = None,
    path_map: PathMap | None = None,
    pool: ScanPool | None = None,
) -> Iterator[list[tuple[CaseRow, CheckResult]]]:
    """The cases of a large folder read and fully checked in a process pool as discovery
    finds them (``refs`` is consumed as the pool takes work): rows with their final problem
    counts, in batches as they complete. ``pool``: the scan's own, when given (it stays
    open for the integrity pass), else one started and shut down here. Without a pool (no
    semaphores, no process): here."""
    own = pool is None
    shared = ScanPool(workers) if pool is None else pool
    executor = shared.executor()
    if executor is None:
        for chunk in iter(lambda: list(islice(refs, THREAD_CHUNK)), []):
            if cancelled():
                return
            yield checked_rows(chunk, base, path_map)
        return
    pending: dict[Future[list[tuple[CaseRow, CheckResult]]], list[CaseRef]] = {}
    left: list[CaseRef] = []
    more = True
    try:
        while more or pending:
            if more:
                more = _submit_ahead(executor, shared, pending, refs, left, (base, path_map), cancelled)
            if cancelled():
                return
            done, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for future in done:
                chunk = pending.pop(future)
                try:
                    yield future.result()
                except (BrokenProcessPool, CancelledError):  # a worker died (killed, out of memory): finish here
                    shared.broken()
                    left.extend(chunk)
    finally:
        for future in pending:
            future.cancel()
        if own:
            shared.close()
    for start in range(0, len(left), THREAD_CHUNK):
        if cancelled():
            return
        yield checked_rows(left[start : start + THREAD_CHUNK], base, path_map)


def _submit_ahead(executor: ProcessPoolExecutor, shared: ScanPool, pending: dict[Future[list[tuple[CaseRow, CheckResult]]], list[CaseRef]],
                  refs: Iterator[CaseRef], left: list[CaseRef], args: tuple[str, PathMap | None], cancelled: Callable[[], bool]) -> bool:
    """Give the pool chunks of discovery until a few are in flight (discovery stays a few
    chunks ahead). False once discovery is exhausted, or the pool broke or was closed (the
    rest of discovery then goes to ``left``, to be read here, unless the scan is cancelled)."""
    while len(pending) < 2 * shared.workers:
        chunk = list(islice(refs, POOL_CHUNK))
        if not chunk:
            return False
        try:
            pending[executor.submit(checked_rows, chunk, *args)] = chunk
        except (BrokenProcessPool, RuntimeError):
            if not cancelled():
                shared.broken()
                left.extend(chunk)
                left.extend(refs)
            return False
    return True


def outside(root: Path, extra: Iterable[Path]) -> list[Path]:
    """The ``extra`` roots that are not under ``root`` (those the scan of ``root`` misses)."""
    base = os.path.abspath(root)
    out = []
    for path in extra:
        apath = os.path.abspath(path)
        if apath != base and not apath.startswith(base.rstrip(os.sep) + os.sep):
            out.append(Path(apath))
    return out


def extra_base(root: Path, path: Path) -> Path:
    """The base an extra root's row key is relative to: the opened folder's parent when
    the extra root is beside it (the default work directory ``<root>.eviscene-tui``:
    ``sample_runs.eviscene-tui/demo/…``), else the file-system root. Never ``../`` keys."""
    parent = Path(os.path.abspath(root)).parent
    apath = os.path.abspath(path)
    if apath.startswith(str(parent).rstrip(os.sep) + os.sep):
        return parent
    return Path(Path(apath).anchor)


def scan_rows(
    root: Path,
    transient: TransientProblems | None = None,
    *,
    cancelled: Callable[[], bool] = lambda: False,
    problems: list[Problem] | None = None,
    base: Path | None = None,
    extra: Iterable[Path] = (),
) -> Iterator[CaseRow]:
    """Discover and summarise every case under ``root``, one row at a time; row keys are
    relative to ``base`` (default ``root``). Then the cases of the ``extra`` roots outside
    ``root`` (gated searches the app was told about, such as the demo's stand-in search
    in the work directory)."""
    key_base = base if base is not None else root
    for ref in discover_cases(root, problems):
        if cancelled():
            return
        yield build_row(ref, key_base, transient, initial=True)
    for other in outside(root, extra):
        if not other.exists():
            continue  # not written yet: the runs screen adds it once it is (see extra_rows)
        for ref in discover_cases(other, problems):
            if cancelled():
                return
            yield build_row(ref, key_base, transient, initial=True)


def extra_rows(root: Path, extra: Iterable[Path], known: set[str], base: Path | None = None) -> list[CaseRow]:
    """Rows of the cases of the ``extra`` roots outside ``root`` whose absolute paths are
    not in ``known`` (a gated search whose driver wrote its root after the scan); keys
    relative to ``base`` (default ``root``) as :func:`scan_rows` makes them."""
    out = []
    for other in outside(root, extra):
        if not other.exists():
            continue
        for ref in discover_cases(other):
            if os.path.abspath(ref.path) not in known:
                out.append(build_row(ref, base if base is not None else root, None))
    return out


@dataclass(frozen=True, slots=True)
class ScannedTree:
    """A folder scanned and fully checked before the app opened it: the rows its scan
    worker would post, the results its integrity pass would post, and the discovery
    problems. An app given one starts from these instead of scanning (the test suite
    scans the sample tree once and starts every screen test on it)."""

    rows: tuple[CaseRow, ...]
    checks: tuple[CheckResult, ...]
    problems: tuple[str, ...] = ()


def scan_tree(root: Path, *, base: Path | None = None, extra: Iterable[Path] = (), path_map: PathMap | None = None) -> ScannedTree:
    """Scan and check every case under ``root`` in this thread, as the app's scan worker
    and integrity pass do (row keys relative to ``base``, default ``root``)."""
    problems: list[Problem] = []
    rows = list(scan_rows(root, LockedTransient(), problems=problems, base=base, extra=extra))
    items = [(row.key, row.ref) for row in rows if isinstance(row.ref, CaseRef)]
    key_base = os.path.abspath(base if base is not None else root)
    checks = [result for batch in integrity_pass(items, key_base, workers=1, path_map=path_map) for result in batch]
    return ScannedTree(tuple(rows), tuple(checks), tuple(f"{p.code}: {p.path}: {p.message}" for p in problems))


def batched(rows: Iterable[CaseRow], *, first: int = 20, size: int = 500, interval: float = 0.2) -> Iterator[list[CaseRow]]:
    """Group rows for posting: a small first batch (fast first paint), then batches
    of ``size`` or whatever arrived within ``interval`` seconds."""
    batch: list[CaseRow] = []
    limit = first
    last = time.monotonic()
    for row in rows:
        batch.append(row)
        now = time.monotonic()
        if len(batch) >= limit or now - last >= interval:
            yield batch
            batch = []
            limit = size
            last = now
    if batch:
        yield batch


class CaseIndex:
    """Absolute case root -> row key, to map watcher paths to cases."""

    def __init__(self) -> None:
        self._by_path: dict[str, str] = {}
        self._refs: dict[str, CaseRef] = {}
        self._folders: frozenset[str] | None = None  # parents of the case roots (None = to recompute)

    def add(self, row: CaseRow) -> None:
        ref = row.ref
        path = getattr(ref, "path", None)
        if path is None:
            return
        apath = os.path.abspath(str(path))
        if apath not in self._by_path:
            self._folders = None
        self._by_path[apath] = row.key
        if isinstance(ref, CaseRef):
            self._refs[row.key] = ref

    def remove(self, key: str) -> None:
        for path in [p for p, k in self._by_path.items() if k == key]:
            del self._by_path[path]
            self._folders = None
        self._refs.pop(key, None)

    def ref(self, key: str) -> CaseRef | None:
        return self._refs.get(key)

    def case_for(self, path: str) -> str | None:
        """The key of the case containing ``path`` (deepest match), or None."""
        p = os.path.abspath(path)
        while True:
            key = self._by_path.get(p)
            if key is not None:
                return key
            parent = os.path.dirname(p)
            if parent == p:
                return None
            p = parent

    def paths(self) -> dict[str, str]:
        return dict(self._by_path)

    def folders(self) -> frozenset[str]:
        """The folders that hold the known cases (where a new case would appear)."""
        folders = self._folders
        if folders is None:
            folders = self._folders = frozenset(os.path.dirname(p) for p in list(self._by_path))
        return folders


# a search whose files say ``searching`` but that nothing has written to for this long is
# marked stale (its driver or the app's supervised search probably died)
STALE_AFTER = 3600.0


@dataclass(frozen=True, slots=True)
class Activity:
    """What the runs table shows besides a case's own files: the app's supervised search
    of the case (its status in the work directory) and whether a ``searching`` case has
    gone quiet."""

    supervised: str = ""  # status of ``<workdir>/supervised/<key>/search-state.json``; "" = none
    stale_for: float = 0.0  # seconds since the last write of a search that says it is searching; 0 = not stale


def supervised_status(workdirs: Iterable[Path], case_root: str | os.PathLike[str] | None, record: RecordKey | None,
                      *, opened: str | os.PathLike[str] | None = None) -> tuple[str, float]:
    """(status, mtime) of the bundled driver's search of a case (``eviscene-tui repair``,
    with its gate's marker), else of an earlier version's in-app search (read-only), in the
    first of the work directories that holds one (``journal.records.find_search_root``),
    or ("", 0.0)."""
    if case_root is None or record is None:
        return "", 0.0
    dirs = list(workdirs)
    repair = find_search_root(case_root, record, dirs, folder=REPAIRS_DIR, opened=opened)
    if repair is not None:
        status, mtime = _search_status(repair / "search-state.json")
        if status:
            marker = gate_marker(repair)
            return (f"{status} · {marker}" if marker else status), mtime
    earlier = find_search_root(case_root, record, dirs, folder=SUPERVISED_DIR, opened=opened)
    if earlier is None:
        return "", 0.0
    status, mtime = _search_status(earlier / "search-state.json")
    return (f"{status} (earlier in-app search, read-only)" if status else ""), mtime


def _search_status(state: Path) -> tuple[str, float]:
    try:
        mtime = state.stat().st_mtime
    except OSError:
        return "", 0.0
    read = safe_read_bound(str(state))
    payload = read.payload if isinstance(read.payload, dict) else {}
    status = payload.get("status")
    error = payload.get("execution_error")
    if status == "paused_execution_error" and isinstance(error, dict) and error.get("type") == "OperatorStoppedSearch":
        return "stopped by operator", mtime  # the operator's stop, written as the driver gate writes it
    return (status if isinstance(status, str) and status else "unreadable"), mtime


def supervised_stamp(workdirs: Iterable[Path] | Path | None) -> tuple[tuple[str, int, int], ...]:
    """(search, mtime ns, size) of every supervised search state file in the work
    directories: a cheap fingerprint that changes when any search (this app's or another
    instance's) writes its state. A few ``stat`` calls; run it off the UI thread."""
    if workdirs is None:
        return ()
    out = []
    for workdir in [workdirs] if isinstance(workdirs, Path) else list(workdirs):
        for folder in (SUPERVISED_DIR, REPAIRS_DIR):
            out.extend(_search_files(Path(workdir) / folder))
    return tuple(out)


def _search_files(folder: Path) -> list[tuple[str, int, int]]:
    """(path, mtime ns, size) of each search's state and its gate's gates/ folder (a gate
    opened or closed) under ``folder``."""
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it if e.is_dir()]
    except OSError:
        return []
    out = []
    for name in sorted(names):
        for file in ("search-state.json", f"../{name}{SIDECAR_SUFFIX}/{GATES_DIR}"):
            try:
                st = os.stat(folder / name / file)
            except OSError:
                continue
            out.append((os.path.join(str(folder), name, file), st.st_mtime_ns, st.st_size))
    return out


def activity(rows: Iterable[CaseRow], workdirs: Iterable[Path] | Path | None, *, now: float | None = None,
             opened: str | os.PathLike[str] | None = None) -> dict[str, Activity]:
    """The :class:`Activity` of each row (file reads: run it in a worker thread)."""
    now = time.time() if now is None else now
    dirs = [] if workdirs is None else ([workdirs] if isinstance(workdirs, Path) else list(workdirs))
    out: dict[str, Activity] = {}
    for n, row in enumerate(rows, 1):
        if n % 200 == 0:
            pace.yield_to_input()  # in background work (the app's activity pass): a key goes first
        path = getattr(row.ref, "path", None)
        supervised, smtime = supervised_status(dirs, path, row.record, opened=opened) if dirs else ("", 0.0)
        stale = 0.0
        if row.status == "searching" and row.mtime and now - row.mtime > STALE_AFTER:
            stale = now - row.mtime
        elif supervised == "searching" and smtime and now - smtime > STALE_AFTER:
            stale = now - smtime
        out[row.key] = Activity(supervised, stale)
    return out


class KeyThrottle:
    """At most one re-read of a case per ``gap`` seconds while its files keep changing.

    A driver writing a case at full speed changes its files many times a second; each
    re-read of a changed case runs its whole integrity check (it hashes every bound input,
    a source trace of hundreds of MB included), so re-reading on every watcher batch keeps
    a core busy and the UI stutters. The first change of a quiet case is re-read at once
    (leading edge); later changes within ``gap`` are held and re-read once when it ends
    (trailing edge), so the last state is always shown."""

    def __init__(self, gap: float = 1.0) -> None:
        self.gap = gap
        self._last: dict[str, float] = {}  # key -> when it was last let through
        self._held: set[str] = set()

    def admit(self, keys: Iterable[str], now: float) -> set[str]:
        """The keys to re-read now; the others are held until their gap ends."""
        ready = set()
        for key in keys:
            if now - self._last.get(key, -self.gap) >= self.gap:
                ready.add(key)
                self._last[key] = now
                self._held.discard(key)
            else:
                self._held.add(key)
        return ready

    def due(self, now: float) -> set[str]:
        """Held keys whose gap has ended (let through now)."""
        ready = {key for key in self._held if now - self._last.get(key, -self.gap) >= self.gap}
        for key in ready:
            self._held.discard(key)
            self._last[key] = now
        return ready

    def wait(self, now: float, default: float) -> float:
        """How long until the next held key is due (``default`` when none is held)."""
        if not self._held:
            return default
        soonest = min(self._last.get(key, now) + self.gap for key in self._held)
        return max(0.0, min(default, soonest - now))


class EntryPoller:
    """A cheap stat-based look for new cases, for ``--poll`` (no inotify).

    Polling the whole tree for changes stats every file; doing that often burns a core on
    a large tree, doing it rarely makes a new case wait. A new case is a new entry in a
    folder that holds cases (the opened root, a wrapper's ``repairs/``): stat just those
    folders often, and list a folder only when its mtime changed. A new entry that is not
    a case yet (a copy or a driver still creating it) is offered again at every tick until
    it is a known case, for at most ``settle`` seconds."""

    def __init__(self, root: str, *, settle: float = 3.0) -> None:
        self.root = os.path.abspath(root)
        self.settle = settle
        self._mtimes: dict[str, int] = {}  # folder -> st_mtime_ns seen
        self._entries: dict[str, set[str]] = {}  # folder -> names seen in it
        self._fresh: dict[str, float] = {}  # new entry -> when it was first seen

    def _names(self, folder: str) -> set[str]:
        try:
            return {e.name for e in os.scandir(folder) if not e.name.startswith(".")}
        except OSError:
            return set()

    def tick(self, folders: Iterable[str], now: float, known: Callable[[str], bool]) -> set[str]:
        """Paths to re-read: new entries of ``folders`` (those that hold the known cases;
        the opened root is always looked at) and the new entries that are not yet a
        known case (``known``)."""
        inside = self.root + os.sep
        for folder in {self.root, *(f for f in folders if f.startswith(inside))}:
            try:
                mtime = os.stat(folder).st_mtime_ns
            except OSError:
                continue
            if self._mtimes.get(folder) == mtime:
                continue
            names = self._names(folder)
            if folder in self._mtimes:  # not the first look: what is new is a change
                for name in names - self._entries.get(folder, set()):
                    self._fresh.setdefault(os.path.join(folder, name), now)
            self._mtimes[folder] = mtime
            self._entries[folder] = names
        out: set[str] = set()
        for path, since in list(self._fresh.items()):
            if known(path) or now - since > self.settle or not os.path.isdir(path):
                del self._fresh[path]
            else:
                out.add(path)
        return out


class OpenCasePoller:
    """For ``--poll`` (and a watcher that fell back to polling): the files of the cases
    open on screen, looked at often.

    The polling watcher compares whole-second modification times, so a file a driver keeps
    appending to (a runtime ``events.jsonl``, a manifest rewritten every 50 ms) is seen to
    change once a second at best, and an open case would lag behind its files.
    Here each open case's tree is walked and every file's (mtime in ns, size) compared with
    the last walk; a changed, new or removed file is reported. A walk's cost grows with the
    case, so the next walk of a case waits ``min_interval`` or ``1 / budget`` times as long
    as its last walk took, whichever is longer: walking takes at most about ``budget`` of
    a core. The first walk of a case only records what is there."""

    def __init__(self, *, min_interval: float = 0.2, budget: float = 0.1) -> None:
        self.min_interval = min_interval
        self.budget = budget
        self._seen: dict[str, dict[str, tuple[int, int]]] = {}  # case root -> file -> (mtime_ns, size)
        self._due: dict[str, float] = {}  # case root -> monotonic time of its next walk

    def tick(self, cases: Iterable[str], now: float) -> set[str]:
        """The files of ``cases`` (absolute roots) that changed since their last walk, for
        the cases due now; cases no longer given are forgotten."""
        roots = set(cases)
        for gone in set(self._seen) - roots:
            del self._seen[gone]
            self._due.pop(gone, None)
        changed: set[str] = set()
        for root in roots:
            if self._due.get(root, 0.0) > now:
                continue
            started = time.perf_counter()
            files = _file_signatures(root)
            before = self._seen.get(root)
            if before is not None:
                changed.update(p for p, sig in files.items() if before.get(p) != sig)
                changed.update(p for p in before if p not in files)
            self._seen[root] = files
            took = time.perf_counter() - started
            self._due[root] = now + max(self.min_interval, took / self.budget)
        return changed


def _file_signatures(root: str) -> dict[str, tuple[int, int]]:
    """Every regular file under ``root`` (symlinks not followed): (mtime in ns, size)."""
    out: dict[str, tuple[int, int]] = {}
    stack = [root]
    while stack:
        stack.extend(_scan_folder(stack.pop(), out))
    return out


def _scan_folder(folder: str, out: dict[str, tuple[int, int]]) -> list[str]:
    """The signatures of ``folder``'s files into ``out``; its subfolders returned."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    folders = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                out[entry.path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            continue  # gone meanwhile: reported as removed by the caller's comparison
    return folders
