"""Themes, help, command palette and user key overrides."""

from __future__ import annotations

from pathlib import Path

from ui_helpers import palette_run, make_app, open_case, sample_root, wait_for, wait_scan

from eviscene_tui.settings import load_settings
from eviscene_tui.ui.screens.help import HelpScreen
from eviscene_tui.ui.themes import DARK, LIGHT
from eviscene_tui.ui.widgets.trace_view import TraceView


async def test_theme_switch_at_runtime_and_from_option(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_scan(pilot, app)
        assert app.theme == DARK
        assert {DARK, LIGHT} <= set(app.available_themes)
        dark_bg = app.screen.styles.background
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == LIGHT
        assert app.has_class("-theme-eviscene-light")
        assert await wait_for(pilot, lambda: app.screen.styles.background != dark_bg)  # the stylesheet is refreshed after the switch
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == DARK
    app = make_app(sample_root(tmp_path_factory), theme=LIGHT)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == LIGHT


async def test_unknown_theme_falls_back_with_a_message(tmp_path_factory, notices) -> None:
    app = make_app(sample_root(tmp_path_factory), theme="no-such-theme")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: any("Unknown theme" in n for n in notices))
        assert app.theme == DARK


async def test_help_lists_every_registered_key_and_opens_at_the_screen(tmp_path_factory) -> None:
    from eviscene_tui.ui.actions import ACTIONS, SECTIONS

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_scan(pilot, app)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = "\n".join(str(s.content) for s in app.screen.query(".help-section"))
        for title in SECTIONS.values():
            assert title in text
        for action in ACTIONS:  # the gate card's keys and the token view's l / n among them
            assert action.id in text, action.id
        assert app.screen.section == "runs"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await open_case(pilot, app, "feedback-converged-3-rounds")
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert help_screen.section == "case"
        body = help_screen.query_one("#help-body")
        target = help_screen.query_one("#help-case")
        assert await wait_for(pilot, lambda: body.scroll_y > 0 and abs(body.scroll_y - (target.virtual_region.y)) <= 1)


def test_every_binding_has_a_registered_id() -> None:
    """Every screen's and widget's BINDINGS come from the registry (an id each)."""
    import importlib

    from eviscene_tui.ui.actions import BY_ID

    classes = [
        ("eviscene_tui.ui.app", "EvisceneApp"), ("eviscene_tui.ui.screens.runs", "RunsScreen"), ("eviscene_tui.ui.screens.runs", "SortChooser"),
        ("eviscene_tui.ui.widgets.runs_table", "RunsTable"), ("eviscene_tui.ui.screens.case", "CaseScreen"),
        ("eviscene_tui.ui.widgets.trace_view", "TraceView"), ("eviscene_tui.ui.widgets.search_box", "SearchBox"),
        ("eviscene_tui.ui.screens.step_detail", "StepDetailScreen"), ("eviscene_tui.ui.screens.goto", "GotoStepScreen"),
        ("eviscene_tui.ui.screens.label", "TriageLabelScreen"), ("eviscene_tui.ui.screens.stream", "StreamScreen"),
        ("eviscene_tui.ui.screens.tokens", "TokenScreen"),
        ("eviscene_tui.ui.widgets.token_view", "TokenView"), ("eviscene_tui.ui.screens.help", "HelpScreen"),
        ("eviscene_tui.ui.screens.dialogs", "TriState"), ("eviscene_tui.ui.screens.dialogs", "FormScreen"),
        ("eviscene_tui.ui.screens.gate", "GateScreen"), ("eviscene_tui.ui.screens.gate", "GateCard"),
        ("eviscene_tui.ui.screens.gate", "ReasonPrompt"), ("eviscene_tui.ui.screens.gate", "StepPicker"),
        ("eviscene_tui.ui.screens.dialogs", "HintEditor"), ("eviscene_tui.ui.screens.dialogs", "VerdictForm"),
        ("eviscene_tui.ui.screens.confirm", "ConfirmScreen"),
    ]
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        for b in cls.BINDINGS:
            assert b.id in BY_ID, (name, b)
            assert BY_ID[b.id].key == b.key and BY_ID[b.id].action == b.action


def test_ctrl_t_is_the_theme_everywhere() -> None:
    from eviscene_tui.ui.actions import ACTIONS

    assert [a.id for a in ACTIONS if "ctrl+t" in a.key.split(",")] == ["app.theme"]


async def test_palette_offers_commands_with_their_keys_and_opens_cases_by_name(tmp_path_factory) -> None:
    from eviscene_tui.ui.screens.case import CaseScreen

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_scan(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "runs: search  (/)" in titles
        assert "runs: filter triage queue  (t)" in titles
        await palette_run(pilot, app, "open paused-pending", "paused-pending")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.key == "search-paused-pending-verifier")


async def test_palette_command_runs_case_action(tmp_path_factory) -> None:
    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        tv = screen.query_one(TraceView)
        await pilot.press("home")
        await pilot.pause()
        assert tv.cursor == 0
        await palette_run(pilot, app, "case: go to failure step", "go to failure step")
        assert await wait_for(pilot, lambda: app.screen is screen and tv.cursor == screen.view.failure_index)


async def test_palette_lists_noun_verb_commands(tmp_path_factory, tmp_path: Path) -> None:
    app = make_app(sample_root(tmp_path_factory), workdir=tmp_path / "work")  # the filter it sets is saved there
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_scan(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert any(t.startswith("runs: filter triage queue") for t in titles)
        assert "theme: switch to light" in titles
        assert all(": " in t for t in titles)
        await palette_run(pilot, app, "runs: filter triage", "filter triage")
        assert await wait_for(pilot, lambda: app.store.filter_name == "triage")


async def test_user_keymap_from_config_file(tmp_path_factory, tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('theme = "eviscene-light"\n[keys]\n"runs.filter.triage" = "z"\n"case.failure" = "F"\n', encoding="utf-8")
    monkeypatch.setenv("EVISCENE_TUI_CONFIG", str(config))
    cfg = load_settings()
    assert cfg.found and cfg.keys == {"runs.filter.triage": "z", "case.failure": "F"} and not cfg.problems
    app = make_app(sample_root(tmp_path_factory), settings=cfg, workdir=tmp_path / "work")  # the filter it sets is saved there
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_scan(pilot, app)
        assert app.theme == LIGHT
        await pilot.press("z")
        await pilot.pause()
        assert app.store.filter_name == "triage"
        await pilot.press("a")
        await pilot.pause()
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        tv = screen.query_one(TraceView)
        await pilot.press("home")
        await pilot.pause()
        await pilot.press("F")
        await pilot.pause()
        assert tv.cursor == screen.view.failure_index


def test_broken_config_is_reported_not_raised(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[keys\n", encoding="utf-8")
    cfg = load_settings(bad)
    assert cfg.problems and "not valid TOML" in cfg.problems[0]
    missing = load_settings(tmp_path / "missing.toml")
    assert missing.problems and not missing.found


def test_launch_builds_options_from_args(tmp_path: Path) -> None:
    import argparse

    from eviscene_tui.ui.launch import build_app

    args = argparse.Namespace(theme="eviscene-light", poll=True, operator="ann", workdir=str(tmp_path / "work"), config=None)
    app = build_app(tmp_path, args)
    assert app.options.root == tmp_path
    assert (app.options.theme, app.options.poll, app.options.operator) == ("eviscene-light", True, "ann")
    assert app.options.workdir == tmp_path / "work"
