"""``subscribe`` + notify, once, for every Textual-free session and store of floor 3
(``RunsStore``, ``CaseSession``, ``GateSession``, ``StreamSession``): a screen (the gate's panel) subscribes, gets the
changes (a snapshot, or a short reason), and calls what ``subscribe`` returned when it
goes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Observable(Generic[T]):
    """Base of a session or store whose subscribers are called with a ``T`` on each change."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[[T], None]] = []

    def subscribe(self, callback: Callable[[T], None]) -> Callable[[], None]:
        """Call ``callback`` on every change from now on; returns the call that stops it
        (calling that twice is harmless)."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _unsubscribe_all(self) -> None:
        """Nobody is called any more (the session is closed)."""
        self._subscribers.clear()

    def _notify(self, change: T) -> None:
        """Call every subscriber, in the order they subscribed; one that unsubscribes (or
        subscribes another) while called changes who is called next time, not now."""
        for callback in list(self._subscribers):
            callback(change)


__all__ = ["Observable"]
