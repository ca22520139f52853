"""Entry point used by ``eviscene_tui.cli`` (and the ``demo`` command) to open the app."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path

from eviscene_tui.options import AppOptions
from eviscene_tui.state import case_check, index_process
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.ui.widgets.image_preview import prepare_terminal_graphics


def build_app(path: Path, args: object) -> EvisceneApp:
    options = AppOptions.from_args(Path(path), args)
    return EvisceneApp(options)


def _prepare_graphics() -> None:
    """Let the image preview probe the terminal before Textual reads stdin
    (see ``ui/widgets/image_preview.py``). Skipped without a tty or when
    ``EVISCENE_TUI_NO_GRAPHICS`` is set; never fatal."""
    if os.environ.get("EVISCENE_TUI_NO_GRAPHICS") or not sys.stdout.isatty() or not sys.stdin.isatty():
        return
    # the probe logs a traceback when the terminal does not answer; keep it off the screen
    probe_log = logging.getLogger("textual_image")
    probe_log.addHandler(logging.NullHandler())
    probe_log.propagate = False
    prepare_terminal_graphics()  # never raises: a failed probe is said beside the preview


def run_app(path: Path, args: object) -> int:
    """Build ``AppOptions.from_args(path, args)`` and run the app; returns the exit code."""
    app = build_app(path, args)
    _prepare_graphics()
    result = app.run()
    end_worker_processes()
    return int(result) if isinstance(result, int) else 0


#: how long the processes a shut-down pool told to stop get to end before they are ended
STOP_GRACE = 0.5


def end_worker_processes() -> None:
    """After the app has quit, end the processes it spawned (the interpreter would wait for
    them at exit): quitting always quits. The pools are shut down first, the open case's
    check process with them, and their processes given :data:`STOP_GRACE` to end on their
    own: a process ended under a pool still reading from it had its pool's thread print a
    traceback (a closed pipe, ``EBADF``) into the terminal the app had just given back."""
    case_check.CHECKS.close()
    index_process.INDEXES.close()
    deadline = time.monotonic() + STOP_GRACE
    for child in multiprocessing.active_children():
        child.join(timeout=max(0.0, deadline - time.monotonic()))
    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(timeout=1.0)
        if child.is_alive():
            child.kill()
