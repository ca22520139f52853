"""The ``check`` report: discovery + summary + integrity for every case under a folder.

``build_check_report(root, given)`` returns exactly the ``check --json`` shape::

    {"root": "<PATH as given>",
     "cases": [{"path", "layout", "status", "rounds", "attempts", "accepted", "pending",
                "problems": [{"code", "path", "message"}], ...extra keys}],
     "summary": {"cases", "by_status": {status: n}, "problems"},
     "problems": [...discovery problems not tied to one case...]}

Case paths and problem paths are relative to PATH; cases are sorted by path. Large
folders are checked in a process pool (one chunk of cases per task).

No Textual import here (architecture rule).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from itertools import islice
from pathlib import Path
from typing import NotRequired, TypedDict

from eviscene_tui.artifacts.integrity import check_case, safe_read_bound
from eviscene_tui.artifacts.jsonio import Parsed, read_json
from eviscene_tui.artifacts.layout import CaseRef, discover_cases
from eviscene_tui.artifacts.paths import InputProvenance, PathMap
from eviscene_tui.artifacts.problems import Problem, ProblemCode
from eviscene_tui.artifacts.summary import CaseSummary, summarize_case



class ProblemJson(TypedDict):
    code: str
    path: str  # relative to PATH
    message: str


class CaseEntry(TypedDict):
    """One ``cases[]`` entry of ``check --json``."""

    path: str
    layout: str
    status: str
    rounds: int
    attempts: int
    accepted: int
    pending: int
    problems: list[ProblemJson]
    case_id: str | None
    candidate_id: str | None
    localization_kind: str | None
    semantic_category: str | None
    wrapper: NotRequired[str]  # a case of a multi-case wrapper: the wrapper's path and the case key
    key: NotRequired[str | None]


class CheckSummary(TypedDict):
    cases: int
    by_status: dict[str, int]
    problems: int


class CheckReport(TypedDict):
    """The ``check --json`` document."""

    root: str
    cases: list[CaseEntry]
    summary: CheckSummary
    problems: list[ProblemJson]


PARALLEL_MIN_CASES = 400  # below this one thread is faster than starting processes (``check`` and the app's scan)
CHUNK = 100  # small enough that the last chunks keep every worker busy to the end


def _rel(path: str | os.PathLike[str], base: str) -> str:
    try:
        rel = os.path.relpath(os.fspath(path), base)
    except ValueError:
        return os.fspath(path)
    return rel.replace(os.sep, "/")


def _problem_json(p: Problem, base: str) -> ProblemJson:
    return {"code": str(p.code), "path": _rel(p.path, base), "message": p.message}


def checked_case(
    ref: CaseRef,
    base: str | os.PathLike[str],
    *,
    fingerprint: bool = False,
    path_map: PathMap | None = None,
    provenance: list[InputProvenance] | None = None,
) -> tuple[CaseSummary, list[Problem]]:
    """The cheap summary of one case and its full list of integrity problems.

    This is the one definition of "the problems of a case": ``check`` reports it and the
    runs screen counts it. Each problem appears once per (code, path); paths are absolute.
    ``path_map`` / ``provenance``: see ``integrity.check_case``.
    """
    cache: dict[str, bytes] = {}
    parsed: Parsed = {}
    problems = unique_problems(check_case(ref, cache=cache, parsed=parsed, path_map=path_map, provenance=provenance))
    summary = summarize_case(ref, base if isinstance(base, str) else Path(base), cache=cache, parsed=parsed, fingerprint=fingerprint, path_map=path_map)
    # the summary's own problems (unreadable manifest, torn ledger lines) are found again by
    # the full check; keep any the check did not report under the same code and path
    seen = {(str(p.code), os.path.abspath(p.path)) for p in problems}
    for p in summary.problems:
        ident = (str(p.code), os.path.abspath(p.path))
        if ident not in seen:
            seen.add(ident)
            problems.append(p)
    return summary, problems


def unique_problems(problems: Iterable[Problem]) -> list[Problem]:
    """``problems`` with repeats dropped: one entry per (code, absolute path), the first
    message kept (two checks reaching the same file report the same defect)."""
    out: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for p in problems:
        ident = (str(p.code), os.path.abspath(p.path))
        if ident not in seen:
            seen.add(ident)
            out.append(p)
    return out


def case_entry(ref: CaseRef, base: str, path_map: PathMap | None = None) -> CaseEntry:
    """One ``cases[]`` entry: cheap summary counts plus the full integrity problems."""
    summary, problems = checked_case(ref, base, path_map=path_map)
    entry: CaseEntry = {
        "path": _rel(ref.path, base),
        "layout": str(ref.layout),
        "status": summary.status,
        "rounds": summary.rounds,
        "attempts": summary.attempts,
        "accepted": summary.accepted,
        "pending": summary.pending,
        "problems": sorted((_problem_json(p, base) for p in problems), key=lambda d: (d["path"], d["code"], d["message"])),
        "case_id": summary.case_id,
        "candidate_id": summary.candidate_id,
        "localization_kind": summary.localization_kind,
        "semantic_category": summary.semantic_category,
    }
    if ref.wrapper is not None:
        entry["wrapper"] = _rel(ref.wrapper, base)
        entry["key"] = ref.key
    return entry


def _chunk_entries(refs: list[CaseRef], base: str, path_map: PathMap | None = None) -> list[CaseEntry]:
    return [case_entry(ref, base, path_map) for ref in refs]


def _pooled_entries(
    refs: list[CaseRef], more: Iterator[CaseRef], base: str, path_map: PathMap | None, n_workers: int
) -> list[CaseEntry]:
    """The entries of ``refs`` and of the cases ``more`` still yields, checked in a process
    pool one chunk at a time: the walk goes on here while the workers check what it found
    (a large folder's walk is a good part of the whole). Every case found is appended to
    ``refs``."""
    # fork is fastest, but forking a process that runs other threads (the app) is unsafe
    method = "fork" if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods() else "spawn"
    try:
        with ProcessPoolExecutor(max_workers=n_workers, mp_context=multiprocessing.get_context(method)) as pool:
            futures = [pool.submit(_chunk_entries, refs[i : i + CHUNK], base, path_map) for i in range(0, len(refs), CHUNK)]
            for chunk in iter(lambda: list(islice(more, CHUNK)), []):
                refs.extend(chunk)
                futures.append(pool.submit(_chunk_entries, chunk, base, path_map))
            return [e for future in futures for e in future.result()]
    except (OSError, RuntimeError):  # no fork / no semaphores / a broken pool: one process
        refs.extend(more)
        return _chunk_entries(refs, base, path_map)


def _wrapper_problems(wrappers: Iterable[Path]) -> list[Problem]:
    """Wrapper-level files (``inputs.json`` bound envelope, ``progress.json``)."""
    out: list[Problem] = []
    for w in sorted(set(wrappers)):
        inputs = w / "inputs.json"
        if inputs.exists():
            out.extend(safe_read_bound(str(inputs)).problems)
        progress = w / "progress.json"
        if progress.exists():
            out.extend(read_json(progress)[1])
        try:
            names = [n for n in os.listdir(w) if n.endswith(".tmp")]
        except OSError:
            names = []
        for name in sorted(names):
            out.append(
                Problem(
                    code=ProblemCode.LEFTOVER_TMP,
                    path=str(w / name),
                    message=f"leftover temporary file from an interrupted write (the final file would be {name[:-4]})",
                )
            )
    return out


def build_check_report(
    root: Path, given: str | None = None, *, workers: int | None = None, path_map: PathMap | None = None
) -> CheckReport:
    """Discover, summarise and check every case under ``root``.

    ``given`` is PATH as the user typed it (reported verbatim). ``workers``: process
    count for large folders (default: the CPU count; 1 disables the pool).
    ``path_map``: explicit ``OLD=NEW`` mappings (``artifacts.paths``).
    """
    root = Path(root)
    base = os.path.abspath(root)
    discovery_problems: list[Problem] = []
    found = discover_cases(root, discovery_problems)
    refs = list(islice(found, PARALLEL_MIN_CASES))
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    entries: list[CaseEntry]
    if n_workers > 1 and len(refs) >= PARALLEL_MIN_CASES:
        entries = _pooled_entries(refs, found, base, path_map, n_workers)
    else:
        refs.extend(found)
        entries = _chunk_entries(refs, base, path_map)
    entries.sort(key=lambda e: e["path"])

    top = discovery_problems + _wrapper_problems(r.wrapper for r in refs if r.wrapper is not None)
    top_json = [_problem_json(p, base) for p in top]
    by_status = Counter(e["status"] for e in entries)
    total = sum(len(e["problems"]) for e in entries) + len(top_json)
    return {
        "root": given if given is not None else str(root),
        "cases": entries,
        "summary": {"cases": len(entries), "by_status": dict(sorted(by_status.items())), "problems": total},
        "problems": top_json,
    }


__all__ = ["CaseEntry", "CheckReport", "CheckSummary", "ProblemJson", "build_check_report", "case_entry", "checked_case", "unique_problems"]
