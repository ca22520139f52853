"""Quit always quits: no background work can hold the app open, not even a worker stuck
in a read that never returns (a file on a dead network mount)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from test_ui_pty import run_in_pty
from ui_helpers import copy_case, make_app, wait_for

import eviscene_tui.state.scan as scan

CASE = "feedback-converged-3-rounds"


async def test_q_quits_while_the_integrity_worker_is_stuck(tmp_path_factory, tmp_path, monkeypatch, check_in_thread) -> None:
    """The integrity pass blocks forever in a read (injected at its seam): q ends the
    app, and the thread left blocked is a daemon, which cannot keep the process alive."""
    root = tmp_path / "runs"
    copy_case(tmp_path_factory, CASE, root)
    release, entered = threading.Event(), threading.Event()
    stuck: list[threading.Thread] = []

    def stuck_check(items, base, path_map=None):
        stuck.append(threading.current_thread())
        entered.set()
        release.wait()
        return []

    monkeypatch.setattr(scan, "check_refs", stuck_check)
    app = make_app(root)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            assert await wait_for(pilot, entered.is_set)
            await pilot.press("q")
            assert await wait_for(pilot, lambda: not app.is_running)
        assert app.return_code == 0
        assert stuck[0].is_alive() and stuck[0].daemon  # still blocked, and nothing waits for it
    finally:
        release.set()


LAUNCHER = """
import sys, threading
import eviscene_tui.state.scan as scan

def stuck_check(items, base, path_map=None):
    threading.Event().wait()  # a read that never returns

scan.check_refs = stuck_check
from eviscene_tui.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_the_process_ends_after_q_while_a_worker_is_stuck(tmp_path_factory, tmp_path: Path, monkeypatch) -> None:
    """The real app in a terminal: once its integrity pass is stuck, q ends the process
    (it used to wait at exit for the stuck thread, forever)."""
    root = tmp_path / "runs"
    copy_case(tmp_path_factory, CASE, root)
    launcher = tmp_path / "launch_stuck.py"
    launcher.write_text(LAUNCHER)
    monkeypatch.setenv("EVISCENE_TUI_NO_GRAPHICS", "1")
    monkeypatch.setenv("EVISCENE_TUI_OFF", "check_process")  # the pass on the app's thread, where it is stuck
    out, status = run_in_pty([str(launcher), str(root)], [(b"checking integrity", b"q")], timeout=90)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, out[-400:])


def test_the_worker_pool_never_waits_for_a_stuck_job() -> None:
    from eviscene_tui.ui.executor import DaemonThreadExecutor

    pool = DaemonThreadExecutor(max_workers=4)
    release = threading.Event()
    try:
        stuck = pool.submit(release.wait)
        assert pool.submit(lambda: 41 + 1).result(timeout=30) == 42  # a stuck job holds up no other
        assert all(t.daemon for t in pool.worker_threads)
        pool.shutdown(wait=True)  # returns although a job still runs
        assert not stuck.done()
    finally:
        release.set()
    assert stuck.result(timeout=30) is True
