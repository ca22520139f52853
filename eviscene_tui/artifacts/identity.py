"""What a case records about itself: the identity its driver binds, and its bound candidate.

- :func:`read_identity`: the ``identity`` of the case's own bound envelope, the one the
  driver checks on every ``--resume`` (``search-state.json`` of a feedback search,
  ``run-inputs.json`` of a single run, ``slate-state.json`` of a slate root). It holds
  the resolved ``output_dir`` and every input binding ``{path, sha256}``, so it does not
  change when the tree is moved or opened from another folder. Read cheaply: the identity
  is the envelope's first key, so only the head of a big ``search-state.json`` is parsed
  (which also survives a torn tail of that non-atomically rewritten file).
- :func:`bound_candidate`: the ``candidate.json`` the identity binds (a multi-case
  wrapper's ``case-inputs/<key>/`` copy first; a moved tree's inputs found where the
  tree's recorded ``output_dir`` says; an indexed candidate's row bytes), for the case id
  and candidate id of a case whose ledgers name none (a no-recoverable-site case).

Never raises; no Textual import.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.fileio import open_regular, read_regular
from eviscene_tui.artifacts.layout import Layout
from eviscene_tui.artifacts.paths import PathMap, PathResolver

#: the envelope each layout binds its identity in (the driver's own resume check)
IDENTITY_FILES: dict[str, tuple[str, ...]] = {
    Layout.FEEDBACK_SEARCH: ("search-state.json",),
    Layout.SINGLE_RUN: ("run-inputs.json",),
    Layout.SLATE: ("slate-state.json",),
}
ANY_IDENTITY_FILES = ("search-state.json", "run-inputs.json", "slate-state.json")
HEAD_BYTES = 256 << 10  # the identity (a few KB) is read from this much of the file
MAX_WHOLE = 512 << 20  # an identity that is not at the head: the whole file, up to this size
MAX_CANDIDATE = 16 << 20


@dataclass(frozen=True, slots=True)
class CaseIdentity:
    """The identity a case's driver bound, and where it was read."""

    source: str  # file name, relative to the case root
    sha256: str  # :func:`identity_sha256` of the identity
    value: dict[str, Any]

    def _field(self, name: str) -> Any:
        if name in self.value:
            return self.value[name]
        inputs = self.value.get("inputs")  # a search identity keeps the CLI arguments in "inputs"
        return inputs.get(name) if isinstance(inputs, dict) else None

    @property
    def output_dir(self) -> str | None:
        value = self._field("output_dir")
        return value if isinstance(value, str) and value else None

    def binding(self, name: str) -> dict[str, Any] | None:
        """The ``{path, sha256[, offset, length]}`` binding of input ``name``, or None."""
        value = self._field(name)
        return value if isinstance(value, dict) and isinstance(value.get("path"), str) else None


def _head_identity(head: bytes) -> Any:
    """The ``identity`` member of the envelope object that ``head`` starts, parsed from
    the head alone (members before it are skipped: the gzip form's pointer starts with
    its ``schema_version``); None when it is not in the head."""
    text = head.decode("utf-8", "ignore")  # a cut multi-byte tail is dropped
    decoder = json.JSONDecoder()
    at = _skip_ws(text, 0)
    if not text.startswith("{", at):
        return None
    at += 1
    try:
        while True:
            at = _skip_ws(text, at)
            key, at = decoder.raw_decode(text, at)
            at = _skip_ws(text, at)
            if not isinstance(key, str) or not text.startswith(":", at):
                return None
            value, at = decoder.raw_decode(text, _skip_ws(text, at + 1))
            if key == "identity":
                return value
            at = _skip_ws(text, at)
            if not text.startswith(",", at):
                return None
            at += 1
    except ValueError:  # cut by the head's end, or not JSON
        return None


def _skip_ws(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _identity_of(path: Path) -> Any:
    """The identity of the envelope at ``path`` (a file the run wrote: opened through
    ``artifacts.fileio``, inside the case root, never a FIFO or a link out of it)."""
    try:
        with open_regular(path, inside=[os.path.normpath(os.path.abspath(path.parent))]) as fh:
            head = fh.read(HEAD_BYTES)
            size = os.fstat(fh.fileno()).st_size
    except OSError:
        return None
    if size <= len(head):
        try:  # the whole file was read: one C parse (a torn file falls through to the head scan)
            doc = orjson.loads(head)
            return doc.get("identity") if isinstance(doc, dict) else None
        except orjson.JSONDecodeError:
            pass
    value = _head_identity(head)
    if isinstance(value, dict) or size <= len(head) or size > MAX_WHOLE:
        return value
    try:
        doc = orjson.loads(read_regular(path, inside=[os.path.normpath(os.path.abspath(path.parent))]))
    except (OSError, orjson.JSONDecodeError):
        return None
    return doc.get("identity") if isinstance(doc, dict) else None


def read_identity(root: str | os.PathLike[str], layout: str | None = None) -> CaseIdentity | None:
    """The identity the case's driver bound (see the module doc), or None when the case
    records none that can be read (no envelope yet, unreadable, not an object)."""
    names = IDENTITY_FILES.get(str(layout), ANY_IDENTITY_FILES) if layout else ANY_IDENTITY_FILES
    for name in names:
        value = _identity_of(Path(root) / name)
        if isinstance(value, dict) and value:
            try:
                digest = identity_sha256(value)
            except (TypeError, orjson.JSONEncodeError):
                continue
            return CaseIdentity(name, digest, value)
    return None


def identity_sha256(value: Any) -> str:
    """sha256 of the identity as compact JSON with sorted keys (orjson's encoding: the
    same bytes as the driver's canonical JSON for every identity without floats, and a
    fixed encoding for the few floats an identity holds)."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _wrapper_copy(root: Path) -> Path | None:
    """``<wrapper>/case-inputs/<key>/candidate.json`` of a case at ``<wrapper>/repairs/<key>``."""
    if root.parent.name != "repairs":
        return None
    copy = root.parent.parent / "case-inputs" / root.name / "candidate.json"
    return copy if copy.is_file() else None


def _read_candidate(path: str, binding: dict[str, Any], inside: list[str] | None = None) -> dict[str, Any] | None:
    """The candidate object at ``path`` (an input: read wherever it is, through
    ``artifacts.fileio``; an indexed candidate is one row of a candidates file)."""
    offset, length = binding.get("offset"), binding.get("length")
    try:
        if isinstance(offset, int) and isinstance(length, int) and 0 <= offset and 0 < length <= MAX_CANDIDATE:
            with open_regular(path, limit=0, inside=inside) as fh:
                fh.seek(offset)
                data = fh.read(length)
        else:
            data = read_regular(path, limit=MAX_CANDIDATE, inside=inside)
        value = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def bound_candidate(
    root: str | os.PathLike[str],
    identity: CaseIdentity | None,
    *,
    path_map: PathMap | None = None,
) -> dict[str, Any] | None:
    """The candidate object the case binds (see the module doc), or None when it binds
    none or it is found nowhere. Read only; the sha256 is not checked here (the
    integrity check reports a mismatch)."""
    case = Path(root)
    copy = _wrapper_copy(case)
    if copy is not None:
        found = _read_candidate(str(copy), {}, [os.path.normpath(os.path.abspath(case.parent.parent))])
        if found is not None:
            return found
    binding = identity.binding("candidate") if identity is not None else None
    if binding is None or identity is None:
        return None
    resolver = PathResolver(str(case), boundary=str(case), path_map=path_map or PathMap())
    if identity.output_dir:
        resolver.add_written(identity.output_dir, str(case))
    hit = resolver.bound_input(binding["path"], want="file")
    if not hit.ok or not hit.path:
        return None
    return _read_candidate(hit.path, binding)


def candidate_ids(candidate: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(case_id, candidate_id) a candidate object names."""
    if not isinstance(candidate, dict):
        return None, None

    def text(key: str) -> str | None:
        value = candidate.get(key)
        return value if isinstance(value, str) and value else None

    return text("case_id"), text("candidate_id")


__all__ = ["CaseIdentity", "bound_candidate", "candidate_ids", "read_identity"]
