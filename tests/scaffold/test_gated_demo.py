"""The demo's gated search: the bundled driver (``eviscene-tui repair``) on a sample case,
against the fake vLLM and the demo hint constructor, stopped (by its own pid) when the
demo ends; every gate kind comes in turn, and the search checks clean."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from eviscene_tui.artifacts.layout import discover_cases
from eviscene_tui.artifacts.report import checked_case
from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.hints import POOL, DemoHintServer
from eviscene_tui.gate.decide import decide
from eviscene_tui.scaffold.gated_demo import DEMO_CASE, start_gated_demo
from eviscene_tui.gate.sidecar import read_status

from gate_fixtures import run_cli, wait_until
from repair_fixtures import waiting

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"


def _profile(tmp_path: Path, server: FakeVLLMServer) -> Path:
    path = tmp_path / "serving-profile-demo.json"
    path.write_bytes(orjson.dumps(server.profile_dict()))
    return path


def test_gated_demo_steps_through_every_gate_kind_and_stops(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as server, DemoHintServer() as hints:
        demo = start_gated_demo(tmp_path / "work" / "demo", SAMPLES / DEMO_CASE, workdir=tmp_path / "work",
                                policy_profile=_profile(tmp_path, server), hint_url=hints.v1_url, hint_model="demo", operator="newcomer")
        try:
            wait_until(waiting(demo.root, "round", 0), "the demo's round gate")
            assert decide(demo.root, "approve-round", 0, operator="newcomer").taken
            hint = wait_until(waiting(demo.root, "hint", 0), "the demo's hint gate")
            assert hint["hint"]["text"] == POOL[0]
            assert decide(demo.root, "approve-hint", 0, operator="newcomer").taken
            attempt = wait_until(waiting(demo.root, "attempt", 0, phase="judge"), "the demo's attempt gate")
            assert attempt["attempt"]["completion_tokens"] > 0
            assert any(r["path"] == "/v1/chat/completions" for r in server.recorder.requests)
            assert decide(demo.root, "reject-attempt", 0, reason="not yet", operator="newcomer").taken
            wait_until(waiting(demo.root, "round", 1), "the demo's round-1 gate")
        finally:
            demo.stop()
        assert demo.process.poll() is not None
        wait_until(lambda: not read_status(demo.root).driver.alive, "the demo driver reported stopped")


def test_demo_reuses_one_folder_and_its_search_checks_clean(tmp_path):
    """Each start uses the same folder (the previous one's, and older stamped ones, are
    cleaned once their driver is gone), ``gate-status`` finds the search from the demo
    folder, and ``check`` on the search reports no problem."""
    base = tmp_path / "work" / "demo"
    old = base / "gated-repair-20260101T000000Z" / "search"
    old.mkdir(parents=True)  # an older demo's stamped folder, its driver long gone
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as server, DemoHintServer() as hints:
        kw = dict(workdir=tmp_path / "work", policy_profile=_profile(tmp_path, server), hint_url=hints.v1_url, hint_model="demo")
        first = start_gated_demo(base, SAMPLES / DEMO_CASE, operator="newcomer", **kw)
        try:
            wait_until(waiting(first.root, "round", 0), "the first demo's round gate")
            assert decide(first.root, "approve-round", 0, operator="newcomer").taken
            wait_until(waiting(first.root, "hint", 0), "the hint gate")
            assert decide(first.root, "approve-hint", 0, operator="newcomer").taken
            wait_until(waiting(first.root, "attempt", 0, phase="judge"), "the attempt gate")
            assert decide(first.root, "accept-attempt", 0, operator="newcomer").taken
            wait_until(lambda: first.process.poll() is not None, "the converged search's driver to exit")
            (ref,) = list(discover_cases(first.root))
            _summary, problems = checked_case(ref, first.root)
            assert [(p.code, p.message) for p in problems] == []
            out = run_cli("gate-status", str(base), "--json")
            assert out.returncode == 0, out.stdout + out.stderr
            assert json.loads(out.stdout)["root"] == str(first.root)
        finally:
            first.stop()
        second = start_gated_demo(base, SAMPLES / DEMO_CASE, **kw)
        try:
            assert second.root == first.root
            wait_until(waiting(second.root, "round", 0), "the second demo's round gate (a fresh search)")
            assert sorted(p.name for p in base.iterdir()) == ["gated-repair"]
        finally:
            second.stop()
