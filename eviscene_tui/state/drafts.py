"""Text the operator typed and has not finished with, kept in the app's work directory.

A hint edited on the stream screen is the operator's work: leaving the screen (Esc,
the token inspector), quitting, or a crash must not lose it. Each place that takes
such text has one draft file, ``<workdir>/drafts/<place>-<key>.json``, replaced
atomically (tmp + fsync + rename) as the text changes; a draft is state, not a
record, so replacing it is the rule here (records of what was sent live elsewhere and
are never overwritten).

Reading and writing are plain functions, run by the screen's workers, never by a
widget. A draft that cannot be read (garbage, a FIFO, too large) is no draft: the
screen opens on the run's text and says why.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from eviscene_tui.artifacts.fileio import read_regular
from eviscene_tui.storage import WorkDir

DRAFTS_DIR = "drafts"
DRAFT_SCHEMA = "eviscene-tui-draft-v1"
#: a draft is what one person typed: a megabyte is far beyond any hint
DRAFT_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class Draft:
    text: str
    saved_at: str


def draft_path(workdir: str | os.PathLike[str], place: str, *parts: str) -> Path:
    """The draft file of ``place`` (``stream-hint``) for the thing ``parts`` name
    (a case folder and a round)."""
    key = hashlib.sha256("\0".join((place, *parts)).encode("utf-8")).hexdigest()[:24]
    return Path(workdir) / DRAFTS_DIR / f"{place}-{key}.json"


def read_draft(path: str | os.PathLike[str]) -> tuple[Draft | None, str | None]:
    """The draft at ``path`` (None when there is none), and why it could not be read."""
    try:
        data = read_regular(path, limit=DRAFT_LIMIT)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"the saved draft {os.fspath(path)} cannot be read: {exc.strerror or exc}"
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return None, f"the saved draft {os.fspath(path)} is not JSON ({exc})"
    if not isinstance(doc, dict) or doc.get("schema") != DRAFT_SCHEMA or not isinstance(doc.get("text"), str):
        return None, f"the saved draft {os.fspath(path)} is not a draft"
    saved = doc.get("saved_at")
    return Draft(doc["text"], saved if isinstance(saved, str) else ""), None


def save_draft(work: WorkDir, path: str | os.PathLike[str], text: str) -> Path:
    """Replace the draft at ``path`` with ``text`` (atomically, in the work directory)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return work.replace(path, orjson.dumps({"schema": DRAFT_SCHEMA, "text": text, "saved_at": stamp}))
