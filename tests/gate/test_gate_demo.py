"""The demo's gated search: the bundled stand-in driver under ``eviscene-tui gate``
against the fake vLLM, stopped (by its own pid) when the demo ends."""

from __future__ import annotations

import json

from eviscene_tui.artifacts.layout import discover_cases
from eviscene_tui.artifacts.report import checked_case
from eviscene_tui.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.gate.decide import decide
from eviscene_tui.gate.demo import start_gated_demo
from eviscene_tui.gate.sidecar import read_status

from gate_fixtures import run_cli, wait_until


def _waiting(root, kind, round_index):
    def check():
        st = read_status(root)
        return any(p.kind == kind and p.round == round_index and st.driver.waiting == p.name for p in st.pending)

    return check


def test_gated_demo_runs_the_standin_and_stops_it(tmp_path):
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as server:
        demo = start_gated_demo(tmp_path / "demo", policy_url=server.v1_url, policy_model=server.profile_dict()["profile_id"],
                                operator="newcomer", step_seconds=0.0)
        try:
            assert (demo.root.parent.parent / "inputs" / "standin-flood-photo" / "trace.json").is_file()  # inputs outside the root
            wait_until(_waiting(demo.root, "round", 0), "the demo's round-0 gate")
            assert decide(demo.root, "approve-round", 0, operator="newcomer").taken
            wait_until(_waiting(demo.root, "hint", 0), "the demo's hint gate")
            assert decide(demo.root, "approve-hint", 0, operator="newcomer").taken
            wait_until(_waiting(demo.root, "round", 1), "the demo's round-1 gate")
            assert any(r["path"] == "/v1/chat/completions" for r in server.recorder.requests)
        finally:
            demo.stop()
        assert demo.process.poll() is not None
        wait_until(lambda: not read_status(demo.root).driver.alive, "the demo driver reported stopped")


def test_demo_reuses_one_standin_folder_and_its_search_checks_clean(tmp_path):
    """Each start uses the same folder (the previous one's, and older stamped ones, are
    cleaned once their driver is gone), ``gate-status`` finds the search from the demo
    folder, and the stand-in's trace and attempt records carry complete token captures:
    ``check`` on it reports no problem."""
    base = tmp_path / "work" / "demo"
    old = base / "gated-standin-20260101T000000Z" / "repairs"
    old.mkdir(parents=True)  # an older demo's stamped folder, its driver long gone
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as server:
        model = server.profile_dict()["profile_id"]
        first = start_gated_demo(base, policy_url=server.v1_url, policy_model=model, operator="newcomer", step_seconds=0.0)
        try:
            wait_until(_waiting(first.root, "round", 0), "the first demo's round-0 gate")
            assert decide(first.root, "approve-round", 0, operator="newcomer").taken
            wait_until(_waiting(first.root, "hint", 0), "the hint gate")
            assert decide(first.root, "approve-hint", 0, operator="newcomer").taken
            wait_until(_waiting(first.root, "round", 1), "the round-1 gate (round 0's attempt recorded)")
            (ref,) = list(discover_cases(first.root))
            _summary, problems = checked_case(ref, first.root)
            assert [(p.code, p.message) for p in problems] == []
            out = run_cli("gate-status", str(base), "--json")
            assert out.returncode == 0, out.stdout + out.stderr
            assert json.loads(out.stdout)["root"] == str(first.root)
        finally:
            first.stop()
        wait_until(lambda: not read_status(first.root).driver.alive, "the first demo's driver stopped")
        second = start_gated_demo(base, policy_url=server.v1_url, policy_model=model, step_seconds=0.0)
        try:
            assert second.root == first.root
            wait_until(_waiting(second.root, "round", 0), "the second demo's round-0 gate (a fresh search)")
            assert sorted(p.name for p in base.iterdir()) == ["gated-standin"]
        finally:
            second.stop()
