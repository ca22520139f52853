"""Terminal safety: the real app in a pty, on a case whose strings carry escape
sequences, markup and bidi controls. None of them may reach the terminal raw."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time
from pathlib import Path
from typing import Any

import orjson
from ui_helpers import sample_root

HOSTILE = (
    "A\x1b]0;PWNED-TITLE\x1b\\B\x1b[2JC\x1b]52;c;SGVsbG8gY2xpcGJvYXJk\x1b\\D"
    "[@click=app.quit]x[/]E[/]F[bold red]G\u202eevil-bidi\u2066H\x07I\x9bJ"
)
KEYS = ("thought", "output", "tool_result", "text", "quote", "explanation", "case_id", "hint", "stage", "tool_name")


def poison(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (v + HOSTILE if isinstance(v, str) and k in KEYS else poison(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [poison(v) for v in value]
    return value


def poison_json(path: Path) -> None:
    if path.is_file():
        path.write_bytes(orjson.dumps(poison(orjson.loads(path.read_bytes())), option=orjson.OPT_INDENT_2))


def poison_jsonl(path: Path) -> None:
    if path.is_file():
        rows = [orjson.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
        path.write_bytes(b"".join(orjson.dumps(poison(r)) + b"\n" for r in rows))


def build_hostile_root(tmp_factory, dest: Path) -> Path:
    from eviscene_tui.artifacts.case import load_case

    root = dest / "runs"
    case = root / "hostile"
    from eviscene_tui.scaffold.samples import copy_case

    copy_case(sample_root(tmp_factory), "feedback-converged-3-rounds", root, name="hostile")
    trace_path = load_case(case).source_trace_path
    assert trace_path is not None
    poison_json(Path(trace_path))
    for ledger in [case / "repair_attempts.jsonl", *case.glob("rounds/*/repair_attempts.jsonl")]:
        poison_jsonl(ledger)
    for sl in case.glob("rounds/*/semantic-localization.json"):
        poison_json(sl)
    manifest = orjson.loads((case / "manifest.json").read_bytes())
    manifest["status"] = "converged" + HOSTILE
    (case / "manifest.json").write_bytes(orjson.dumps(manifest))
    (case / "rounds" / ("round-99" + "\x1b]0;DIRNAME\x07")).mkdir()  # a hostile directory name too
    return root


_CONTROL = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def _visible(raw: bytes) -> bytes:
    """The terminal output without its control sequences (text split by style changes joins up)."""
    return _CONTROL.sub(b"", raw)


def run_in_pty(argv: list[str], script: list[tuple[bytes | None, bytes]], *, cols: int = 100, rows: int = 32, timeout: float = 120.0,
               program: str = sys.executable) -> tuple[bytes, int]:
    """Run ``program argv`` (this Python by default) in a pty and drive it by ``script``: each ``(marker, key)``
    sends ``key`` once ``marker`` has appeared in what the app wrote since the previous
    key (``None``: once it wrote anything since then). Waits are for what is on screen,
    never for a time; ``timeout`` only bounds the whole run. Returns (output, status)."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ["TERM"] = "xterm-256color"
        os.environ["COLUMNS"] = str(cols)
        os.environ["LINES"] = str(rows)
        os.environ.pop("TEXTUAL", None)
        try:
            os.execv(program, [program, *argv])
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    output = bytearray()
    deadline = time.monotonic() + timeout
    pending = list(script)
    since = 0  # where the output after the last key starts
    status = None
    while time.monotonic() < deadline:
        if pending:
            marker, key = pending[0]
            fresh = _visible(bytes(output[since:]))
            if (marker is None and fresh) or (marker is not None and marker in fresh):
                pending.pop(0)
                since = len(output)
                try:
                    os.write(fd, key)
                except OSError:  # the app has already exited (a fallback quit key)
                    pass
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            output += chunk
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
    if status is None:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(pid, 0)
        # drain
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            output += chunk
    except OSError:
        pass
    os.close(fd)
    assert not pending or pending[0][1] == b"\x11", f"waited in vain for {pending[0][0]!r} before sending {pending[0][1]!r}; tail: {bytes(output[-600:])!r}"
    return bytes(output), status


def test_hostile_strings_never_reach_the_terminal_raw(tmp_path_factory, tmp_path: Path) -> None:
    root = build_hostile_root(tmp_path_factory, tmp_path)
    # open the case, every tab, reveal, a step's detail, the token inspector, back,
    # search the runs, quit: each key once the screen it needs is showing
    # the runs screen's title holds the opened folder's path, which holds the test's name
    # ("hostile"): the row is there once the status line counts it
    # Each key waits for what the one before it painted (a key sent on any output may reach
    # a tab still being filled, and an Esc followed at once by a key reads as alt+key)
    script: list[tuple[bytes | None, bytes]] = [
        (b"1 of 1 cases", b"\r"),
        (b"Localization", b"2"),
        (b"Failure site", b"3"),  # the localization tab
        (b"Round 00", b"v"),  # the rounds tab
        (b"PRIVILEGED MATERIAL SHOWN", b"4"),  # revealed
        (b"marks fields that differ", b"5"),  # the compare tab
        (b"binds sha256", b"1"),  # the integrity tab's problems
        ("step 1 (of 0\u20134)".encode(), b"\r"),  # the trace tab is showing again, its view holding the keys
        (b"Close", b"\x1b"),  # the step detail's footer
        (b"Next policy", b"k"),  # the case screen's footer is back
        (b"Token inspector", b"\x1b"),
        (b"Next policy", b"\x1b"),
        (b"1 of 1 cases", b"/"),  # the runs table again
        (b"search case ids", b"h"),  # its search box is open
        ("search \u201ch\u201d".encode(), b"\x1b"),  # the status line names the search
        ("labelled \u00b7 not shown".encode(), b"q"),  # the search closed: the status line without it
        (None, b"\x11"),  # ctrl+q in case q went to the search box
    ]
    output, status = run_in_pty(["-m", "eviscene_tui", str(root), "--workdir", str(tmp_path / "work")], script)
    assert os.WIFEXITED(status), f"app killed or crashed (status {status}); tail: {output[-400:]!r}"
    assert os.WEXITSTATUS(status) == 0, output[-2000:]
    assert b"Traceback" not in output
    # the app really rendered the hostile case (sanitised): control pictures are visible
    assert "\u241b".encode() in output, "the sanitised escape (U+241B) should be visible"
    assert b"PWNED-TITLE" in output
    for raw in (b"\x1b]0;PWNED", b"\x1b]52;", b"\x1b[2JC", b"\x1b]0;DIRNAME", "\u202e".encode(), "\u2066".encode(), b"\x07I", "\x9b".encode()):
        assert raw not in output, f"raw {raw!r} reached the terminal"


def test_the_stream_screen_writes_a_hostile_run_hint_sanitised(tmp_path: Path) -> None:
    """The hostile-strings sample's hint carries ``ESC ] 0 ; hint BEL`` (a terminal
    title) and a bidi override; the stream screen's hint editor shows them as
    placeholders, so neither reaches the terminal."""
    from eviscene_tui.scaffold.samples import copy_case

    sample = Path(__file__).resolve().parents[2] / "sample_runs"
    if not (sample / "hostile-strings").is_dir():
        import pytest

        pytest.skip("sample_runs not generated")
    root = tmp_path / "runs"
    copy_case(sample, "hostile-strings", root)
    script: list[tuple[bytes | None, bytes]] = [
        (b"1 of 1 cases", b"\r"),  # the row is listed (not only named somewhere on screen)
        # t asks first while the case's integrity check is still running: wait for its result
        (b"no integrity problems", b"t"),
        (b"repair hint", b"\x1b"),
        (b"Next policy", b"\x1b"),
        (b"1 of 1 cases", b"q"),
        (None, b"\x11"),
    ]
    output, status = run_in_pty(["-m", "eviscene_tui", str(root), "--workdir", str(tmp_path / "work")], script)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, output[-2000:]
    visible = _visible(output)
    assert b"repair hint" in visible and "\u241b]0;hint\u2407".encode() in visible  # the hint was shown, sanitised
    for raw in (b"\x1b]0;hint", b"hint\x07", "\u202e".encode(), "\u2028".encode(), "\x85".encode()):
        assert raw not in output, f"raw {raw!r} reached the terminal"
