"""Shared helpers for the UI tests: the sample tree, the app, opening a case, the app
that hosts the gate screen (the wait and screen-text helpers themselves live in
tests/conftest.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from conftest import DEFAULT_TIMEOUT, ScreenHarness, screen_text, wait_until

from eviscene_tui.options import AppOptions
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.ui.screens.gate import GateScreen
from eviscene_tui.settings import Settings
from eviscene_tui.state.gate import GateSession
from eviscene_tui.state.scan import ScannedTree, scan_tree

_SAMPLES: dict[str, Path] = {}
_SCANNED: dict[Path, ScannedTree] = {}
#: how long ago the shared sample tree was "written": well past the grace in which a torn
#: line counts as being written, so every test sees the same rows however soon it runs
SAMPLE_AGE = 3600.0


def sample_root(tmp_factory) -> Path:
    """Generated sample_runs (once per test process), read-only by convention."""
    if "root" not in _SAMPLES:
        from conftest import generate_samples

        root = tmp_factory.mktemp("ui-samples") / "runs"
        generate_samples(root)
        then = time.time() - SAMPLE_AGE
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                os.utime(os.path.join(folder, name), (then, then), follow_symlinks=False)
        _SAMPLES["root"] = root
    return _SAMPLES["root"]


def shared_sample_root() -> Path | None:
    """The shared sample tree of this test process, if a test has made it yet."""
    return _SAMPLES.get("root")


def copy_samples(tmp_factory, dest: Path) -> Path:
    """A copy of the whole sample tree at ``dest / "runs"`` (times and symlinks kept), for a
    test that writes to the tree or to its work directory: the shared tree and its work
    directory stay as every other test expects them (tests/conftest.py checks that)."""
    root = dest / "runs"
    shutil.copytree(sample_root(tmp_factory), root, symlinks=True)
    return root


def scanned_sample(root: Path) -> ScannedTree:
    """The shared sample tree scanned and checked once per test process, as the app's scan
    worker and integrity pass would: screen tests start from it instead of each scanning
    and checking every sample case before its first key."""
    if root not in _SCANNED:
        _SCANNED[root] = scan_tree(root)
    return _SCANNED[root]


def copy_case(tmp_factory, name: str, dest: Path) -> Path:
    """Copy one sample case into ``dest`` with its inputs beside it (as rsynced off the cluster)."""
    from eviscene_tui.scaffold.samples import copy_case as copy_sample

    return copy_sample(sample_root(tmp_factory), name, dest)


def make_app(root: Path, *, watch: bool = False, theme: str | None = None, poll: bool = False, settings: Settings | None = None,
             scanned: bool | None = None, workdir: Path | None = None, **kw) -> EvisceneApp:
    """The app on ``root``. ``scanned``: start from the pre-scanned sample tree
    (:func:`scanned_sample`); by default on the shared sample tree opened without a watcher
    and with the default transient grace (the screen tests). ``scanned=False``: the app scans
    and checks the tree itself (tests of the scan and the integrity pass). ``workdir``: the
    app's work directory (``--workdir``), for a test on the shared tree that changes what the
    app saves there (a filter, a sort): the shared tree's own must stay empty."""
    args = argparse.Namespace(theme=theme, poll=poll, operator="tester", workdir=str(workdir) if workdir else None, config=None)
    options = AppOptions.from_args(root, args, settings=settings or Settings())
    if scanned is None:
        scanned = not watch and "transient_grace" not in kw and Path(root) == _SAMPLES.get("root")
    if scanned:
        kw["scanned"] = scanned_sample(Path(root))
    return EvisceneApp(options, watch=watch, **kw)


async def wait_for(pilot, predicate: Callable[[], object], timeout: float = DEFAULT_TIMEOUT) -> bool:
    """:func:`conftest.wait_until` for a Pilot: fails the test if ``predicate`` does not
    hold in time. The timeout is a floor of DEFAULT_TIMEOUT: a wait ends as soon as the
    condition holds, so a short one only makes a loaded machine fail the test."""
    await wait_until(predicate, max(timeout, DEFAULT_TIMEOUT), pilot=pilot)
    return True


def scanned(app) -> bool:
    """The scan is over: every case it found is in the store and the status line no longer
    says "scanning" (the app starts its scan while it mounts, before a test's first line)."""
    return not app.store.scanning


def checked(app) -> bool:
    """The scan and its integrity pass are over: every listed case shows its final problem
    count and the status line no longer says "checking integrity"."""
    return not app.store.scanning and not app.store.checking


async def wait_scan(pilot, app, timeout: float = 20.0) -> None:
    assert await wait_for(pilot, lambda: scanned(app), timeout), "scan did not finish"
    await pilot.pause()


async def wait_checked(pilot, app, timeout: float = 30.0) -> None:
    assert await wait_for(pilot, lambda: checked(app), timeout), "integrity pass did not finish"
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


async def palette_run(pilot, app, query: str, expect: str) -> None:
    """Open the command palette, type ``query``, wait until the highlighted command's
    text contains ``expect`` (the search is asynchronous), then run it with Enter."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)

    def highlighted() -> str:
        found = app.screen.query(CommandList)
        if not found:
            return ""
        commands = found.first()
        index = commands.highlighted
        return str(commands.get_option_at_index(index).prompt) if index is not None and index < commands.option_count else ""

    await wait_for(pilot, lambda: expect in highlighted())
    await pilot.press("enter")


class WatchProbe:
    """Readiness of the app's file watcher, awaited instead of slept for: pass
    ``probe.hook`` as ``run_test(message_hook=...)``, then ``await probe.live(pilot)``
    touches a probe file at the root's top (no case is there) until the app reports
    the change. ``watch_ready`` alone is set before the watcher really watches."""

    def __init__(self, root: Path) -> None:
        self.path = root / ".watch-probe"
        self.seen: set[str] = set()

    def hook(self, message: object) -> None:
        from eviscene_tui.ui import messages as M

        if isinstance(message, M.FilesChanged):
            self.seen.update(message.paths)

    async def live(self, pilot) -> None:
        import os

        target = os.path.abspath(self.path)
        polls = 0

        def reported() -> bool:
            nonlocal polls
            if polls % 10 == 0:
                self.path.write_text(str(polls))
            polls += 1
            return target in self.seen

        await wait_for(pilot, reported)


class GateApp(ScreenHarness):
    """The app the gate card tests run: the gate screen on ``session``, and every
    notification text it posts in ``notices`` (what the operator is told)."""

    def __init__(self, session: GateSession) -> None:
        super().__init__(lambda: GateScreen(session))
        self.session = session
        self.notices: list[str] = []

    def notify(self, message, *args, **kwargs) -> None:  # type: ignore[override]
        self.notices.append(str(message))
        super().notify(message, *args, **kwargs)
