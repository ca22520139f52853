"""Shared helpers for the UI tests (imported by test_ui_*.py; not a conftest)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from eviscene_tui.options import AppOptions
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.settings import Settings

_SAMPLES: dict[str, Path] = {}


def sample_root(tmp_factory) -> Path:
    """Generated sample_runs (once per session), read-only by convention."""
    if "root" not in _SAMPLES:
        from eviscene_tui.samples import generate

        root = tmp_factory.mktemp("ui-samples") / "runs"
        generate(root)
        _SAMPLES["root"] = root
    return _SAMPLES["root"]


def copy_case(tmp_factory, name: str, dest: Path) -> Path:
    """Copy one sample case into ``dest`` with its inputs beside it (as rsynced off the cluster)."""
    from eviscene_tui.samples import copy_case as copy_sample

    return copy_sample(sample_root(tmp_factory), name, dest)


def make_app(root: Path, *, watch: bool = False, theme: str | None = None, poll: bool = False, settings: Settings | None = None, **kw) -> EvisceneApp:
    args = argparse.Namespace(theme=theme, poll=poll, operator="tester", workdir=None, config=None)
    options = AppOptions.from_args(root, args, settings=settings or Settings())
    return EvisceneApp(options, watch=watch, **kw)


def screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def wait_for(pilot, predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.05) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(step)
    return predicate()


async def wait_scan(pilot, app, timeout: float = 20.0) -> None:
    assert await wait_for(pilot, lambda: app.scan_seconds is not None, timeout), "scan did not finish"
    await pilot.pause()


async def open_case(pilot, app, key: str, timeout: float = 20.0):
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    await wait_scan(pilot, app)
    table = app.screen.query_one(RunsTable)
    assert table.select_key(key), f"{key} not in the runs table"
    await pilot.press("enter")
    assert await wait_for(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.view is not None, timeout)
    screen = app.screen
    await wait_for(pilot, lambda: screen.trace_rows is not None or "unavailable" in screen_text(app), timeout)
    await pilot.pause()
    return screen
