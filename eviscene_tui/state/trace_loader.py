"""Open a case's source trace with a lower memory peak (used by the case screen's worker).

``artifacts.trace.load_trace`` parses the file with ``orjson.loads(bytes)``: the peak
is the file bytes + orjson's intermediate document + the Python objects (about 3.3x
the file for a 200 MB trace). For big plain-JSON files this module decodes the bytes
to ``str``, frees the bytes, then parses with the standard library's C scanner: the
peak is the text + the objects (about 2x), in about the same time. The result is
the artifact layer's own :class:`~eviscene_tui.artifacts.trace.SourceTrace`, cached
on the bundle so every later ``bundle.trace()`` call reuses it. Anything unusual
(gzip, invalid JSON, odd shapes, small files) goes through ``load_trace`` unchanged,
so problems are reported exactly as the artifact layer does. No Textual import.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LOWMEM_MIN_BYTES = 32 << 20


def _lowmem_parse(path: Path) -> Any | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            return None
        text = data.decode("utf-8")
        del data
        return json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def load_source_trace(bundle: Any) -> tuple[Any, list[Any]]:
    """``bundle.trace()``, parsed with a lower memory peak when the file is big."""
    if getattr(bundle, "trace_loaded", True):
        return bundle.trace()
    path = bundle.source_trace_path
    if path is None or str(path).endswith(".gz"):
        return bundle.trace()
    try:
        size = os.stat(path).st_size
    except OSError:
        return bundle.trace()
    if size < LOWMEM_MIN_BYTES:
        return bundle.trace()
    raw = _lowmem_parse(Path(path))
    state = raw.get("state") if isinstance(raw, dict) else None
    if not isinstance(state, dict) or not isinstance(state.get("all_steps"), list):
        del raw
        return bundle.trace()  # let the artifact layer report what is wrong
    from eviscene_tui.artifacts.trace import SourceTrace

    trace = SourceTrace(raw, Path(path), size_bytes=size)
    # The bundle caches its trace in ``_trace`` (artifacts/case.py); set it so later
    # ``bundle.trace()`` calls (compare, token inspector) reuse this parse.
    bundle._trace = (trace, [])
    return trace, []
