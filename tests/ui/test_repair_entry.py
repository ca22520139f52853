"""The case screen's ``g``: it starts the bundled driver on the case under the gate (its own
process, in the work directory) and opens its gate screen; pressed again while that driver
runs, it attaches to it instead of starting another."""

from __future__ import annotations

import argparse
import os
import signal

from ui_helpers import copy_case, open_case, wait_for

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.gate.bundled import repair_root
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.journal.records import record_key
from eviscene_tui.options import AppOptions
from eviscene_tui.settings import Settings
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.ui.screens.gate import GateCard, GateScreen

CASE = "feedback-converged-3-rounds"


async def test_g_starts_the_bundled_driver_then_attaches_to_it(tmp_path_factory, tmp_path, notices) -> None:
    root = tmp_path / "runs"
    copy_case(tmp_path_factory, CASE, root)
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as vllm:
        args = argparse.Namespace(theme=None, poll=False, operator="tester", workdir=str(tmp_path / "work"), config=None,
                                  policy_url=vllm.v1_url, policy_model=vllm.profile_dict()["profile_id"])
        app = EvisceneApp(AppOptions.from_args(root, args, settings=Settings()))
        search = repair_root(tmp_path / "work", record_key(root / CASE).key)  # keyed as the case's records are
        try:
            async with app.run_test(size=(140, 50), notifications=True) as pilot:
                screen = await open_case(pilot, app, CASE)
                assert await wait_for(pilot, lambda: screen.integrity is not None, 30)
                await pilot.press("g")
                assert await wait_for(pilot, lambda: isinstance(app.screen, GateScreen))
                assert app.screen.session.root == search
                assert any("bundled driver started under the gate" in n for n in notices)
                assert await wait_for(pilot, lambda: "ROUND GATE · round 0" in str(app.screen.query_one(GateCard).render()), 60)
                first = read_status(search).driver.pid
                await pilot.press("escape")
                assert await wait_for(pilot, lambda: app.screen is screen)
                await pilot.press("g")
                assert await wait_for(pilot, lambda: isinstance(app.screen, GateScreen))
                assert any("attached to its driver" in n for n in notices)
                assert read_status(search).driver.pid == first  # no second driver
                assert not case_root_written(root / CASE)
        finally:
            pid = read_status(search).driver.pid
            if pid and read_status(search).driver.alive:
                os.kill(pid, signal.SIGKILL)


def case_root_written(case) -> bool:
    """Anything but the driver's files in the opened case (evidence is never written)."""
    return any(p.name.endswith((".eviscene-gate", ".log")) for p in case.rglob("*"))
