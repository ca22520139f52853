"""Helpers for the gate tests: the stand-in driver as a real subprocess under
``eviscene-tui gate``, ``decide`` / ``gate-status`` as real subprocesses, and a
bounded wait on a condition (never a sleep for readiness)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from conftest import wait_until_sync

from eviscene_tui.gate.standin import StandinInputs, driver_args, write_inputs

CLI = [sys.executable, "-m", "eviscene_tui"]
ENV = {**os.environ, "EVISCENE_GATE_POLL": "0.05", "PYTHONUNBUFFERED": "1"}
TIMEOUT = 60.0


def wait_until(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll ``condition`` until it returns a truthy value (returned); fail naming ``what``."""
    return wait_until_sync(condition, timeout, what=what)


@dataclass
class Case:
    """A stand-in case laid out like reality: inputs beside (outside) the search root."""

    base: Path
    inputs: StandinInputs
    root: Path
    policy_url: str | None = None
    policy_model: str | None = None

    @property
    def gate_dir(self) -> Path:
        return self.root.parent / (self.root.name + ".eviscene-gate")

    def argv(self, *, resume: bool = False, extra: list[str] | None = None) -> list[str]:
        return driver_args(self.inputs, self.root, policy_url=self.policy_url, policy_model=self.policy_model,
                           resume=resume, extra=extra)


def make_case(tmp_path: Path, **kw: Any) -> Case:
    inputs = write_inputs(tmp_path / "inputs" / "standin-flood-photo")
    return Case(tmp_path, inputs, tmp_path / "repairs" / "search-0001", **kw)


def start_gate(case: Case, *, resume: bool = False, gate_opts: list[str] | None = None, extra: list[str] | None = None) -> subprocess.Popen:
    log = case.base / f"driver-{time.monotonic_ns()}"
    with open(f"{log}.out", "wb") as out, open(f"{log}.err", "wb") as err:
        proc = subprocess.Popen(
            [*CLI, "gate", *(gate_opts or []), "--", *case.argv(resume=resume, extra=extra)],
            stdout=out, stderr=err, env=ENV, cwd=case.base,
        )
    proc.log = log  # type: ignore[attr-defined]  # the log file rides on the process object
    return proc


def output_of(proc: subprocess.Popen) -> tuple[str, str]:
    """(stdout, stderr) of a process started by :func:`start_gate`."""
    log = proc.log  # type: ignore[attr-defined]  # the log file rides on the process object
    return (Path(f"{log}.out").read_text(encoding="utf-8", errors="replace"),
            Path(f"{log}.err").read_text(encoding="utf-8", errors="replace"))


def status(case: Case) -> dict[str, Any]:
    done = subprocess.run([*CLI, "gate-status", str(case.root), "--json"], capture_output=True, env=ENV, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def pending(case: Case, kind: str, round_index: int) -> Callable[[], dict[str, Any] | None]:
    """A condition: the pending gate of that kind and round (read through gate-status)."""
    from eviscene_tui.gate.sidecar import read_status

    def check() -> dict[str, Any] | None:
        st = read_status(case.root)
        for p in st.pending:
            if p.kind == kind and p.round == round_index:
                # the driver publishes the gate, then waits on it: both must be true
                if st.driver.waiting == p.name:
                    return p.as_pending()
        return None

    return check


def decide(case: Case, action: str, round_index: int, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "decide", str(case.root), action, "--round", str(round_index), *args],
                          capture_output=True, text=True, env=ENV, timeout=TIMEOUT)


def finish(proc: subprocess.Popen, timeout: float = TIMEOUT) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def manifest(case: Case) -> dict[str, Any]:
    return json.loads((case.root / "manifest.json").read_text(encoding="utf-8"))
