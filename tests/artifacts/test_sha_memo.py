"""sha256_file remembers a big settled file's digest under its stat, and never a file
that is still changing: an in-place rewrite (same size, mtime put back) is hashed again."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from eviscene_tui.artifacts import jsonio


def _big(path: Path, fill: bytes) -> bytes:
    data = fill * (jsonio.SHA_MEMO_MIN // len(fill) + 1)
    path.write_bytes(data)
    return data


def test_a_file_just_written_is_hashed_again_after_an_in_place_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    first = _big(path, b"a")
    assert jsonio.sha256_file(path) == hashlib.sha256(first).hexdigest()
    st = os.stat(path)
    second = b"b" + first[1:]
    with open(path, "r+b") as fh:  # in place, same size
        fh.write(b"b")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the mtime put back
    assert jsonio.sha256_file(path) == hashlib.sha256(second).hexdigest()


def test_a_settled_file_is_hashed_once_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.json"
    first = _big(path, b"x")
    # the file's last change is long past (as a source trace's is)
    monkeypatch.setattr(jsonio.time, "time", lambda: time.time_ns() / 1e9 + 60)
    assert jsonio.sha256_file(path) == hashlib.sha256(first).hexdigest()
    hashed: list[int] = []
    real = jsonio.hashlib.sha256
    want = real(first).hexdigest()
    monkeypatch.setattr(jsonio.hashlib, "sha256", lambda *a: hashed.append(1) or real(*a))
    assert jsonio.sha256_file(path) == want
    assert hashed == []  # remembered
    grown = first + b"y"
    path.write_bytes(grown)
    assert jsonio.sha256_file(path) == real(grown).hexdigest()
    assert hashed == [1]
