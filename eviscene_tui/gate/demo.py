"""The demo's gated search: the bundled STAND-IN driver (not EviScene) run under
``eviscene-tui gate`` against the demo's fake vLLM, in the demo's own directory
(inputs beside the search root, as a real driver's are)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui.gate import protocol as proto
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.gate.standin import DRIVER_PATH, driver_args, write_inputs


@dataclass
class GatedDemo:
    root: Path
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        """End the stand-in driver(s) this demo started: its first process, and one the
        app resumed (found by the heartbeat: same host, the stand-in's script)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        doc, _ = proto.read_document(proto.sidecar_for(self.root) / proto.HEARTBEAT_FILE)
        if not doc or doc.get("state") == "exited" or type(doc.get("pid")) is not int:
            return
        argv = doc.get("argv") or []
        if doc.get("host") == socket.gethostname() and argv and argv[0] == str(DRIVER_PATH) and doc["pid"] != self.process.pid:
            try:
                os.kill(doc["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass


DEMO_FOLDER = "gated-standin"  # <work dir>/demo/gated-standin/repairs/search-0001: the same path every start


def demo_root(base: Path) -> Path:
    """The stand-in search root of the demo whose work sub-directory is ``base``."""
    return base / DEMO_FOLDER / "repairs" / "search-0001"


def _driver_alive(folder: Path) -> bool:
    """Whether a stand-in driver of an earlier demo still runs in ``folder`` (its heartbeat)."""
    root = folder / "repairs" / "search-0001"
    if not proto.sidecar_for(root).is_dir():
        return False
    return read_status(root).driver.alive


def _clean(base: Path) -> Path:
    """Make room for a fresh stand-in search: the previous demo's folder (and those of
    older demos, named ``gated-standin-<stamp>``) are removed unless their driver still
    runs. They are the demo's own scratch in the app's work directory, never evidence.
    Returns the folder to use: the fixed one, or a stamped one while another demo's
    driver is alive in it."""
    for old in sorted(base.glob(DEMO_FOLDER + "-*")) if base.is_dir() else []:
        if old.is_dir() and not _driver_alive(old):
            shutil.rmtree(old, ignore_errors=True)
    folder = base / DEMO_FOLDER
    if folder.exists():
        if _driver_alive(folder):
            return base / f"{DEMO_FOLDER}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        shutil.rmtree(folder)
    return folder


def start_gated_demo(base: Path, *, policy_url: str, policy_model: str, operator: str | None = None,
                     step_seconds: float = 1.0) -> GatedDemo:
    folder = _clean(base)
    inputs = write_inputs(folder / "inputs" / "standin-flood-photo")
    root = folder / "repairs" / "search-0001"
    log = folder / "driver.log"
    argv = [sys.executable, "-m", "eviscene_tui", "gate"]
    if operator:
        argv += ["--operator", operator]
    argv += ["--", *driver_args(inputs, root, policy_url=policy_url, policy_model=policy_model,
                                 extra=["--step-seconds", str(step_seconds)])]
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder)
    return GatedDemo(root, process, log)
