"""Helpers for the gate tests: the stand-in driver as a real subprocess under
``eviscene-tui gate`` (:func:`gated`: started, and killed if a test leaves it
running), ``decide`` / ``gate-status`` as real subprocesses, and a bounded wait on a
condition (never a sleep for readiness).

The timeouts are generous bounds that only a real hang reaches (the suite runs on a
loaded 2-core machine): a process that does not finish in time is asked for its
Python stacks (``PYTHONFAULTHANDLER``: SIGABRT dumps every thread's stack to its
stderr) and the failure shows them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import sigint_as_in_a_terminal, wait_until_sync

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.scaffold.standin import StandinInputs, driver_args, write_inputs

CLI = [sys.executable, "-m", "eviscene_tui"]
ENV = {**os.environ, "EVISCENE_GATE_POLL": "0.05", "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
TIMEOUT = 120.0  # a gate or a state to show up
EXIT_TIMEOUT = 180.0  # a process to finish (a driver round, a headless command)


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


@pytest.fixture
def fake_vllm() -> Iterator[FakeVLLMServer]:
    """The bundled fake vLLM over real loopback HTTP, unthrottled (the teacher step)."""
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as server:
        yield server


def start_gate(case: Case, *, resume: bool = False, gate_opts: list[str] | None = None, extra: list[str] | None = None) -> subprocess.Popen:
    log = case.base / f"driver-{time.monotonic_ns()}"
    with open(f"{log}.out", "wb") as out, open(f"{log}.err", "wb") as err, sigint_as_in_a_terminal():
        proc = subprocess.Popen(
            [*CLI, "gate", *(gate_opts or []), "--", *case.argv(resume=resume, extra=extra)],
            stdout=out, stderr=err, env=ENV, cwd=case.base,
        )
    proc.log = log  # type: ignore[attr-defined]  # the log file rides on the process object
    return proc


@contextmanager
def gated(case: Case, **kw: Any) -> Iterator[subprocess.Popen]:
    """:func:`start_gate`; the driver is killed on the way out if it still runs."""
    proc = start_gate(case, **kw)
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Kill ``proc`` if it still runs (the end of a test that failed midway)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def output_of(proc: subprocess.Popen) -> tuple[str, str]:
    """(stdout, stderr) of a process started by :func:`start_gate`."""
    log = proc.log  # type: ignore[attr-defined]  # the log file rides on the process object
    return (Path(f"{log}.out").read_text(encoding="utf-8", errors="replace"),
            Path(f"{log}.err").read_text(encoding="utf-8", errors="replace"))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``eviscene-tui ARGS`` as a real subprocess (text output, bounded)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=EXIT_TIMEOUT)


def status(case: Case) -> dict[str, Any]:
    done = subprocess.run([*CLI, "gate-status", str(case.root), "--json"], capture_output=True, env=ENV, timeout=EXIT_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def pending(case: Case, kind: str, round_index: int) -> Callable[[], dict[str, Any] | None]:
    """A condition: the pending gate of that kind and round, published AND waited on by
    the driver (its heartbeat names it): the readiness a decision or a signal needs."""

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
    return run_cli("decide", str(case.root), action, "--round", str(round_index), *args)


def finish(proc: subprocess.Popen, timeout: float = EXIT_TIMEOUT) -> int:
    """``proc``'s exit code; a process still running after ``timeout`` is hung: the
    failure shows its Python stacks and the end of its stderr."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"pid {proc.pid} did not exit within {timeout:g} s (hung):\n{_stacks(proc)}") from None
    finally:
        stop(proc)


def _stacks(proc: subprocess.Popen) -> str:
    """SIGABRT makes the hung interpreter dump its threads' stacks (PYTHONFAULTHANDLER)."""
    proc.send_signal(signal.SIGABRT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        return "(no stacks: the process did not react to SIGABRT)"
    log = getattr(proc, "log", None)
    if log is None:
        return "(its stderr was not kept)"
    return Path(f"{log}.err").read_text(encoding="utf-8", errors="replace")[-6000:]


def manifest(case: Case) -> dict[str, Any]:
    return json.loads((case.root / "manifest.json").read_text(encoding="utf-8"))
