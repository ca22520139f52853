"""The pass-through wrapper of ``StageRunner._call_llm``, in process, on the stand-in's
stage runner: the caller gets the very object the method returned (the same bytes),
the very exception it raised (the live record keeps its type only), and the call
returns while the live channel's writer is stuck (nothing on the driver's path waits
for it). The signature check refuses any other signature."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import threading
from pathlib import Path

import pytest

from eviscene_tui.gate import inproc
from eviscene_tui.gate import protocol as P
from eviscene_tui.scaffold.standin import DRIVER_PATH

STANDIN = DRIVER_PATH.parent


class Store:
    """The runtime archive a StageRunner writes to (events kept in memory)."""

    def __init__(self, root: Path) -> None:
        self.root, self.events, self.n = root, [], 0

    def next_request_id(self) -> str:
        self.n += 1
        return f"req-{self.n:06d}"

    def event(self, event_type: str, payload: dict) -> None:
        self.events.append((event_type, payload))


def _stage_runner_module(monkeypatch, name: str = "probe.orchestrator.stage_runner"):
    """A fresh copy of the stand-in's stage runner module (its class is patched per test)."""
    monkeypatch.syspath_prepend(str(STANDIN))
    spec = importlib.util.spec_from_file_location(name, STANDIN / "eviscene" / "orchestrator" / "stage_runner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def search(tmp_path):
    gate = inproc.Gate(gate_dir=None, operator="t", hint_gate=False, argv=["driver.py"])
    found = gate.enter_search(tmp_path / "root")
    yield gate, found
    gate.finish(0)


def _backend():
    from eviscene.orchestrator.llm_backend import ScriptedBackend  # lazy: on sys.path only once the module is loaded

    return ScriptedBackend(model="probe")


def _round(found):
    return inproc._ROUND.set({"round": 0, "search": found, "hints": [(0, "Find the oldest copy.")]})


def test_the_caller_gets_exactly_what_the_method_returned(monkeypatch, tmp_path, search):
    gate, found = search
    module = _stage_runner_module(monkeypatch)
    original = module.StageRunner._call_llm
    returned = []

    @functools.wraps(original)
    async def spy(self, messages, **kwargs):  # records what the real method hands back, before the gate's wrapper sees it
        result = await original(self, messages, **kwargs)
        returned.append((result, P.canonical_bytes([result[0].__dict__, result[1]])))
        return result

    module.StageRunner._call_llm = spy
    gate.wrap_stage_runner(module)
    assert module.StageRunner._call_llm is not spy and getattr(module.StageRunner._call_llm, "__eviscene_gate__", False)
    runner = module.StageRunner(stage_name="psd_teacher_repair", llm=_backend(), store=Store(tmp_path), tools=[{"type": "function"}])
    token = _round(found)
    try:
        result = asyncio.run(runner.call([{"role": "user", "content": "Hint: Find the oldest copy."}], require_tool=True,
                                         lifecycle_kind="psd_teacher_action"))
    finally:
        inproc._ROUND.reset(token)
    assert result is returned[0][0]
    assert P.canonical_bytes([result[0].__dict__, result[1]]) == returned[0][1]  # not one byte changed on the way
    found.calls.close()
    records, _ = P.parse_live((found.gate_dir / P.LIVE_FILE).read_bytes())
    assert [r["type"] for r in records] == ["call_started", "call_complete"]
    assert records[0]["hint"] == 0 and records[0]["hint_text"] == "Find the oldest copy." and records[0]["stage"] == "psd_teacher_repair"
    assert records[1]["completion_token_ids"] == result[1]["policy_token_capture"]["completion_token_ids"]


class ProviderError(RuntimeError):
    pass


def test_an_exception_is_re_raised_as_it_was_and_recorded_by_type_only(monkeypatch, tmp_path, search):
    gate, found = search
    module = _stage_runner_module(monkeypatch)
    gate.wrap_stage_runner(module)
    raised = ProviderError("401 for key sk-SECRET-123")

    class Failing:
        async def get_response(self, *args, **kwargs):
            raise raised

    runner = module.StageRunner(stage_name="psd_teacher_judgment", llm=Failing(), store=Store(tmp_path))
    token = _round(found)
    try:
        with pytest.raises(ProviderError) as info:
            asyncio.run(runner.call([{"role": "user", "content": "judge"}], suppress_tools=True))
    finally:
        inproc._ROUND.reset(token)
    assert info.value is raised
    found.calls.close()
    data = (found.gate_dir / P.LIVE_FILE).read_bytes()
    records, _ = P.parse_live(data)
    assert records[-1]["type"] == "call_failed" and records[-1]["error_type"] == "ProviderError"
    assert b"SECRET" not in data


def test_a_stuck_live_channel_does_not_hold_the_call(monkeypatch, tmp_path, search):
    gate, found = search
    module = _stage_runner_module(monkeypatch)
    gate.wrap_stage_runner(module)
    release, entered = threading.Event(), threading.Event()
    real_write = found.live.write

    def stuck_write(*args, **kwargs):  # a write that hangs (a dead network mount)
        entered.set()
        release.wait()
        return real_write(*args, **kwargs)

    monkeypatch.setattr(found.live, "write", stuck_write)
    runner = module.StageRunner(stage_name="psd_teacher_repair", llm=_backend(), store=Store(tmp_path), tools=[{"type": "function"}])
    token = _round(found)
    try:
        result = asyncio.run(runner.call([{"role": "user", "content": "go"}], require_tool=True))
        second = asyncio.run(runner.call([{"role": "user", "content": "again"}], require_tool=True))
    finally:
        inproc._ROUND.reset(token)
    assert entered.wait(30) and not release.is_set()  # both calls returned while the writer was stuck on the first record
    assert result[1]["context_request_id"] == "req-000001" and second[1]["context_request_id"] == "req-000002"
    release.set()
    found.calls.close()
    records, _ = P.parse_live((found.gate_dir / P.LIVE_FILE).read_bytes())
    assert [r["type"] for r in records] == ["call_started", "call_complete"] * 2


def test_only_the_known_signature_is_wrapped(monkeypatch, search):
    gate, found = search
    module = _stage_runner_module(monkeypatch)
    assert inproc.call_llm_mismatch(module.StageRunner._call_llm) is None

    async def renamed(self, messages, *, require_tool=False, max_tokens=None, generation_config=None, lifecycle_kind="",
                      parent_context_request_id="", suppress_tools=False, active_step=None):
        return None

    async def new_default(self, messages, *, require_tool=True, max_tokens=None, generation_config=None, lifecycle_kind="",
                          parent_context_request_id="", suppress_tools=False, active_steps=None):
        return None

    def not_async(self, messages, *, require_tool=False, max_tokens=None, generation_config=None, lifecycle_kind="",
                  parent_context_request_id="", suppress_tools=False, active_steps=None):
        return None

    for changed in (renamed, new_default, not_async):
        assert inproc.call_llm_mismatch(changed) is not None, changed.__name__
    module.StageRunner._call_llm = renamed
    gate.wrap_stage_runner(module)
    assert module.StageRunner._call_llm is renamed
    assert P.CALL_LLM_CHANGED in found.heartbeat_doc()["problems"][0] and "active_step=None" in found.heartbeat_doc()["problems"][0]
    for name in ("eviscene.orchestrator.stage_runner", "src.orchestrator.stage_runner", "a.b.orchestrator.stage_runner"):
        assert P.is_stage_runner(name) and inproc.is_target(name)
    assert not P.is_stage_runner("eviscene.orchestrator.stage_runner_utils") and not P.is_stage_runner("xorchestrator.stage_runner")
