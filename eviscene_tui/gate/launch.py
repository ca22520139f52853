"""Starting a driver process for the app (the bundled driver's search, a gated driver resumed).

A driver started from the app runs detached from it — its own session, no stdin, its
output appended to a log file — so quitting the app leaves it waiting at its gate.
Launching a process is a service: sessions call it from their workers, widgets never do.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def log_stamp() -> str:
    """The UTC time for a driver log's name (sorts by when the driver was started)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def start_detached(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session with its output appended to ``log`` (OSError: it
    could not be started, or the log could not be opened)."""
    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
