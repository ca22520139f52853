"""An in-memory file tree: every sample file is built as bytes first, then written.

Building in memory keeps the generator deterministic (no clock, no directory
listing order) and lets the damaged case mutate bytes after they were produced.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_jsonl_bytes, encode_bound, pretty_json_bytes

#: the fictitious cluster location the committed samples' recorded paths name
FAKE_BASE = "/data/eviscene/sample_runs"


class Tree:
    """``{posix relative path: bytes}`` with the driver's writers."""

    def __init__(self, base: str | None = None) -> None:
        self.files: dict[str, bytes] = {}
        # where the tree was "written": the absolute prefix every recorded path names
        # (the committed samples use a fictitious cluster location; tests pass a real one)
        self.base = (base or FAKE_BASE).rstrip("/")

    def put(self, rel: str, data: bytes) -> bytes:
        rel = rel.strip("/")
        if ".." in rel.split("/"):
            raise ValueError(f"sample path escapes the tree: {rel}")
        self.files[rel] = data
        return data

    def json(self, rel: str, value: Any) -> bytes:
        """The driver's ``write_json`` (and ``_atomic_json``) format."""
        return self.put(rel, pretty_json_bytes(value))

    def jsonl(self, rel: str, rows: list[Any]) -> bytes:
        """The driver's ``write_jsonl``."""
        return self.put(rel, canonical_jsonl_bytes(rows))

    def bound(self, rel: str, identity: Any, payload: Any, *, force_gzip: bool | None = None) -> bytes:
        """Write a bound envelope; returns the bytes of the file at ``rel`` (pointer in gzip form)."""
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        out = encode_bound(Path(rel), identity, payload, force_gzip=force_gzip)
        main = b""
        for name, data in out.items():
            path = f"{parent}/{name}" if parent else name
            self.put(path, data)
            if name == Path(rel).name:
                main = data
        return main

    def get(self, rel: str) -> bytes:
        return self.files[rel.strip("/")]

    def write(self, dest: Path) -> None:
        """Write every file under ``dest`` (created). Existing files with the same name are replaced."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for rel in sorted(self.files):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.files[rel])


def reset_dir(dest: Path) -> None:
    """Remove ``dest`` when it holds a previous generator output (refuses anything else)."""
    dest = Path(dest)
    if not dest.exists():
        return
    if not dest.is_dir():
        raise SystemExit(f"{dest} exists and is not a directory")
    entries = os.listdir(dest)
    if entries and not (dest / "serving-profile.json").exists() and not (dest / "README.md").exists():
        raise SystemExit(f"{dest} is not empty and does not look like a sample_runs folder; refusing to replace it")
    shutil.rmtree(dest)


# --------------------------------------------------------------------------- PNG
def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def make_png(width: int, height: int, palette: list[tuple[int, int, int]], *, stripes: int = 4) -> bytes:
    """A real, deterministic RGB PNG: horizontal colour bands and a diagonal line."""
    rows = []
    for y in range(height):
        band = palette[(y * stripes // height) % len(palette)]
        row = bytearray([0])
        for x in range(width):
            if abs(x * height - y * width) < width:  # the diagonal
                row += bytes((250, 250, 250))
            elif x < width // 8:
                row += bytes(palette[-1])
            else:
                row += bytes(band)
        rows.append(bytes(row))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + _chunk(b"IEND", b"")
