"""The bundled driver (``eviscene-tui repair CASE_PATH``): a feedback search from an
existing case, run in its own process, always under the operator gate.

- :mod:`~eviscene_tui.gate.bundled.driver`: the search, its round / hint / attempt gates;
- :mod:`~eviscene_tui.gate.bundled.stages` and :mod:`~eviscene_tui.gate.bundled.records`:
  the documents it writes (the driver's layout, psd-run-format §2);
- :mod:`~eviscene_tui.gate.bundled.layout`: the writer (atomic, in the app's work directory);
- :mod:`~eviscene_tui.gate.bundled.source`: what it starts from (read from the case);
- :mod:`~eviscene_tui.gate.bundled.continuation`, :mod:`~eviscene_tui.gate.bundled.live`:
  the teacher continuation and its live channel;
- :mod:`~eviscene_tui.gate.bundled.hints`, :mod:`~eviscene_tui.gate.bundled.proposer`,
  :mod:`~eviscene_tui.gate.bundled.audit`: the hint constructor and the hint audit.

Its search root is, by default, ``<work dir>/repairs/<record key>`` (:func:`repair_root`;
the record key is the case's, ``journal.records``, the same from whichever folder the app
was opened on and after the tree was moved), where an existing search of the case is
looked for first in every work directory that may hold its records.
"""

from __future__ import annotations

import os
from pathlib import Path

REPAIRS_DIR = "repairs"


def repair_label(case_root: str | os.PathLike[str], key_root: str | os.PathLike[str]) -> str:
    """The case's label (its path relative to the opened tree, as the runs rows key it)."""
    rel = os.path.relpath(os.path.abspath(case_root), os.path.abspath(key_root))
    return rel if not rel.startswith("..") else str(Path(case_root).absolute())


def repair_root(workdir: str | os.PathLike[str], key: str) -> Path:
    """Where the search of the case with record key ``key`` lives in ``workdir``."""
    return Path(workdir) / REPAIRS_DIR / key
