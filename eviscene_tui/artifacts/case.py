"""One case folder, loaded lazily: ``load_case(path) -> CaseBundle``.

Layouts (psd-run-format §1):

- ``feedback_search``: ``search-state.json``, or a ``manifest.json`` with schema
  ``ifv-psd-feedback-search-v1``, or ``rounds/round-NN`` + ``requests/``/``round-inputs/``.
- ``single_run``: ``run-inputs.json``, or a run ``manifest.json`` (driver-result schema or a
  run status), or run ledgers (``repair_attempts.jsonl``, ``hint-proposals.json``).
- ``slate``: ``slate-state.json`` / ``slate-rounds/`` (recognised, labelled unsupported).
- ``unknown``: nothing recognisable (an ``unsupported_layout`` problem).

A search root inside a multi-case wrapper (``<out>/repairs/<key>/``) also knows its
``<out>/case-inputs/<key>/`` folder; written paths may then resolve anywhere under ``<out>``.

Recorded paths are resolved by the one trust model of :mod:`eviscene_tui.artifacts.paths`
(``CaseBundle.paths``): bound inputs (the source trace, candidate, contexts, …) and the
source rollout's runtime archive are read wherever they are — normally OUTSIDE the root —
while everything the run wrote must resolve inside it. A tree copied elsewhere is
rebased from the locations the driver recorded about itself; ``input_provenance()``
says where each input was found and by which rule.

Rules: nothing is read until asked for, and each file is read at most once (cached).
Reading never writes, locks or touches anything; ``search.lock`` is never opened.
No method raises: a file that is missing gives ``None`` (optional files are normal, §7.11),
a file that cannot be read or does not fit gives a :class:`Problem` in ``.problems``.

``CaseBundle.status``: the manifest status; else the search-state status; else
``"unreadable"``.

No Textual import here.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Callable, TypeVar

from pydantic import BaseModel

from eviscene_tui.artifacts.models import (
    M,
    SCHEMA_FEEDBACK_SEARCH,
    SCHEMA_RUN_RESULT,
    RUN_STATUSES,
    AttemptRecord,
    Candidate,
    ContinuationPayload,
    FailureSite,
    FeedbackObject,
    Finalization,
    GenerationLastError,
    HintProposal,
    JudgeSummary,
    LiveServingCheck,
    LocalVerification,
    ProposerAuditRow,
    ProposerAudits,
    ProposerResponse,
    RoundMediaInputs,
    RoundPublicInputs,
    RunInputs,
    RunManifest,
    SearchIdentity,
    SearchManifest,
    SearchState,
    SemanticLocalization,
    VerificationBundle,
    parse_model,
)
from eviscene_tui.artifacts.paths import (
    RULE_CASE_INPUTS,
    Found,
    InputProvenance,
    PathMap,
    PathResolver,
    input_provenance,
    missing_input_message,
    run_dirs_from_media,
)
from eviscene_tui.artifacts.problems import Problem, ProblemCode
from eviscene_tui.artifacts.runtime_archive import (
    ArchivedRequest,
    RuntimeStore,
    check_regular_file,
    request_from_policy_input,
)
from eviscene_tui.artifacts.trace import ForeignIndex, SourceTrace, load_trace
from eviscene_tui.artifacts.jsonio import parse_jsonl_bytes, read_bound, read_file_bytes, read_json, read_jsonl, sha256_file

T = TypeVar("T")

ROUND_DIR_RE = re.compile(r"^round-(\d+)$")
HINT_FILE_RE = re.compile(r"^hint-(\d+)\.json$")
EPISODE_FILE_RE = re.compile(r"^hint-(\d+)-teacher\.json$")

LAYOUT_FEEDBACK_SEARCH = "feedback_search"
LAYOUT_SINGLE_RUN = "single_run"
LAYOUT_SLATE = "slate"
LAYOUT_UNKNOWN = "unknown"


def _real_subdirs(folder: Path) -> list[Path]:
    """The sub-directories of ``folder`` that are not symlinks, sorted (raises OSError)."""
    return [d for d in sorted(folder.iterdir()) if d.is_dir() and not d.is_symlink()]


def _guarded(default: Callable[[], Any]) -> Callable[[Callable[[Any], T]], functools.cached_property[T]]:
    """cached_property that records any unexpected exception as a Problem instead of raising."""

    def deco(fn: Callable[[Any], T]) -> functools.cached_property[T]:
        @functools.wraps(fn)
        def wrapper(self: Any) -> T:
            try:
                return fn(self)
            except Exception as exc:  # noqa: BLE001 - loaders never raise
                self._add(
                    Problem(
                        code=ProblemCode.JSON_INVALID,
                        path=str(getattr(self, "dir", getattr(self, "root", ""))),
                        message=f"unexpected error reading {fn.__name__}: {type(exc).__name__}",
                    )
                )
                # the empty value of the property's own type (dict, list or None)
                empty: T = default()
                return empty

        return functools.cached_property(wrapper)

    return deco


def _round_name(index: int) -> str:
    return f"round-{index:02d}"


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _jsonl_path(directory: Path, stem: str) -> Path | None:
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        p = directory / name
        if _exists(p):
            return p
    return None


class _Loader:
    """Shared file-reading helpers; subclasses set ``self._problems``."""

    _problems: list[Problem]

    def _add(self, problem: Problem) -> None:
        self._problems.append(problem)

    @property
    def torn_tail_paths(self) -> set[str]:
        """JSONL files (read so far) whose LAST line is torn: possibly being written right now."""
        return set(self.__dict__.get("_torn", ()))

    def _extend(self, problems: list[Problem]) -> None:
        self._problems.extend(problems)

    def _boundary(self) -> Path | None:
        case = getattr(self, "case", self)
        return getattr(case, "boundary", None)

    def _readable(self, path: Path) -> bool:
        """False (with a problem) for FIFOs, devices, directories and symlinks out of the case."""
        bad = check_regular_file(path, root=self._boundary())
        if bad is not None:
            self._add(bad)
            return False
        return True

    def _json(self, path: Path) -> Any:
        """Raw JSON of an optional file: missing -> None silently."""
        if not _exists(path) or not self._readable(path):
            return None
        raw, problems = read_json(path)
        self._extend(problems)
        return raw

    def _bound(self, path: Path) -> tuple[Any, Any] | None:
        """(identity, payload) of an optional bound file; a plain JSON file without an
        envelope is accepted as a payload with identity None."""
        if not _exists(path) or not self._readable(path):
            return None
        bound = read_bound(path)
        if bound.form == "invalid" and bound.payload is None:
            raw, _ = read_json(path)
            if raw is not None and not (isinstance(raw, dict) and {"identity", "payload_sha256"} & raw.keys()):
                return None, raw
        self._extend(bound.problems)
        if bound.form in ("missing",):
            return None
        return bound.identity, bound.payload

    def _plain_or_bound(self, path: Path) -> Any:
        """Payload of a file that may be plain JSON or a bound envelope."""
        raw = self._json(path)
        if isinstance(raw, dict) and "payload_sha256" in raw and ("payload" in raw or "archive" in raw):
            got = self._bound(path)
            return got[1] if got else None
        return raw

    def _model(self, cls: type[M], raw: Any, path: Path, what: str | None = None) -> M | None:
        if raw is None:
            return None
        model, problems = parse_model(cls, raw, str(path), what=what or path.name)
        self._extend(problems)
        return model

    def _rows(self, cls: type[M], directory: Path, stem: str) -> list[M] | None:
        path = _jsonl_path(directory, stem)
        if path is None or not self._readable(path):
            return None
        rows, problems, torn_tail = _read_jsonl_tail(path)
        if torn_tail:
            # a writer may be mid-write: callers can show "being written" (see torn_tail_paths)
            self.__dict__.setdefault("_torn", set()).add(str(path))
        self._extend(problems)
        out: list[M] = []
        for i, row in enumerate(rows):
            model, more = parse_model(cls, row, str(path), what=f"{stem} row {i + 1}")
            self._extend(more)
            if model is not None:
                out.append(model)
        return out


def _read_jsonl_tail(path: Path) -> tuple[list[Any], list[Problem], bool]:
    """Like ``read_jsonl`` but also says whether only the last line is torn."""
    p = str(path)
    if p.endswith(".gz"):
        rows, problems = read_jsonl(path)
        return rows, problems, False
    raw, problems = read_file_bytes(p)
    if raw is None:
        return [], problems, False
    return parse_jsonl_bytes(raw, p)


# --------------------------------------------------------------------------- rounds
class RoundBundle(_Loader):
    """One run directory: a feedback round (``rounds/round-NN``) or a single run."""

    def __init__(self, case: "CaseBundle", index: int, directory: Path, *, kind: str = "search_round") -> None:
        self.case = case
        self.index = index
        self.dir = directory
        self.kind = kind  # search_round | single
        self._problems = []

    def __repr__(self) -> str:  # pragma: no cover
        return f"RoundBundle({self.index}, {str(self.dir)!r})"

    @property
    def name(self) -> str:
        return _round_name(self.index) if self.kind == "search_round" else self.dir.name

    @property
    def exists(self) -> bool:
        return self.dir.is_dir()

    @property
    def incomplete(self) -> bool:
        """The directory exists but has no ``run-inputs.json`` (crash between mkdir and the
        first write, §7.6: every driver resume then fails)."""
        return self.dir.is_dir() and not _exists(self.dir / "run-inputs.json")

    # ---------------------------------------------------------------- run files
    @_guarded(lambda: None)
    def _run_inputs_bound(self) -> tuple[Any, Any] | None:
        return self._bound(self.dir / "run-inputs.json")

    @property
    def run_inputs(self) -> RunInputs | None:
        got = self._run_inputs_bound
        if not got or got[0] is None:
            return None
        return self._cached_model("_ri", RunInputs, got[0], self.dir / "run-inputs.json", "run-inputs identity")

    @property
    def run_inputs_status(self) -> str | None:
        got = self._run_inputs_bound
        if got and isinstance(got[1], dict):
            status = got[1].get("status")
            return status if isinstance(status, str) else None
        return None

    def _cached_model(self, key: str, cls: type[M], raw: Any, path: Path, what: str) -> M | None:
        cache: dict[str, BaseModel | None] = self.__dict__.setdefault("_model_cache", {})
        if key not in cache:
            cache[key] = self._model(cls, raw, path, what)
        model = cache[key]
        return model if isinstance(model, cls) else None

    @_guarded(lambda: None)
    def manifest(self) -> RunManifest | None:
        path = self.dir / "manifest.json"
        return self._model(RunManifest, self._json(path), path)

    @property
    def status(self) -> str | None:
        return self.manifest.status if self.manifest is not None else None

    @_guarded(lambda: None)
    def semantic_localization(self) -> SemanticLocalization | None:
        path = self.dir / "semantic-localization.json"
        return self._model(SemanticLocalization, self._plain_or_bound(path), path)

    @_guarded(lambda: None)
    def candidates(self) -> list[Candidate] | None:
        return self._rows(Candidate, self.dir, "repair_candidates")

    @_guarded(lambda: None)
    def attempts(self) -> list[AttemptRecord] | None:
        return self._rows(AttemptRecord, self.dir, "repair_attempts")

    @_guarded(lambda: None)
    def proposals(self) -> list[HintProposal] | None:
        path = self.dir / "hint-proposals.json"
        got = self._bound(path)
        if got is None:
            return None
        payload = got[1]
        if isinstance(payload, dict) and isinstance(payload.get("proposals"), list):
            payload = payload["proposals"]
        if isinstance(payload, dict):
            payload = [payload]
        if not isinstance(payload, list):
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(path), message="hint-proposals payload is not a list"))
            return []
        out = []
        for i, item in enumerate(payload):
            model = self._model(HintProposal, item, path, f"hint proposal {i}")
            if model is not None:
                out.append(model)
        return out

    @_guarded(lambda: None)
    def _audits(self) -> ProposerAudits | None:
        path = self.dir / "proposer-hint-audits.json"
        raw = self._json(path)
        if isinstance(raw, list):  # legacy: bare list of rows
            raw = {"proposals": raw}
        return self._model(ProposerAudits, raw, path)

    @property
    def proposer_audits(self) -> list[ProposerAuditRow] | None:
        audits = self._audits
        return audits.proposals if audits is not None else None

    @_guarded(lambda: None)
    def proposer_response(self) -> ProposerResponse | None:
        path = self.dir / "proposer-response.json"
        got = self._bound(path)
        if got is None:
            return None
        payload = got[1]
        if isinstance(payload, str):
            payload = {"text": payload}
        return self._model(ProposerResponse, payload, path)

    def _hint_files(self, sub: str, pattern: re.Pattern[str]) -> dict[int, Path]:
        directory = self.dir / sub
        out: dict[int, Path] = {}
        try:
            entries = list(directory.iterdir())
        except OSError:
            return out
        for entry in entries:
            m = pattern.match(entry.name)
            if m:
                out[int(m.group(1))] = entry
        return dict(sorted(out.items()))

    @_guarded(dict)
    def continuations(self) -> dict[int, ContinuationPayload]:
        out: dict[int, ContinuationPayload] = {}
        for n, path in self._hint_files("continuations", HINT_FILE_RE).items():
            got = self._bound(path)
            if got is None:
                continue
            model = self._model(ContinuationPayload, got[1], path)
            if model is not None:
                out[n] = model
        return out

    @_guarded(dict)
    def episode_paths(self) -> dict[int, Path]:
        return self._hint_files("episodes", EPISODE_FILE_RE)

    def episode(self, hint_index: int) -> tuple[SourceTrace | None, list[Problem]]:
        """The teacher episode trace (loaded on demand, cached)."""
        cache: dict[int, tuple[SourceTrace | None, list[Problem]]] = self.__dict__.setdefault("_episode_cache", {})
        if hint_index not in cache:
            path = self.episode_paths.get(hint_index)
            if path is None:
                cache[hint_index] = (None, [])
            elif not self._readable(path):
                cache[hint_index] = (None, [self._problems[-1]])
            else:
                trace, problems = load_trace(path)
                self._extend(problems)
                cache[hint_index] = (trace, problems)
        return cache[hint_index]

    @_guarded(dict)
    def judge(self) -> dict[int, LocalVerification]:
        out: dict[int, LocalVerification] = {}
        for n, path in self._hint_files("judge", HINT_FILE_RE).items():
            model = self._model(LocalVerification, self._json(path), path)
            if model is not None:
                out[n] = model
        return out

    @_guarded(lambda: None)
    def live_serving_check(self) -> LiveServingCheck | None:
        path = self.dir / "live-serving-check.json"
        return self._model(LiveServingCheck, self._json(path), path)

    @_guarded(lambda: None)
    def generation_last_error(self) -> GenerationLastError | None:
        path = self.dir / "generation-last-error.json"
        return self._model(GenerationLastError, self._json(path), path)

    @_guarded(lambda: None)
    def finalization(self) -> Finalization | None:
        path = self.dir / "finalization.json"
        return self._model(Finalization, self._json(path), path)

    @_guarded(lambda: None)
    def judge_summary(self) -> JudgeSummary | None:
        path = self.dir / "judge-summary.json"
        return self._model(JudgeSummary, self._json(path), path)

    @_guarded(lambda: None)
    def verification_bundle(self) -> VerificationBundle | None:
        path = self.dir / "gemini-verification-bundle.json"
        return self._model(VerificationBundle, self._json(path), path)

    # ---------------------------------------------------------------- search-round inputs
    @property
    def feedback(self) -> FeedbackObject | None:
        """``requests/round-NN.json`` payload (search rounds only)."""
        if self.kind != "search_round":
            return None
        return self.case.feedback_for(self.index)

    @_guarded(lambda: None)
    def round_public(self) -> RoundPublicInputs | None:
        if self.kind != "search_round":
            return None
        path = self.case.root / "round-inputs" / _round_name(self.index) / "public.json"
        return self._model(RoundPublicInputs, self._json(path), path)

    @_guarded(lambda: None)
    def round_media(self) -> RoundMediaInputs | None:
        if self.kind != "search_round":
            return None
        path = self.case.root / "round-inputs" / _round_name(self.index) / "media.json"
        return self._model(RoundMediaInputs, self._json(path), path)

    @property
    def relocalized(self) -> bool:
        fb = self.feedback
        return bool(fb is not None and fb.needs_relocalization is True)

    # ---------------------------------------------------------------- runtime
    def runtime_store_dirs(self) -> list[Path]:
        """Every ``runtime/<case>/<attempt>/`` directory of this run (sorted)."""
        out: list[Path] = []
        try:
            for case_dir in _real_subdirs(self.dir / "runtime"):
                out.extend(_real_subdirs(case_dir))
        except OSError:
            pass  # no (or an unreadable) runtime folder: the attempt folders listed so far
        return out

    def failure_site(self) -> FailureSite | None:
        """This round's site: its latest attempt's ``repair_site``, else its candidate's.
        A candidate site without a localization kind/category is completed from this
        round's ``semantic-localization.json`` when its selected candidate is the same step."""
        try:
            site = site_from_attempts(self.attempts or [])
            if site is not None:
                return site
            site = site_from_candidates(self.candidates or [])
            if site is not None and (site.localization_kind is None or site.semantic_category is None):
                site = _enrich_from_semantic(site, self.semantic_localization)
            return site
        except Exception as exc:  # noqa: BLE001 - recorded as a Problem; the round then has no known site
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(self.dir), message=f"failure site: {type(exc).__name__}"))
            return None

    def attempt_for_hint(self, hint_index: int) -> AttemptRecord | None:
        attempts = self.attempts or []
        if 0 <= hint_index < len(attempts):
            return attempts[hint_index]
        return None

    # ---------------------------------------------------------------- problems
    def load_all(self) -> None:
        for name in (
            "run_inputs",
            "manifest",
            "semantic_localization",
            "candidates",
            "attempts",
            "proposals",
            "proposer_audits",
            "proposer_response",
            "continuations",
            "episode_paths",
            "judge",
            "live_serving_check",
            "generation_last_error",
            "finalization",
            "judge_summary",
            "verification_bundle",
            "round_public",
            "round_media",
        ):
            getattr(self, name)

    @property
    def problems(self) -> list[Problem]:
        """Every problem of this round's files (loads all of them; episodes only if opened)."""
        self.load_all()
        return _dedupe(self._problems)


# --------------------------------------------------------------------------- the case
class CaseBundle(_Loader):
    """A case folder (search root or single run). Everything is lazy and cached."""

    def __init__(self, root: Path, *, path_map: PathMap | None = None) -> None:
        self.root = root
        self.path_map = path_map or PathMap()
        self._problems = []
        self._stores: dict[str, RuntimeStore | None] = {}
        self._feedback: dict[int, FeedbackObject | None] = {}
        self._trace: tuple[SourceTrace | None, list[Problem]] | None = None
        self.layout = LAYOUT_UNKNOWN
        try:
            self.layout = self._detect()
        except Exception as exc:  # noqa: BLE001 - recorded as a Problem
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(root), message=f"layout detection failed: {type(exc).__name__}"))
        if self.layout == LAYOUT_SLATE:
            self._add(
                Problem(code=ProblemCode.UNSUPPORTED_LAYOUT, path=str(root), message="slate search layout (--search-mode slate) is not supported")
            )
        elif self.layout == LAYOUT_UNKNOWN:
            self._add(Problem(code=ProblemCode.UNSUPPORTED_LAYOUT, path=str(root), message="no PSD run or search files found here"))

    def __repr__(self) -> str:  # pragma: no cover
        return f"CaseBundle({str(self.root)!r}, layout={self.layout!r})"

    # ---------------------------------------------------------------- layout
    def _detect(self) -> str:
        root = self.root
        if not root.is_dir():
            self._add(Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(root), message="case folder not found"))
            return LAYOUT_UNKNOWN
        if _exists(root / "slate-state.json") or (root / "slate-rounds").is_dir():
            return LAYOUT_SLATE
        if _exists(root / "search-state.json"):
            return LAYOUT_FEEDBACK_SEARCH
        if _exists(root / "run-inputs.json"):
            return LAYOUT_SINGLE_RUN
        schema, status = self._peek_manifest()
        if schema == SCHEMA_FEEDBACK_SEARCH:
            return LAYOUT_FEEDBACK_SEARCH
        if schema == SCHEMA_RUN_RESULT or status in RUN_STATUSES:
            return LAYOUT_SINGLE_RUN
        if (root / "rounds").is_dir() and ((root / "requests").is_dir() or (root / "round-inputs").is_dir()):
            return LAYOUT_FEEDBACK_SEARCH
        if _exists(root / "hint-proposals.json") or _jsonl_path(root, "repair_attempts") or (root / "continuations").is_dir():
            return LAYOUT_SINGLE_RUN
        if _exists(root / "manifest.json") and (root / "rounds").is_dir():
            return LAYOUT_FEEDBACK_SEARCH
        if _exists(root / "manifest.json"):
            return LAYOUT_SINGLE_RUN
        return LAYOUT_UNKNOWN

    def _peek_manifest(self) -> tuple[Any, Any]:
        path = self.root / "manifest.json"
        if not _exists(path) or check_regular_file(path, root=self.root) is not None:
            return None, None
        raw, _ = read_json(path)  # problems are reported by .manifest
        if isinstance(raw, dict):
            return raw.get("schema_version"), raw.get("status")
        return None, None

    def reloaded(self) -> "CaseBundle":
        """A fresh bundle of the same folder (this one is a cached snapshot)."""
        return load_case(self.root, path_map=self.path_map)

    @property
    def is_search(self) -> bool:
        return self.layout == LAYOUT_FEEDBACK_SEARCH

    # ---------------------------------------------------------------- wrapper
    @functools.cached_property
    def wrapper_root(self) -> Path | None:
        """``<out>`` when this search root is ``<out>/repairs/<key>/`` of a multi-case wrapper."""
        parent = self.root.parent
        if parent.name == "repairs" and (parent.parent / "case-inputs").is_dir():
            return parent.parent
        return None

    @property
    def case_inputs_dir(self) -> Path | None:
        if self.wrapper_root is None:
            return None
        path = self.wrapper_root / "case-inputs" / self.root.name
        return path if path.is_dir() else None

    @property
    def boundary(self) -> Path:
        """Referenced paths must resolve under this folder (the wrapper root, else the case root)."""
        return self.wrapper_root or self.root

    # ---------------------------------------------------------------- root files
    @_guarded(lambda: None)
    def manifest(self) -> SearchManifest | RunManifest | None:
        path = self.root / "manifest.json"
        raw = self._json(path)
        if raw is None:
            return None
        if self.layout == LAYOUT_FEEDBACK_SEARCH:
            return self._model(SearchManifest, raw, path, "search manifest")
        return self._model(RunManifest, raw, path, "run manifest")

    @_guarded(lambda: None)
    def _search_state_bound(self) -> tuple[Any, Any] | None:
        if self.layout != LAYOUT_FEEDBACK_SEARCH:
            return None
        return self._bound(self.root / "search-state.json")

    @_guarded(lambda: None)
    def search_state(self) -> SearchState | None:
        got = self._search_state_bound
        if not got:
            return None
        return self._model(SearchState, got[1], self.root / "search-state.json", "search-state payload")

    @_guarded(lambda: None)
    def search_identity(self) -> SearchIdentity | None:
        got = self._search_state_bound
        if not got:
            return None
        return self._model(SearchIdentity, got[0], self.root / "search-state.json", "search-state identity")

    @_guarded(lambda: None)
    def slate_state(self) -> Any:
        if self.layout != LAYOUT_SLATE:
            return None
        got = self._bound(self.root / "slate-state.json")
        return got[1] if got else None

    @property
    def status(self) -> str:
        manifest = self.manifest
        if manifest is not None and isinstance(manifest.status, str):
            return manifest.status
        state = self.search_state
        if state is not None and isinstance(state.status, str):
            return state.status
        slate = self.slate_state
        status = slate.get("status") if isinstance(slate, dict) else None
        return status if isinstance(status, str) else "unreadable"

    @_guarded(list)
    def rounds(self) -> list[RoundBundle]:
        if self.layout == LAYOUT_SINGLE_RUN:
            return [RoundBundle(self, 0, self.root, kind="single")]
        if self.layout != LAYOUT_FEEDBACK_SEARCH:
            return []
        found: list[tuple[int, Path]] = []
        try:
            entries = list((self.root / "rounds").iterdir())
        except OSError:
            entries = []
        for entry in entries:
            m = ROUND_DIR_RE.match(entry.name)
            if m and entry.is_dir():
                found.append((int(m.group(1)), entry))
        found.sort()
        return [RoundBundle(self, n, d) for n, d in found]

    def round(self, index: int) -> RoundBundle | None:
        for r in self.rounds:
            if r.index == index:
                return r
        return None

    @property
    def latest_round(self) -> RoundBundle | None:
        return self.rounds[-1] if self.rounds else None

    def request_indices(self) -> list[int]:
        """Round indices that have a ``requests/round-NN.json`` or ``round-inputs/round-NN``."""
        found: set[int] = set()
        for sub in ("requests", "round-inputs"):
            try:
                for entry in (self.root / sub).iterdir():
                    m = ROUND_DIR_RE.match(entry.name.removesuffix(".json"))
                    if m:
                        found.add(int(m.group(1)))
            except OSError:
                continue
        return sorted(found)

    def pending_round_indices(self) -> list[int]:
        """Rounds whose inputs are written but whose ``rounds/round-NN`` does not exist yet."""
        have = {r.index for r in self.rounds}
        return [i for i in self.request_indices() if i not in have]

    @_guarded(list)
    def attempts(self) -> list[AttemptRecord]:
        if self.layout == LAYOUT_FEEDBACK_SEARCH:
            return self._rows(AttemptRecord, self.root, "repair_attempts") or []
        if self.layout == LAYOUT_SINGLE_RUN:
            return self.rounds[0].attempts or []
        return []

    @_guarded(list)
    def candidates(self) -> list[Candidate]:
        if self.layout == LAYOUT_FEEDBACK_SEARCH:
            return self._rows(Candidate, self.root, "repair_candidates") or []
        if self.layout == LAYOUT_SINGLE_RUN:
            return self.rounds[0].candidates or []
        return []

    def feedback_for(self, round_index: int) -> FeedbackObject | None:
        """The feedback object given to round NN: ``requests/round-NN.json`` payload, else
        ``round-inputs/round-NN/public.json`` ``repair_search``."""
        if round_index in self._feedback:
            return self._feedback[round_index]
        result: FeedbackObject | None = None
        try:
            path = self.root / "requests" / f"{_round_name(round_index)}.json"
            got = self._bound(path)
            if got is not None and got[1] is not None:
                result = self._model(FeedbackObject, got[1], path, "feedback request")
            if result is None:
                public_path = self.root / "round-inputs" / _round_name(round_index) / "public.json"
                raw, _ = read_json(public_path) if _exists(public_path) and self._readable(public_path) else (None, [])
                if isinstance(raw, dict) and isinstance(raw.get("repair_search"), dict):
                    result, _ = parse_model(FeedbackObject, raw["repair_search"], str(public_path))
        except Exception as exc:  # noqa: BLE001 - recorded as a Problem
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(self.root / "requests"), message=f"feedback: {type(exc).__name__}"))
        self._feedback[round_index] = result
        return result

    # ---------------------------------------------------------------- identity / inputs
    @property
    def run_inputs(self) -> RunInputs | None:
        """The first round's (or the single run's) run inputs."""
        for r in self.rounds:
            ri = r.run_inputs
            if ri is not None:
                return ri
        return None

    @property
    def case_id(self) -> str | None:
        for c in self.candidates:
            if c.case_id:
                return c.case_id
        for a in self.attempts:
            if a.case_id:
                return a.case_id
        return None

    # ---------------------------------------------------------------- paths (artifacts.paths)
    @functools.cached_property
    def paths(self) -> PathResolver:
        """The path resolver of this case, told where the driver wrote the tree (the
        search / run ``output_dir``, search-state ``rounds[].directory``, manifest
        ``rounds``, each round's ``output_dir``) so a moved copy resolves like the original."""
        resolver = PathResolver(str(self.root), boundary=str(self.boundary), path_map=self.path_map)
        try:
            self._tell_written_location(resolver)
        except Exception as exc:  # noqa: BLE001 - loaders never raise
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(self.root), message=f"cannot infer where the tree was written: {type(exc).__name__}"))
        return resolver

    def _tell_written_location(self, resolver: PathResolver) -> None:
        ident = self.search_identity
        if ident is not None and isinstance(ident.inputs, dict):
            self._root_written_at(resolver, ident.inputs.get("output_dir"))
        if self.layout == LAYOUT_FEEDBACK_SEARCH:
            self._tell_round_locations(resolver)
        elif self.layout == LAYOUT_SINGLE_RUN:
            ri = self.rounds[0].run_inputs if self.rounds else None
            if ri is not None:
                self._root_written_at(resolver, ri.output_dir)
        if not resolver.knows_written_location:
            self._tell_media_locations(resolver)

    def _root_written_at(self, resolver: PathResolver, recorded: Any) -> None:
        """The case root was written at ``recorded`` (and, for ``<out>/repairs/<key>``,
        the wrapper at ``<out>``)."""
        if not resolver.add_written(recorded, str(self.root)) or self.wrapper_root is None:
            return
        suffix = f"/repairs/{self.root.name}"
        rec = str(recorded).rstrip("/")
        if rec.endswith(suffix):
            resolver.add_written(rec[: -len(suffix)], str(self.wrapper_root))

    def _tell_round_locations(self, resolver: PathResolver) -> None:
        """A search's recorded round directories (search-state rows, then the manifest),
        the search root above them, and each round's own ``output_dir``."""
        got = self._search_state_bound
        payload = got[1] if got else None
        rows = payload.get("rounds") if isinstance(payload, dict) else None
        dirs: list[Any] = [r.get("directory") for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        manifest = self.manifest
        if isinstance(manifest, SearchManifest):
            dirs.extend(manifest.rounds)
        for d in dirs:
            name = d.rstrip("/").rsplit("/", 1)[-1] if isinstance(d, str) and d.startswith("/") else ""
            if not ROUND_DIR_RE.match(name):
                continue
            resolver.add_written(d, str(self.root / "rounds" / name))
            parent = d.rstrip("/").rsplit("/", 1)[0]
            if parent.endswith("/rounds"):
                self._root_written_at(resolver, parent[: -len("/rounds")])
        for r in self.rounds:
            ri = r.run_inputs
            if ri is not None:
                resolver.add_written(ri.output_dir, str(r.dir))

    def _tell_media_locations(self, resolver: PathResolver) -> None:
        """A relative --output-dir: the absolute psd_media image paths still say where
        each run was written (only then: they are no better evidence than output_dir)."""
        for r in self.rounds:
            for a in r.attempts or []:
                media = a.psd_media if isinstance(a.psd_media, dict) else {}
                for d in run_dirs_from_media(media.get("image_paths")):
                    resolver.add_written(d, str(r.dir))

    def _input_binding(self, name: str) -> tuple[str | None, str | None, str]:
        """(recorded path, recorded sha256, the file that binds it) of input ``name``:
        the search identity ``inputs``, else the first round's / the run's run-inputs."""
        ident = self.search_identity
        if ident is not None and isinstance(ident.inputs, dict):
            value = ident.inputs.get(name)
            if isinstance(value, dict) and isinstance(value.get("path"), str):
                sha = value.get("sha256")
                return value["path"], sha if isinstance(sha, str) else None, "search-state.json"
            if isinstance(value, str):
                return value, None, "search-state.json"
        for r in self.rounds:
            ri = r.run_inputs
            if ri is None:
                continue
            b = ri.binding(name)
            if b is not None and b.path:
                rel = os.path.relpath(r.dir / "run-inputs.json", self.root)
                sha = b.sha256 if ri.candidate_offset is None or name != "trace" else None
                return b.path, sha, rel
            break
        return None, None, ""

    _CASE_INPUT_FILES: dict[str, tuple[str, ...]] = {
        "trace": ("trace.json", "source-trace.json"),
        "candidate": ("candidate.json",),
        "gold": ("gold.json",),
        "public_context": ("public.json",),
        "private_context": ("private.json",),
    }

    def input_found(self, name: str) -> Found | None:
        """Where bound input ``name`` is (``paths.PathResolver.bound_input``), else the
        wrapper's ``case-inputs/<key>/`` copy. None when the case binds no such input."""
        cache: dict[str, Found | None] = self.__dict__.setdefault("_input_found", {})
        if name in cache:
            return cache[name]
        recorded, _sha, referrer = self._input_binding(name)
        found: Found | None = None
        if recorded and referrer == "search-state.json":
            found = self.paths.bound_input(recorded, want="file")
        if (found is None or not found.ok) and self.case_inputs_dir is not None:
            # the wrapper's copy of the case's own inputs comes before a round's bindings
            # (a round's public_context is its round-inputs file, with the feedback in it)
            for fname in self._CASE_INPUT_FILES.get(name, ()):
                cand = self.case_inputs_dir / fname
                if cand.is_file():
                    found = Found(recorded or str(cand), "ok", str(cand), RULE_CASE_INPUTS, "", (str(cand),))
                    break
        if found is None and recorded:
            bases = [str((self.root / referrer).parent)] if referrer else []
            found = self.paths.bound_input(recorded, bases=bases, want="file")
        cache[name] = found
        return found

    def input_path(self, name: str) -> Path | None:
        """The local path of bound input ``name`` when it was found, else None."""
        found = self.input_found(name)
        return Path(found.path) if found is not None and found.ok and found.path else None

    def _input_readable(self, path: Path) -> bool:
        """Inputs are read wherever they are: no root check, but never a FIFO or device."""
        bad = check_regular_file(path)
        if bad is not None:
            self._add(bad)
            return False
        return True

    @_guarded(lambda: None)
    def source_trace_path(self) -> Path | None:
        """The source trace: run-inputs / search identity ``trace`` binding, else the
        manifest ``trace`` (possibly relative to the driver's working directory), else the
        candidate's ``source.source_trace_path``, else the wrapper's case inputs. A trace
        that is referenced but found nowhere gives one ``missing_artifact`` problem saying
        where it was recorded and where it was looked for."""
        found = self.input_found("trace")
        if found is not None and found.ok and found.path:
            return Path(found.path)
        misses: list[tuple[str, Found]] = []
        if found is not None:
            misses.append((self._input_binding("trace")[2] or "run-inputs.json", found))
        for r in self.rounds:
            m = r.manifest
            if m is not None and m.trace_path:
                got = self.paths.bound_input(m.trace_path, bases=[str(r.dir)], want="file")
                if got.ok and got.path:
                    self.__dict__.setdefault("_trace_rule", ("manifest.json", got))
                    return Path(got.path)
                misses.append((os.path.relpath(r.dir / "manifest.json", self.root), got))
                break
        for c in self.candidates:
            if c.source is not None and c.source.source_trace_path:
                got = self.paths.bound_input(c.source.source_trace_path, want="file")
                if got.ok and got.path:
                    self.__dict__.setdefault("_trace_rule", ("repair_candidates.jsonl", got))
                    return Path(got.path)
                misses.append(("repair_candidates.jsonl", got))
                break
        if misses:
            referrer, miss = misses[0]
            code = ProblemCode.JSON_INVALID if miss.outcome == "invalid" else ProblemCode.MISSING_ARTIFACT
            where = miss.looked_at[0] if miss.looked_at else str(self.root)
            problem = Problem(code=code, path=where, message=missing_input_message("source trace", referrer, miss))
            self.__dict__["_trace_missing"] = problem
            self._add(problem)
        return None

    def input_provenance(self, *, verify: bool = False) -> list[InputProvenance]:
        """Every bound input of the case and where it was found (for the case screen):
        what, recorded path, found path, the rule that found it, inside/outside the root,
        sha status (``verify``: hash each found file against its binding; otherwise a
        bound one is ``unverified``). The source rollout's runtime archive is listed when
        the source trace is loaded. Never raises."""
        out: list[InputProvenance] = []
        try:
            names = [n for n in RunInputs.FILE_ARGUMENTS if self._input_binding(n)[0]]
            if "trace" not in names and self.source_trace_path is not None:
                names.insert(0, "trace")
            for name in names:
                recorded, sha, referrer = self._input_binding(name)
                found = self.input_found(name)
                if name == "trace" and (found is None or not found.ok):
                    alt = self.__dict__.get("_trace_rule")
                    if alt is not None:
                        referrer, found = alt
                status = None
                if verify and sha and found is not None and found.ok and found.path:
                    try:
                        status = "verified" if sha256_file(found.path) == sha.lower() else "mismatch"
                    except OSError:
                        status = "unreadable"
                out.append(input_provenance(name, referrer, recorded, found, resolver=self.paths, sha256=sha, sha_status=status))
            trace = self._trace[0] if self._trace else None
            desc = trace.runtime_store if trace is not None else None
            if desc is not None and desc.runtime_path:
                near = [str(trace.path.parent)] if trace is not None and trace.path is not None else []
                found = self.paths.source(desc.runtime_path, near=near)
                out.append(
                    input_provenance("source_runtime", "source trace state.runtime_store", desc.runtime_path, found,
                                     resolver=self.paths, what="source runtime archive", sha_status="unbound" if found.ok else "missing")
                )
        except Exception as exc:  # noqa: BLE001 - a view of the inputs never raises
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(self.root), message=f"input provenance: {type(exc).__name__}"))
        return out

    def trace(
        self, *, spool_dir: str | os.PathLike[str] | None = None, foreign: ForeignIndex | None = None
    ) -> tuple[SourceTrace | None, list[Problem]]:
        """The source trace, loaded once (lazy; a big one is indexed, see
        ``artifacts.trace.load_trace``; ``spool_dir`` takes a gzip trace's decompressed
        copy: the app's work directory, never the case; ``foreign``: its index built
        elsewhere, used when it is of the file opened)."""
        if self._trace is None:
            path = self.source_trace_path
            if path is None:
                # a referenced but unreachable trace says where it was looked for
                missing = self.__dict__.get("_trace_missing")
                self._trace = (None, [missing] if missing is not None else [])
            else:
                try:
                    trace, problems = load_trace(path, spool_dir=spool_dir, foreign=foreign)
                except Exception as exc:  # noqa: BLE001 - recorded as a Problem
                    trace, problems = None, [Problem(code=ProblemCode.JSON_INVALID, path=str(path), message=f"trace: {type(exc).__name__}")]
                self._extend(problems)
                self._trace = (trace, problems)
        return self._trace

    def adopt_trace(self, trace: SourceTrace, problems: list[Problem] | None = None) -> None:
        """Use an already parsed trace of this case (a reload after a live update keeps the
        parse of a trace that may be hundreds of megabytes) instead of reading it again."""
        self._trace = (trace, list(problems or []))

    @_guarded(lambda: None)
    def private_context(self) -> Any:
        """The raw private context (privileged!) if its input file is reachable, else None."""
        path = self.input_path("private_context")
        if path is None or not self._input_readable(path):
            return None
        raw, problems = read_json(path)
        self._extend(problems)
        return raw

    @_guarded(lambda: None)
    def public_context(self) -> Any:
        """The original public context: the search input, else the wrapper's
        ``case-inputs/<key>/public.json``, else the run's ``public_context`` input (for a
        feedback round that is ``round-inputs/round-00/public.json``, with ``repair_search``)."""
        path = self.input_path("public_context")
        if path is None or not self._input_readable(path):
            return None
        raw, problems = read_json(path)
        self._extend(problems)
        return raw

    # ---------------------------------------------------------------- failure site
    def failure_site(self) -> FailureSite | None:
        """The current failure site: the latest round's attempt ``repair_site``, else its
        candidate's ``repair_site`` / ``failure_localization``; rounds are walked newest
        first, then the root ledgers. None when no site is known."""
        try:
            for r in reversed(self.rounds):
                site = r.failure_site()
                if site is not None:
                    return site
            return site_from_attempts(self.attempts) or site_from_candidates(self.candidates)
        except Exception as exc:  # noqa: BLE001 - recorded as a Problem; the case then has no known site
            self._add(Problem(code=ProblemCode.JSON_INVALID, path=str(self.root), message=f"failure site: {type(exc).__name__}"))
            return None

    # ---------------------------------------------------------------- runtime
    def runtime_store_for(
        self, store_path: str | os.PathLike[str] | None, *, trace_dir: Path | None = None, source: bool = False
    ) -> RuntimeStore | None:
        """The runtime store a (possibly relative) ``runtime_path`` names; None (with a
        problem recorded) when it cannot be found or, for a store the run wrote, leaves the
        case root. ``source``: the store belongs to the source rollout (the trace's
        ``state.runtime_store``, a site's ``runtime_store_path``) and is read where it is;
        otherwise it is one of the run's own ``runtime/`` dirs and must be inside the
        root. Cached per (path, kind)."""
        if store_path is None:
            return None
        key = ("source:" if source else "written:") + os.fspath(store_path)
        if key in self._stores:
            return self._stores[key]
        text = os.fspath(store_path)
        store: RuntimeStore | None = None
        if source:
            near = [str(trace_dir)] if trace_dir is not None else []
            tr = self._trace[0] if self._trace else None
            if tr is not None and tr.path is not None:
                near.append(str(tr.path.parent))
            found = self.paths.source(text, near=near)
            if found.ok and found.path:
                store = RuntimeStore(found.path)
            else:
                self._add(
                    Problem(
                        code=ProblemCode.JSON_INVALID if found.outcome == "invalid" else ProblemCode.MISSING_ARTIFACT,
                        path=found.looked_at[0] if found.looked_at else text[:300],
                        message=missing_input_message("source runtime archive", "the source trace", found),
                    )
                )
        else:
            found = self.paths.written(text, base=str(trace_dir) if trace_dir is not None else None, cwd=True)
            if found.outcome in ("outside", "unmapped"):
                self._add(Problem(code=ProblemCode.PATH_OUTSIDE_ROOT, path=text[:300], message=f"runtime path resolves outside the case root {self.boundary}; not read"))
            elif found.ok and found.path and os.path.isdir(found.path):
                store = RuntimeStore(found.path)
            elif found.ok:
                self._add(Problem(code=ProblemCode.MISSING_ARTIFACT, path=found.path or text[:300], message=f"runtime store {text[:200]} not found in the case"))
        self._stores[key] = store
        return store

    def source_runtime_store(self) -> RuntimeStore | None:
        """The source trace's runtime store (``state.runtime_store.runtime_path``, else the
        candidate's ``source_runtime_store_path`` / site ``runtime_store_path``), read
        where it is (the source rollout, ``artifacts.paths`` rule 2)."""
        values: list[str] = []
        trace, _ = self.trace()
        if trace is not None:
            desc = trace.runtime_store
            if desc is not None and desc.runtime_path:
                values.append(desc.runtime_path)
        for c in self.candidates:
            if c.source is not None and c.source.source_runtime_store_path:
                values.append(c.source.source_runtime_store_path)
            if c.repair_site is not None and c.repair_site.runtime_store_path:
                values.append(c.repair_site.runtime_store_path)
        for value in values:
            store = self.runtime_store_for(value, source=True)
            if store is not None:
                return store
        return None

    def source_step_request(self, index: int) -> tuple[ArchivedRequest | None, list[Problem]]:
        """The archived request of source step ``index`` (the failure step's exact request):
        from the source runtime store by ``context_request_id``, else rebuilt from the step's
        ``metadata.policy_input``."""
        trace, problems = self.trace()
        if trace is None:
            return None, problems or [Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(self.root), message="source trace not found")]
        try:
            step = trace.step(index)
        except IndexError:
            return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(trace.path), message=f"no step {index} in the trace")]
        store = self.source_runtime_store()
        found: list[Problem] = []
        if store is not None and step.context_request_id:
            req, found = store.reconstruct_request(step.context_request_id)
            if req is not None:
                return req, found
        req, more = request_from_policy_input(step.metadata.policy_input, store=store, request_id=step.context_request_id)
        return req, found + more

    # ---------------------------------------------------------------- problems
    def load_root(self) -> None:
        for name in ("manifest", "search_state", "search_identity", "attempts", "candidates", "rounds", "slate_state"):
            getattr(self, name)
        for i in self.request_indices():
            self.feedback_for(i)

    @property
    def problems(self) -> list[Problem]:
        """Problems of the root files plus whatever has been loaded so far (rounds, trace)."""
        self.load_root()
        out = list(self._problems)
        for r in self.rounds:
            out.extend(r._problems)
        return _dedupe(out)

    def all_problems(self, *, include_trace: bool = True) -> list[Problem]:
        """Load everything (every round's files, and the source trace) and return every problem."""
        self.load_root()
        for r in self.rounds:
            r.load_all()
        _ = self.source_trace_path, self.private_context  # reading these properties records their problems
        if include_trace:
            self.trace()
        return self.problems


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for p in problems:
        key = (str(p.code), p.path, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def site_from_attempts(attempts: list[AttemptRecord]) -> FailureSite | None:
    """The site of the last attempt that has a ``repair_site`` (None if none)."""
    for a in reversed(attempts):
        s = a.repair_site
        if s is not None and (s.source_step_index is not None or s.step_id):
            return FailureSite(
                step_id=s.step_id or a.repair_step_id,
                stage=s.stage,
                source_step_index=s.source_step_index,
                localization_kind=s.localization_kind,
                semantic_category=s.semantic_category,
                localization_verifier=s.localization_verifier,
                context_request_id=s.context_request_id,
                runtime_store_path=s.runtime_store_path,
                origin="attempt",
            )
    return None


_SIGNAL_KIND = {
    "protocol_rejection": "runtime_action_failure",
    "strict_trace_audit_failure": "strict_trace_audit",
}


def site_from_candidates(candidates: list[Candidate]) -> FailureSite | None:
    """The site of the last candidate with a ``repair_site`` or ``failure_localization`` anchor."""
    for c in reversed(candidates):
        s = c.repair_site
        fl = c.failure_localization
        step_id = (s.step_id if s else None) or (fl.repair_anchor_step_id if fl else None)
        index = s.source_step_index if s and s.source_step_index is not None else (fl.repair_anchor_source_step_index if fl else None)
        if step_id is None and index is None:
            continue
        kind = s.localization_kind if s else None
        if kind is None:
            signal = c.repair_signal or (fl.repair_signal if fl else None)
            kind = _SIGNAL_KIND.get(signal or "")
        return FailureSite(
            step_id=step_id,
            stage=s.stage if s else None,
            source_step_index=index,
            localization_kind=kind,
            semantic_category=s.semantic_category if s else None,
            localization_verifier=s.localization_verifier if s else None,
            context_request_id=s.context_request_id if s else None,
            runtime_store_path=s.runtime_store_path if s else None,
            origin="candidate",
        )
    return None


def _enrich_from_semantic(site: FailureSite, loc: SemanticLocalization | None) -> FailureSite:
    if loc is None or loc.passed is not True:
        return site
    chosen = loc.selected_candidate()
    if chosen is None or chosen.source_step_index != site.source_step_index:
        return site
    update: dict[str, Any] = {}
    if site.localization_kind is None:
        update["localization_kind"] = "semantic_task_verifier"
    if site.semantic_category is None and chosen.category:
        update["semantic_category"] = chosen.category
    if site.localization_verifier is None and chosen.verifier is not None:
        update["localization_verifier"] = chosen.verifier.label() or None
    return site.model_copy(update=update) if update else site


def load_case(path: str | os.PathLike[str], *, path_map: PathMap | None = None) -> CaseBundle:
    """Open a case folder. Never raises; never writes; everything is read lazily.

    ``path_map``: explicit ``OLD=NEW`` mappings for inputs copied elsewhere (``--path-map``,
    the config file's ``[paths] map``); see :mod:`eviscene_tui.artifacts.paths`."""
    try:
        root = Path(path).resolve()
    except (OSError, RuntimeError, TypeError, ValueError):
        root = Path(str(path))
    return CaseBundle(root, path_map=path_map)


__all__ = [
    "CaseBundle",
    "RoundBundle",
    "load_case",
    "site_from_attempts",
    "site_from_candidates",
    "LAYOUT_FEEDBACK_SEARCH",
    "LAYOUT_SINGLE_RUN",
    "LAYOUT_SLATE",
    "LAYOUT_UNKNOWN",
]
