"""One settings module: the file is found once (flag, env, XDG), read once, and every
part of the app (theme, keys, policy client, supervised budgets, path map) sees it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from conftest import wait_until

from eviscene_tui.policy.config import PolicyConfig, policy_config
from eviscene_tui.settings import PolicySettings, Settings, SupervisedSettings, config_path, load_settings
from eviscene_tui.gate.bundled.stages import Budgets

GOOD = """\
theme = "eviscene-light"

[keys]
"case.failure" = "F"
"runs.triage" = ["t", "ctrl+t"]

[policy]
temperature = 0.2
read_timeout = 900
hint_placement = "system_suffix"
api_key = "file-key"

[supervised]
max_attempts = 2
max_proposals = 4
max_seconds = 60

[paths]
map = { "/data/eviscene" = "/home/me/eviscene" }
"""


def _xdg_file(text: str) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "eviscene-tui" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_table_is_read_from_the_xdg_file() -> None:
    path = _xdg_file(GOOD)
    s = load_settings()
    assert s.path == path and s.found and s.problems == ()
    assert s.theme == "eviscene-light"
    assert s.keys == {"case.failure": "F", "runs.triage": "t,ctrl+t"}
    assert (s.policy.temperature, s.policy.read_timeout, s.policy.hint_placement) == (0.2, 900.0, "system_suffix")
    assert (s.supervised.max_attempts, s.supervised.max_proposals, s.supervised.max_seconds) == (2, 4, 60)
    assert s.paths.map == {"/data/eviscene": "/home/me/eviscene"}
    assert "file-key" not in repr(s)


def test_the_flag_wins_over_the_env_which_wins_over_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = _xdg_file('theme = "from-xdg"\n')
    env = tmp_path / "env.toml"
    env.write_text('theme = "from-env"\n')
    flag = tmp_path / "flag.toml"
    flag.write_text('theme = "from-flag"\n')
    assert config_path() == xdg and load_settings().theme == "from-xdg"
    monkeypatch.setenv("EVISCENE_TUI_CONFIG", str(env))
    assert load_settings().theme == "from-env"
    assert load_settings(flag).theme == "from-flag"


def test_a_missing_file_is_fine_at_the_default_place_but_reported_when_named(tmp_path: Path) -> None:
    s = load_settings()
    assert not s.found and s.problems == () and s == Settings(path=s.path)
    named = load_settings(tmp_path / "nope.toml")
    assert not named.found and len(named.problems) == 1
    assert "nope.toml" in named.problems[0] and "does not exist" in named.problems[0]


def test_bad_toml_names_file_and_line_and_keeps_defaults(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('theme = "x"\n\n[policy\ntemperature = 0.1\n')
    s = load_settings(bad)
    assert s.theme is None and s.policy == PolicySettings()
    (problem,) = s.problems
    assert str(bad) in problem and "line 3" in problem and "not valid TOML" in problem


def test_a_bad_value_drops_only_that_key_and_names_its_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[policy]\ntemperature = 0.3\nhint_placement = "nowhere"\nread_timeout = "soon"\n\n[supervised]\nmax_attempts = 40\n')
    s = load_settings(cfg)
    assert s.policy.temperature == 0.3  # the good key of the table still applies
    assert s.policy.hint_placement == "as_run" and s.policy.read_timeout == 600.0
    assert s.supervised == SupervisedSettings()
    text = "\n".join(s.problems)
    assert len(s.problems) == 3, text
    assert f"config {cfg}, line 3: [policy] hint_placement = 'nowhere'" in text
    assert f"config {cfg}, line 4: [policy] read_timeout = 'soon'" in text
    assert f"config {cfg}, line 7: [supervised] max_attempts = 40" in text


def test_cross_field_budget_rule_and_unknown_keys(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('colour = "red"\n[supervised]\nmax_attempts = 8\nmax_proposals = 4\n[policy]\ntemprature = 0.1\n')
    s = load_settings(cfg)
    assert s.supervised == SupervisedSettings()
    text = "\n".join(s.problems)
    assert "line 1: unknown setting 'colour'" in text
    assert "line 2: [supervised] max_proposals (4) must be at least max_attempts (8)" in text
    assert "line 6: [policy] temprature = 0.1: unknown setting 'temprature'" in text


def test_types_are_not_coerced(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[policy]\nlogprobs = 1\ntemperature = true\n[supervised]\nmax_attempts = 2.0\n")
    s = load_settings(cfg)
    assert s.policy.logprobs is False and s.policy.temperature == 0.7 and s.supervised.max_attempts == 6
    assert len(s.problems) == 3


def test_policy_api_key_env_wins_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[policy]\napi_key = "file-key"\n')
    assert policy_config(load_settings(cfg).policy).api_key == "file-key"
    monkeypatch.setenv("EVISCENE_POLICY_API_KEY", "env-key")
    c = policy_config(load_settings(cfg).policy)
    assert c.api_key == "env-key" and "env-key" not in repr(c)


def test_policy_config_overrides_and_budgets() -> None:
    s = Settings(policy=PolicySettings(temperature=0.1), supervised=SupervisedSettings(max_attempts=3, max_proposals=5))
    assert policy_config(s.policy, read_timeout=5.0, max_tokens=None) == PolicyConfig(temperature=0.1, read_timeout=5.0)
    with pytest.raises(ValueError, match="hint_placement"):
        policy_config(s.policy, hint_placement="nowhere")
    assert Budgets.from_settings(s.supervised) == Budgets(max_attempts=3, max_proposals=5)


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(ValueError):
        s.theme = "x"  # type: ignore[misc]  # the point: assignment is refused at run time


async def test_a_bad_config_is_said_in_the_app(tmp_path: Path, notices: list[str]) -> None:
    from eviscene_tui.ui.launch import build_app

    _xdg_file("[supervised]\nmax_attempts = 99\n")
    app = build_app(tmp_path, argparse.Namespace(workdir=str(tmp_path / "work"), config=None))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_until(lambda: any("max_attempts = 99" in n for n in notices), pilot=pilot, what="the config problem notification")
