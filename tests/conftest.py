"""Shared test helpers and fixtures for the whole suite.

- :func:`wait_until`: poll a condition with a bounded timeout and ASSERT it (never
  sleep for readiness);
- the autouse :func:`_hermetic_settings` fixture: no test reads the developer's own
  config file or API keys (XDG config dir in a temp folder, env variables unset).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

#: generous: a loaded 2-core machine can be slow, and a wait returns as soon as it holds
DEFAULT_TIMEOUT = 30.0


async def wait_until(
    predicate: Callable[[], Any],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    pilot: Any = None,
    step: float = 0.02,
    what: str | None = None,
) -> None:
    """Await ``predicate()`` becoming truthy; fail the test if it has not within ``timeout``.

    With a Textual ``pilot`` the app is given time through ``pilot.pause`` (messages are
    processed, the screen refreshes); without one, ``asyncio.sleep``.
    """
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            break
        if pilot is not None:
            await pilot.pause(step)
        else:
            await asyncio.sleep(step)
    assert predicate(), f"timed out after {timeout:g} s waiting for {what or getattr(predicate, '__name__', 'the condition')}"


def wait_until_sync(predicate: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, *, step: float = 0.02, what: str | None = None) -> None:
    """:func:`wait_until` for code outside an event loop (threads, subprocesses)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            assert predicate(), f"timed out after {timeout:g} s waiting for {what or getattr(predicate, '__name__', 'the condition')}"
            return
        time.sleep(step)


@pytest.fixture(autouse=True)
def _hermetic_settings(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    monkeypatch.delenv("EVISCENE_TUI_CONFIG", raising=False)
    monkeypatch.delenv("EVISCENE_POLICY_API_KEY", raising=False)
    monkeypatch.delenv("EVISCENE_HINT_API_KEY", raising=False)


@pytest.fixture
def notices(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every notification any app posts during the test (``App.notify`` is
    wrapped: the public way in, instead of reading Textual's private notification store)."""
    from textual.app import App

    seen: list[str] = []
    original = App.notify

    def notify(self: App[Any], message: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(str(message))
        original(self, message, *args, **kwargs)

    monkeypatch.setattr(App, "notify", notify)
    return seen
