"""One rule chooses the policy server, and every surface says the same thing about it:
the runs screen's status bar, the stream screen, the case screen's repair (``g``) and ``stream``."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from conftest import ScreenHarness, wait_until
from textual.widgets import Static

from eviscene_tui.cli import UsageError, policy_target_from_args
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.profile import NO_POLICY, ProfileError, resolve_policy_target
from eviscene_tui.state.repair import plan_repair
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.ui.screens.stream import StreamScreen

NEEDS_MODEL = "an unattested session needs both --policy-url and --policy-model (--policy-model is missing)"


def test_the_rule() -> None:
    assert resolve_policy_target(profile=None, url=None, model=None) is None
    target = resolve_policy_target(profile=None, url="http://h:1", model="m")
    assert target is not None and target.base_urls == ("http://h:1/v1",) and not target.attested
    with pytest.raises(ProfileError, match=r"--policy-model is missing"):
        resolve_policy_target(profile=None, url="http://h:1", model=None)
    with pytest.raises(ProfileError, match=r"--policy-url is missing"):
        resolve_policy_target(profile=None, url=None, model="m")
    with pytest.raises(ProfileError, match="not both"):
        resolve_policy_target(profile="p.json", url="http://h:1", model="m")
    with pytest.raises(ProfileError, match="not found"):
        resolve_policy_target(profile="/nonexistent/p.json", url=None, model=None)


async def test_only_policy_url_reads_the_same_everywhere(tmp_path: Path) -> None:
    """The bug: with only --policy-url the status bar said "needs both" while the
    stream screen said "no policy configured"."""
    (tmp_path / "runs").mkdir()
    options = AppOptions(root=tmp_path / "runs", workdir=tmp_path / "work", policy_url="http://127.0.0.1:9/v1")

    app = EvisceneApp(options, watch=False)
    async with app.run_test(size=(160, 30)) as pilot:
        bar = app.screen.query_one("#policy-status", Static)
        await wait_until(lambda: NEEDS_MODEL in str(bar.render()), pilot=pilot, what="the status bar's message")

    screen = StreamScreen(None, options, hint_text="h")
    async with ScreenHarness(screen).run_test(size=(200, 30)) as pilot:
        await wait_until(lambda: screen.target_error is not None, pilot=pilot)
        assert screen.target_error == NEEDS_MODEL
        assert NEEDS_MODEL in str(screen.query_one("#stream-policy", Static).render())

    assert NEEDS_MODEL in plan_repair(options, tmp_path).refusal  # the case screen's g (the bundled driver)

    args = argparse.Namespace(policy_profile=None, policy_url="http://127.0.0.1:9/v1", policy_model=None)
    with pytest.raises(UsageError, match=r"--policy-model is missing"):
        policy_target_from_args(args)


async def test_no_policy_reads_the_same_everywhere(tmp_path: Path) -> None:
    options = AppOptions(root=tmp_path, workdir=tmp_path / "work")
    screen = StreamScreen(None, options, hint_text="h")
    async with ScreenHarness(screen).run_test(size=(200, 30)) as pilot:
        await wait_until(lambda: screen.target_error is not None, pilot=pilot)
        assert screen.target_error == NO_POLICY
    assert plan_repair(options, tmp_path).refusal == NO_POLICY
    with pytest.raises(UsageError, match="no policy server configured"):
        policy_target_from_args(argparse.Namespace(policy_profile=None, policy_url=None, policy_model=None))
