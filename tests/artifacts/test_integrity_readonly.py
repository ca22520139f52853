"""check never writes, locks or touches anything: a tree hash is identical before and after."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import test_integrity_fixtures as fx

from eviscene_tui.artifacts.report import build_check_report
from eviscene_tui.artifacts.summary import summarize_case
from eviscene_tui.artifacts.layout import discover


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)}|{st.st_mode}|{st.st_size}|{st.st_mtime_ns}|{st.st_nlink}\n".encode())
            if p.is_file() and not p.is_symlink():
                h.update(p.read_bytes())
            elif p.is_symlink():
                h.update(os.readlink(p).encode())
        st = Path(dirpath).lstat()
        h.update(f"dir {dirpath}|{st.st_mode}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def test_check_is_read_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fx.build_search(root / "s")
    fx.build_run(root / "r", "/remote/r")
    (root / "r" / "manifest.json.tmp").write_bytes(b"{")
    (root / "s" / "repair_attempts.jsonl").write_bytes(b"{torn")
    os.symlink(tmp_path, root / "r" / "escape")
    lock = root / "s" / "search.lock"
    lock.chmod(0o400)
    before = tree_hash(root)
    lock_stat = lock.stat()
    report = build_check_report(root, str(root))
    for ref in discover(root)[0]:
        summarize_case(ref, root)
    assert report["summary"]["problems"] > 0
    assert tree_hash(root) == before
    # search.lock is never opened (atime untouched as far as the filesystem records it)
    assert lock.stat().st_atime_ns == lock_stat.st_atime_ns
    assert not any(p.name.endswith(".tmp") for p in root.rglob("*") if p.name != "manifest.json.tmp")


def test_no_file_is_opened_for_writing_and_search_lock_is_never_opened(tmp_path: Path, monkeypatch) -> None:
    import builtins
    import io

    root = tmp_path / "root"
    fx.build_search(root / "s")
    fx.build_run(root / "r", "/remote/r")
    opened: list[tuple[str, str]] = []
    real_open = builtins.open
    real_os_open = os.open

    def spy_open(file, mode="r", *args, **kwargs):
        opened.append((os.fspath(file) if not isinstance(file, int) else str(file), mode))
        return real_open(file, mode, *args, **kwargs)

    def spy_os_open(path, flags, *args, **kwargs):
        opened.append((os.fspath(path), "w" if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) else "r"))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    report = build_check_report(root, str(root), workers=1)
    for ref in discover(root)[0]:
        summarize_case(ref, root)
    assert report["summary"]["cases"] == 2
    assert opened, "the spy saw no reads at all"
    assert not [p for p, m in opened if any(c in m for c in "wax+")]
    assert not [p for p, _ in opened if p.endswith("search.lock")]
