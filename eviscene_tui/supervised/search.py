"""The operator-gated feedback search, written in the driver's format.

Layout (default ``<root>.eviscene-tui/supervised/<case-key>/``; nothing is
written into the driver's root)::

    search-state.json                 bound; identity {"version", "inputs", budgets}; payload {status, elapsed_seconds, rounds}
    manifest.json                     search manifest (§2.14)
    repair_attempts.jsonl             aggregate of every round's records (absolute episode paths)
    repair_candidates.jsonl           candidates merged by candidate_id
    requests/round-NN.json            bound; identity {"search": sha(search identity), "round": NN}; payload = feedback
    round-inputs/round-NN/public.json {...public context, "repair_search": feedback}
    round-inputs/round-NN/media.json  {"episodes": [{path, sha256}]} of earlier teacher episodes
    round-inputs/round-NN/semantic-localization.json   the localization input bound by run-inputs (when any)
    rounds/round-NN/                  run-inputs.json (bound), semantic-localization.json, repair_candidates.jsonl,
                                      manifest.json, proposer-response.json (bound, when fetched),
                                      proposer-hint-audits.json, hint-proposals.json (bound list),
                                      continuations/hint-00.json (bound), episodes/hint-00-teacher.json,
                                      repair_attempts.jsonl, live-serving-check.json, judge/hint-00.json,
                                      gemini-verification-bundle.json, media/<sha>.image

Its journal: ``<workdir>/supervised/<case-key>.decisions.jsonl`` (beside the
root, so the root looks exactly like a driver root). Evidence paths in the
journal are relative to the supervised root.

Gates, in order, per round: :meth:`begin_round` (after the operator saw
:meth:`preview_feedback`) -> site (:meth:`accept_site` | :meth:`relocalize`) ->
hints (:meth:`fetch_proposals`, :meth:`add_operator_hint`, :meth:`approve_hint`,
:meth:`reject_hint`) -> :meth:`run_continuation` -> verdict
(:meth:`approve_attempt` | :meth:`reject_attempt` | :meth:`relocalize`).
Every operator action is journaled (one write + fsync) before its files are written.

Writes: write-once files with ``storage.write_new_file``; the state files the
driver rewrites (search-state, manifests, ledgers, audits, judge,
live-serving-check) with ``storage.replace_file``; all through a ``WorkDir``
that refuses paths inside the driver's root.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eviscene_tui.artifacts.jsonio import (
    canonical_jsonl_bytes,
    canonical_sha256,
    encode_bound,
    hint_sha256,
    pretty_json_bytes,
    read_bound,
    read_json,
    read_jsonl,
    sha256_file,
)
from eviscene_tui.journal import Journal, JournalReadOnly, case_key, evidence_for, supervised_journal_for_root, supervised_root_path
from eviscene_tui.storage import WorkDir
from eviscene_tui.supervised import records as R
from eviscene_tui.supervised.audit import audit_hint, driver_audit
from eviscene_tui.supervised.continuation import ContinuationJob, ContinuationOutcome, ContinuationRunner
from eviscene_tui.supervised.feedback import (
    CHECK_NAMES,
    TERMINAL_STATUSES,
    Budgets,
    next_feedback,
    next_stop,
    no_further_hint,
    round_feedback,
)
from eviscene_tui.supervised.hints import HintFetchError, build_prompt, fetch_hints, parse_hints, prompt_identity
from eviscene_tui.supervised.source import SupervisedInputs

if TYPE_CHECKING:
    from eviscene_tui.artifacts.case import CaseBundle
    from eviscene_tui.options import AppOptions

SEARCH_VERSION = R.SEARCH_SCHEMA
OPERATOR_RELOCALIZATION_REASON = "operator_relocalization"
OPERATOR_REJECTED_REASON = "operator_rejected"
# A stop is written as the driver records any exception that ends a round early, with the
# exception type the driver gate raises: ``paused_execution_error`` + ``execution_error.type``.
PAUSED_EXECUTION_ERROR = "paused_execution_error"
OPERATOR_STOPPED = "OperatorStoppedSearch"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SearchError(RuntimeError):
    """An operator action that is not possible now (message says why)."""


@dataclass
class Proposal:
    index: int
    text: str
    level: int
    provider: str
    model: str
    audit: dict[str, Any]
    status: str = "pending"  # pending | approved | rejected
    reason: str = ""
    event_id: str | None = None

    @property
    def hint_sha256(self) -> str:
        return hint_sha256(self.text)

    @property
    def passed(self) -> bool:
        return bool(self.audit.get("passed"))

    def driver_row(self, site_step_id: str) -> dict[str, Any]:
        return {
            "text": self.text,
            "level": self.level,
            "proposal_id": R.proposal_id_for(site_step_id, self.text, self.level),
            "provider": self.provider,
            "model": self.model,
            "audit": driver_audit(self.audit),
        }

    def audit_row(self) -> dict[str, Any]:
        if self.status == "rejected" and self.passed:
            return {"passed": False, "reason": OPERATOR_REJECTED_REASON}
        if not self.passed:
            return {"passed": False, "reason": self.audit.get("reason") or "hint_audit_failed"}
        return {"passed": True, "audit": driver_audit(self.audit)}


@dataclass
class RoundDraft:
    index: int
    dir: Path
    feedback: dict[str, Any]
    site: dict[str, Any]
    candidate: dict[str, Any]
    config: dict[str, Any]
    stage: str = "site"  # site | hints | continuation | verdict | closed
    started: float = field(default_factory=time.monotonic)
    proposals: list[Proposal] = field(default_factory=list)
    prompt: list[dict[str, Any]] | None = None
    proposer_called: bool = False
    approved: Proposal | None = None
    record: dict[str, Any] | None = None
    episode: dict[str, Any] | None = None
    outcome: ContinuationOutcome | None = None
    retries: int = 0
    relocalization_requested: bool = False
    earlier_audit_rows: list[dict[str, Any]] = field(default_factory=list)  # rows already on disk (resume)

    @property
    def name(self) -> str:
        return R.round_name(self.index)


@dataclass
class SearchSettings:
    operator: str = "operator"
    policy_model: str | None = None
    policy_base_url: str | None = None
    policy_profile: Path | None = None
    policy_temperature: float = 0.7
    hint_url: str | None = None
    hint_model: str | None = None
    hint_count: int = 3
    hint_level: int = 1


class SupervisedSearch:
    """One supervised search root and its journal."""

    def __init__(
        self,
        root: Path,
        inputs: SupervisedInputs,
        *,
        settings: SearchSettings,
        budgets: Budgets,
        work: WorkDir,
        journal: Journal,
    ) -> None:
        self.root = root
        self.inputs = inputs
        self.settings = settings
        self.budgets = budgets
        self.work = work
        self.journal = journal
        self.identity = self._search_identity()
        self.state: dict[str, Any] = {"status": "searching", "elapsed_seconds": 0.0, "rounds": [], "execution_error": None}
        self.draft: RoundDraft | None = None
        self.messages: list[str] = []
        self.site_note: str | None = None

    # ================================================================ opening
    @classmethod
    def start(
        cls,
        inputs: SupervisedInputs,
        workdir: str | Path,
        *,
        settings: SearchSettings | None = None,
        budgets: Budgets | None = None,
        root: str | Path | None = None,
        site_note: str | None = None,
    ) -> "SupervisedSearch":
        """Create (or reopen) the supervised root for ``inputs`` in ``workdir``.

        ``site_note``: when the operator chose the starting step (a case with no
        recoverable site), the note is journaled as a ``relocalize`` decision."""
        settings = settings or SearchSettings()
        budgets = budgets or Budgets()
        evidence: list[str | os.PathLike[str]] = [inputs.source_root] if inputs.source_root is not None else []
        work = WorkDir(workdir, evidence_roots=evidence)
        sroot = Path(root) if root is not None else supervised_root_path(work.path, case_key(inputs.label))
        sroot = work.guard(sroot)
        journal = Journal(supervised_journal_for_root(work.guard(sroot)), operator=settings.operator)
        search = cls(sroot, inputs, settings=settings, budgets=budgets, work=work, journal=journal)
        fresh = not (sroot / "search-state.json").exists()
        search.site_note = site_note
        search._open()
        if fresh and site_note and not search.read_only:
            search.journal.append(
                "relocalize",
                target={"case": inputs.label, "round": 0, "step_index": inputs.site.get("source_step_index")},
                reason=site_note,
                evidence=evidence_for([inputs.trace_path], sroot),
                data={"from_source_step": None, "to_source_step": inputs.site.get("source_step_index"), "initial_site": True},
            )
        return search

    @classmethod
    def for_case(
        cls,
        case: CaseBundle,
        options: AppOptions,
        *,
        label: str | None = None,
        source_step_index: int | None = None,
        site_note: str | None = None,
        budgets: Budgets | None = None,
        settings: SearchSettings | None = None,
    ) -> "SupervisedSearch":
        """Start from a ``CaseBundle`` and the app's ``AppOptions``.

        ``label`` defaults to the case path relative to ``options.root``; budgets come
        from the ``[supervised]`` table of the config file (driver defaults otherwise)."""
        import os

        from eviscene_tui.supervised.feedback import budgets_from_settings
        from eviscene_tui.supervised.source import inputs_from_case

        if label is None:
            rel = os.path.relpath(os.path.abspath(case.root), os.path.abspath(options.root))
            label = rel if not rel.startswith("..") else str(case.root)
        inputs = inputs_from_case(case, label=label, source_step_index=source_step_index)
        settings = settings or SearchSettings(
            operator=options.operator or "operator",
            policy_model=options.policy_model,
            policy_base_url=options.policy_url,
            policy_profile=options.policy_profile,
            # the temperature the continuation is sampled at, as the run inputs record it
            policy_temperature=options.settings.policy.temperature,
            hint_url=options.hint_url,
            hint_model=options.hint_model,
        )
        budgets = budgets or budgets_from_settings(options.settings.supervised)
        return cls.start(inputs, options.workdir, settings=settings, budgets=budgets, site_note=site_note)

    def close(self) -> None:
        self.journal.close()

    @property
    def read_only(self) -> bool:
        return self.journal.read_only

    @property
    def read_only_reason(self) -> str | None:
        return self.journal.read_only_reason

    def _search_identity(self) -> dict[str, Any]:
        i = self.inputs
        inputs = {
            "trace": {"path": str(i.trace_path), "sha256": i.trace_sha256},
            "candidate": i.candidate_binding,
            "public_context": i.public_binding,
            "private_context": i.private_binding,
            "output_dir": str(self.root.resolve()),
            "search_mode": "feedback",
            "operator_gated": True,
            "supervisor": "eviscene-tui",
            "source_root": str(i.source_root) if i.source_root is not None else None,
            "initial_site": {"source_step_index": i.site.get("source_step_index"), "step_id": i.site.get("step_id")},
            "repair_attempts": self.budgets.max_attempts,
            "proposal_rounds": self.budgets.max_proposals,
            "search_seconds": self.budgets.max_seconds,
        }
        return {
            "version": SEARCH_VERSION,
            "inputs": inputs,
            "max_attempts": self.budgets.max_attempts,
            "max_proposals": self.budgets.max_proposals,
            "max_seconds": self.budgets.max_seconds,
        }

    def _sweep_tmp(self) -> None:
        """Remove this app's own orphaned temporary files (``.<name>.<pid>.<hex>.tmp`` from
        ``storage``) left by a process that died mid-write; the final files were never
        created (writes are tmp + fsync + link/rename), so nothing decided is lost."""
        import re

        pattern = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")
        removed = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                m = pattern.match(name)
                if not m:
                    continue
                pid = int(m.group(1))
                if pid != os.getpid() and _pid_alive(pid):
                    continue
                try:
                    os.unlink(self.work.guard(Path(dirpath) / name))
                    removed += 1
                except OSError as exc:
                    self.messages.append(f"cannot remove the leftover temporary file {name}: {exc.strerror or exc}")
        if removed:
            self.messages.append(f"removed {removed} temporary file(s) left by an interrupted write")

    def _open(self) -> None:
        state_path = self.root / "search-state.json"
        if not self.read_only and self.root.is_dir():
            self._sweep_tmp()
        if state_path.exists():
            bound = read_bound(state_path)
            if bound.problems:
                raise SearchError(f"cannot reopen {self.root}: {bound.problems[0].message}")
            if bound.identity != self.identity:
                raise SearchError(
                    f"{self.root} belongs to a supervised search with different inputs or budgets "
                    "(its search-state identity differs); use another --workdir"
                )
            payload = bound.payload if isinstance(bound.payload, dict) else {}
            error = payload.get("execution_error")
            self.state = {
                "status": payload.get("status", "searching"),
                "elapsed_seconds": payload.get("elapsed_seconds", 0.0),
                "rounds": list(payload.get("rounds") or []),
                "execution_error": dict(error) if isinstance(error, dict) else None,
            }
            self._resume_draft()
            return
        if self.read_only:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self._persist()

    # ================================================================ small helpers
    def _require_writable(self) -> None:
        if self.read_only:
            raise JournalReadOnly(self.read_only_reason or "read-only")

    def _require_stage(self, *stages: str) -> RoundDraft:
        d = self.draft
        if d is None or d.stage not in stages:
            now = d.stage if d is not None else "no round in progress"
            raise SearchError(f"not possible now: the round is at {now!r}; expected {' or '.join(stages)}")
        return d

    def _rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def _write_new(self, path: Path, data: bytes) -> None:
        """Write-once: a file that already exists must hold exactly these bytes (a retry
        after a crash); otherwise it is never overwritten and the action is refused."""
        try:
            self.work.write_new(path, data)
        except FileExistsError:
            try:
                same = path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                raise SearchError(
                    f"{self._rel(path) if path.is_relative_to(self.root) else path} already exists with different content; "
                    "written files are never overwritten"
                ) from None

    def _replace(self, path: Path, data: bytes) -> None:
        self.work.replace(path, data)

    def _write_bound(self, path: Path, identity: Any, payload: Any, *, replace: bool = False) -> None:
        for name, data in encode_bound(path, identity, payload).items():
            target = path.parent / name
            if replace:
                self._replace(target, data)
            else:
                self._write_new(target, data)

    def _target(self, **extra: Any) -> dict[str, Any]:
        d = self.draft
        t = {"case": self.inputs.label, "round": d.index if d else None, "step_index": d.site.get("source_step_index") if d else None}
        t.update(extra)
        return t

    def _journal(self, action: str, *, reason: str = "", evidence: Sequence[Path] = (), data: dict[str, Any] | None = None, **target: Any) -> dict[str, Any]:
        self._require_writable()
        return self.journal.append(
            action,
            target=self._target(**target),
            reason=reason,
            evidence=evidence_for(evidence, self.root),
            data=data,
        )

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self.state["rounds"])

    @property
    def status(self) -> str:
        return str(self.state.get("status"))

    @property
    def stopped(self) -> bool:
        """The search ended (a terminal status) or the operator stopped it (until resumed)."""
        return self.status in TERMINAL_STATUSES or self.stopped_by_operator

    @property
    def stopped_by_operator(self) -> bool:
        error = self.state.get("execution_error")
        return self.status == PAUSED_EXECUTION_ERROR and isinstance(error, dict) and error.get("type") == OPERATOR_STOPPED

    @property
    def status_label(self) -> str:
        """The status as the operator reads it (a stop is "stopped by operator", not an error)."""
        return "stopped by operator" if self.stopped_by_operator else self.status

    # ================================================================ persistence
    def _records(self) -> list[dict[str, Any]]:
        return [rec for row in self.history for rec in (row.get("records") or [])]

    def _persist(self) -> None:
        payload: dict[str, Any] = {
            "status": self.state["status"],
            "elapsed_seconds": round(float(self.state["elapsed_seconds"]), 3),
            "rounds": self.history,
        }
        error = self.state.get("execution_error")
        if error is not None:
            payload["execution_error"] = error
        self._write_bound(self.root / "search-state.json", self.identity, payload, replace=True)
        records = self._records()
        candidates: dict[str, Any] = {}
        for row in self.history:
            for cand in row.get("candidates") or []:
                if isinstance(cand, dict):
                    candidates.setdefault(str(cand.get("candidate_id")), cand)
        self._replace(self.root / "repair_attempts.jsonl", canonical_jsonl_bytes(records))
        self._replace(self.root / "repair_candidates.jsonl", canonical_jsonl_bytes(list(candidates.values())))
        status = self.state["status"]
        manifest = {
            "schema_version": SEARCH_VERSION,
            "status": status,
            "converged": status == "converged",
            "candidate_count": len(records),
            "accepted_count": sum(1 for r in records if r.get("accepted") is True),
            "proposal_rounds": len(self.history),
            "attempt_budget": self.budgets.max_attempts,
            "proposal_budget": self.budgets.max_proposals,
            "elapsed_seconds": payload["elapsed_seconds"],
            "stop_reason": status,
            "rounds": [row.get("directory") for row in self.history],
            "execution_error": error,
            "training_distribution_provider": "frozen_self_teacher_only",
        }
        self._replace(self.root / "manifest.json", pretty_json_bytes(manifest))

    # ================================================================ feedback / stop
    def preview_feedback(self) -> dict[str, Any]:
        """The next round's feedback object, computed by the driver's rules (shown before starting)."""
        return next_feedback(self.history)

    def stop_reason(self) -> str | None:
        return next_stop(self.state, self.budgets, root=self.root)

    # ================================================================ round start
    def next_site(self) -> tuple[dict[str, Any], bool]:
        """The next round's site and whether its feedback asks for a relocalization.

        Pure (no file is read): the screen shows it between rounds, so an operator
        relocalization is visible at once, before the next round starts."""
        trace = self.inputs.trace
        hist = self.history
        if not hist:
            site = dict(self.inputs.site)
            if site.get("localization_kind") == "operator":
                site["localization_verifier"] = f"operator:{self.settings.operator}"
            return site, False
        last = hist[-1]
        reloc = last.get("operator_relocalization")
        if isinstance(reloc, dict):
            step = int(reloc["to_source_step"])
            site = R.site_from_trace(
                trace,
                step,
                localization_kind="operator",
                semantic_category=reloc.get("category"),
                localization_verifier=f"operator:{reloc.get('operator') or self.settings.operator}",
                basis={"source_step_index": step, "note": reloc.get("note"), "operator": reloc.get("operator")},
            )
            return site, False
        # reuse the latest round's site
        reused: dict[str, Any] | None = None
        for rec in reversed(last.get("records") or []):
            if isinstance(rec.get("repair_site"), dict):
                reused = dict(rec["repair_site"])
                break
        if reused is None:
            for cand in reversed(last.get("candidates") or []):
                reused = R.site_from_candidate(cand, trace)
                if reused:
                    break
        needs = bool(next_feedback(hist).get("needs_relocalization"))
        return reused or dict(self.inputs.site), needs

    def _next_site(self) -> tuple[dict[str, Any], dict[str, Any] | None, bool]:
        """(site, localization doc to bind or None, relocalization requested by feedback)."""
        site, needs = self.next_site()
        trace = self.inputs.trace
        hist = self.history
        if not hist:
            if site.get("localization_kind") == "operator":
                step = int(site["source_step_index"])
                doc = R.operator_localization(trace, step, note=self.site_note or "operator-chosen starting step",
                                              operator=self.settings.operator, category=site.get("semantic_category"))
                return site, doc, False
            return site, self.inputs.semantic_localization, False
        last = hist[-1]
        reloc = last.get("operator_relocalization")
        if isinstance(reloc, dict):
            step = int(reloc["to_source_step"])
            doc = R.operator_localization(trace, step, note=str(reloc.get("note") or ""), operator=str(reloc.get("operator") or ""), category=reloc.get("category"))
            return site, doc, False
        # reuse the latest round's localization
        reused_doc: dict[str, Any] | None = None
        p = Path(str(last.get("directory"))) / "semantic-localization.json"
        if p.is_file():
            raw, _ = read_json(p)
            reused_doc = raw if isinstance(raw, dict) else None
        return site, reused_doc, needs

    def _binding(self, path: Path | None) -> dict[str, Any] | None:
        if path is None or not path.is_file():
            return None
        return {"path": str(path.resolve()), "sha256": sha256_file(path)}

    def _run_config(self, index: int, rdir: Path, public: Path, media: Path, semloc: Path | None) -> dict[str, Any]:
        s = self.settings
        i = self.inputs
        return {
            "trace": {"path": str(i.trace_path), "sha256": i.trace_sha256},
            "candidate": i.candidate_binding,
            "audit": None,
            "semantic_verification": self._binding(semloc),
            "image": None,
            "gold": None,
            "public_context": self._binding(public),
            "private_context": i.private_binding,
            "output_dir": str(rdir.resolve()),
            "policy_provider": "qwen_local",
            "policy_model": s.policy_model,
            "policy_base_url": s.policy_base_url,
            "policy_wire_api": "chat_completions",
            "policy_serving_profile": self._binding(Path(s.policy_profile)) if s.policy_profile else None,
            "hint_constructor_provider": "openai_compatible" if s.hint_url else "operator",
            "hint_constructor_model": s.hint_model if s.hint_url else s.operator,
            "hint_constructor_base_url": s.hint_url,
            "hint_constructor_wire_api": "chat_completions" if s.hint_url else None,
            "hint_constructor_thinking_level": None,
            "round_start_checkpoint": None,
            "round_start_checkpoint_manifest": None,
            "hint_count": 1,
            "hint_level": s.hint_level,
            "max_suffix_actions": 1,
            "run_student_diagnostic": False,
            "verification_bundle": None,
            "train_cases": None,
            "source_access_policy": None,
            "judge_model": "operator",
            "search_mode": "single",
            "policy_temperature": s.policy_temperature,
            "repair_attempts": self.budgets.max_attempts,
            "proposal_rounds": self.budgets.max_proposals,
            "search_seconds": self.budgets.max_seconds,
            "search_media": self._binding(media),
            "precomputed_slate_cache": None,
            "candidate_offset": None,
            "candidate_length": None,
            "continuation_policy_version": R.CONTINUATION_POLICY_VERSION,
            "operator_gated": True,
            "operator": s.operator,
        }

    def begin_round(self) -> RoundDraft:
        """Write the round's request and inputs (the operator saw the feedback) and open its site gate."""
        self._require_writable()
        if self.draft is not None and self.draft.stage != "closed":
            raise SearchError(f"{self.draft.name} is still open (at {self.draft.stage!r})")
        if self.stopped_by_operator:
            raise SearchError("the search was stopped by the operator; resume it first")
        stop = self.stop_reason()
        if stop is not None:
            self.state["status"] = stop
            self._persist()
            raise SearchError(f"the search has stopped: {stop}")
        index = len(self.history)
        name = R.round_name(index)
        feedback = self.preview_feedback()
        site, semdoc, needs = self._next_site()
        rdir = self.root / "rounds" / name  # may exist after a crash mid-start: write-once files are then re-checked
        self._journal("comment", reason=f"start {name}", data={"event": "start_round", "round": index}, round=index,
                      step_index=site.get("source_step_index"))
        req = self.root / "requests" / f"{name}.json"
        self._write_bound(req, {"search": canonical_sha256(self.identity), "round": index}, feedback)
        inputs_dir = self.root / "round-inputs" / name
        public = inputs_dir / "public.json"
        media = inputs_dir / "media.json"
        public_ctx = self.inputs.public_context if isinstance(self.inputs.public_context, dict) else {}
        self._write_new(public, pretty_json_bytes({**public_ctx, "repair_search": feedback}))
        episodes = [
            {"path": fname, "sha256": digest}
            for row in self.history
            for fname, digest in (row.get("files") or {}).items()
            if fname.endswith("-teacher.json")
        ]
        self._write_new(media, pretty_json_bytes({"episodes": episodes}))
        semloc = None
        if semdoc is not None:
            semloc = inputs_dir / "semantic-localization.json"
            self._write_new(semloc, pretty_json_bytes(semdoc))
        config = self._run_config(index, rdir, public, media, semloc)
        self._write_bound(rdir / "run-inputs.json", config, {"status": "initialized"})
        if semdoc is not None:
            self._write_new(rdir / "semantic-localization.json", pretty_json_bytes(semdoc))
        candidate = R.bind_candidate(self.inputs.candidate, self.inputs.trace, site, source_trace_sha256=self.inputs.trace_sha256)
        self._replace(rdir / "repair_candidates.jsonl", canonical_jsonl_bytes([candidate]))
        self._replace(rdir / "manifest.json", pretty_json_bytes(self._run_manifest_initial()))
        self.draft = RoundDraft(
            index=index, dir=rdir, feedback=feedback, site=site, candidate=candidate, config=config,
            relocalization_requested=needs,
        )
        self.state["status"] = "searching"
        self.state["execution_error"] = None
        self._persist()
        return self.draft

    def _run_manifest_initial(self) -> dict[str, Any]:
        src = self.inputs.candidate.get("source") if isinstance(self.inputs.candidate, dict) else None
        return {
            "schema_version": R.RUN_SCHEMA,
            "status": "generating",
            "trace": str(self.inputs.trace_path),
            "runtime_archive": None,
            "source_task_review": (src or {}).get("source_task_review") if isinstance(src, dict) else None,
            "source_audit": None,
            "train_cases_sha256": None,
            "source_access_policy": None,
            "candidate_count": 0,
            "accepted_count": 0,
        }

    def _run_manifest_final(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        m = self._run_manifest_initial()
        s = self.settings
        m.update(
            {
                "status": "generated" if records else "no_admissible_hints",
                "policy_serving_attestation": {
                    "profile": str(s.policy_profile) if s.policy_profile else None,
                    "profile_sha256": sha256_file(s.policy_profile) if s.policy_profile and Path(s.policy_profile).is_file() else None,
                    "profile_id": s.policy_model,
                    "model_path": None,
                    "checkpoint_manifest": None,
                    "checkpoint_manifest_sha256": None,
                },
                "hint_constructor": {
                    "provider": "openai_compatible" if s.hint_url else "operator",
                    "model": s.hint_model if s.hint_url else s.operator,
                    "wire_api": "chat_completions" if s.hint_url else None,
                    "thinking_level": None,
                    "supplies_training_distribution": False,
                },
                "candidate_count": len(records),
                "accepted_count": sum(1 for r in records if r.get("accepted") is True),
                "pending_hinted_episode_count": sum(1 for r in records if not r.get("local_verification")),
                "artifacts": {"repair_attempts": "repair_attempts.jsonl"},
            }
        )
        return m

    # ================================================================ site gate
    def site_step(self) -> dict[str, Any]:
        d = self._require_stage("site", "hints", "continuation", "verdict")
        steps = R.trace_steps_of(self.inputs.trace)
        return steps[int(d.site["source_step_index"])]

    def accept_site(self, note: str = "") -> dict[str, Any]:
        d = self._require_stage("site")
        ev = self._journal(
            "comment",
            reason=note or "site accepted",
            evidence=[d.dir / "repair_candidates.jsonl", d.dir / "run-inputs.json"],
            data={"event": "accept_site", "source_step_index": d.site.get("source_step_index")},
        )
        d.stage = "hints"
        return ev

    def relocalize(self, step_index: int, note: str, *, category: str | None = None) -> dict[str, Any]:
        """Operator relocalization, at the site gate (before any continuation) or as the verdict.

        The round closes; the next round's feedback gets ``needs_relocalization:
        true`` and ``anchor_feedback`` for the old site; its site is ``step_index``
        with ``localization_kind: "operator"``.
        """
        d = self._require_stage("site", "hints", "continuation", "verdict")
        problem = self.relocalize_problem(step_index, note, category=category)
        if problem is not None:
            raise SearchError(problem)
        old = d.site.get("source_step_index")
        evidence = [self.inputs.trace_path, d.dir / "repair_candidates.jsonl"]
        reloc_data = {"from_source_step": old, "to_source_step": step_index, "category": category}
        if d.stage == "verdict":
            checker = {"anchor_matches": False}
            self._verdict(accepted=False, reason=note, checker=checker, earliest_error_step=step_index, close=False)
            evidence += [d.dir / "continuations" / "hint-00.json", d.dir / "episodes" / "hint-00-teacher.json"]
        ev = self._journal("relocalize", reason=note, evidence=evidence, data=reloc_data, step_index=old,
                           attempt_id=d.record.get("attempt_id") if d.record else None)
        reloc = {
            "from_source_step": old,
            "to_source_step": step_index,
            "note": note,
            "category": category,
            "operator": self.settings.operator,
            "event_id": ev["id"],
        }
        self._close_round(extra_audit_rows=[] if d.record else [{"passed": False, "reason": OPERATOR_RELOCALIZATION_REASON}], operator_relocalization=reloc)
        return ev

    def relocalize_problem(self, step_index: int, note: str, *, category: str | None = None) -> str | None:
        """Why :meth:`relocalize` would refuse these values, or None (pure: a dialog checks
        before it closes)."""
        if not (note or "").strip():
            return "relocalization needs a note saying why"
        if category is not None and category not in R.SEMANTIC_CATEGORIES:
            return f"unknown category {category!r}; one of {', '.join(R.SEMANTIC_CATEGORIES)}"
        try:
            R.site_from_trace(self.inputs.trace, step_index, localization_kind="operator")
        except ValueError as exc:
            return str(exc)
        return None

    # ================================================================ hints gate
    def proposer_prompt(self) -> list[dict[str, Any]]:
        d = self._require_stage("hints", "site")
        step = R.trace_steps_of(self.inputs.trace)[int(d.site["source_step_index"])]
        return build_prompt(
            feedback=d.feedback,
            site=d.site,
            public_context=self.inputs.public_context,
            failure_step=step if isinstance(step, dict) else {},
            level=self.settings.hint_level,
            count=self.settings.hint_count,
        )

    def _audit(self, text: str, level: int) -> dict[str, Any]:
        d = self.draft
        assert d is not None
        return audit_hint(text, level=level, private_context=self.inputs.private_context, feedback=d.feedback)

    def add_operator_hint(self, text: str, *, level: int | None = None) -> Proposal:
        """Audit a hint the operator typed and add it to the round's proposals.

        The hint is journaled (a ``comment`` with ``event: add_hints``) so that a reopened
        search shows the same proposals; nothing is written into the round's files
        until a hint is approved."""
        d = self._require_stage("hints")
        self._require_writable()
        lvl = self.settings.hint_level if level is None else level
        p = Proposal(len(d.proposals), text, lvl, "operator", self.settings.operator, self._audit(text, lvl))
        ev = self._journal_proposals([p], provider="operator")
        p.event_id = ev["id"]
        d.proposals.append(p)
        return p

    def _journal_proposals(self, proposals: list[Proposal], *, provider: str) -> dict[str, Any]:
        return self._journal(
            "comment",
            reason=f"{len(proposals)} hint(s) proposed by {provider}",
            data={
                "event": "add_hints",
                "hints": [
                    {"proposal_index": p.index, "text": p.text, "level": p.level, "provider": p.provider, "model": p.model}
                    for p in proposals
                ],
            },
        )

    async def fetch_proposals(self, *, base_url: str | None = None, model: str | None = None, timeout: float = 120.0) -> list[Proposal]:
        """One hint-constructor call per round (as the driver); the response is cached in
        ``proposer-response.json`` before it is parsed."""
        d = self._require_stage("hints")
        self._require_writable()
        url = base_url or self.settings.hint_url
        mdl = model or self.settings.hint_model
        if not url or not mdl:
            raise SearchError("no hint constructor configured (--hint-url and --hint-model); type a hint instead")
        if d.proposer_called:
            raise SearchError("the hint constructor was already asked in this round (one proposer call per round); type a hint instead")
        messages = self.proposer_prompt()
        d.prompt = messages
        try:
            reply = await fetch_hints(url, mdl, messages, limit=self.settings.hint_count, timeout=timeout)
        except HintFetchError as exc:
            raise SearchError(str(exc)) from None
        d.proposer_called = True
        usage = reply.usage
        self._write_bound(
            d.dir / "proposer-response.json",
            prompt_identity(messages, mdl, url),
            {
                "text": reply.text,
                "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                "completion_tokens": int(usage.get("completion_tokens") or 0),
                "response_sha256": reply.raw_sha256,
            },
        )
        if reply.error:
            raise SearchError(f"{reply.error} (the raw reply is kept in {self._rel(d.dir / 'proposer-response.json')})")
        out: list[Proposal] = []
        for text in reply.hints:
            lvl = self.settings.hint_level
            out.append(Proposal(len(d.proposals) + len(out), text, lvl, "openai_compatible", mdl, self._audit(text, lvl)))
        ev = self._journal_proposals(out, provider=mdl)
        for p in out:
            p.event_id = ev["id"]
        d.proposals.extend(out)
        return out

    def _proposal(self, index: int) -> Proposal:
        d = self._require_stage("hints")
        if not 0 <= index < len(d.proposals):
            raise SearchError(f"no proposal {index}")
        return d.proposals[index]

    def _hint_evidence(self) -> list[Path]:
        d = self.draft
        assert d is not None
        paths = [self.root / "requests" / f"{d.name}.json", self.root / "round-inputs" / d.name / "public.json", d.dir / "repair_candidates.jsonl"]
        if (d.dir / "proposer-response.json").is_file():
            paths.append(d.dir / "proposer-response.json")
        return paths

    def reject_hint(self, index: int, reason: str) -> dict[str, Any]:
        p = self._proposal(index)
        if not (reason or "").strip():
            raise SearchError("rejecting a hint needs a reason")
        ev = self._journal("reject_hint", reason=reason, evidence=self._hint_evidence(), hint_sha256=p.hint_sha256,
                           data={"proposal_index": index, "audit_errors": list(p.audit.get("errors") or [])})
        p.status, p.reason, p.event_id = "rejected", reason, ev["id"]
        return ev

    def approve_hint(self, index: int, reason: str = "") -> dict[str, Any]:
        """Approve one audited hint to run; writes ``hint-proposals.json`` and the audits."""
        d = self._require_stage("hints")
        p = self._proposal(index)
        if not p.passed:
            raise SearchError(f"the hint failed its audit ({', '.join(p.audit.get('errors') or [])}); it cannot run")
        ev = self._journal("approve_hint", reason=reason, evidence=self._hint_evidence(), hint_sha256=p.hint_sha256,
                           data={"proposal_index": index, "provider": p.provider})
        p.status, p.reason, p.event_id = "approved", reason, ev["id"]
        d.approved = p
        self._write_audits()
        self._write_bound(d.dir / "hint-proposals.json", d.config, [p.driver_row(d.site["step_id"])])
        d.stage = "continuation"
        return ev

    def _write_audits(self, extra: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        d = self.draft
        assert d is not None
        rows = list(d.earlier_audit_rows)
        rows += [p.audit_row() for p in d.proposals if p.status != "pending" or not p.passed or p is d.approved]
        rows += list(extra)
        self._replace(d.dir / "proposer-hint-audits.json", pretty_json_bytes({"proposals": rows}))
        return rows

    # ================================================================ continuation
    async def run_continuation(
        self,
        runner: ContinuationRunner,
        *,
        on_event: Callable[[Any], None] | None = None,
    ) -> ContinuationOutcome:
        """Stream the approved hint's continuation and record it into the round as the driver would.

        A failed or cancelled stream writes ``generation-last-error.json`` (type only) and
        leaves the round at the continuation gate (run again or relocalize)."""
        d = self._require_stage("continuation")
        self._require_writable()
        assert d.approved is not None
        if self._cached_continuation(d) is not None:
            # generated before a crash: never re-sampled (as the driver's cached_continuation)
            self._record_continuation(d, None)
            d.stage = "verdict"
            d.outcome = ContinuationOutcome(status="complete", error=None)
            self.messages.append("the continuation was already generated before an interruption; reused")
            return d.outcome
        job = ContinuationJob(
            case=self.inputs.case,
            source_step_index=int(d.site["source_step_index"]),
            hint=d.approved.text,
            round_index=d.index,
            on_event=on_event,
        )
        try:
            outcome = await runner(job)
        except asyncio.CancelledError:
            # the operator cancelled: the round stays at this gate and says so (also after a reopen)
            d.outcome = ContinuationOutcome(status="cancelled", error="cancelled by the operator", error_type="cancelled")
            self._last_error_file(d, "cancelled")
            raise
        d.outcome = outcome
        if outcome.attestation is not None:
            self._replace(d.dir / "live-serving-check.json", pretty_json_bytes(outcome.attestation))
        if not outcome.ok:
            self._last_error_file(d, outcome.error_type or ("cancelled" if outcome.status == "cancelled" else "error"))
            return outcome
        self._record_continuation(d, outcome)
        d.stage = "verdict"
        return outcome

    def _last_error_file(self, d: RoundDraft, error_type: str) -> None:
        """``generation-last-error.json`` as the driver writes it (the error's type only)."""
        self._replace(
            d.dir / "generation-last-error.json",
            pretty_json_bytes({"hint_index": 0, "retry": d.retries, "error_type": error_type, "archive": None}),
        )
        d.retries += 1

    def _cached_continuation(self, d: RoundDraft) -> dict[str, Any] | None:
        """The round's stored continuation payload, when one was written before (a crash
        after generation): reused as the driver's ``cached_continuation`` does."""
        path = d.dir / "continuations" / "hint-00.json"
        if not path.exists():
            return None
        assert d.approved is not None
        bound = read_bound(path)
        identity = {"run": canonical_sha256(d.config), "hint": d.approved.hint_sha256}
        if bound.problems or bound.identity != identity or not isinstance(bound.payload, dict):
            raise SearchError(f"{self._rel(path)} exists but does not bind this run and hint; it is never overwritten")
        return bound.payload

    def _record_continuation(self, d: RoundDraft, outcome: ContinuationOutcome | None) -> None:
        assert d.approved is not None
        trace = self.inputs.trace
        index = int(d.site["source_step_index"])
        source_step = R.trace_steps_of(trace)[index]
        src_meta = _v if isinstance(_v := source_step.get("metadata"), dict) else {}
        src_capture = _v if isinstance(_v := src_meta.get("policy_token_capture"), dict) else {}
        hint_sha = d.approved.hint_sha256
        cached = self._cached_continuation(d)
        if cached is not None:
            step = cached["teacher_steps"][0]
            episode = cached["teacher_episode_trace"]
            capture = step["metadata"]["policy_token_capture"]
            stop_reason = cached["stop_reason"]
        else:
            assert outcome is not None
            capture = R.token_capture(outcome.prompt_token_ids, outcome.completion_token_ids, outcome.logprobs, outcome.topk)
            step = R.teacher_step(
                site=d.site, source_step=source_step, content=outcome.content, reasoning=outcome.reasoning,
                tool_calls=outcome.tool_calls, capture=capture, usage=outcome.usage,
                finish_reason=outcome.finish_reason, hint_sha=hint_sha,
            )
            step["metadata"]["policy_request"] = outcome.request
            step["metadata"]["attestation_status"] = outcome.attestation_status
            runtime = (trace.get("state") or {}).get("runtime_store") if isinstance(trace.get("state"), dict) else None
            source_store = runtime.get("runtime_path") if isinstance(runtime, dict) else None
            episode = R.build_episode(trace, d.site, [step], source_runtime_store_path=source_store, attempt_store=None)
            stop_reason = episode["stop_reason"]
            self._write_bound(
                d.dir / "continuations" / "hint-00.json",
                {"run": canonical_sha256(d.config), "hint": hint_sha},
                {
                    "teacher_steps": [step],
                    "student_steps": [],
                    "hint": d.approved.text,
                    "teacher_complete": True,
                    "student_complete": False,
                    "stop_reason": stop_reason,
                    "teacher_episode_trace": episode,
                    "local_targets": [],
                },
            )
        ep_path = d.dir / "episodes" / "hint-00-teacher.json"
        self._write_new(ep_path, pretty_json_bytes(episode))
        student_ids = list(src_capture.get("prompt_token_ids") or [])
        media = None
        if R.has_image_pads(student_ids) or R.has_image_pads(capture["prompt_token_ids"]):
            if outcome is None or not outcome.images:
                outcome = self._archived_images_outcome(index) or outcome
            if outcome is not None:
                media = self._write_media(d, outcome)
        roles = R.model_roles(
            hint_provider=d.approved.provider,
            hint_model=d.approved.model,
            policy_model=(outcome.policy_model if outcome is not None else None) or self.settings.policy_model or "",
            checkpoint=None,
            manifest_sha=None,
        )
        proposal = d.approved.driver_row(d.site["step_id"])
        record = R.attempt_record(
            candidate=d.candidate, site=d.site, proposal=proposal, roles=roles,
            student_prompt_ids=student_ids, teacher_capture=capture,
            source_trace_sha256=self.inputs.trace_sha256,
            continuation={
                "teacher_complete": True,
                "student_complete": False,
                "stop_reason": stop_reason,
                "teacher_step_count": 1,
                "student_step_count": 0,
                "hinted_teacher_episode_verified": False,
                "unhinted_student_diagnostic": None,
                "unhinted_student_affects_acceptance": False,
                "hinted_teacher_episode_trace": "episodes/hint-00-teacher.json",
                "hinted_teacher_episode_trace_sha256": sha256_file(ep_path),
            },
            psd_media=media,
        )
        self._replace(d.dir / "repair_attempts.jsonl", canonical_jsonl_bytes([record]))
        self._replace(d.dir / "manifest.json", pretty_json_bytes(self._run_manifest_final([record])))
        d.record, d.episode = record, episode

    def _archived_images_outcome(self, index: int) -> ContinuationOutcome | None:
        """The failure step's archived request images (for a continuation reused after a crash)."""
        case = self.inputs.case
        if case is None:
            return None
        try:
            archived, _ = case.source_step_request(index)
        except Exception:  # noqa: BLE001 - best effort; psd_media is then absent and check reports it
            return None
        images = [(img.sha256, img.mime, img.data) for img in (getattr(archived, "images", None) or [])]
        return ContinuationOutcome(status="complete", images=images) if images else None

    def _write_media(self, d: RoundDraft, outcome: ContinuationOutcome) -> dict[str, Any] | None:
        if not outcome.images:
            return None
        shas, paths = [], []
        for sha, _mime, data in outcome.images:
            target = d.dir / "media" / f"{sha}.image"
            if not target.exists():
                self._write_new(target, data)
            shas.append(sha)
            paths.append(str(target.resolve()))
        processor = self.settings.policy_model
        if self.settings.policy_profile:
            prof, _ = read_json(self.settings.policy_profile)
            if isinstance(prof, dict):
                processor = prof.get("engine_model_path") or prof.get("model_path") or processor
        return {
            "schema_version": "ifv-psd-media-v3",
            "processor_id": processor,
            "processor_config": {},
            "image_sha256": shas,
            "image_paths": paths,
            "merge_size": 2,
        }

    # ================================================================ verdict gate
    def _verdict(
        self,
        *,
        accepted: bool,
        reason: str,
        checker: dict[str, Any] | None,
        earliest_error_step: int | None,
        close: bool = True,
    ) -> dict[str, Any]:
        d = self._require_stage("verdict")
        assert d.record is not None and d.episode is not None
        checker = dict(checker or {})
        unknown = set(checker) - set(CHECK_NAMES)
        if unknown:
            raise SearchError(f"unknown checker values: {', '.join(sorted(unknown))}")
        bad = [k for k, v in checker.items() if v is not None and type(v) is not bool]
        if bad:
            raise SearchError(f"checker values must be true, false or unset: {', '.join(bad)}")
        if accepted:
            checker = {name: True for name in CHECK_NAMES} | {k: v for k, v in checker.items() if v is not None}
        earliest = earliest_error_step if type(earliest_error_step) is int else (
            int(d.site["source_step_index"]) if accepted else -1
        )
        action = "approve_attempt" if accepted else "reject_attempt"
        ev = self._journal(
            action,
            reason=reason,
            evidence=[d.dir / "continuations" / "hint-00.json", d.dir / "episodes" / "hint-00-teacher.json"],
            attempt_id=d.record["attempt_id"],
            hint_sha256=d.approved.hint_sha256 if d.approved else None,
            data={"checker": {k: v for k, v in checker.items() if v is not None}, "earliest_error_step": earliest},
        )
        lv = R.local_verification(
            d.record, d.episode, operator=self.settings.operator, passed=accepted, checker=checker,
            earliest_error_step=earliest, reason=reason, event_id=ev["id"],
        )
        self._replace(d.dir / "judge" / "hint-00.json", pretty_json_bytes(lv))
        d.record = R.apply_verdict(d.record, lv, accepted=accepted, reason=reason)
        self._replace(d.dir / "repair_attempts.jsonl", canonical_jsonl_bytes([d.record]))
        self._replace(
            d.dir / "gemini-verification-bundle.json",
            pretty_json_bytes(
                {
                    "schema_version": R.BUNDLE_SCHEMA,
                    "attempts": [{"hint_index": 0, "hint_sha256": d.approved.hint_sha256 if d.approved else None, "local_verification": "judge/hint-00.json"}],
                }
            ),
        )
        self._replace(d.dir / "manifest.json", pretty_json_bytes(self._run_manifest_final([d.record])))
        if close:
            self._close_round()
        return ev

    def approve_attempt(self, reason: str = "", *, checker: dict[str, Any] | None = None) -> dict[str, Any]:
        """Accept the attempt: tier ``causal_episode_pass``, ``accepted: true``; the search converges."""
        return self._verdict(accepted=True, reason=reason or "operator approved", checker=checker, earliest_error_step=None)

    def reject_attempt(self, reason: str, *, checker: dict[str, Any] | None = None, earliest_error_step: int | None = None) -> dict[str, Any]:
        if not (reason or "").strip():
            raise SearchError("rejecting an attempt needs a reason")
        return self._verdict(accepted=False, reason=reason, checker=checker, earliest_error_step=earliest_error_step)

    # ================================================================ closing a round
    def _close_round(self, *, extra_audit_rows: Sequence[dict[str, Any]] = (), operator_relocalization: dict[str, Any] | None = None) -> dict[str, Any]:
        d = self.draft
        assert d is not None
        records = [d.record] if d.record is not None else []
        audits_path = d.dir / "proposer-hint-audits.json"
        if d.proposals or extra_audit_rows or d.earlier_audit_rows or not audits_path.exists():
            audit_rows = self._write_audits(list(extra_audit_rows))
        else:
            existing, _ = read_json(audits_path)
            audit_rows = list(existing.get("proposals") or []) if isinstance(existing, dict) else []
        if d.proposals and not (d.dir / "hint-proposals.json").exists():
            self._write_bound(d.dir / "hint-proposals.json", d.config, [])
        manifest = self._run_manifest_final(records)
        self._replace(d.dir / "manifest.json", pretty_json_bytes(manifest))
        status = manifest["status"]
        names = [
            "manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "episodes/hint-00-teacher.json",
            "proposer-hint-audits.json", "hint-proposals.json", "proposer-response.json", "live-serving-check.json",
            "semantic-localization.json",
        ]
        if not records:
            self._replace(d.dir / "repair_attempts.jsonl", b"")
        rdir = d.dir.resolve()
        files = {str(rdir / n): sha256_file(rdir / n) for n in names if (rdir / n).is_file()}
        abs_records = []
        for rec in records:
            r = dict(rec)
            cont = dict(r.get("continuation") or {})
            if cont.get("hinted_teacher_episode_trace"):
                cont["hinted_teacher_episode_trace"] = str(rdir / cont["hinted_teacher_episode_trace"])
            r["continuation"] = cont
            abs_records.append(r)
        row: dict[str, Any] = {
            "directory": str(rdir),
            "files": files,
            "records": abs_records,
            "candidates": [d.candidate],
            "feedback": round_feedback(records, audit_rows, status, [d.episode] if d.episode is not None else []),
            "no_further_hint": no_further_hint(records, audit_rows, status),
        }
        if operator_relocalization is not None:
            row["operator_relocalization"] = operator_relocalization
        self.state["rounds"].append(row)
        self.state["elapsed_seconds"] = float(self.state.get("elapsed_seconds") or 0.0) + (time.monotonic() - d.started)
        d.stage = "closed"
        self.state["status"] = self.stop_reason() or "searching"
        self._persist()
        return row

    def finish_round(self, note: str) -> dict[str, Any]:
        """Close the open round without an attempt (no hint worth running).

        Rejected proposals stay in ``proposer-hint-audits.json``; a round with no
        proposal at all is an explicit empty proposal, so the search then stops as
        ``no_further_grounded_hint`` (§4.3.5)."""
        d = self._require_stage("site", "hints", "continuation")
        if not (note or "").strip():
            raise SearchError("closing a round without an attempt needs a note")
        ev = self._journal("comment", reason=note, evidence=[d.dir / "repair_candidates.jsonl"], data={"event": "finish_round", "round": d.index})
        for p in d.proposals:
            if p.status == "pending" and p.passed:
                p.status, p.reason = "rejected", note
        self._close_round()
        return ev

    def stop(self, note: str = "") -> dict[str, Any]:
        """The operator stops the search between rounds.

        The search files say so as the driver gate's stop does: status
        ``paused_execution_error`` with ``execution_error`` ``{round, type:
        "OperatorStoppedSearch"}`` for the round that was not started. No round
        starts until :meth:`resume`."""
        self._require_writable()
        if self.draft is not None and self.draft.stage not in ("closed",):
            raise SearchError(f"{self.draft.name} is open; finish or relocalize it first")
        if self.stopped_by_operator:
            raise SearchError("the search is already stopped by the operator")
        if self.status in TERMINAL_STATUSES:
            raise SearchError(f"the search has already ended: {self.status}")
        index = len(self.history)
        error = {"round": index, "type": OPERATOR_STOPPED}
        ev = self._journal(
            "comment", reason=note or "operator stopped the search", round=index, step_index=None,
            data={"event": "stop", "status": PAUSED_EXECUTION_ERROR, "execution_error": error},
        )
        self.state["status"] = PAUSED_EXECUTION_ERROR
        self.state["execution_error"] = error
        self._persist()
        return ev

    def resume(self, note: str = "") -> dict[str, Any]:
        """Go on after an operator stop: the search is ``searching`` again (the next round
        still waits for :meth:`begin_round`)."""
        self._require_writable()
        if not self.stopped_by_operator:
            raise SearchError(f"the search was not stopped by the operator (status {self.status})")
        index = len(self.history)
        ev = self._journal("comment", reason=note or "operator resumed the search", round=index, step_index=None,
                           data={"event": "resume", "status": "searching"})
        self.state["status"] = "searching"
        self.state["execution_error"] = None
        self._persist()
        return ev

    @property
    def torn_tail_warning(self) -> str | None:
        """A message when the journal ends with torn bytes (decisions are refused until acknowledged)."""
        t = self.journal.torn_tail
        if t is None:
            return None
        return (
            f"the decision journal ends with {t.length} torn bytes at offset {t.offset} (a crash mid-write?); "
            "they are kept and reported; acknowledge them to record new decisions"
        )

    def acknowledge_torn_tail(self, note: str = "") -> dict[str, Any]:
        self._require_writable()
        return self.journal.acknowledge_torn_tail(operator=self.settings.operator, note=note)

    def comment(self, text: str) -> dict[str, Any]:
        return self._journal("comment", reason=text)

    # ================================================================ resume
    def _resume_draft(self) -> None:
        index = len(self.history)
        rdir = self.root / "rounds" / R.round_name(index)
        started = rdir.exists() or (self.root / "requests" / f"{R.round_name(index)}.json").exists()
        if not started:
            return
        ri = read_bound(rdir / "run-inputs.json")
        fb = read_bound(self.root / "requests" / f"{R.round_name(index)}.json")
        cands, _ = read_jsonl(rdir / "repair_candidates.jsonl")
        if ri.problems or fb.problems or not cands or not (rdir / "manifest.json").is_file():
            # interrupted while the round was starting: its start is deterministic (write-once
            # files are re-checked byte for byte), so finish it now
            if self.read_only:
                self.messages.append(f"{rdir.name} was interrupted while starting; a writable instance will finish it")
                return
            try:
                self.begin_round()
            except SearchError as exc:
                self.messages.append(f"{rdir.name} was interrupted while starting and cannot be finished: {exc}")
                return
            self.messages.append(f"finished starting {rdir.name} (it was interrupted)")
            return
        candidate = cands[-1]
        site = R.site_from_candidate(candidate, self.inputs.trace) or dict(self.inputs.site)
        feedback = fb.payload if isinstance(fb.payload, dict) else {}
        _, needs = self.next_site()
        round_events = [e for e in self.journal.events if (e.get("target") or {}).get("round") == index]
        accepted = any(isinstance(e.get("data"), dict) and e["data"].get("event") == "accept_site" for e in round_events)
        d = RoundDraft(index=index, dir=rdir, feedback=feedback, site=site, candidate=candidate, config=ri.identity,
                       stage="hints" if accepted else "site", relocalization_requested=needs)
        d.proposer_called = (rdir / "proposer-response.json").is_file()
        self.draft = d
        self._resume_proposals(d, round_events)
        if d.proposer_called and not any(p.provider != "operator" for p in d.proposals):
            self._resume_fetched(d)
        props = read_bound(rdir / "hint-proposals.json") if (rdir / "hint-proposals.json").is_file() else None
        if props is not None and isinstance(props.payload, list) and props.payload:
            row = props.payload[0]
            if d.approved is None:
                # a journal from before proposals were journaled: only the approved hint is known
                p = Proposal(0, row.get("text", ""), row.get("level", 1), row.get("provider", ""), row.get("model", ""),
                             dict(row.get("audit") or {}, reason=""), status="approved")
                d.approved = p
                existing, _ = read_json(rdir / "proposer-hint-audits.json")
                if isinstance(existing, dict):
                    d.earlier_audit_rows = [r for r in existing.get("proposals") or [] if isinstance(r, dict)]
            d.stage = "continuation"
        elif d.approved is not None and not self.read_only:
            # the approval was journaled but its files were not written (a crash in between)
            self._write_audits()
            self._write_bound(rdir / "hint-proposals.json", d.config, [d.approved.driver_row(d.site["step_id"])])
            d.stage = "continuation"
        elif d.approved is not None:
            d.approved.status = "pending"
            d.approved = None
        d.outcome, d.retries = self._resumed_outcome(rdir)
        recs, _ = read_jsonl(rdir / "repair_attempts.jsonl") if (rdir / "repair_attempts.jsonl").is_file() else ([], [])
        if recs:
            d.record = recs[-1]
            d.site = dict(d.record.get("repair_site") or d.site)
            raw, _ = read_json(rdir / "episodes" / "hint-00-teacher.json")
            d.episode = raw if isinstance(raw, dict) else {}
            d.stage = "verdict"
            d.outcome = ContinuationOutcome(status="complete")
        self.messages.append(f"resumed {rdir.name} at the {d.stage} gate")
        if d.stage == "verdict" and d.record is not None and d.record.get("local_verification"):
            self._close_round()

    def _resume_proposals(self, d: RoundDraft, events: list[dict[str, Any]]) -> None:
        """The round's proposals, rebuilt from its journal: hints added (typed or fetched),
        then each rejection and approval by proposal index. Audits are recomputed (the
        audit is a pure function of the hint, the private context and the feedback)."""
        for ev in events:
            data = _v if isinstance(_v := ev.get("data"), dict) else {}
            if ev.get("action") == "comment" and data.get("event") == "add_hints":
                for h in data.get("hints") or []:
                    if not isinstance(h, dict) or not isinstance(h.get("text"), str):
                        continue
                    raw_level = h.get("level")
                    level = raw_level if isinstance(raw_level, int) and not isinstance(raw_level, bool) else self.settings.hint_level
                    p = Proposal(len(d.proposals), h["text"], level, str(h.get("provider") or ""), str(h.get("model") or ""),
                                 self._audit_for(d, h["text"], level), event_id=ev.get("id"))
                    d.proposals.append(p)
            elif ev.get("action") in ("reject_hint", "approve_hint"):
                i = data.get("proposal_index")
                if type(i) is not int or not 0 <= i < len(d.proposals):
                    continue
                p = d.proposals[i]
                p.status = "approved" if ev["action"] == "approve_hint" else "rejected"
                p.reason, p.event_id = str(ev.get("reason") or ""), ev.get("id")
                if p.status == "approved":
                    d.approved = p

    def _resume_fetched(self, d: RoundDraft) -> None:
        """The hint constructor answered (its reply is cached) but the proposals were not
        journaled (an interruption in between): add them from the cached reply now, as
        the one proposer call of the round is already spent."""
        bound = read_bound(d.dir / "proposer-response.json")
        payload = bound.payload if isinstance(bound.payload, dict) else {}
        model = str(bound.identity.get("model") or "") if isinstance(bound.identity, dict) else ""
        try:
            texts = parse_hints(str(payload.get("text") or ""), limit=self.settings.hint_count)
        except HintFetchError as exc:
            self.messages.append(f"the cached hint-constructor reply gives no proposals: {exc}")
            return
        if not texts or self.read_only:
            return
        lvl = self.settings.hint_level
        out = [Proposal(len(d.proposals) + i, t, lvl, "openai_compatible", model, self._audit_for(d, t, lvl)) for i, t in enumerate(texts)]
        ev = self._journal_proposals(out, provider=model or "the hint constructor")
        for p in out:
            p.event_id = ev["id"]
        d.proposals.extend(out)
        self.messages.append(f"{len(out)} proposal(s) taken from the cached hint-constructor reply")

    def _audit_for(self, d: RoundDraft, text: str, level: int) -> dict[str, Any]:
        return audit_hint(text, level=level, private_context=self.inputs.private_context, feedback=d.feedback)

    def _resumed_outcome(self, rdir: Path) -> tuple[ContinuationOutcome | None, int]:
        """The last failed or cancelled run of this round (``generation-last-error.json``)."""
        raw, _ = read_json(rdir / "generation-last-error.json") if (rdir / "generation-last-error.json").is_file() else (None, [])
        if not isinstance(raw, dict):
            return None, 0
        error_type = str(raw.get("error_type") or "error")
        raw_retry = raw.get("retry")
        retry = raw_retry if isinstance(raw_retry, int) and not isinstance(raw_retry, bool) else 0
        status = "cancelled" if error_type == "cancelled" else "failed"
        return ContinuationOutcome(status=status, error_type=error_type), retry + 1
