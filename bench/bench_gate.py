"""Operator gate: latency from a decision to the driver resuming (goal < 1 s with polling).

The stand-in driver runs under ``eviscene-tui gate`` as a real subprocess; each
gate is decided in-process with :func:`eviscene_tui.gate.decide.decide`; the
latency is the time from just before the decision file is created to the
driver's heartbeat saying it left that gate (written as soon as the decision
is read). Default poll interval (0.2 s) and a fast one (0.05 s).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eviscene_tui.gate import protocol as proto
from eviscene_tui.gate.decide import decide
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.gate.standin import driver_args, write_inputs


def _wait(condition, timeout: float = 30.0, step: float = 0.002):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError("the gated stand-in driver did not reach the expected state")


def _waiting_on(gate_dir: Path) -> str | None:
    doc, _ = proto.read_document(gate_dir / proto.HEARTBEAT_FILE)
    return doc.get("waiting") if doc and doc.get("state") == "waiting" else None


def measure(poll: str, attempts: int = 3) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        base = Path(tmp)
        inputs = write_inputs(base / "inputs")
        root = base / "search"
        argv = driver_args(inputs, root, extra=["--repair-attempts", str(attempts), "--proposal-rounds", str(attempts)])
        env = {**os.environ, "EVISCENE_GATE_POLL": poll}
        proc = subprocess.Popen([sys.executable, "-m", "eviscene_tui", "gate", "--", *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        gate_dir = proto.sidecar_for(root)
        latencies = []
        try:
            while True:
                name = _wait(lambda: _waiting_on(gate_dir) or proc.poll() is not None)
                if name is True:
                    break
                status = read_status(root)
                request = next(p for p in status.pending if p.name == name)
                action = "approve-round" if request.kind == "round" else "approve-hint"
                started = time.perf_counter()
                result = decide(root, action, request.round, operator="bench")
                if not result.taken:
                    raise RuntimeError(result.message)
                _wait(lambda name=name: _waiting_on(gate_dir) != name)
                latencies.append(time.perf_counter() - started)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        return latencies


def run() -> list[tuple[str, str]]:
    rows = []
    for poll in ("0.2", "0.05"):
        lat = measure(poll)
        rows.append((
            f"decision -> driver resumes, poll {poll} s ({len(lat)} gates; goal < 1 s)",
            f"median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms",
        ))
    return rows


if __name__ == "__main__":  # pragma: no cover
    for label, figure in run():
        print(f"{label}: {figure}")
