"""Read-only guarantee: a scripted session leaves the opened root byte-identical."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from ui_helpers import make_app, open_case, sample_root, scanned, wait_for

from eviscene_tui.ui.screens.runs import RunsScreen
from eviscene_tui.ui.screens.step_detail import StepDetailScreen


def tree_hash(root: Path) -> str:
    """sha256 over (relative name, kind, mode, bytes / link target) of every entry."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0" + oct(st.st_mode).encode() + b"\0")
            if stat.S_ISLNK(st.st_mode):
                h.update(b"L" + os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                h.update(b"F" + path.read_bytes())
            else:
                h.update(b"D")
    return h.hexdigest()


async def test_scripted_session_leaves_root_identical(tmp_path_factory, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(sample_root(tmp_path_factory), root, symlinks=True)
    before = tree_hash(root)
    app = make_app(root, watch=True)
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("feedback-converged-3-rounds", "damaged"):
            screen = await open_case(pilot, app, key)
            await wait_for(pilot, lambda screen=screen: screen.integrity is not None, 20)
            await pilot.press("f", "n", "p", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, StepDetailScreen))
            await pilot.press("escape", "2", "3", "v", "4", "5", "1", "escape")
            await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), 5)
        await pilot.press("t", "n", "a", "s", "S", "slash", "c", "escape", "ctrl+r")
        await wait_for(pilot, lambda: scanned(app), 20)
    assert tree_hash(root) == before
