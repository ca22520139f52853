"""The triage queue's data: why a case has no recoverable site, and the current label of
every listed case over every work directory that holds its records. Textual-free; the
file reads run in workers.

- :func:`localizer_reasons`: why a semantic localization cannot yield a site, as
  (code, message) pairs: the codes are the runs table's "why no site" column and the
  ``no_site_reasons`` of ``eviscene-tui labels``; the messages are the case screen's.
- :func:`no_site_details`: those codes for a case's newest localization, and the
  category its localizer proposed (for the category column of a no-site row).
- :func:`load_triage`: the merged review journals of the work directories that may hold
  the listed cases' records (``journal.records.read_workdirs``), folded to one current
  label per case; :func:`case_records`: the same for one case, with its supervised search.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui import pace
from eviscene_tui.artifacts.fileio import read_regular
from eviscene_tui.artifacts.models import SEMANTIC_CATEGORIES
from eviscene_tui.artifacts.summary import round_dirs
from eviscene_tui.gate.bundled import REPAIRS_DIR
from eviscene_tui.journal.fold import Triage
from eviscene_tui.journal.records import (
    CaseRecords,
    RecordIndex,
    RecordKey,
    find_search_root,
    find_supervised_root,
    read_workdirs,
    record_key,
    review_journals,
)
from eviscene_tui.journal.review import merged_triage

SEMANTIC_SCHEMA = "ifv-psd-semantic-localization-v1"
MAX_LOCALIZATION_BYTES = 8 << 20
KNOWN_CATEGORIES = frozenset(SEMANTIC_CATEGORIES)
#: cases whose record keys are read between two looks at the operator's input (load_triage)
YIELD_EVERY = 50


def _chosen(cands: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, int]:
    """(the selected candidate, or the only one; how many are selected)."""
    selected = [c for c in cands if c.get("selected") is True]
    if len(selected) == 1:
        return selected[0], 1
    if not selected and len(cands) == 1:
        return cands[0], 0
    return None, len(selected)


def _candidate_reasons(chosen: dict[str, Any], recoverable: bool) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not chosen.get("observed_basis"):
        out.append(("no_observed_basis", "selected candidate has no observed_basis quotes"))
    if chosen.get("category") not in KNOWN_CATEGORIES:
        out.append(("unknown_category", f"unknown category {chosen.get('category')!r}"))
    verifier = chosen.get("verifier")
    if not isinstance(verifier, dict) or verifier.get("kind") != "task":
        out.append(("verifier_not_task", "verifier kind is not 'task'"))
    if recoverable and chosen.get("recoverable") is False:
        out.append(("not_recoverable", "the localizer marked its candidate not recoverable"))
    return out


def localizer_reasons(sl: Mapping[str, Any] | None, trace_sha: str | None = None, *, recoverable: bool = False) -> list[tuple[str, str]]:
    """Why a semantic localization (``semantic-localization.json`` as read) cannot
    yield a failure site (psd-run-format §3.4 rule 3), as (code, message); [] = valid.
    ``recoverable``: also say when the chosen candidate is marked not recoverable."""
    if sl is None:
        return [("no_localization", "semantic localization missing (no semantic-localization.json)")]
    out: list[tuple[str, str]] = []
    if sl.get("schema_version") != SEMANTIC_SCHEMA:
        out.append(("unknown_schema", f"unknown schema {sl.get('schema_version')!r}"))
    if sl.get("passed") is not True:
        out.append(("localizer_failed", "localizer did not pass (passed is not true)"))
    raw = sl.get("candidates")
    cands = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
    if not cands:
        out.append(("no_candidates", "no candidates"))
    chosen, selected = _chosen(cands)
    if cands and chosen is None:
        out.append(("ambiguous_selection", f"{selected} selected candidates (exactly one needed)"))
    if chosen is not None:
        out.extend(_candidate_reasons(chosen, recoverable))
    if trace_sha and sl.get("source_trace_canonical_sha256") not in (None, trace_sha):
        out.append(("trace_mismatch", "source_trace_canonical_sha256 does not match the source trace"))
    return out


def localizer_category(sl: Mapping[str, Any] | None) -> str:
    """The category the localizer proposed: its chosen candidate's, else the first named."""
    if sl is None:
        return ""
    raw = sl.get("candidates")
    cands = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
    chosen, _ = _chosen(cands)
    for cand in ([chosen] if chosen is not None else []) + cands:
        value = cand.get("category")
        if isinstance(value, str) and value:
            return value
    return ""


def newest_localization(case_root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The newest round's ``semantic-localization.json`` (a single run's own), as read;
    None when there is none or it cannot be read."""
    root = Path(case_root)
    inside = [os.path.normpath(os.path.abspath(root))]
    for folder in [*reversed(round_dirs(root)), root]:
        path = folder / "semantic-localization.json"
        try:
            value = orjson.loads(read_regular(path, limit=MAX_LOCALIZATION_BYTES, inside=inside))
        except FileNotFoundError:
            continue
        except (OSError, orjson.JSONDecodeError):  # unreadable, a FIFO, too big, a link out of the root
            return None
        return value if isinstance(value, dict) else None
    return None


@dataclass(frozen=True, slots=True)
class NoSiteDetails:
    reasons: tuple[str, ...] = ()  # localizer_reasons codes; ("localization_valid",) when it would yield a site
    category: str = ""  # the localizer's proposed category ("" = none)


def no_site_details(case_root: str | os.PathLike[str]) -> NoSiteDetails:
    """Why the case's newest localization yields no site, and its proposed category."""
    sl = newest_localization(case_root)
    codes = tuple(code for code, _ in localizer_reasons(sl, recoverable=True)) or ("localization_valid",)
    return NoSiteDetails(codes, localizer_category(sl))


# ---------------------------------------------------------------------- labels
@dataclass(frozen=True)
class TriageMarks:
    """The current label of every listed case, and where it was read."""

    by_record: dict[str, Triage] = field(default_factory=dict)  # record key -> current triage
    workdirs: tuple[Path, ...] = ()
    journals: tuple[Path, ...] = ()
    records: dict[str, RecordKey] = field(default_factory=dict)  # the listed cases' record keys, by their ident

    def for_key(self, record: RecordKey | None) -> Triage | None:
        if record is None:
            return None
        return self.by_record.get(record.key)


@dataclass(frozen=True, slots=True)
class ListedCase:
    """What :func:`load_triage` needs of a listed case (its record key is read when not given)."""

    ident: str
    path: str
    record: RecordKey | None = None
    layout: str | None = None

    def key(self) -> RecordKey:
        return self.record if self.record is not None else record_key(self.path, self.layout)


def load_triage(cases: Iterable[ListedCase], *, opened: str | os.PathLike[str], workdir: str | os.PathLike[str]) -> TriageMarks:
    """Every listed case's current label: the review journals of every work directory
    that may hold its records (the work directory of the opened path, the cases' and
    their ancestors' ``*.eviscene-tui``, the registry's), merged in time order, with an
    earlier version's path keys mapped to the cases (``journal.records.RecordIndex``)."""
    listed = []
    for n, c in enumerate(cases, 1):
        listed.append(CaseRecords(c.ident, os.path.abspath(c.path), c.key()))  # reads the case's identity
        if n % YIELD_EVERY == 0:
            pace.yield_to_input()  # in background work (the app's label read): a key goes first
    keys = [k for c in listed for k in c.key.keys]
    workdirs = read_workdirs([c.path for c in listed], workdir, keys, opened=opened)
    journals = review_journals(workdirs)
    index = RecordIndex(listed, opened=opened)
    return TriageMarks(merged_triage(journals, index), tuple(workdirs), tuple(journals), {c.ident: c.key for c in listed})


@dataclass(frozen=True)
class CaseRecordSet:
    """Everything this app recorded for one case, wherever it was written (for a surface
    that shows one case: ``gate-status``, the gate card, a headless report)."""

    record: RecordKey
    workdirs: tuple[Path, ...]  # where its records were looked for and found (existing work directories)
    triage: Triage | None  # its current label and note
    search_root: Path | None  # the bundled driver's search of it (``repair``), else an earlier version's in-app one


def case_records(case_root: str | os.PathLike[str], workdir: str | os.PathLike[str], *,
                 opened: str | os.PathLike[str] | None = None) -> CaseRecordSet:
    """The records of the case at ``case_root`` by the read rule of ``journal.records``
    (``workdir``: where the surface itself writes; ``opened``: the folder it was given)."""
    rk = record_key(case_root)
    marks = load_triage([ListedCase(os.fspath(case_root), os.fspath(case_root), rk)], opened=opened or case_root, workdir=workdir)
    dirs = list(marks.workdirs)
    found = find_search_root(case_root, rk, dirs, folder=REPAIRS_DIR, opened=opened)
    if found is None:
        found = find_supervised_root(case_root, rk, dirs, opened=opened)
    return CaseRecordSet(rk, marks.workdirs, marks.for_key(rk), found)
