"""``eviscene-tui gate [--python PY] [--gate-dir DIR] [--operator NAME] [--no-hint-gate] -- DRIVER.py ARGS…``

Runs the EviScene driver under the operator gate: the driver's interpreter
``PY`` (default: this one) starts the stdlib-only ``eviscene_tui/gate/inproc.py``
by path, which installs the gate and runs the script as ``__main__``. This
process *becomes* the driver (``exec``), so the driver's exit code, its
stdout/stderr and its reaction to SIGINT/SIGTERM are unchanged.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from eviscene_tui.cli import UsageError
from eviscene_tui.gate import INPROC_PATH
from eviscene_tui.gate.inproc import search_mode_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", help="the driver's interpreter (default: this one)")
    parser.add_argument("--gate-dir", help="the gate's sidecar directory (default: <root>.eviscene-gate beside the search root)")
    parser.add_argument("--operator", help="who started the gate (recorded in gate.json)")
    parser.add_argument("--no-hint-gate", action="store_true", help="gate rounds only, not each proposed hint")
    parser.add_argument("driver", nargs=argparse.REMAINDER, help="-- DRIVER.py DRIVER-ARGS…")


def build_argv(args: argparse.Namespace) -> list[str]:
    driver = list(args.driver or [])
    if driver and driver[0] == "--":
        driver = driver[1:]
    if not driver:
        raise UsageError("no driver given: eviscene-tui gate [options] -- DRIVER.py DRIVER-ARGS…")
    mode = search_mode_of(driver[1:])
    if mode != "feedback":
        raise UsageError(f"--search-mode {mode} has no feedback rounds to gate; only feedback searches can run under the gate")
    if not os.path.isfile(driver[0]):
        raise UsageError(f"driver script {driver[0]} does not exist")
    python = args.python or sys.executable
    resolved = shutil.which(python) if os.sep not in python else python
    if not resolved or not os.access(resolved, os.X_OK):
        raise UsageError(f"interpreter {python} not found or not executable")
    argv = [resolved, str(INPROC_PATH)]
    if args.gate_dir:
        argv += ["--gate-dir", os.path.abspath(args.gate_dir)]
    if args.operator:
        argv += ["--operator", args.operator]
    if args.no_hint_gate:
        argv.append("--no-hint-gate")
    return argv + ["--", *driver]


def run(args: argparse.Namespace) -> int:
    argv = build_argv(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)
    return 0  # pragma: no cover - execv does not return
