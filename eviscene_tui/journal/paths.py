"""Where journals live (always in the app's work directory, never in a run root).

- Review sidecar, one per work directory: ``<workdir>/journal/review.jsonl``.
  ``target.case`` is the case's record key (:mod:`eviscene_tui.journal.records`; an
  earlier version wrote the case path relative to the tree the work directory sat
  beside); a label's evidence paths are relative to the case folder. Lock:
  ``<workdir>/journal/review.jsonl.lock``.
- Supervised search, one per supervised root: the root itself is
  ``<workdir>/supervised/<record key>/`` (earlier: ``<case_key(path)>``; it must look
  exactly like a driver root for ``check``), so its journal sits beside it:
  ``<workdir>/supervised/<name>.decisions.jsonl``; evidence paths are relative to the
  supervised root (``../`` paths reach inputs outside it).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

REVIEW_JOURNAL = "review.jsonl"
SUPERVISED_DIR = "supervised"
JOURNAL_DIR = "journal"
SUPERVISED_SUFFIX = ".decisions.jsonl"


def case_key(case_path: str) -> str:
    """A short, file-name-safe key for a text (an earlier version's supervised-root name of
    a case path; a search started with an explicit label)."""
    text = case_path.strip() or "."
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip("/")).strip("._") or "root"
    return f"{safe[:40]}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:10]}"


def review_journal_path(workdir: str | os.PathLike[str]) -> Path:
    return Path(workdir) / JOURNAL_DIR / REVIEW_JOURNAL


def supervised_root_path(workdir: str | os.PathLike[str], key: str) -> Path:
    return Path(workdir) / SUPERVISED_DIR / key


def supervised_journal_path(workdir: str | os.PathLike[str], key: str) -> Path:
    return Path(workdir) / SUPERVISED_DIR / f"{key}{SUPERVISED_SUFFIX}"


def supervised_journal_for_root(supervised_root: str | os.PathLike[str]) -> Path:
    r = Path(supervised_root)
    return r.parent / f"{r.name}{SUPERVISED_SUFFIX}"


def journals_in_workdir(workdir: str | os.PathLike[str]) -> list[Path]:
    """Every journal file under a work directory (review sidecar first)."""
    w = Path(workdir)
    out: list[Path] = []
    review = review_journal_path(w)
    if review.is_file():
        out.append(review)
    sup = w / SUPERVISED_DIR
    if sup.is_dir():
        out.extend(sorted(p for p in sup.glob(f"*{SUPERVISED_SUFFIX}") if p.is_file()))
    return out
