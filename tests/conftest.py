"""Shared test helpers and fixtures for the whole suite.

- :func:`wait_until` / :func:`wait_until_sync`: poll a condition with a bounded timeout
  and ASSERT it (never sleep for readiness);
- :class:`ScreenHarness`: the one App that hosts a screen under test;
- :func:`screen_text`: the text on screen, through Textual's public screenshot export;
- the :func:`notices` fixture: every notification text an app posts;
- the autouse :func:`_hermetic_settings` fixture: no test reads the developer's own
  config file or API keys (XDG config dir in a temp folder, env variables unset).

Helper folders (``tests/<area>/*_fixtures.py``, ``ui_helpers.py``) are importable from
every test: they are put on ``sys.path`` here, once.
"""

from __future__ import annotations

import asyncio
import html
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen

from eviscene_tui.ui import gc_hold

TESTS = Path(__file__).resolve().parent
for _helpers in ("artifacts", "ui", "policy", "gate"):
    if str(TESTS / _helpers) not in sys.path:
        sys.path.append(str(TESTS / _helpers))

#: generous: a loaded 2-core machine can be slow, and a wait returns as soon as it holds
DEFAULT_TIMEOUT = 30.0


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
    monkeypatch.delenv("EVISCENE_TUI_CONFIG", raising=False)
    monkeypatch.delenv("EVISCENE_POLICY_API_KEY", raising=False)
    monkeypatch.delenv("EVISCENE_HINT_API_KEY", raising=False)


@pytest.fixture(autouse=True)
def _garbage_collector_given_back() -> Iterator[None]:
    """A screen left mounted at a test's end must not keep the collector frozen for the next."""
    yield
    while gc_hold.holds():
        gc_hold.release()


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
