"""Shared test helpers and fixtures for the whole suite.

- :func:`wait_until` / :func:`wait_until_sync`: poll a condition with a bounded timeout
  and ASSERT it (never sleep for readiness);
- :class:`ScreenHarness`: the one App that hosts a screen under test;
- :func:`screen_text`: the text on screen, through Textual's public screenshot export;
- the :func:`notices` fixture: every notification text an app posts;
- the autouse :func:`_hermetic_settings` fixture: no test reads the developer's own
  config file or API keys (XDG config dir in a temp folder, env variables unset), nor
  writes to the user's registry of work directories (XDG data dir in a temp folder);
- the autouse :func:`_shared_samples_workdir_untouched` fixture: no test leaves anything in
  the shared sample tree's work directory for the tests after it;
- :func:`generate_samples`: the sample tree written where a test needs it, built once per
  test process;
- the ``e2e`` mark on the end-to-end tests that run the app or the driver as real
  processes (a pty, a gated driver, the CLI in a subprocess): :data:`E2E` names them, and
  ``pytest -m "not e2e"`` is the inner loop (``make test`` runs everything).

Helper folders (``tests/<area>/*_fixtures.py``, ``ui_helpers.py``) are importable from
every test: they are put on ``sys.path`` here, once.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import html
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen

from eviscene_tui import pace, switches
from eviscene_tui.scaffold.samples import build
from eviscene_tui.scaffold.samples.tree import Tree, reset_dir
from eviscene_tui.storage import default_workdir
from eviscene_tui.ui import gc_hold

TESTS = Path(__file__).resolve().parent
for _helpers in ("artifacts", "ui", "policy", "gate"):
    if str(TESTS / _helpers) not in sys.path:
        sys.path.append(str(TESTS / _helpers))

#: generous: a loaded 2-core machine can be slow, and a wait returns as soon as it holds
DEFAULT_TIMEOUT = 30.0

#: ``EVISCENE_TEST_EXAMPLES=N`` runs the property tests that size their runs with
#: :func:`examples` N times as long (a thorough run, before a release or after a change to
#: a parser); ``make test`` runs them at their everyday count (fresh random examples each
#: run, and Hypothesis replays any failing example it has stored)
EXAMPLES_SCALE = max(1, int(os.environ.get("EVISCENE_TEST_EXAMPLES", "1") or "1"))


def examples(n: int) -> int:
    """A property test's ``max_examples``: ``n`` for ``make test``, scaled by
    ``EVISCENE_TEST_EXAMPLES`` for a thorough run."""
    return n * EXAMPLES_SCALE


#: the end-to-end tests (whole modules, or single tests by node id): each runs the app, the
#: CLI or a gated driver as real processes, in a pty or through a process pool
E2E = (
    "tests/commands/test_decide_usage.py",
    "tests/core/test_cli_entry.py",
    "tests/gate/test_gate_faults.py",
    "tests/gate/test_gate_flow.py",
    "tests/gate/test_gate_multi.py",
    "tests/journal/test_journal_crash.py",
    "tests/policy/test_policy_cli.py",
    "tests/scaffold/samples/test_samples_regenerate.py::test_generation_is_deterministic_across_processes",
    "tests/scaffold/test_demo_wheel.py",
    "tests/scaffold/test_gated_demo.py",
    "tests/supervised/test_supervised_crash.py",
    "tests/ui/test_gate_screen.py",
    "tests/ui/test_ui_pty.py",
    "tests/ui/test_ui_runs.py::test_integrity_pass_uses_worker_processes_inside_the_app",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.nodeid == name or item.nodeid.startswith(name + "::") for name in E2E):
            item.add_marker(pytest.mark.e2e)


@functools.lru_cache(maxsize=4)
def _sample_tree(base: str | None) -> Tree:
    return build(base)


def generate_samples(dest: Path, *, base: str | None = None, cases: Collection[str] | None = None) -> int:
    """``eviscene_tui.scaffold.samples.generate(dest, base=base)`` for a test that needs the
    sample tree written somewhere: the same files, but the tree is built in memory once per
    test process and ``base`` (about 1 CPU-s a build; the suite writes the tree some 30 times)
    and only written here. Only tests/scaffold/samples call ``generate`` itself (what it
    writes, that it refuses a foreign folder).

    ``cases``: write only these sample cases, each with its inputs (``inputs/<case>`` and
    ``inputs/<case>-<key>``), and the tree's top-level files: the files are the full tree's,
    byte for byte, at the same places (a test that reads one case need not write 1,100 files).
    Returns the number of files written."""
    tree = _sample_tree(base)
    reset_dir(dest)
    if cases is None:
        tree.write(dest)
        return len(tree.files)
    wanted = set(cases)
    unknown = wanted - {rel.split("/", 1)[0] for rel in tree.files}
    assert not unknown, f"no such sample case: {sorted(unknown)}"
    part = Tree(tree.base)
    part.files = {rel: data for rel, data in tree.files.items() if _in_cases(rel, wanted)}
    part.write(dest)
    return len(part.files)


def _in_cases(rel: str, cases: set[str]) -> bool:
    parts = rel.split("/")
    if len(parts) == 1:
        return True  # the tree's own files (serving-profile.json, README.md)
    if parts[0] == "inputs":
        return any(parts[1] == c or parts[1].startswith(c + "-") for c in cases)
    return parts[0] in cases


@functools.lru_cache(maxsize=None)
def parsed(source: str) -> ast.Module:
    """``ast.parse(source)``, once per test process: the source checks (tests/core) each
    read every module of the package, and only read the trees, never change them."""
    return ast.parse(source)


async def wait_until(
    predicate: Callable[[], Any],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    pilot: Any = None,
    step: float = 0.02,
    what: str | None = None,
) -> Any:
    """Await ``predicate()`` becoming truthy and return its value; fail the test if it has
    not within ``timeout``.

    With a Textual ``pilot`` the app is given time through ``pilot.pause`` (messages are
    processed, the screen refreshes); without one, ``asyncio.sleep``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        if pilot is not None:
            await pilot.pause(step)
        else:
            await asyncio.sleep(step)
    value = predicate()
    assert value, f"timed out after {timeout:g} s waiting for {what or getattr(predicate, '__name__', 'the condition')}"
    return value


def wait_until_sync(predicate: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, *, step: float = 0.02, what: str | None = None) -> Any:
    """:func:`wait_until` for code outside an event loop (threads, subprocesses)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(step)
    value = predicate()
    assert value, f"timed out after {timeout:g} s waiting for {what or getattr(predicate, '__name__', 'the condition')}"
    return value


@pytest.fixture(autouse=True)
def _hermetic_settings(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    # the registry of work directories (journal.records) lives in the user's data dir
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.delenv("EVISCENE_TUI_CONFIG", raising=False)
    monkeypatch.delenv("EVISCENE_POLICY_API_KEY", raising=False)
    monkeypatch.delenv("EVISCENE_HINT_API_KEY", raising=False)


@pytest.fixture(autouse=True)
def _garbage_collector_given_back() -> Iterator[None]:
    """A screen left mounted at a test's end must not keep the collector frozen for the next,
    nor its foreground work (``pace.hold_foreground``) the next test's background work."""
    yield
    while gc_hold.holds():
        gc_hold.release()
    while pace.foreground_held():
        pace.release_foreground()


@pytest.fixture(autouse=True)
def _shared_samples_workdir_untouched() -> Iterator[None]:
    """The shared sample tree (tests/ui/ui_helpers.py ``sample_root``, one per test process)
    is opened by many tests in turn: its work directory must be as empty after a test as
    before it, or the next test opens a tree with a saved filter, label or decision. A test
    that leaves something there fails, naming it, and the directory is emptied for the next
    (a test that writes works on ``ui_helpers.copy_samples``)."""
    yield
    helpers = sys.modules.get("ui_helpers")
    root = helpers.shared_sample_root() if helpers is not None else None
    if root is None:
        return
    workdir = default_workdir(root)
    if not workdir.is_dir():
        return
    left = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if not p.is_dir())
    for entry in workdir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    if left:
        pytest.fail(f"the test left files in the shared sample tree's work directory {workdir}: {', '.join(left)} "
                    "(a test that writes there works on a copy: ui_helpers.copy_samples)", pytrace=False)


@pytest.fixture
def check_in_thread() -> Iterator[None]:
    """The open case's full integrity check on its worker's thread rather than in its own
    process (``state/case_check.py``), where a test can replace what it calls."""
    switches.set_off("check_process")
    try:
        yield
    finally:
        switches.set_off("check_process", False)


@pytest.fixture
def notices(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every notification any app posts during the test (``App.notify`` is
    wrapped: the public way in, instead of reading Textual's private notification store)."""
    seen: list[str] = []
    original = App.notify

    def notify(self: App[Any], message: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(str(message))
        original(self, message, *args, **kwargs)

    monkeypatch.setattr(App, "notify", notify)
    return seen


class ScreenHarness(App[None]):
    """The App that hosts a screen under test: pushes ``screen`` (a Screen, or a
    callable making one, called once the app runs) on mount."""

    def __init__(self, screen: Screen[Any] | Callable[[], Screen[Any]]) -> None:
        super().__init__()
        self.target = screen

    def on_mount(self) -> None:
        self.push_screen(self.target() if callable(self.target) else self.target)


_SVG_TEXT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>')


def screen_text(app: Any) -> str:
    """What the screen shows, one line per row (trailing blanks dropped), read from
    ``App.export_screenshot()``: Textual's public way to get the rendered screen."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in _SVG_TEXT.finditer(app.export_screenshot()):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3)).replace("\xa0", " ")))
    return "\n".join("".join(text for _x, text in sorted(cells)) for _y, cells in sorted(rows.items()))


@contextmanager
def sigint_as_in_a_terminal() -> Iterator[None]:
    """Children started inside get SIGINT at its default disposition, as a driver started
    from a terminal has it. A test run started in the background (``cmd &`` in a script,
    ``nohup``) ignores SIGINT, and an ignored signal stays ignored across fork and exec:
    the gated driver would then never see the SIGINT a test sends it. A Python handler in
    this process becomes the default disposition in an exec'd child."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="session", autouse=True)
def _check_process_ended_with_the_session():
    """The open case's check process (and the index process) is the app's one for its whole life (a module-level
    singleton the tests' apps share); the session ends it, as quitting the app does, so a
    run of the suite leaves no process behind."""
    yield
    from eviscene_tui.state import case_check, index_process

    case_check.CHECKS.close()
    index_process.INDEXES.close()
