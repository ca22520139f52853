"""The machine the figures are measured on: a second process busy on one core.

A researcher's machine runs other things beside the app (a driver, an editor, a build), so
every figure of ``make bench`` is measured with one core taken by another process: a
``while True: pass`` loop started here, at the normal priority, for the whole run (``python
-m bench --quiet-machine`` leaves it out). Started and stopped by its process id.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_SPIN = "while True: pass"


@contextmanager
def one_core_busy(enabled: bool = True) -> Iterator[subprocess.Popen[bytes] | None]:
    """A process spinning on one core while the block runs (nothing when not ``enabled``)."""
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", _SPIN], stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def load_average() -> str:
    """The 1-minute load average, as printed beside the figures."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"
