"""The demo's gated search: the bundled stand-in driver under ``eviscene-tui gate``
against the fake vLLM, stopped (by its own pid) when the demo ends."""

from __future__ import annotations

from eviscene_tui.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.gate.demo import start_gated_demo
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.gate.decide import decide


from gate_fixtures import wait_until


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
