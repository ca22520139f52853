"""The demo's gated search: the bundled STAND-IN driver (not EviScene) run under
``eviscene-tui gate`` against the demo's fake vLLM, in the demo's own directory
(inputs beside the search root, as a real driver's are)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui.gate import inproc as proto
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
        import socket

        if doc.get("host") == socket.gethostname() and argv and argv[0] == str(DRIVER_PATH) and doc["pid"] != self.process.pid:
            try:
                os.kill(doc["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass


def start_gated_demo(base: Path, *, policy_url: str, policy_model: str, operator: str | None = None,
                     step_seconds: float = 1.0) -> GatedDemo:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = base / f"gated-standin-{stamp}"
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
