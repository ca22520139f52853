"""Layout discovery: find every case under a folder without parsing big files.

A *case* is one of:

- a feedback search root (``search-state.json``, a ``manifest.json`` with schema
  ``ifv-psd-feedback-search-v1``, or ``requests/`` + ``rounds/``);
- a single run directory (``run-inputs.json``, a driver ``manifest.json``, or the
  minimal ``no_recoverable_site`` manifest);
- a slate root (``slate-state.json`` / ``slate-rounds/``): recognised, unsupported;
- each ``repairs/<key>/`` of a multi-case wrapper (``repairs/`` next to
  ``case-inputs/``, ``progress.json`` or ``inputs.json``), whatever it holds yet.

The tool's own folders (``*.eviscene-tui`` work directories, ``*.eviscene-gate``
gate sidecars) are never cases and are not descended into.

Round directories (``rounds/round-NN``) belong to their search root and are not
cases. Discovery never descends into a case, reads at most one small
``manifest.json`` per directory, never follows a symlink out of the root, and
reports unreadable directories as Problems instead of raising.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.fileio import read_regular
from eviscene_tui.artifacts.problems import Problem, ProblemCode

SEARCH_SCHEMA = "ifv-psd-feedback-search-v1"
RUN_SCHEMA = "ifv-psd-repair-driver-result-v1"
RUN_STATUSES = frozenset({"generating", "generated", "no_admissible_hints", "no_recoverable_site"})
SEARCH_STATUSES = frozenset(
    {
        "searching",
        "converged",
        "attempt_budget_exhausted",
        "proposal_budget_exhausted",
        "time_budget_exhausted",
        "no_further_grounded_hint",
        "paused_pending_verifier",
        "paused_execution_error",
        "paused_storage_budget",
    }
)
# Files / directories that only a driver run directory holds: a folder with one of
# these but no run-inputs.json / manifest.json is a damaged single run, not a folder.
RUN_ONLY_FILES = frozenset(
    {
        "repair_attempts.jsonl",
        "repair_candidates.jsonl",
        "hint-proposals.json",
        "proposer-hint-audits.json",
        "proposer-response.json",
        "gemini-verification-bundle.json",
        "generation-last-error.json",
        "live-serving-check.json",
    }
)
RUN_ONLY_DIRS = frozenset({"continuations", "episodes", "judge-cache"})  # not "runtime": too generic a name
MAX_MANIFEST_PROBE = 4 << 20  # a manifest larger than this is not read during discovery
MAX_DEPTH = 64
#: the app's own work directories (``<root>.eviscene-tui``) and the operator gate's
#: sidecars (``<root>.eviscene-gate``): written by this tool, never evidence, never cases
TOOL_DIR_SUFFIXES = (".eviscene-tui", ".eviscene-gate")


def is_tool_dir(name: str) -> bool:
    """True for a folder this tool writes (a work directory or a gate sidecar)."""
    return name.endswith(TOOL_DIR_SUFFIXES)


class Layout(StrEnum):
    FEEDBACK_SEARCH = "feedback_search"
    SINGLE_RUN = "single_run"
    SLATE = "slate"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: str) -> "Layout":
        """The layout named ``value``; ``UNKNOWN`` for a name that is none of them."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class CaseRef:
    """One case found by discovery. ``path`` is the case root as reached from the
    discovery root (root-joined, not resolved); ``wrapper`` is the multi-case wrapper
    root for ``repairs/<key>/`` cases, with ``key`` the directory name."""

    path: Path
    layout: Layout
    wrapper: Path | None = None
    key: str | None = None


def _names(path: Path) -> tuple[set[str], set[str]]:
    """(files, dirs) of a directory; symlinks count by their target kind. Raises OSError."""
    files, dirs, _links = _entries(path)
    return files, dirs


def _entries(path: Path) -> tuple[set[str], set[str], set[str]]:
    """(files, dirs, the dirs that are symlinks) of a directory; symlinks count by their
    target kind. The directory listing says which entries are symlinks, so a folder of
    thousands of cases is not looked at entry by entry again. Raises OSError."""
    files: set[str] = set()
    dirs: set[str] = set()
    links: set[str] = set()
    with os.scandir(path) as it:
        for entry in it:
            kind = _entry_kind(entry)
            (dirs if kind else files).add(entry.name)
            if kind == "link":
                links.add(entry.name)
    return files, dirs, links


def _entry_kind(entry: os.DirEntry[str]) -> str:
    """"dir", "link" (a symlink to a directory) or "" (anything else, or unreadable)."""
    try:
        if entry.is_dir():
            return "link" if entry.is_symlink() else "dir"
    except OSError:
        pass
    return ""


_UNREADABLE: dict[str, Any] = {}


def _probe_manifest(path: Path) -> dict[str, Any] | None:
    """Read a small manifest.json. None when missing, too big or not a regular file;
    ``_UNREADABLE`` when it is there but does not parse as a JSON object."""
    try:
        data = read_regular(path, limit=MAX_MANIFEST_PROBE)
    except OSError:  # missing, unreadable, not a regular file or too big: not probed
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _UNREADABLE
    return value if isinstance(value, dict) else _UNREADABLE


def classify_names(path: Path, files: set[str], dirs: set[str]) -> Layout | None:
    """Classify one directory from its entry names (reading at most its manifest).

    Returns None when the directory is not a case by itself.
    """
    if "slate-state.json" in files or "slate-rounds" in dirs:
        return Layout.SLATE
    if "search-state.json" in files:
        return Layout.FEEDBACK_SEARCH
    if "rounds" in dirs and ("requests" in dirs or "round-inputs" in dirs):
        return Layout.FEEDBACK_SEARCH
    if "run-inputs.json" in files:
        return Layout.SINGLE_RUN
    if "manifest.json" in files:
        manifest = _probe_manifest(path / "manifest.json")
        if manifest is _UNREADABLE:
            # a damaged manifest: still a case, shown with status "unreadable"
            return Layout.FEEDBACK_SEARCH if "rounds" in dirs else Layout.SINGLE_RUN
        if manifest is not None:
            schema = manifest.get("schema_version")
            status = manifest.get("status")
            if schema == SEARCH_SCHEMA:
                return Layout.FEEDBACK_SEARCH
            if schema == RUN_SCHEMA:
                return Layout.SINGLE_RUN
            if status in RUN_STATUSES and ("candidate_count" in manifest or "accepted_count" in manifest):
                return Layout.SINGLE_RUN
            if status in SEARCH_STATUSES and "proposal_rounds" in manifest:
                return Layout.FEEDBACK_SEARCH
        if "rounds" in dirs:
            return Layout.FEEDBACK_SEARCH
    if files & RUN_ONLY_FILES or dirs & RUN_ONLY_DIRS:
        return Layout.SINGLE_RUN
    return None


def classify(path: Path) -> Layout | None:
    """Classify one directory; None when it is not a case (or cannot be read)."""
    try:
        files, dirs = _names(path)
    except OSError:
        return None
    return classify_names(path, files, dirs)


def _is_wrapper(files: set[str], dirs: set[str]) -> bool:
    return "repairs" in dirs and ("case-inputs" in dirs or "progress.json" in files or "inputs.json" in files)


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def discover_cases(root: Path, problems: list[Problem] | None = None) -> Iterator[CaseRef]:
    """Yield every case under ``root`` (``root`` itself may be a case).

    Problems met on the way (unreadable directories, symlinks leaving the root) are
    appended to ``problems`` when given. Never raises for file-system reasons.
    """
    sink: list[Problem] = problems if problems is not None else []
    root = Path(root)
    try:
        real_root = os.path.realpath(root)
    except OSError:
        real_root = os.path.abspath(root)
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        path, depth = stack.pop()
        try:
            st = path.stat()
        except OSError as exc:
            sink.append(Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(path), message=f"cannot read directory: {exc.strerror or exc}"))
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in seen:
            continue
        seen.add(ident)
        try:
            files, dirs, links = _entries(path)
        except OSError as exc:
            sink.append(Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(path), message=f"cannot read directory: {exc.strerror or exc}"))
            continue
        layout = classify_names(path, files, dirs)
        if layout is not None:
            yield CaseRef(path=path, layout=layout)
            continue
        if _is_wrapper(files, dirs):
            yield from _wrapper_cases(path, sink)
            continue
        if depth >= MAX_DEPTH:
            continue
        # sorted by name (a child's path differs from its siblings' by its name only; names
        # sort faster than paths), reversed onto the stack so cases come out in name order
        children = [
            name for name in sorted(dirs)
            if not (name.startswith(".") or is_tool_dir(name)) and (name not in links or _within_root(path / name, real_root, sink))
        ]
        stack.extend((path / name, depth + 1) for name in reversed(children))


def _within_root(child: Path, real_root: str, sink: list[Problem]) -> bool:
    """True unless ``child`` is a symlink resolving outside the discovery root."""
    try:
        if not child.is_symlink():
            return True
        target = os.path.realpath(child)
    except OSError:
        return False
    if _inside(target, real_root):
        return True
    sink.append(
        Problem(
            code=ProblemCode.PATH_OUTSIDE_ROOT,
            path=str(child),
            message=f"symlinked directory points outside the root (to {target}); not followed",
        )
    )
    return False


def _wrapper_cases(wrapper: Path, sink: list[Problem]) -> Iterator[CaseRef]:
    repairs = wrapper / "repairs"
    try:
        real_wrapper = os.path.realpath(wrapper)
        with os.scandir(repairs) as it:
            entries = sorted((e for e in it), key=lambda e: e.name)
    except OSError as exc:
        sink.append(Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(repairs), message=f"cannot read directory: {exc.strerror or exc}"))
        return
    for entry in entries:
        if entry.name.startswith(".") or is_tool_dir(entry.name):
            continue
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        child = repairs / entry.name
        if not _within_root(child, real_wrapper, sink):
            continue
        layout = classify(child) or Layout.UNKNOWN
        yield CaseRef(path=child, layout=layout, wrapper=wrapper, key=entry.name)


def ref_for_path(path: Path) -> CaseRef | None:
    """The CaseRef of one case directory (e.g. a case opened directly), or None when
    ``path`` is not a case. A ``repairs/<key>`` directory of a wrapper gets its wrapper."""
    path = Path(path)
    try:
        files, dirs = _names(path)
    except OSError:
        return None
    layout = classify_names(path, files, dirs)
    parent = path.parent
    if parent.name == "repairs" and parent.parent != parent:
        wrapper = parent.parent
        try:
            wfiles, wdirs = _names(wrapper)
        except OSError:
            wfiles, wdirs = set(), set()
        if _is_wrapper(wfiles, wdirs):
            return CaseRef(path=path, layout=layout or Layout.UNKNOWN, wrapper=wrapper, key=path.name)
    if layout is None:
        return None
    return CaseRef(path=path, layout=layout)


def discover(root: Path) -> tuple[list[CaseRef], list[Problem]]:
    """All cases under ``root`` in discovery order, plus discovery problems."""
    problems: list[Problem] = []
    cases = list(discover_cases(root, problems))
    return cases, problems
