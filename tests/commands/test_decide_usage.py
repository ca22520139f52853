"""`decide` and `gate-status` on a ROOT that does not exist or was never gated: bad
usage (exit 2) with a message, like `check`; gate-status --json says why it is empty."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

CLI = [sys.executable, "-m", "eviscene_tui"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def test_decide_on_a_missing_root_is_bad_usage(tmp_path: Path) -> None:
    done = _run("decide", str(tmp_path / "nonexistent"), "approve-round", "--round", "0")
    assert done.returncode == 2, done.stderr
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_decide_on_a_root_never_gated_is_bad_usage(tmp_path: Path) -> None:
    root = tmp_path / "search-0001"
    root.mkdir()
    done = _run("decide", str(root), "approve-round", "--round", "0")
    assert done.returncode == 2, done.stderr
    assert "no gate directory" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == [root] and not list(root.iterdir())  # nothing written


def test_gate_status_missing_root_and_never_gated(tmp_path: Path) -> None:
    missing = _run("gate-status", str(tmp_path / "nonexistent"), "--json")
    assert missing.returncode == 2 and missing.stdout == "" and "does not exist" in missing.stderr
    root = tmp_path / "search-0001"
    root.mkdir()
    empty = _run("gate-status", str(root), "--json")
    assert empty.returncode == 1
    assert orjson.loads(empty.stdout)["problems"] == []
    assert "no gate directory" in empty.stderr
