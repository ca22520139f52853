"""The demo's gated search: the bundled driver (``eviscene-tui repair``) on a sample case,
against the demo's fake vLLM and its scripted hint constructor, under the gate.

Its search root is the demo's own scratch in the app's work directory
(``<work dir>/demo/gated-repair/search``, the same path every start: the previous
demo's is cleaned unless its driver still runs), never the case's default repair
root, so a newcomer always starts at round 0 and steps through every gate kind:
the round gate, a hint gate (the constructor's proposals, or a hint they add), the
streaming continuation (cancel it), the attempt gate (accept or reject it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.sidecar import read_status

DEMO_FOLDER = "gated-repair"  # <work dir>/demo/gated-repair/search: the same path every start
DEMO_CASE = "feedback-converged-3-rounds"  # the sample case the demo repairs


@dataclass
class GatedDemo:
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """End the bundled driver this demo started: its first process, and one the app
        resumed or started again (found by the heartbeat: same host, this demo's root)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        status = read_status(self.root)
        pid = status.driver.pid
        if status.driver.alive and pid is not None and pid != self.process.pid and str(self.root) in status.driver.argv:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _driver_alive(folder: Path) -> bool:
    root = folder / "search"
    return P.sidecar_for(root).is_dir() and read_status(root).driver.alive


def _clean(base: Path) -> Path:
    """Make room for a fresh search: the previous demo's folder (and older stamped ones) are
    removed unless their driver still runs. They are the demo's own scratch in the app's
    work directory, never evidence. Returns the folder to use."""
    for old in sorted(base.glob(DEMO_FOLDER + "-*")) if base.is_dir() else []:
        if old.is_dir() and not _driver_alive(old):
            shutil.rmtree(old, ignore_errors=True)
    folder = base / DEMO_FOLDER
    if folder.exists():
        if _driver_alive(folder):
            return base / f"{DEMO_FOLDER}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        shutil.rmtree(folder)
    return folder


def start_gated_demo(base: Path, case: Path, *, workdir: Path, policy_profile: Path, hint_url: str, hint_model: str,
                     operator: str | None = None) -> GatedDemo:
    """Start ``eviscene-tui repair CASE`` for the demo (a background process, its output in a log)."""
    folder = _clean(base)
    folder.mkdir(parents=True, exist_ok=True)
    root = folder / "search"
    log = folder / "driver.log"
    argv = [sys.executable, "-m", "eviscene_tui", "repair", str(case), "--output-dir", str(root), "--workdir", str(workdir),
            "--policy-profile", str(policy_profile), "--hint-url", hint_url, "--hint-model", hint_model,
            "--operator", P.operator_identity(operator)]
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder)
    return GatedDemo(root, process, log)
