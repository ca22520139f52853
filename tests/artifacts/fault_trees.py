"""Run trees for the fault tests: a sample case copied (moved) as rsync would, with its
inputs beside it, and a record of every file the process opens while a block runs.

``opened()`` uses Python's audit hooks (``open`` events are raised by ``open()``,
``os.open`` and ``io.open`` before the file is opened), so a test can say "this path
was never opened" about every reader at once, not only the ones it knows of.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_runs"

_recording: list[list[str]] = []
_hook_lock = threading.Lock()
_hooked = False


UNBLOCKER = "fifo-unblocker"  # the test's own opens of its FIFOs (for writing) are not recorded


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event != "open" or not _recording or threading.current_thread().name == UNBLOCKER:
        return
    path = args[0] if args else None
    if isinstance(path, (str, bytes, os.PathLike)):
        text = os.fsdecode(os.fspath(path))
        for sink in _recording:
            sink.append(text)


@contextlib.contextmanager
def opened() -> Iterator[list[str]]:
    """Every path opened (by any reader, in any thread) while the block runs."""
    global _hooked
    with _hook_lock:
        if not _hooked:
            sys.addaudithook(_hook)
            _hooked = True
    sink: list[str] = []
    _recording.append(sink)
    try:
        yield sink
    finally:
        _recording.remove(sink)


def real_opens(paths: list[str]) -> set[str]:
    """The opened paths with their symlinks resolved (what was really read)."""
    out = set()
    for p in paths:
        try:
            out.add(os.path.realpath(p))
        except (OSError, ValueError):
            out.add(p)
    return out


def copy_case(name: str, dest: Path) -> Path:
    """``sample_runs/<name>`` and its inputs copied under ``dest`` as a moved tree
    (the recorded paths still name ``/data/eviscene/sample_runs/...``); returns the root."""
    target = dest / "sample_runs"
    shutil.copytree(SAMPLES / name, target / name, symlinks=True)
    inputs = SAMPLES / "inputs" / name
    if inputs.is_dir():
        shutil.copytree(inputs, target / "inputs" / name, symlinks=True)
    shutil.copy2(SAMPLES / "serving-profile.json", target / "serving-profile.json")
    return target / name


_HEX = re.compile(r"[0-9a-f]{6,64}|(?<=/)[0-9a-f]{2}(?=/)")
_NUM = re.compile(r"\d+")


def one_file_per_kind(*roots: Path) -> list[Path]:
    """One file of each place and name pattern under ``roots`` (the manifests of
    ``round-00`` and ``round-01`` count once, so do blobs of two shards or stores)."""
    seen: set[str] = set()
    out: list[Path] = []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            shape = _NUM.sub("N", _HEX.sub("H", "/" + str(path.relative_to(root))))
            key = shape
            if key not in seen and path.name != "search.lock":
                seen.add(key)
                out.append(path)
    return out


@contextlib.contextmanager
def unblocking(fifos: list[Path]) -> Iterator[list[Path]]:
    """While the block runs, a FIFO that some reader opened (and is blocked on) is
    opened for writing and closed again, so that reader sees end-of-file and the test
    fails on its assertions instead of hanging; the FIFOs so unblocked are listed."""
    unblocked: list[Path] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            for fifo in fifos:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO unless a reader has it open
                except OSError:
                    continue
                os.close(fd)
                unblocked.append(fifo)

    thread = threading.Thread(target=watch, name=UNBLOCKER, daemon=True)
    thread.start()
    try:
        yield unblocked
    finally:
        stop.set()
        thread.join()
