"""pace: background work gives way to the operator's last input, and nothing else waits."""

from __future__ import annotations

import threading

import pytest

from eviscene_tui import pace


class _Clock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(pace.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(pace.time, "sleep", fake.sleep)
    monkeypatch.setattr(pace, "_last_input", float("-inf"))
    return fake


def test_background_work_waits_until_the_last_input_is_quiet(clock: _Clock) -> None:
    pace.note_input()
    clock.now += 0.02  # the key arrived 20 ms ago
    with pace.background():
        slept = pace.yield_to_input()
    assert slept == pytest.approx(pace.QUIET_AFTER_INPUT - 0.02)
    assert clock.now == pytest.approx(pace.last_input() + pace.QUIET_AFTER_INPUT)
    with pace.background():
        assert pace.yield_to_input() == 0.0  # the input is quiet now: no second wait


def test_background_work_waits_while_foreground_work_is_held(clock: _Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """k held the foreground: the background loop sleeps until the capture is painted
    (here: released by the fake clock's third sleep), and no longer than the limit."""
    hold = pace.ForegroundHold()
    assert pace.foreground_held()
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        real_sleep(seconds)
        if len(clock.sleeps) == 3:
            hold.release()

    monkeypatch.setattr(pace.time, "sleep", sleep)
    with pace.background():
        slept = pace.yield_to_input()
    assert slept == pytest.approx(3 * pace.FOREGROUND_POLL) and not pace.foreground_held()
    hold.release()  # a second release (the timer after the paint) changes nothing
    assert not pace.foreground_held()
    assert pace.yield_to_input() == 0.0  # outside background work: never waits
    stuck = pace.ForegroundHold()  # never released: the background goes on after the limit
    try:
        with pace.background():
            assert pace.yield_to_input() == pytest.approx(pace.FOREGROUND_MAX_WAIT, abs=pace.FOREGROUND_POLL)
    finally:
        stuck.release()


def test_work_outside_background_never_waits(clock: _Clock) -> None:
    pace.note_input()
    assert pace.yield_to_input() == 0.0  # the UI thread, a worker the operator waits for
    assert clock.sleeps == []
    with pace.background():
        assert pace.in_background()
    assert not pace.in_background()


def test_no_input_means_no_wait(clock: _Clock) -> None:
    with pace.background():
        assert pace.yield_to_input() == 0.0
    assert clock.sleeps == [] and pace.idle_seconds() == float("inf")


def test_one_call_waits_at_most_max_wait_under_a_stream_of_keys(clock: _Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = clock.sleep

    def typing_sleep(seconds: float) -> None:  # a key arrives during every sleep
        real_sleep(seconds)
        pace.note_input()

    monkeypatch.setattr(pace.time, "sleep", typing_sleep)
    pace.note_input()
    with pace.background():
        slept = pace.yield_to_input(max_wait=0.3)
    assert slept == pytest.approx(0.3)


def test_background_nests_and_is_per_thread(clock: _Clock) -> None:
    seen: list[bool] = []
    with pace.background():
        with pace.background():
            pass
        assert pace.in_background()  # the inner block ended, the outer one goes on
        other = threading.Thread(target=lambda: seen.append(pace.in_background()))
        other.start()
        other.join()
    assert seen == [False] and not pace.in_background()


def _followed_view() -> tuple[float, bool]:
    """What a process following another's clock sees (run in that process)."""
    return pace.last_input(), pace.foreground_held()


def test_a_process_following_the_apps_clock_sees_its_keys_and_foreground_work() -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    shared = pace.share_clock()
    assert shared is not None and pace.share_clock() is shared  # one clock per process
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=pace.follow_clock, initargs=(shared,)) as pool:
        pace.note_input()
        assert pool.submit(_followed_view).result(timeout=60) == (pace.last_input(), False)
        hold = pace.ForegroundHold()
        try:
            assert pool.submit(_followed_view).result(timeout=60)[1] is True
        finally:
            hold.release()
        assert pool.submit(_followed_view).result(timeout=60)[1] is False
    assert pace.foreground_held() is False  # this process follows nobody: its own holds
