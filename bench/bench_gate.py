"""Operator gate figures (printed, not asserted).

- decision -> driver resumes: the bundled driver (``eviscene-tui repair`` on a sample case,
  the fake vLLM streaming its continuations) and the real driver's contract stand-in (under
  ``eviscene-tui gate``), each a real subprocess; each gate is decided in-process with
  :func:`eviscene_tui.gate.decide.decide`; the latency is the time from just before the
  decision file is created to the driver's heartbeat saying it left that gate (written as
  soon as the decision is read). Goal < 0.3 s at the default poll interval (0.1 s).
- a search started on the realistic 193 MB source trace (``bench.realistic_trace``, the
  open benchmark's case): ``eviscene-tui repair`` spawned until its round-0 gate waits,
  and the process's peak RSS (VmHWM) there; beside it the same on a sample case (the
  command's own start: interpreter, imports, the search root) and a bare ``orjson.loads``
  of the trace (what the whole parse took before it was read lazily). Goals: the first
  gate < 1 s after the trace is read, peak RSS < 1.2x the file.
- the live channel: a writer process appends ``delta`` records (one 4-character token
  each, as vLLM sends them) to a sidecar's ``live.jsonl`` at 5,000 tokens/s while the
  gate screen tails it; the latency is from a record's append to the end of the app's
  frame that painted it (``bench/frames.py``),
  and a key (tab) is pressed every 100 ms meanwhile, timed to the end of the frame that
  answered it. Goals < 50 ms both.
- the real driver's policy calls: the pass-through wrapper of ``StageRunner._call_llm``
  (the in-driver gate's, on a method of the real signature returning a capture of 8,000
  prompt and 400 completion ids with logprobs and top-20) costs per call the difference
  between wrapped and unwrapped calls, with its writer thread running (goal < 1 ms); a
  returned call is on the gate card (the call list's line says its finish reason) after
  the driver's side received it: from the wrapper seeing the return to the end of the
  frame that painted it, through the live channel and the card's polling tail (goal < 0.5 s).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.frames import frame_clock

from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.decide import decide
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.scaffold.standin import driver_args, write_inputs

SAMPLES = Path(__file__).resolve().parents[1] / "sample_runs"
RATE = 5000  # tokens a second through the live channel


def _wait(condition, timeout: float = 60.0, step: float = 0.002):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError("the gated driver did not reach the expected state")


def _waiting_on(gate_dir: Path) -> str | None:
    doc, _ = P.read_document(gate_dir / P.HEARTBEAT_FILE)
    return doc.get("waiting") if doc and doc.get("state") == "waiting" else None


def _decision_for(request) -> tuple[str, dict]:
    if request.kind == "round":
        return "approve-round", {}
    if request.kind == "hint":
        return ("approve-hint", {}) if request.hint else ("add-hint", {"text": "Check the earliest copy of the photo first."})
    return "reject-attempt", {"reason": "bench"}


def _decide_until_done(root: Path, proc: subprocess.Popen, gates: int) -> list[float]:
    gate_dir = P.sidecar_for(root)
    latencies = []
    while len(latencies) < gates:
        name = _wait(lambda: _waiting_on(gate_dir) or proc.poll() is not None)
        if name is True:
            break
        request = next(p for p in read_status(root).pending if p.name == name)
        action, extra = _decision_for(request)
        started = time.perf_counter()
        result = decide(root, action, request.round, operator="bench", **extra)
        if not result.taken:
            raise RuntimeError(result.message)
        _wait(lambda name=name: _waiting_on(gate_dir) != name)
        latencies.append(time.perf_counter() - started)
    return latencies


def measure_bundled(poll: str, gates: int = 6) -> list[float]:
    from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer

    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp, FakeVLLMServer(scenario={"tokens_per_second": None}) as server:
        env = {**os.environ, "EVISCENE_GATE_POLL": poll}
        root = Path(tmp) / "search"
        argv = [sys.executable, "-m", "eviscene_tui", "repair", str(SAMPLES / "feedback-converged-3-rounds"), "--output-dir", str(root),
                "--workdir", tmp, "--policy-url", server.v1_url, "--policy-model", server.profile_dict()["profile_id"]]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            return _decide_until_done(root, proc, gates)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def measure_search_start(case: Path) -> dict[str, float]:
    """``eviscene-tui repair CASE`` from its spawn until the round-0 gate waits: seconds and
    the process's peak RSS at that gate."""
    from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer

    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp, FakeVLLMServer(scenario={"tokens_per_second": None}) as server:
        root = Path(tmp) / "search"
        argv = [sys.executable, "-m", "eviscene_tui", "repair", str(case), "--output-dir", str(root),
                "--workdir", tmp, "--policy-url", server.v1_url, "--policy-model", server.profile_dict()["profile_id"]]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ)
        try:
            _wait(lambda: _waiting_on(P.sidecar_for(root)) or proc.poll() is not None, timeout=600)
            if proc.poll() is not None:
                raise RuntimeError((proc.stderr.read() if proc.stderr else b"").decode(errors="replace").strip()[-300:])
            return {"seconds": time.perf_counter() - started, "rss": _peak_rss(proc.pid)}
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


_BARE = """
import orjson, sys, time
t = time.perf_counter()
orjson.loads(open(sys.argv[1], "rb").read())
seconds = time.perf_counter() - t
print(seconds, next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:")))
"""


def search_start_rows() -> list[tuple[str, str]]:
    from bench.bench_open import _realistic

    info = _realistic()
    size = int(info["bytes"])
    big = measure_search_start(Path(info["case_dir"]))
    small = measure_search_start(SAMPLES / "feedback-converged-3-rounds")
    out = subprocess.run([sys.executable, "-c", _BARE, info["path"]], capture_output=True, text=True, check=True)
    bare_s, bare_rss = (float(x) for x in out.stdout.split())
    return [
        (f"search start: spawn -> round-0 gate, {size / 1e6:.0f} MB trace | a sample case (goal: < 1 s more than the sample's)",
         f"{big['seconds']:.2f} s | {small['seconds']:.2f} s (+{big['seconds'] - small['seconds']:.2f} s for the trace;"
         f" a bare orjson.loads of it {bare_s:.2f} s)"),
        ("search start: peak RSS at the round-0 gate (goal < 1.2x the file)",
         f"{big['rss'] / 1e6:.0f} MB = {big['rss'] / size:.2f}x the file (sample case {small['rss'] / 1e6:.0f} MB;"
         f" a bare orjson.loads {bare_rss / size:.2f}x)"),
    ]


def measure_standin(poll: str, attempts: int = 3) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        inputs = write_inputs(Path(tmp) / "inputs")
        root = Path(tmp) / "search"
        argv = driver_args(inputs, root, extra=["--repair-attempts", str(attempts), "--proposal-rounds", str(attempts)])
        env = {**os.environ, "EVISCENE_GATE_POLL": poll}
        proc = subprocess.Popen([sys.executable, "-m", "eviscene_tui", "gate", "--", *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            return _decide_until_done(root, proc, 2 * attempts)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


# ---------------------------------------------------------------------- the live channel on screen
WRITER = r"""
import os, sys, time, orjson
path, rate, seconds, stamps = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, orjson.dumps({"schema_version": "eviscene-tui-live-v1", "type": "call_started", "call": "bench", "t": time.time(),
                           "round": 0, "hint": 0, "stage": "psd_teacher_repair", "streaming": True}) + b"\n")
start, n, out = time.perf_counter(), 0, []
while time.perf_counter() - start < seconds:
    due = start + n / rate
    now = time.perf_counter()
    if now < due:
        time.sleep(due - now)
    event = {"type": "delta", "kind": "content", "text": " " + "abcdefghij"[n % 10] * 3, "token_ids": [n % 50000 + 1], "logprobs": None}
    os.write(fd, orjson.dumps({"schema_version": "eviscene-tui-live-v1", "type": "delta", "call": "bench", "t": time.time(),
                               "round": 0, "hint": 0, "seq": n, "event": event}) + b"\n")
    out.append(time.perf_counter())
    n += 1
with open(stamps, "wb") as f:
    f.write(orjson.dumps(out))
"""


async def _live_on_screen(seconds: float = 4.0) -> dict[str, float]:
    from textual import events
    from textual.app import App

    from eviscene_tui.state.gate import GateSession
    from eviscene_tui.ui.screens.gate import GateScreen
    from eviscene_tui.ui.widgets.gate_panel import GatePanel
    from eviscene_tui.ui.widgets.stream_view import StreamView

    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        root = Path(tmp) / "search"
        root.mkdir()
        gate_dir = P.sidecar_for(root)
        gate_dir.mkdir()
        (gate_dir / P.SESSION_FILE).write_text(json.dumps({"schema_version": P.GATE_SCHEMA}))
        handed: list[tuple[int, float]] = []  # (the last record the stream view painted, when it did)
        keys: list[float] = []
        try:
            with frame_clock() as clock:
                app = App()
                async with app.run_test(size=(140, 50)):
                    app.push_screen(GateScreen(GateSession(root, operator="bench")))
                    await asyncio.sleep(0.5)
                    stamps_file = Path(tmp) / "stamps.json"
                    # the driver's side in its own process, as a driver is (CLOCK_MONOTONIC is shared on one host)
                    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(gate_dir / P.LIVE_FILE), str(RATE), str(seconds),
                                               str(stamps_file)])
                    view = app.screen.query_one(GatePanel).query_one(StreamView)
                    next_key = time.perf_counter() + 0.1
                    while writer.poll() is None:
                        await asyncio.sleep(0.001)
                        events_painted, at = view.probes.last_flush  # one delta record is one event: the last painted is its seq
                        if events_painted and (not handed or handed[-1][1] != at):
                            handed.append((events_painted - 1, at))
                        if time.perf_counter() >= next_key:
                            sent = time.perf_counter()
                            event = events.Key("tab", None)
                            event.set_sender(app)
                            app._driver.send_message(event)
                            keys.append((await clock.end_after(sent)) - sent)
                            next_key = time.perf_counter() + 0.1
                    await asyncio.sleep(0.3)
                    stamps = orjson.loads(stamps_file.read_bytes())
                    lat = []
                    for seq, at in handed:
                        if 0 <= seq < len(stamps):
                            lat.append((await clock.end_after(at)) - stamps[seq])
        finally:
            pass
    return {"rate": len(stamps) / seconds, "median_ms": statistics.median(lat) * 1000, "p95_ms": sorted(lat)[int(len(lat) * 0.95)] * 1000,
            "max_ms": max(lat) * 1000, "key_median_ms": statistics.median(keys) * 1000, "key_max_ms": max(keys) * 1000}


# ---------------------------------------------------------------------- the real driver's policy calls
class _Probe:
    """A stage runner whose ``_call_llm`` has the real signature and returns a real-sized capture."""

    stage_name = "psd_teacher_repair"

    def __init__(self, prompt: int = 8000, completion: int = 400) -> None:
        capture = {"schema_version": "ifv-policy-token-capture-v1", "status": "complete",
                   "prompt_token_ids": list(range(1, prompt + 1)), "completion_token_ids": list(range(100, 100 + completion)),
                   "completion_logprobs": [-0.1] * completion,
                   "completion_topk_by_position": [[{"token_id": k, "probability": 0.05} for k in range(20)] for _ in range(completion)],
                   "topk": 20, "missing": []}
        self.result = (None, {"policy_token_capture": capture, "finish_reason": "tool_calls", "context_request_id": "req-000001",
                              "llm_duration_ms": 900})

    async def _call_llm(self, messages, *, require_tool=False, max_tokens=None, generation_config=None, lifecycle_kind="",
                        parent_context_request_id="", suppress_tools=False, active_steps=None):
        return self.result


def _gate_in(tmp: str):
    from eviscene_tui.gate import inproc

    gate = inproc.Gate(gate_dir=None, operator="bench", hint_gate=False, argv=["driver.py"])
    return inproc, gate, gate.enter_search(Path(tmp) / "search")


async def _calls(method, runner, messages, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        await method(runner, messages)
    return time.perf_counter() - t0


def measure_wrapper_cost(n: int = 400) -> dict[str, float]:
    """The wrapper's cost on the driver's path (its writer held, so only what the driver's
    own thread does is timed), and back to back with the writer encoding each record
    (the whole CPU the live view takes per call; a real call waits seconds on the network,
    during which the writer runs)."""
    import threading

    with tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp:
        inproc, gate, search = _gate_in(tmp)
        runner = _Probe()
        plain = _Probe._call_llm
        wrapped = gate.live_calls.wrap(plain)
        messages = [{"role": "user", "content": "x" * 20000}, {"role": "user", "content": "Hint: find the oldest copy first."}]
        token = inproc._ROUND.set({"round": 0, "search": search, "hints": [(0, "find the oldest copy first.")]})
        held = threading.Event()
        write = search.live.write

        def held_write(*args, **kwargs):
            held.wait()
            return write(*args, **kwargs)

        try:
            bare = min(asyncio.run(_calls(plain, runner, messages, n)) for _ in range(3))
            search.live.write = held_write
            path = asyncio.run(_calls(wrapped, runner, messages, n))
            held.set()
            search.calls.close(timeout=60)
            search.calls = inproc.CallRecorder(search.live)
            search.live.write = write
            t0 = time.perf_counter()
            asyncio.run(_calls(wrapped, runner, messages, n))
            search.calls.close(timeout=120)  # until the writer has written every record
            live = time.perf_counter() - t0
        finally:
            inproc._ROUND.reset(token)
            gate.finish(0)
        return {"path_ms": (path - bare) / n * 1000, "total_ms": (live - bare) / n * 1000}


async def _call_on_screen(calls: int = 12) -> dict[str, float]:
    import threading

    from textual.app import App

    from eviscene_tui.state.gate import GateSession
    from eviscene_tui.ui.screens.gate import GateScreen
    from eviscene_tui.ui.widgets.gate_panel import CallList

    with tempfile.TemporaryDirectory(prefix="bench-calls-screen-") as tmp:
        inproc, gate, search = _gate_in(tmp)
        probe = _Probe()
        lat: list[float] = []
        try:
            with frame_clock() as clock:
                app = App()
                async with app.run_test(size=(140, 60)):
                    app.push_screen(GateScreen(GateSession(search.root, operator="bench")))
                    await asyncio.sleep(0.5)
                    view = app.screen.query_one(CallList)
                    for i in range(calls):
                        returned: list[float] = []

                        def driver(returned: list[float] = returned) -> None:  # the driver's thread: a call starts, then returns
                            token = inproc._ROUND.set({"round": 0, "search": search})
                            started = gate.live_calls.started(probe, [], {})
                            time.sleep(0.05)
                            returned.append(time.perf_counter())
                            gate.live_calls.ended(started, probe.result, None)
                            inproc._ROUND.reset(token)

                        thread = threading.Thread(target=driver)
                        thread.start()
                        while view.option_count <= i or "finish" not in str(view.get_option_at_index(i).prompt):
                            await asyncio.sleep(0.001)
                        seen = time.perf_counter()
                        thread.join()
                        lat.append((await clock.end_after(seen)) - returned[0])
        finally:
            gate.finish(0)
    return {"median_ms": statistics.median(lat) * 1000, "max_ms": max(lat) * 1000, "n": len(lat)}


def run() -> list[tuple[str, str]]:
    rows = search_start_rows()
    cost = measure_wrapper_cost()
    rows.append(("real driver's policy calls: the _call_llm wrapper's cost per call on the driver's path "
                 "(8,000 + 400 ids with logprobs, top-20 in the capture; goal < 1 ms)",
                 f"{cost['path_ms']:.3f} ms (with its writer's encoding and write of each record, back to back: {cost['total_ms']:.3f} ms)"))
    shown = asyncio.run(_call_on_screen())
    rows.append((f"real driver's policy calls: a returned call on the gate card after the driver received it ({shown['n']:.0f} calls; goal < 0.5 s)",
                 f"median {shown['median_ms']:.0f} ms, max {shown['max_ms']:.0f} ms"))
    for poll in ("0.1", "0.05"):
        lat = measure_bundled(poll)
        rows.append((f"bundled driver: decision -> driver resumes, poll {poll} s ({len(lat)} gates; goal < 0.3 s)",
                     f"median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms"))
    lat = measure_standin("0.1")
    rows.append((f"real-driver stand-in under gate: decision -> driver resumes, poll 0.1 s ({len(lat)} gates; goal < 0.3 s)",
                 f"median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms"))
    live = asyncio.run(_live_on_screen())
    rows.append((f"live channel: delta appended -> on screen, at {live['rate']:.0f} tokens/s (goal < 50 ms at >= 5,000 tokens/s)",
                 f"median {live['median_ms']:.0f} ms, p95 {live['p95_ms']:.0f} ms, max {live['max_ms']:.0f} ms"))
    rows.append(("live channel: a key (tab) answered meanwhile (goal < 50 ms)",
                 f"median {live['key_median_ms']:.0f} ms, max {live['key_max_ms']:.0f} ms"))
    return rows


if __name__ == "__main__":  # pragma: no cover
    for label, figure in run():
        print(f"{label}: {figure}")
