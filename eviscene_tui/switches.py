"""Switches that turn off the parts of the app that work around a library for speed.

Each such part exists for one figure of ``make bench``, which measures it on and off in the
same run; a part is kept only while it wins its figure. They are on unless named in
``$EVISCENE_TUI_OFF`` (comma separated, read once at import: the benchmarks set it for the
process they start), or turned off in a running process with :func:`set_off`:

- ``lean_token_view``: the token view hands its own cached lines to the screen and draws its
  scrollbar without Textual's general widget pipeline (``ui/widgets/token_view.py``,
  ``ui/widgets/lean_scrollbar.py``);
- ``gc_hold``: big data on screen is kept off full garbage collections, which wait for the
  operator's pauses (``ui/gc_hold.py``);
- ``chunked_trace``: a big trace that the step index declines is parsed in chunks of steps
  rather than with one ``orjson.loads`` (``artifacts/chunked_trace.py``: a lower memory peak);
- ``check_process``: the open case's full integrity check runs in a process of its own, niced,
  rather than on a thread of the app (``state/case_check.py``);
- ``index_process``: a big source trace is indexed in a process of its own, begun as the case
  is opened, rather than on the case's load thread (``state/index_process.py``).

The streaming client's direct body reader has its own setting (``[policy] direct_body``).

No Textual import here (floor 1).
"""

from __future__ import annotations

import os

NAMES = frozenset({"lean_token_view", "gc_hold", "chunked_trace", "check_process", "index_process"})

_off: set[str] = {name.strip() for name in os.environ.get("EVISCENE_TUI_OFF", "").split(",") if name.strip() in NAMES}


def on(name: str) -> bool:
    """The part ``name`` (one of :data:`NAMES`) is in use."""
    return name not in _off


def set_off(name: str, off: bool = True) -> None:
    """Turn the part ``name`` off (or on again) in this process."""
    if name not in NAMES:
        raise ValueError(f"unknown switch {name!r} (known: {', '.join(sorted(NAMES))})")
    if off:
        _off.add(name)
    else:
        _off.discard(name)
