"""One ``subscribe`` for every session and store of floor 3 (``state/observable.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

from eviscene_tui.state.gate import GateSession
from eviscene_tui.state.observable import Observable
from eviscene_tui.state.runs import RunsStore
from eviscene_tui.state.stream_session import StreamSession

STATE = Path(__file__).resolve().parents[2] / "eviscene_tui" / "state"


def test_subscribers_are_called_in_order_until_they_unsubscribe() -> None:
    hub: Observable[int] = Observable()
    seen: list[tuple[str, int]] = []
    stop_a = hub.subscribe(lambda n: seen.append(("a", n)))
    hub.subscribe(lambda n: seen.append(("b", n)))
    hub._notify(1)
    stop_a()
    stop_a()  # twice is harmless
    hub._notify(2)
    assert seen == [("a", 1), ("b", 1), ("b", 2)]


def test_a_subscriber_that_unsubscribes_while_called_does_not_skip_the_next() -> None:
    hub: Observable[str] = Observable()
    seen: list[str] = []
    stops = []
    stops.append(hub.subscribe(lambda s: (seen.append("first " + s), stops[0]())))
    hub.subscribe(lambda s: seen.append("second " + s))
    hub._notify("x")
    hub._notify("y")
    assert seen == ["first x", "second x", "second y"]


def test_the_sessions_and_the_store_notify_through_it(tmp_path: Path) -> None:
    store = RunsStore()
    reasons: list[str] = []
    stop = store.subscribe(reasons.append)
    store.set_progress(1, True)
    stop()
    store.set_progress(2, False)
    assert reasons == ["progress"]
    assert isinstance(GateSession(tmp_path), Observable) and isinstance(StreamSession(), Observable)


def test_no_session_writes_its_own_subscribe() -> None:
    """A hand-written ``subscribe`` (a fourth list of callbacks) is what this base replaced."""
    own = []
    for path in sorted(STATE.glob("*.py")):
        if path.name == "observable.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                own += [f"{path.name}:{f.lineno} {node.name}.subscribe" for f in node.body
                        if isinstance(f, ast.FunctionDef) and f.name == "subscribe"]
    assert not own, own
