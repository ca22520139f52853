"""The runs screen shows the policy server's status, polled through the real client."""

from pathlib import Path

from eviscene_tui.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.options import AppOptions
from eviscene_tui.ui.app import EvisceneApp
from textual.widgets import Static

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"


async def _wait_for(pilot, predicate, tries: int = 100):
    for _ in range(tries):
        if predicate():
            return True
        await pilot.pause(0.05)
    return False


async def test_status_bar_polls_the_attested_server(tmp_path):
    with FakeVLLMServer(profile=None) as server:
        profile = tmp_path / "profile.json"
        import orjson

        profile.write_bytes(orjson.dumps(server.profile_dict()))
        options = AppOptions(root=SAMPLES, workdir=tmp_path / "work", policy_profile=profile)
        app = EvisceneApp(options, watch=False)
        async with app.run_test(size=(120, 30)) as pilot:
            bar = app.screen.query_one("#policy-status", Static)
            assert await _wait_for(pilot, lambda: "healthy" in str(bar.render()))
            text = str(bar.render())
            assert "ATTESTED" in text and "run 0 wait 0" in text and "kv" in text


async def test_status_bar_reports_unreachable_and_hidden_without_policy(tmp_path):
    options = AppOptions(root=SAMPLES, workdir=tmp_path / "work", policy_url="http://127.0.0.1:9/v1", policy_model="m")
    app = EvisceneApp(options, watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        bar = app.screen.query_one("#policy-status", Static)
        assert await _wait_for(pilot, lambda: "unreachable" in str(bar.render()))
        assert "UNATTESTED" in str(bar.render())
    app = EvisceneApp(AppOptions(root=SAMPLES, workdir=tmp_path / "work2"), watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(0.2)
        assert app.screen.query_one("#policy-status", Static).display is False
