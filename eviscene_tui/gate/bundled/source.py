"""What the bundled driver starts from, read (never written) from the case.

:func:`inputs_from_case` takes a ``CaseBundle`` (a driver search root
or run); :func:`inputs_from_files` takes a source trace + candidate file (and
optional public / private context files). Either gives :class:`CaseInputs`:
the raw trace, its file sha, the candidate seed, contexts, and the initial
failure site (the driver's current site; an explicit ``source_step_index`` wins).

The source trace is read through the step index (``artifacts.trace.load_trace``, lazy):
its ``state.all_steps`` stays on disk as a :class:`~eviscene_tui.artifacts.trace.LazySteps`
(a step parsed from its byte range when it is read), and the lookups over every step use
a light projection of them (``records.step_facts``, made here, which also checks every
range). A 200 MB trace of token captures then starts a search in about the time of that
scan and projection, in a third of its size in memory, where the whole parse took seconds
and about ten times its size (``make bench``, gate area). A trace the index declines, or
one whose range is not one object, is parsed whole, as before. A gzip trace is decompressed
into an unnamed temporary file (the system's temporary directory: nothing is left behind). The file's sha is computed meanwhile on another thread (hashing lets go
of the interpreter).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.case import CaseBundle
from eviscene_tui.artifacts.jsonio import read_json, read_jsonl, sha256_file
from eviscene_tui.artifacts.trace import load_trace as load_source_trace
from eviscene_tui.gate.bundled.records import site_from_candidate, site_from_trace, step_facts, trace_steps_of


class InputError(ValueError):
    """The case cannot start a repair search (message says why)."""


@dataclass
class CaseInputs:
    label: str  # case path relative to the opened root (journal target.case)
    trace: dict[str, Any]
    trace_path: Path
    trace_sha256: str
    site: dict[str, Any] | None  # None: the case has no failure site; the operator names one at round 0
    candidate: dict[str, Any] | None = None
    candidate_binding: dict[str, Any] | None = None  # {path, sha256}
    public_context: Any = None
    public_binding: dict[str, Any] | None = None
    private_context: Any = None
    private_binding: dict[str, Any] | None = None
    semantic_localization: dict[str, Any] | None = None
    source_root: Path | None = None  # the driver's root (evidence; never written)
    case: CaseBundle | None = None  # for rebuilding archived requests
    extra: dict[str, Any] = field(default_factory=dict)


def _binding(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    return {"path": str(path.resolve()), "sha256": sha256_file(path)}


def _load_trace(path: Path) -> dict[str, Any]:
    trace, problems = load_source_trace(path, lazy=True)
    if trace is not None and trace.lazy:
        step_facts(trace.raw)  # every step's range parsed once (its facts kept, not the step)
        if trace.broken is not None:  # a range that is not one object: the whole parse says precisely what is wrong
            trace, problems = load_source_trace(path, lazy=False)
    if trace is None:
        detail = problems[0].message if problems else "not a JSON object"
        raise InputError(f"the source trace {path} cannot be read: {detail}")
    raw = trace.raw
    if not trace_steps_of(raw):
        raise InputError(f"the source trace {path} has no state.all_steps")
    return raw


def load_trace(path: Path) -> dict[str, Any]:
    """The source trace at ``path`` (:class:`InputError` when unreadable or without steps);
    its ``state.all_steps`` may be a :class:`LazySteps` (see the module's docstring)."""
    return _load_trace(path)


def _trace_and_sha(path: Path) -> tuple[dict[str, Any], str]:
    """The trace (``_load_trace``) and the sha of its file, hashed on another thread meanwhile."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="trace-sha") as pool:
        digest = pool.submit(sha256_file, path)
        trace = _load_trace(path)
        return trace, digest.result()


def _initial_site(trace: dict[str, Any], candidate: dict[str, Any] | None, attempt_site: dict[str, Any] | None,
                  step: int | None) -> dict[str, Any] | None:
    if step is not None:
        try:
            return site_from_trace(trace, step, localization_kind="operator", localization_verifier="operator")
        except ValueError as exc:
            raise InputError(str(exc)) from None
    if attempt_site and type(attempt_site.get("source_step_index")) is int:
        return dict(attempt_site)
    if candidate is not None:
        site = site_from_candidate(candidate, trace)
        if site is not None:
            return site
    return None  # no candidate repair_site and no attempt: round 0 asks the operator for a step


def inputs_from_case(case: CaseBundle, *, label: str | None = None, source_step_index: int | None = None) -> CaseInputs:
    """From a ``CaseBundle``: the trace, the latest round's candidate and attempt site, contexts."""
    root = Path(case.root)
    trace_path = case.source_trace_path
    if trace_path is None:
        raise InputError(f"the source trace of {root} cannot be found (see the case's integrity problems)")
    trace, trace_sha = _trace_and_sha(Path(trace_path))
    candidate = None
    candidate_file: Path | None = None
    attempt_site = None
    dirs = [r.dir for r in reversed(case.rounds)]
    dirs.append(root)
    for d in dirs:
        rows, _ = read_jsonl(Path(d) / "repair_attempts.jsonl") if (Path(d) / "repair_attempts.jsonl").is_file() else ([], [])
        if attempt_site is None:
            for row in reversed(rows):
                if isinstance(row, dict) and isinstance(row.get("repair_site"), dict):
                    attempt_site = dict(row["repair_site"])
                    break
        if candidate is None and (Path(d) / "repair_candidates.jsonl").is_file():
            crow, _ = read_jsonl(Path(d) / "repair_candidates.jsonl")
            good = [c for c in crow if isinstance(c, dict)]
            if good:
                candidate, candidate_file = good[-1], Path(d) / "repair_candidates.jsonl"
        if candidate is not None and attempt_site is not None:
            break
    semloc = None
    for d in dirs:
        p = Path(d) / "semantic-localization.json"
        if p.is_file():
            raw, _ = read_json(p)
            if isinstance(raw, dict):
                semloc = raw
                break
    public = case.public_context
    private = case.private_context
    if isinstance(public, dict) and "repair_search" in public:
        public = {k: v for k, v in public.items() if k != "repair_search"}
    bind_pub = None
    bind_priv = None
    try:
        pub_path = case.input_path("public_context")  # bound inputs, found by artifacts.paths
        bind_pub = _binding(pub_path) if pub_path else None
        priv_path = case.input_path("private_context")
        bind_priv = _binding(priv_path) if priv_path else None
        cpath = case.input_path("candidate")
        if cpath is not None and cpath.is_file():
            candidate_file = cpath
    except Exception:  # noqa: BLE001 - bindings are best effort
        pass
    site = _initial_site(trace, candidate, attempt_site, source_step_index)
    return CaseInputs(
        label=label or root.name,
        trace=trace,
        trace_path=Path(trace_path).resolve(),
        trace_sha256=trace_sha,
        site=site,
        candidate=candidate,
        candidate_binding=_binding(candidate_file),
        public_context=public if public is not None else {},
        public_binding=bind_pub,
        private_context=private,
        private_binding=bind_priv,
        semantic_localization=semloc,
        source_root=root,
        case=case,
    )


def inputs_from_files(
    trace: str | os.PathLike[str],
    candidate: str | os.PathLike[str] | None = None,
    *,
    public_context: str | os.PathLike[str] | None = None,
    private_context: str | os.PathLike[str] | None = None,
    label: str | None = None,
    source_step_index: int | None = None,
    case: CaseBundle | None = None,
) -> CaseInputs:
    """From a source trace + candidate file (a JSON object, or a JSONL whose last row is used)."""
    trace_path = Path(trace)
    raw, trace_sha = _trace_and_sha(trace_path)
    cand = None
    if candidate is not None:
        cpath = Path(candidate)
        if cpath.suffix == ".jsonl":
            rows, _ = read_jsonl(cpath)
            rows = [r for r in rows if isinstance(r, dict)]
            cand = rows[-1] if rows else None
        else:
            value, problems = read_json(cpath)
            if not isinstance(value, dict):
                raise InputError(f"the candidate file {cpath} is not a JSON object")
            cand = value
    pub = read_json(public_context)[0] if public_context else {}
    priv = read_json(private_context)[0] if private_context else None
    site = _initial_site(raw, cand, None, source_step_index)
    return CaseInputs(
        label=label or trace_path.stem,
        trace=raw,
        trace_path=trace_path.resolve(),
        trace_sha256=trace_sha,
        site=site,
        candidate=cand,
        candidate_binding=_binding(Path(candidate)) if candidate else None,
        public_context=pub if pub is not None else {},
        public_binding=_binding(Path(public_context)) if public_context else None,
        private_context=priv,
        private_binding=_binding(Path(private_context)) if private_context else None,
        case=case,
    )
