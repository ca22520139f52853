"""The supervised search and its continuation runner take their settings from the one
config file the CLI resolved (the XDG location included)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from supervised_fixtures import write_driver_case

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.supervised.continuation import PolicyContinuationRunner
from eviscene_tui.supervised.feedback import Budgets
from eviscene_tui.supervised.search import SupervisedSearch
from eviscene_tui.ui.launch import build_app
from eviscene_tui.ui.themes import LIGHT

CONFIG = """\
theme = "eviscene-light"
[policy]
temperature = 0.2
hint_placement = "system_suffix"
[supervised]
max_attempts = 2
max_proposals = 4
max_seconds = 60
"""


async def test_xdg_config_reaches_theme_policy_and_supervised(tmp_path: Path) -> None:
    """The bug: with config.toml in the XDG dir the theme applied but ``[policy]``
    and ``[supervised]`` were read from flag/env only (defaults 0.7 and 6 stayed)."""
    xdg = Path(os.environ["XDG_CONFIG_HOME"]) / "eviscene-tui"
    xdg.mkdir(parents=True)
    (xdg / "config.toml").write_text(CONFIG, encoding="utf-8")
    case_root = write_driver_case(tmp_path / "runs")
    args = argparse.Namespace(theme=None, poll=False, operator="op", workdir=str(tmp_path / "work"), config=None,
                              policy_profile=None, policy_url="http://127.0.0.1:9/v1", policy_model="m")
    app = build_app(tmp_path / "runs", args)
    runner = PolicyContinuationRunner.from_options(app.options)
    assert runner.config.temperature == 0.2 and runner.config.hint_placement == "system_suffix"
    search = SupervisedSearch.for_case(load_case(case_root), app.options)
    try:
        assert search.budgets == Budgets(max_attempts=2, max_proposals=4, max_seconds=60)
    finally:
        search.close()
    async with app.run_test(size=(80, 24)):
        assert app.theme == LIGHT


