"""CaseSession without Textual: the case screen's load / reload / fill / integrity state
machine on a host whose steps run when the test says and whose clock and timers are the
test's (no event loop, no sleeps, no wall-clock figures)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import generate_samples

from eviscene_tui.options import AppOptions
from eviscene_tui.scaffold.samples import copy_case
from eviscene_tui.settings import Settings
from eviscene_tui import pace, switches
from eviscene_tui.state import case_check, case_session
from eviscene_tui.state.case_session import (
    INTEGRITY_GAP,
    MIN_TIMER,
    RELOAD_DELAY,
    RELOAD_GAP,
    CaseEvent,
    CaseSession,
    CaseSnapshot,
    Loaded,
    Step,
    StepContext,
    Update,
)


class Host:
    """Runs the session's steps on demand (in this thread) and fires its timers on a fake clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.steps: list[tuple[str, Step]] = []
        self.timers: list[list] = []  # [due, callback, live]
        self.events: list[CaseEvent] = []
        self.session: CaseSession | None = None

    def clock(self) -> float:
        return self.now

    def run(self, group: str, step: Step) -> None:
        self.steps.append((group, step))

    def later(self, seconds: float, callback: Callable[[], None]) -> Callable[[], None]:
        assert seconds > 0
        timer = [self.now + seconds, callback, True]
        self.timers.append(timer)

        def cancel() -> None:
            timer[2] = False

        return cancel

    def run_step(self, group: str | None = None, *, deliver: bool = True) -> list[CaseEvent]:
        """Run the first pending step (of ``group``); its events go to the session unless
        ``deliver`` is false (then they are returned, to hand over later)."""
        index = next(i for i, (g, _s) in enumerate(self.steps) if group is None or g == group)
        _group, step = self.steps.pop(index)
        posted: list[CaseEvent] = []
        step(StepContext(posted.append, lambda: False))
        if deliver:
            assert self.session is not None
            for event in posted:
                self.session.receive(event)
        return posted

    def settle(self) -> None:
        """Run every step (and the ones they start) until none is left."""
        while self.steps:
            self.run_step()

    def advance(self, seconds: float) -> None:
        """Move the clock on, firing the timers that fall due (in order)."""
        end = self.now + seconds
        while True:
            due = sorted((t for t in self.timers if t[2] and t[0] <= end), key=lambda t: t[0])
            if not due:
                break
            timer = due[0]
            self.now = max(self.now, timer[0])
            timer[2] = False
            timer[1]()
        self.now = end

    def groups(self) -> list[str]:
        return [g for g, _s in self.steps]


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("case-session") / "runs"
    generate_samples(root)
    return root


def _session(samples: Path, tmp_path: Path, name: str = "feedback-converged-3-rounds", **kw) -> tuple[CaseSession, Host, list[tuple[CaseSnapshot, Update]]]:
    root = tmp_path / "runs"
    case = copy_case(samples, name, root)
    options = AppOptions.from_args(root, argparse.Namespace(theme=None, poll=False, operator="tester", workdir=str(tmp_path / "work"), config=None),
                                   settings=Settings())
    host = Host()
    session = CaseSession(case, options, host, clock=host.clock, **kw)
    host.session = session
    seen: list[tuple[CaseSnapshot, Update]] = []
    session.subscribe(seen.append)
    return session, host, seen


def test_a_case_opens_trace_first_then_compare_fill_and_integrity(samples: Path, tmp_path: Path) -> None:
    session, host, seen = _session(samples, tmp_path)
    session.load()
    assert host.groups() == ["case-load"] and session.loading
    host.run_step("case-load")
    # the trace was shown before the case view arrived, and the view's arrival is the first
    updates = [u for _s, u in seen]
    assert updates[0].trace_shown and not updates[0].first
    assert sum(u.first for u in updates) == 1
    snap = seen[-1][0]
    assert snap.title.view is not None and snap.title.problems is None  # the check runs after the first paint
    assert snap.trace.rows is session.trace_rows is not None
    assert f"failure at {session.view.failure_index}" in snap.status.parts
    assert snap.compare.compare is not None
    assert not session.loading
    assert sorted(host.groups()) == ["case-claims", "case-integrity", "trace-fill"] or sorted(host.groups()) == ["case-integrity", "trace-fill"]
    host.settle()
    snap = session.snapshot()
    assert session.trace_rows.filled() == session.trace_rows.step_count
    assert snap.title.problems == 0 and session.integrity == []
    assert any("no problems found" in seg.text for line in snap.integrity.lines for seg in line)
    assert session.gc_holds == 3  # the open, the trace shown, every row built


def test_a_stale_load_is_discarded(samples: Path, tmp_path: Path) -> None:
    """Events of a load that a later load replaced never reach the snapshot."""
    session, host, _seen = _session(samples, tmp_path)
    session.load()
    early = host.run_step("case-load", deliver=False)
    session.load()  # a reload before the first answered
    for event in early:
        if isinstance(event, Loaded):
            session.receive(event)
    assert session.view is None and session.loading  # the first load's view was not taken
    host.run_step("case-load")
    assert session.view is not None and not session.loading


def test_a_closed_session_drops_what_its_steps_post_and_gives_back_its_holds(samples: Path, tmp_path: Path) -> None:
    held: list[int] = []
    session, host, seen = _session(samples, tmp_path, gc_hold=lambda: held.append(1), gc_release=held.pop)
    session.load()
    assert held == [1]  # from the open on, before any file is read
    host.run_step("case-load")
    assert held == [1, 1] and session.gc_holds == 2  # the open, the trace shown
    count = len(seen)
    session.close()
    assert held == [] and session.gc_holds == 0
    host.settle()  # the fill and the check still answer: nobody listens
    assert len(seen) == count and session.integrity is None


def test_a_reload_of_unchanged_files_changes_no_panel(samples: Path, tmp_path: Path) -> None:
    session, host, seen = _session(samples, tmp_path)
    session.load()
    host.settle()
    host.advance(INTEGRITY_GAP)
    host.settle()
    before = len(seen)
    session.load()
    host.settle()
    host.advance(INTEGRITY_GAP)
    host.settle()
    changed = set().union(*(u.parts for _s, u in seen[before:]))
    assert not changed & {"docs", "quotes", "compare", "integrity", "trace"}, changed
    # a new problem in the files is a changed integrity part
    (session.case_path / "scratch.json.tmp").write_bytes(b"{}")
    before = len(seen)
    session.load()
    host.settle()
    host.advance(INTEGRITY_GAP)
    host.settle()
    assert any("integrity" in u.parts for _s, u in seen[before:])
    assert any("scratch.json.tmp" in path for _c, path, _m in session.problem_rows())


def test_a_burst_of_changes_reloads_at_most_once_per_gap_and_reads_the_last_change(samples: Path, tmp_path: Path) -> None:
    """Changes every 25 ms for a second: a reload starts RELOAD_DELAY after the first, the
    next never sooner than RELOAD_GAP after the previous one started, never two at once,
    and a reload starts after the last change."""
    session, host, _seen = _session(samples, tmp_path)
    starts: list[float] = []
    real_load = session.load

    def counted() -> None:
        starts.append(host.now)
        real_load()

    session.load = counted  # type: ignore[method-assign]
    session.load()
    host.settle()
    host.advance(RELOAD_GAP)
    manifest = str(session.case_path / "manifest.json")
    first_change = host.now
    for _n in range(40):
        session.files_changed({manifest})
        host.advance(0.025)
        if "case-load" in host.groups():
            assert host.groups().count("case-load") == 1  # never two loads at once
            host.run_step("case-load")
    last_change = host.now - 0.025
    host.advance(RELOAD_GAP + RELOAD_DELAY)
    host.settle()
    burst = starts[1:]
    assert burst[0] == pytest.approx(first_change + RELOAD_DELAY)
    assert len(burst) >= 3  # reloaded during the burst, not only after it
    assert all(b - a >= RELOAD_GAP - 1e-9 for a, b in zip(burst, burst[1:], strict=False))
    assert burst[-1] > last_change
    session.files_changed({"/elsewhere/manifest.json"})
    host.advance(10)
    assert "case-load" not in host.groups()  # not a file of this case


def test_a_change_during_a_load_reloads_once_more_when_it_ends(samples: Path, tmp_path: Path) -> None:
    session, host, _seen = _session(samples, tmp_path)
    session.load()
    host.advance(RELOAD_GAP)
    session.files_changed({str(session.case_path / "manifest.json")})
    host.advance(RELOAD_DELAY)  # due while the first load still runs: waits for it
    assert host.groups().count("case-load") == 1
    host.run_step("case-load")
    assert session.load_count == 1
    host.advance(MIN_TIMER)
    assert session.load_count == 2


def test_a_due_reload_is_never_timed_at_zero_seconds(samples: Path, tmp_path: Path) -> None:
    """Textual's timer divides by its interval when it wakes late (a loaded machine)."""
    session, host, _seen = _session(samples, tmp_path)
    host.now += 1e9  # the last reload started long ago: the next one is due now
    assert session.reload_wait(0.0) == MIN_TIMER > 0
    session.load()
    assert session.reload_wait(0.0) == pytest.approx(RELOAD_GAP)


def test_integrity_checks_asked_for_during_one_are_coalesced(samples: Path, tmp_path: Path) -> None:
    session, host, _seen = _session(samples, tmp_path)
    session.load()
    host.run_step("case-load")
    assert host.groups().count("case-integrity") == 1 and session.integrity_running
    for _n in range(3):  # three reloads during the check: one more check, not three
        session.load()
        host.run_step("case-load")
    assert host.groups().count("case-integrity") == 1
    host.run_step("case-integrity")
    assert not session.integrity_running and session.integrity_waiting
    assert "case-integrity" not in host.groups()
    host.advance(INTEGRITY_GAP - 0.01)
    assert "case-integrity" not in host.groups()
    host.advance(0.01)
    assert host.groups().count("case-integrity") == 1
    host.run_step("case-integrity")
    host.advance(INTEGRITY_GAP * 3)
    assert "case-integrity" not in host.groups()  # nothing was asked for meanwhile


def test_a_check_that_raises_is_the_checks_result(samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_in_thread: None) -> None:
    def broken(*_a: object, **_kw: object) -> None:
        raise KeyError("no such binding")

    monkeypatch.setattr(case_check, "checked_case", broken)
    session, host, _seen = _session(samples, tmp_path)
    session.load()
    host.settle()
    assert [code for code, _p, _m in session.integrity or []] == ["error"]
    assert "integrity check failed: KeyError" in session.integrity[0][2]
    assert session.snapshot().title.problems == 1 and not session.integrity_running


def test_a_step_that_crashes_ends_the_check_and_the_load(samples: Path, tmp_path: Path) -> None:
    session, host, _seen = _session(samples, tmp_path)
    session.load()
    host.steps.clear()
    session.receive(case_session.StepCrashed("case-load", RuntimeError("boom")))
    assert not session.loading and session.load_error == "RuntimeError: boom"
    assert session.snapshot().title.load_error == "RuntimeError: boom"


def test_only_the_last_k_opens_its_capture_and_every_hold_is_released(samples: Path, tmp_path: Path) -> None:
    from eviscene_tui import pace

    session, host, _seen = _session(samples, tmp_path)
    first = session.begin_tokens()
    assert pace.foreground_held()
    second = session.begin_tokens()
    assert session.tokens_answered(first) == (False, None)
    current, hold = session.tokens_answered(second)
    assert current and hold is not None
    hold.release()
    assert not pace.foreground_held()
    session.begin_tokens()
    session.close()  # another case shown before the capture came
    assert not pace.foreground_held()


def test_a_hit_of_an_older_query_is_dropped(samples: Path, tmp_path: Path) -> None:
    session, host, seen = _session(samples, tmp_path)
    session.load()
    host.settle()
    session.search_typed("zzz-nothing", lambda: 0)
    host.advance(1)
    search = host.run_step("trace-search", deliver=False)
    session.search_typed("other", lambda: 0)  # typed on before the answer came
    for event in search:
        session.receive(event)
    assert session.search_status in (None, "searching the steps\u2026")
    host.advance(1)
    host.run_step("trace-search")
    assert session.search_status == "no step contains \u201cother\u201d"
    assert seen[-1][1].marks == frozenset()
    session.search_closed()
    assert session.search_status is None


def test_a_search_and_the_rows_on_screen_hold_the_foreground_while_they_run(samples: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator waits for a search's answer and for the rows on screen (End on a trace
    the fill has not reached): the case's background work waits while they run, and each
    hold is given back (an error too)."""
    from eviscene_tui import pace
    from eviscene_tui.state.trace_search import TraceSearch

    session, host, _seen = _session(samples, tmp_path)
    session.load()
    host.settle()
    held: list[bool] = []
    real_find = TraceSearch.find

    def find(self, *args, **kwargs):
        held.append(pace.foreground_held())
        return real_find(self, *args, **kwargs)

    monkeypatch.setattr(TraceSearch, "find", find)
    session.search("zzz-nothing", 1, 0)
    host.run_step("trace-search")
    assert held == [True] and not pace.foreground_held()
    monkeypatch.setattr(TraceSearch, "find", lambda self, *a, **k: 1 / 0)
    session.search("zzz-other", 1, 0)
    host.run_step("trace-search")
    assert session.search_status.startswith("search failed") and not pace.foreground_held()

    data = session.trace_rows
    data.rows[:] = [None] * data.step_count  # rows the fill has not built
    built: list[bool] = []
    real_brief = session.trace.quick_brief

    def quick_brief(i: int):
        built.append(pace.foreground_held())
        return real_brief(i)

    monkeypatch.setattr(session.trace, "quick_brief", quick_brief)
    session.rows_wanted(0, data.step_count)
    host.run_step("trace-demand")
    visible = [i for i in range(data.step_count) if data.rows[i] is not None]
    assert len(visible) == data.step_count and built[0] and not built[-1]  # the margin after the rows on screen
    assert not pace.foreground_held()


def test_the_full_check_runs_in_a_process_of_its_own_below_the_apps_priority(samples: Path, tmp_path: Path) -> None:
    """The check (parses of whole documents, hashes) never holds the app's interpreter lock:
    it runs in another process, niced, and finds what the same check on a thread finds."""
    session, host, _seen = _session(samples, tmp_path, "damaged")
    session.load()
    host.settle()
    assert session.probes.check_pid is not None and session.probes.check_pid != os.getpid()
    assert session.probes.check_nice == min(19, os.nice(0) + case_check.CHECK_NICE)
    in_process = list(session.integrity or [])
    assert in_process and session.provenance is not None
    switches.set_off("check_process")
    try:
        again, host_again, _ = _session(samples, tmp_path / "again", "damaged")
        again.load()
        host_again.settle()
    finally:
        switches.set_off("check_process", False)
    assert again.probes.check_pid == os.getpid()
    assert sorted(code for code, _p, _m in again.integrity or []) == sorted(code for code, _p, _m in in_process)
    assert [(code, message) for code, _p, message in again.integrity_in_case] == [(code, message) for code, _p, message in session.integrity_in_case]


def test_without_a_process_the_check_runs_on_its_thread_as_background_work(samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_process(*_a: object, **_kw: object) -> None:
        raise OSError("no semaphores here")

    checks = case_check.CheckProcess()
    monkeypatch.setattr(case_check, "ProcessPoolExecutor", no_process)
    monkeypatch.setattr(case_check, "CHECKS", checks)
    backgrounds: list[bool] = []
    real = case_check.checked_case

    def spy(*args: object, **kwargs: object):
        backgrounds.append(pace.in_background())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(case_check, "checked_case", spy)
    session, host, _seen = _session(samples, tmp_path, "damaged")
    session.load()
    host.settle()
    assert session.probes.check_pid == os.getpid() and backgrounds == [True]
    assert session.integrity
