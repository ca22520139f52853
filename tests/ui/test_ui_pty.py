"""Terminal safety: the real app in a pty, on a case whose strings carry escape
sequences, markup and bidi controls. None of them may reach the terminal raw."""

from __future__ import annotations

import fcntl
import os
import pty
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
    from eviscene_tui.samples import copy_case

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


def run_in_pty(argv: list[str], keys: list[tuple[float, bytes]], *, cols: int = 100, rows: int = 32, timeout: float = 60.0) -> tuple[bytes, int]:
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ["TERM"] = "xterm-256color"
        os.environ["COLUMNS"] = str(cols)
        os.environ["LINES"] = str(rows)
        os.environ.pop("TEXTUAL", None)
        try:
            os.execv(sys.executable, [sys.executable, *argv])
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    output = bytearray()
    start = time.monotonic()
    pending = list(keys)
    status = None
    while time.monotonic() - start < timeout:
        now = time.monotonic() - start
        while pending and now >= pending[0][0]:
            os.write(fd, pending.pop(0)[1])
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
    return bytes(output), status


def test_hostile_strings_never_reach_the_terminal_raw(tmp_path_factory, tmp_path: Path) -> None:
    root = build_hostile_root(tmp_path_factory, tmp_path)
    t = 4.0
    script: list[tuple[float, bytes]] = []
    for key in [b"\r", b"", b"2", b"3", b"v", b"4", b"5", b"1", b"\r", b"\x1b", b"k", b"\x1b", b"\x1b", b"/", b"h", b"\x1b", b"q", b"", b"\x11", b"", b"\x11"]:
        if key:
            script.append((t, key))
        t += 1.0
    output, status = run_in_pty(["-m", "eviscene_tui", str(root), "--workdir", str(tmp_path / "work")], script, timeout=t + 30)
    assert os.WIFEXITED(status), f"app killed or crashed (status {status}); tail: {output[-400:]!r}"
    assert os.WEXITSTATUS(status) == 0, output[-2000:]
    assert b"Traceback" not in output
    # the app really rendered the hostile case (sanitised): control pictures are visible
    assert "\u241b".encode() in output, "the sanitised escape (U+241B) should be visible"
    assert b"PWNED-TITLE" in output
    for raw in (b"\x1b]0;PWNED", b"\x1b]52;", b"\x1b[2JC", b"\x1b]0;DIRNAME", "\u202e".encode(), "\u2066".encode(), b"\x07I", "\x9b".encode()):
        assert raw not in output, f"raw {raw!r} reached the terminal"
