"""What quitting the app leaves behind: nothing running."""

from __future__ import annotations

import multiprocessing
import os

from conftest import wait_until_sync

from eviscene_tui.state import case_check
from eviscene_tui.ui.launch import end_worker_processes


def test_quitting_ends_the_check_process_and_every_spawned_process() -> None:
    checks = case_check.CHECKS
    assert checks.call(os.getpid) is not None  # the process is started and answers
    assert checks.running
    end_worker_processes()
    assert not checks.running
    # every process it spawned is ended (the last ones killed): a killed process below the
    # app's priority on a loaded machine is gone only once it is scheduled again
    wait_until_sync(lambda: multiprocessing.active_children() == [], what="every spawned process ended")
