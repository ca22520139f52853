"""What quitting the app leaves behind: nothing running."""

from __future__ import annotations

import multiprocessing
import os

from eviscene_tui.state import case_check
from eviscene_tui.ui.launch import end_worker_processes


def test_quitting_ends_the_check_process_and_every_spawned_process() -> None:
    checks = case_check.CHECKS
    assert checks.call(os.getpid) is not None  # the process is started and answers
    assert checks.running
    end_worker_processes()
    assert not checks.running
    assert multiprocessing.active_children() == []
