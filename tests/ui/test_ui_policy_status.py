"""The runs screen shows the policy server's status, polled through the real client."""

from pathlib import Path

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.options import AppOptions
from eviscene_tui.ui.app import EvisceneApp
from conftest import wait_until
from textual.widgets import Static

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"


async def test_status_bar_polls_the_attested_server(tmp_path):
    with FakeVLLMServer(profile=None) as server:
        profile = tmp_path / "profile.json"
        import orjson

        profile.write_bytes(orjson.dumps(server.profile_dict()))
        options = AppOptions(root=SAMPLES, workdir=tmp_path / "work", policy_profile=profile)
        app = EvisceneApp(options, watch=False)
        async with app.run_test(size=(120, 30)) as pilot:
            bar = app.screen.query_one("#policy-status", Static)
            await wait_until(lambda: "healthy" in str(bar.render()), pilot=pilot)
            text = str(bar.render())
            assert "ATTESTED" in text and "run 0 wait 0" in text and "kv" in text


async def test_status_bar_reports_unreachable_and_hidden_without_policy(tmp_path):
    options = AppOptions(root=SAMPLES, workdir=tmp_path / "work", policy_url="http://127.0.0.1:9/v1", policy_model="m")
    app = EvisceneApp(options, watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        bar = app.screen.query_one("#policy-status", Static)
        await wait_until(lambda: "unreachable" in str(bar.render()), pilot=pilot)
        assert "UNATTESTED" in str(bar.render())
    app = EvisceneApp(AppOptions(root=SAMPLES, workdir=tmp_path / "work2"), watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        # nothing to poll: the status worker ends at once, and the bar stays hidden
        await wait_until(lambda: all(w.is_finished for w in app.workers if w.group == "policy-status"), pilot=pilot)
        assert app.screen.query_one("#policy-status", Static).display is False
