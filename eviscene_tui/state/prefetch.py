"""The next case of the triage queue, read ahead: its files, source trace and case view,
built in a background worker while the operator looks at the case before it, so that
``]`` or a label pick shows it at once. Textual-free.

A read-ahead case is used only while its files are as they were read (the cheap
``summary_fingerprint``: stats of its top files and newest round); a big source trace is
not read ahead (it would hold its index for a case that may never be opened).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eviscene_tui.artifacts.case import CaseBundle, load_case
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.summary import summary_fingerprint
from eviscene_tui.state.case_view import CaseView, build_case_view

if TYPE_CHECKING:
    from eviscene_tui.options import AppOptions

MAX_TRACE_BYTES = 32 << 20  # a bigger source trace is read when its case is opened, not ahead


@dataclass
class Prefetched:
    path: Path
    bundle: CaseBundle
    view: CaseView
    fingerprint: tuple[Any, ...]

    def still_current(self) -> bool:
        """Its files are as they were read."""
        return _fingerprint(self.path, self.bundle) == self.fingerprint


def _fingerprint(path: Path, bundle: CaseBundle) -> tuple[Any, ...]:
    layout = Layout.of(bundle.layout)
    return summary_fingerprint(CaseRef(path=path, layout=layout))


def prefetch(path: Path, key: str, options: AppOptions) -> Prefetched | None:
    """The case at ``path`` read as the case screen reads it, or None (unreadable, or a
    source trace too big to read ahead). Never raises."""
    try:
        bundle = load_case(path, path_map=options.path_map)
        trace_path = bundle.source_trace_path
        if trace_path is not None and os.path.getsize(trace_path) > MAX_TRACE_BYTES:
            return None
        fingerprint = _fingerprint(path, bundle)
        bundle.trace(spool_dir=options.workdir / "spool")
        view = build_case_view(bundle, key=key, base=options.key_root)
    except Exception:  # noqa: BLE001 - a case that cannot be read ahead is read when it is opened
        return None
    return Prefetched(path, bundle, view, fingerprint)
