"""Cheap per-case summaries for the runs screen and ``check``.

``summarize_case`` reads only the small top files of a case (manifest, the attempt
and candidate ledgers, directory listings): no trace parsing, no hashing. It is what
the runs screen runs for 10,000 cases, and ``summary_fingerprint`` lets a live
watcher decide cheaply whether a case needs re-summarising.

Counting:

- feedback search: attempts / accepted / pending from the root
  ``repair_attempts.jsonl`` (parseable object rows); pending = rows whose
  ``local_verification`` is missing or empty; accepted = rows with ``accepted`` true;
  rounds = number of ``rounds/round-NN`` directories; status = search manifest status;
- single run: the same over its own files, rounds = 1, status = its manifest status;
- a manifest that cannot be read -> status ``unreadable`` (the case still appears);
- slate: status from a small ``slate-state.json`` when cheap, else ``unsupported``,
  with an ``unsupported_layout`` problem.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.fileio import ReadRefused, gunzip_capped, not_regular, read_regular
from eviscene_tui.artifacts.identity import bound_candidate, candidate_ids, read_identity
from eviscene_tui.artifacts.jsonio import Parsed, parse_json_bytes, parse_jsonl_bytes, read_json
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.artifacts.problems import Problem, ProblemCode

ROUND_DIR_RE = re.compile(r"^round-\d{2,}$")
UNREADABLE = "unreadable"
UNSUPPORTED = "unsupported"
MAX_SUMMARY_FILE = 512 << 20  # never read a ledger/manifest bigger than this for a summary
MAX_SLATE_STATE = 1 << 20
MAX_HINT_TEXTS = 64


@dataclass(slots=True)
class CaseSummary:
    """One row of the runs screen / ``check`` report."""

    path: Path  # absolute case root
    rel_path: str  # relative to the discovery base ("." for the base itself)
    layout: Layout
    status: str
    rounds: int = 0
    attempts: int = 0
    accepted: int = 0
    pending: int = 0
    case_id: str | None = None
    candidate_id: str | None = None
    localization_kind: str | None = None
    semantic_category: str | None = None
    problems: list[Problem] = field(default_factory=list)
    mtime: float = 0.0  # latest mtime (seconds) of the case's top files
    hint_texts: list[str] = field(default_factory=list)
    wrapper: Path | None = None
    key: str | None = None
    fingerprint: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        """What to call the case in a list: case id, else wrapper key, else its path."""
        return self.case_id or self.key or self.rel_path

    def search_text(self) -> str:
        """Lower-cased text the runs screen's incremental search matches against."""
        parts = [self.rel_path, self.case_id or "", self.candidate_id or "", self.key or "", *self.hint_texts]
        return "\n".join(parts).lower()


# --------------------------------------------------------------------------- small readers
def _stat_entries(path: Path | str) -> list[tuple[str, bool, int, int]]:
    """(name, is_dir, mtime_ns, size) of the entries of ``path``; [] when unreadable."""
    out: list[tuple[str, bool, int, int]] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((entry.name, stat.S_ISDIR(st.st_mode), st.st_mtime_ns, st.st_size))
    except OSError:
        pass
    return out


# file bytes handed to summarize_case(cache=...), for the duration of that call (per thread / task)
_CACHE: ContextVar[dict[str, bytes] | None] = ContextVar("eviscene_summary_cache", default=None)
# what the check parsed of those bytes (``jsonio.Parsed``), for the same call
_PARSED: ContextVar[Parsed | None] = ContextVar("eviscene_summary_parsed", default=None)
# the folder the files read for that call must stay in (the case root, or its wrapper's)
_INSIDE: ContextVar[list[str] | None] = ContextVar("eviscene_summary_inside", default=None)


def _read_small(path: str, limit: int = MAX_SUMMARY_FILE) -> tuple[bytes | None, Problem | None]:
    """(bytes, None); (None, None) when missing or larger than ``limit``; (None, problem)."""
    cache = _CACHE.get()
    if cache:
        hit = cache.get(path)
        if hit is not None:
            return (hit, None) if len(hit) <= limit else (None, None)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, Problem(code=ProblemCode.MISSING_ARTIFACT, path=path, message=f"cannot read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        return None, not_regular(path, st.st_mode).problem()
    if st.st_size > limit:
        return None, None
    try:
        return read_regular(path, limit=limit, inside=_INSIDE.get()), None
    except ReadRefused as exc:
        return None, exc.problem()
    except OSError as exc:
        return None, Problem(code=ProblemCode.MISSING_ARTIFACT, path=path, message=f"cannot read: {exc.strerror or exc}")


def _parse(data: bytes, path: str, jsonl: bool) -> tuple[Any, list[Problem]]:
    """``parse_json_bytes`` / the rows and problems of ``parse_jsonl_bytes`` of ``data``:
    what the check parsed of these very bytes when it left that (``summarize_case(parsed=...)``)."""
    parsed = _PARSED.get()
    if parsed:
        hit = parsed.get(path)
        if hit is not None and hit[0] is data:
            return hit[1], list(hit[2])
    if jsonl:
        rows, problems, _ = parse_jsonl_bytes(data, path)
        return rows, problems
    return parse_json_bytes(data, path)


def _relative(apath: str, abase: str) -> str:
    """``os.path.relpath`` of two absolute, normalised paths; the common case (the case
    below the base) without relpath's generic machinery."""
    if apath == abase:
        return "."
    if abase != os.sep and apath.startswith(abase + os.sep):
        return apath[len(abase) + 1 :]
    return os.path.relpath(apath, abase)


def _abs(path: Path | str) -> str:
    """``os.path.abspath``; an absolute ``str`` path that is normal already (no empty, ``.``
    or ``..`` component, no trailing separator: checked in C) is returned as it is."""
    if type(path) is str and path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/") and os.sep == "/":
        return path
    return os.path.abspath(path)  # abspath normalises already: a second normpath is a no-op


def read_manifest_status(path: Path | str) -> tuple[str, dict[str, Any] | None, list[Problem]]:
    """(status, manifest object or None, problems) of ``path/manifest.json``."""
    mpath = os.path.join(_abs(path), "manifest.json")
    data, problem = _read_small(mpath)
    if problem is not None:
        return UNREADABLE, None, [problem]
    if data is None:
        if os.path.exists(mpath):
            return UNREADABLE, None, []  # larger than we read for a summary
        return UNREADABLE, None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(mpath), message="manifest.json not found")]
    value, problems = _parse(data, mpath, False)
    if problems:
        return UNREADABLE, None, problems
    if not isinstance(value, dict):
        return UNREADABLE, None, [
            Problem(code=ProblemCode.JSON_INVALID, path=mpath, message=f"manifest is a JSON {type(value).__name__}, expected an object")
        ]
    status = value.get("status")
    if not isinstance(status, str) or not status:
        return UNREADABLE, value, [
            Problem(code=ProblemCode.JSON_INVALID, path=mpath, message=f"manifest has no status string (found {status!r})")
        ]
    return status, value, []


def read_ledger(path: Path | str, stem: str) -> tuple[list[dict[str, Any]], list[Problem], str | None]:
    """Rows of ``<stem>.jsonl`` (or ``.jsonl.gz``) under ``path``: object rows only."""
    base = _abs(path)
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        fpath = os.path.join(base, name)
        data, problem = _read_small(fpath)
        if problem is not None:
            return [], [problem], fpath
        if data is None:
            continue
        if name.endswith(".gz"):
            try:
                data = gunzip_capped(data, fpath, MAX_SUMMARY_FILE)
            except ReadRefused:
                continue  # as a plain ledger over the limit: not read for a summary
            except (OSError, EOFError, zlib.error) as exc:
                return [], [Problem(code=ProblemCode.JSON_INVALID, path=fpath, message=f"bad gzip: {exc}")], fpath
        rows, problems = _parse(data, fpath, True)
        return [r for r in rows if isinstance(r, dict)], problems, fpath
    return [], [], None


def _round_names(search_root: str) -> list[str]:
    names = []
    try:
        with os.scandir(os.path.join(search_root, "rounds")) as it:
            for entry in it:
                if ROUND_DIR_RE.match(entry.name) and entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
    except OSError:
        return []
    names.sort(key=lambda n: int(n.split("-", 1)[1]))
    return names


def round_dirs(search_root: Path | str) -> list[Path]:
    """``rounds/round-NN`` directories of a search root, in round order."""
    root = Path(search_root)
    return [root / "rounds" / name for name in _round_names(str(search_root))]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def count_attempts(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(attempts, accepted, pending) over parseable attempt rows."""
    accepted = sum(1 for r in rows if r.get("accepted") is True)
    pending = sum(1 for r in rows if not r.get("local_verification"))
    return len(rows), accepted, pending


def _site_fields(summary: CaseSummary, attempts: list[dict[str, Any]], candidates: list[dict[str, Any]]) -> None:
    for row in reversed(attempts):
        site = _dict(row.get("repair_site"))
        kind = _str(site.get("localization_kind"))
        if kind:
            summary.localization_kind = kind
            summary.semantic_category = _str(site.get("semantic_category"))
            break
    if summary.localization_kind is None and candidates:
        row = candidates[-1]
        site = _dict(row.get("repair_site"))
        loc = _dict(row.get("failure_localization"))
        summary.localization_kind = _str(site.get("localization_kind")) or _str(loc.get("localization_kind")) or _str(loc.get("basis"))
        summary.semantic_category = _str(site.get("semantic_category")) or _str(loc.get("semantic_category"))
    for rows in (attempts, candidates):
        for row in reversed(rows):
            summary.case_id = summary.case_id or _str(row.get("case_id"))
            summary.candidate_id = summary.candidate_id or _str(row.get("candidate_id"))
    texts = []
    for row in attempts[-MAX_HINT_TEXTS:]:
        text = _str(_dict(row.get("hint_record")).get("text"))
        if text:
            texts.append(text)
    summary.hint_texts = texts


# --------------------------------------------------------------------------- fingerprint
def summary_fingerprint(ref: CaseRef) -> tuple[Any, ...]:
    """A cheap value that changes whenever the summary could change.

    Stats (no reads) of the case's top entries, of ``rounds/`` and of the newest
    round's top entries. Equal fingerprints -> no need to re-summarise.
    """
    path = os.fspath(ref.path)  # str paths: the runs screen takes one for each of 10,000 cases
    top = tuple(sorted(_stat_entries(path)))
    parts: list[Any] = [top]
    if ref.layout == Layout.FEEDBACK_SEARCH:
        names = _round_names(path)
        parts.append(tuple(names))
        if names:
            parts.append(tuple(sorted(_stat_entries(os.path.join(path, "rounds", names[-1])))))
    elif ref.layout == Layout.SLATE:
        parts.append(tuple(sorted(_stat_entries(os.path.join(path, "slate-rounds")))))
    return tuple(parts)


def _latest_mtime(fingerprint: tuple[Any, ...]) -> float:
    best = 0
    for _name, is_dir, mtime_ns, _ in fingerprint[0] if fingerprint else ():
        if not is_dir and mtime_ns > best:
            best = mtime_ns
    if best == 0:
        for _, _, mtime_ns, _ in fingerprint[0] if fingerprint else ():
            best = max(best, mtime_ns)
    return best / 1e9


# --------------------------------------------------------------------------- summarize
def summarize_case(
    ref: CaseRef,
    base: Path | str | None = None,
    *,
    cache: dict[str, bytes] | None = None,
    parsed: Parsed | None = None,
    fingerprint: bool = True,
    path_map: PathMap | None = None,
) -> CaseSummary:
    """Summarise one case cheaply. Never raises.

    ``cache``: file bytes already read by ``integrity.check_case(ref, cache=...)``, keyed by
    absolute path; ``parsed``: what that check parsed of them (``check_case(parsed=...)``).
    ``fingerprint=False`` skips the stat calls behind ``mtime`` /
    ``fingerprint`` (the ``check`` report does not show them).
    """
    path = ref.path if isinstance(ref.path, Path) else Path(ref.path)
    text = str(path)
    apath = _abs(text)
    try:
        rel = _relative(apath, _abs(base) if base is not None else apath)
    except ValueError:
        rel = text
    summary = CaseSummary(
        path=path if text == apath else Path(apath),
        rel_path=rel,
        layout=ref.layout,
        status=UNREADABLE,
        wrapper=ref.wrapper,
        key=ref.key,
    )
    token = _CACHE.set(cache)
    parsed_token = _PARSED.set(parsed)
    inside = _INSIDE.set([_abs(ref.wrapper) if ref.wrapper is not None else apath])
    try:
        if fingerprint:
            summary.fingerprint = summary_fingerprint(ref)
            summary.mtime = _latest_mtime(summary.fingerprint)
        if ref.layout == Layout.FEEDBACK_SEARCH:
            _summarize_search(summary, apath)
        elif ref.layout == Layout.SINGLE_RUN:
            _summarize_run(summary, apath)
        elif ref.layout == Layout.SLATE:
            _summarize_slate(summary, path)
        else:
            _summarize_unknown(summary, path)
        if summary.case_id is None or summary.candidate_id is None:
            _ids_from_bound_candidate(summary, ref, path_map)
    except Exception as exc:  # noqa: BLE001 - a summary never raises: the failure becomes a Problem
        summary.problems.append(
            Problem(code=ProblemCode.JSON_INVALID, path=str(path), message=f"could not summarise: {type(exc).__name__}: {exc}")
        )
    finally:
        _CACHE.reset(token)
        _PARSED.reset(parsed_token)
        _INSIDE.reset(inside)
    return summary


def _ids_from_bound_candidate(summary: CaseSummary, ref: CaseRef, path_map: PathMap | None) -> None:
    """A case whose ledgers name no candidate (no recoverable site: they are empty) is
    named by the candidate.json its run binds: case id, candidate id, and the category
    the candidate records, if any (``artifacts.identity``)."""
    candidate = bound_candidate(ref.path, read_identity(ref.path, str(ref.layout)), path_map=path_map)
    case_id, candidate_id = candidate_ids(candidate)
    summary.case_id = summary.case_id or case_id
    summary.candidate_id = summary.candidate_id or candidate_id
    if candidate is not None and summary.semantic_category is None:
        for where in (_dict(candidate.get("repair_site")), _dict(candidate.get("failure_localization")), candidate):
            summary.semantic_category = _str(where.get("semantic_category"))
            if summary.semantic_category:
                break


def _summarize_search(summary: CaseSummary, path: Path | str) -> None:
    root = _abs(path)
    summary.status, _, problems = read_manifest_status(root)
    summary.problems.extend(problems)
    rounds = [os.path.join(root, "rounds", n) for n in _round_names(root)]
    summary.rounds = len(rounds)
    attempts, problems, _ = read_ledger(root, "repair_attempts")
    summary.problems.extend(problems)
    summary.attempts, summary.accepted, summary.pending = count_attempts(attempts)
    candidates, problems, _ = read_ledger(root, "repair_candidates")
    summary.problems.extend(problems)
    if not attempts and not candidates and rounds:
        # nothing aggregated yet: the newest round tells what the search is working on
        latest_candidates, _, _ = read_ledger(rounds[-1], "repair_candidates")
        latest_attempts, _, _ = read_ledger(rounds[-1], "repair_attempts")
        _site_fields(summary, latest_attempts, latest_candidates)
    else:
        _site_fields(summary, attempts, candidates)


def _summarize_run(summary: CaseSummary, path: Path | str) -> None:
    path = _abs(path)
    summary.status, _, problems = read_manifest_status(path)
    summary.problems.extend(problems)
    summary.rounds = 1
    attempts, problems, _ = read_ledger(path, "repair_attempts")
    summary.problems.extend(problems)
    summary.attempts, summary.accepted, summary.pending = count_attempts(attempts)
    candidates, problems, _ = read_ledger(path, "repair_candidates")
    summary.problems.extend(problems)
    _site_fields(summary, attempts, candidates)


def _summarize_slate(summary: CaseSummary, path: Path) -> None:
    summary.status = UNSUPPORTED
    spath = os.path.join(_abs(path), "slate-state.json")
    data, _ = _read_small(spath, MAX_SLATE_STATE)
    if data is not None:
        value, _ = parse_json_bytes(data, spath)
        payload = _dict(_dict(value).get("payload"))
        status = _str(payload.get("status")) or _str(_dict(value).get("status"))
        if status:
            summary.status = status
    summary.rounds = sum(1 for _, is_dir, _, _ in _stat_entries(path / "slate-rounds") if is_dir)
    summary.problems.append(
        Problem(
            code=ProblemCode.UNSUPPORTED_LAYOUT,
            path=str(path),
            message="slate search layout (slate-state.json / slate-rounds/) is recognised but not supported",
        )
    )


def _summarize_unknown(summary: CaseSummary, path: Path) -> None:
    mpath = path / "manifest.json"
    if mpath.exists():
        value, problems = read_json(mpath)
        summary.problems.extend(problems)
        status = _str(_dict(value).get("status"))
        if status:
            summary.status = status


__all__ = [
    "CaseSummary",
    "count_attempts",
    "read_ledger",
    "read_manifest_status",
    "round_dirs",
    "summarize_case",
    "summary_fingerprint",
]
