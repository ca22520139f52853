"""The thread pool the app's thread workers run on: daemon threads that never hold the
process open.

Textual runs a thread worker on its event loop's default executor. asyncio's default,
a ``ThreadPoolExecutor``, is joined when the loop closes and again when the interpreter
exits, so one job blocked in the kernel (a read from a slow network filesystem, a file
that never answers) kept the app's process alive after ``q``: the screen was gone but
the terminal never came back. Here every job runs on a daemon thread, and shutting the
pool down never waits for a job that is still running: quitting always quits. A job is
told to stop the way it always was (Textual's worker cancellation, which our loops
check); one that cannot notice is simply left behind when the process ends.

No job here writes evidence: the app's own writes (journals, records) are appended or
atomically renamed by the code that makes them, so a job abandoned at exit leaves at
most a temporary file its writer cleans up next time.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadExecutor(ThreadPoolExecutor):
    """Up to ``max_workers`` daemon threads, started as jobs arrive and kept while idle.

    A ``ThreadPoolExecutor`` only in type (asyncio accepts no other as a loop's default
    executor): :meth:`submit` and :meth:`shutdown` are its own, so none of the base
    class's (non-daemon, joined at exit) threads is ever started."""

    def __init__(self, max_workers: int = 16, name: str = "eviscene-worker") -> None:
        super().__init__(max_workers=1)
        self._max = max_workers
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._daemons: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a job that no queued job is promised to yet
        self._backlog = 0  # queued jobs that found every thread busy (the next free one takes them)
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            future: Future[T] = Future()
            self._jobs.put((future, fn, args, kwargs))
            # the job is promised, under the lock, to an idle thread or to a new one, so a
            # stuck job never holds up the next (counting the queue against threads that
            # were about to take a job raced: a job could find no thread at all)
            if self._idle > 0:
                self._idle -= 1
            elif len(self._daemons) < self._max:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._daemons)}", daemon=True)
                self._daemons.append(thread)
                thread.start()
            else:
                self._backlog += 1
            return future

    def _work(self) -> None:
        first = True  # a new thread was started for a job already queued
        while True:
            if not first:
                with self._lock:
                    if self._backlog > 0:
                        self._backlog -= 1  # a queued job waits for this thread
                    else:
                        self._idle += 1
            first = False
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args, kwargs = job
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to the job's future, as any executor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking jobs; idle threads end. Never waits for a job still running (its
        daemon thread ends with the process), whatever ``wait`` says."""
        with self._lock:
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is not None:
                        job[0].cancel()
            for _ in self._daemons:
                self._jobs.put(None)

    @property
    def worker_threads(self) -> list[threading.Thread]:
        return list(self._daemons)


__all__ = ["DaemonThreadExecutor"]
