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
journal are relative to the supervised root. A continuation that ends cancelled
or failed is journaled with what it streamed, so a reopened round shows it again.

Gates, in order, per round: :meth:`begin_round` (after the operator saw
:meth:`preview_feedback`) -> site (:meth:`accept_site` | :meth:`relocalize`) ->
hints (:meth:`fetch_proposals`, :meth:`add_operator_hint`, :meth:`approve_hint`,
:meth:`reject_hint`) -> :meth:`run_continuation` -> verdict
(:meth:`approve_attempt` | :meth:`reject_attempt` | :meth:`relocalize`).
Every operator action is journaled (one write + fsync) before its files are written.

:class:`SupervisedSearch` coordinates three parts: the driver's rules
(``stages.py``, pure), the writer of the layout (``layout.py``, atomic writes in
the app's work directory) and the proposal client (``proposer.py``, HTTP).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eviscene_tui.artifacts.jsonio import canonical_sha256, read_bound, read_json, sha256_file
from eviscene_tui.journal import (
    Journal,
    JournalError,
    JournalReadOnly,
    case_key,
    record_key,
    register_workdir,
    supervised_home,
    evidence_for,
    supervised_journal_for_root,
    supervised_root_path,
)
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.events import PolicyEvent
from eviscene_tui.storage import WorkDir
from eviscene_tui.supervised import records as R
from eviscene_tui.supervised import resume
from eviscene_tui.supervised import stages as S
from eviscene_tui.supervised.audit import audit_hint
from eviscene_tui.supervised.continuation import ContinuationJob, ContinuationOutcome, ContinuationRunner
from eviscene_tui.supervised.feedback import TERMINAL_STATUSES, Budgets, budgets_from_settings, next_feedback, next_stop
from eviscene_tui.supervised.hints import HintFetchError, build_prompt
from eviscene_tui.supervised.layout import LayoutWriter
from eviscene_tui.supervised.proposer import ProposalClient, hints_from_cache
from eviscene_tui.supervised.source import SupervisedInputs, inputs_from_case
from eviscene_tui.supervised.stages import (
    OPERATOR_REJECTED_REASON,
    OPERATOR_RELOCALIZATION_REASON,
    OPERATOR_STOPPED,
    PAUSED_EXECUTION_ERROR,
    SEARCH_VERSION,
    Proposal,
    RoundDraft,
    SearchError,
    SearchSettings,
)

if TYPE_CHECKING:
    from eviscene_tui.artifacts.case import CaseBundle
    from eviscene_tui.options import AppOptions

__all__ = [
    "OPERATOR_REJECTED_REASON",
    "OPERATOR_RELOCALIZATION_REASON",
    "OPERATOR_STOPPED",
    "PAUSED_EXECUTION_ERROR",
    "SEARCH_VERSION",
    "Proposal",
    "RoundDraft",
    "SearchError",
    "SearchSettings",
    "SupervisedSearch",
]

_CONT = S.CONTINUATION_FILE
_EPISODE = S.EPISODE_FILE


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
        self.layout = LayoutWriter(root, work)
        self.journal = journal
        self.identity = S.search_identity(inputs, str(root.resolve()), budgets)
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
    ) -> SupervisedSearch:
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
    ) -> SupervisedSearch:
        """Start from a ``CaseBundle`` and the app's ``AppOptions``.

        ``label`` defaults to the case path relative to ``options.key_root``; budgets come
        from the ``[supervised]`` table of the config file (driver defaults otherwise)."""
        if label is None:
            rel = os.path.relpath(os.path.abspath(case.root), os.path.abspath(options.key_root))
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
        # the case's search wherever this app started it (journal.records), else a new one
        # keyed by the case's record key in the work directory
        workdir, root = supervised_home(case.root, options.workdir, options.record_workdirs(case.root), opened=options.root)
        search = cls.start(inputs, workdir, settings=settings, budgets=budgets, site_note=site_note, root=root)
        register_workdir(workdir, record_key(case.root), case.root)  # found again from any folder
        return search

    def close(self) -> None:
        self.journal.close()

    @property
    def read_only(self) -> bool:
        return self.journal.read_only

    @property
    def read_only_reason(self) -> str | None:
        return self.journal.read_only_reason

    def _open(self) -> None:
        state_path = self.root / "search-state.json"
        if not self.read_only and self.root.is_dir():
            self.messages += self.layout.sweep_tmp()
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
        return S.require_stage(self.draft, *stages)

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
        return S.stopped_by_operator(self.state)

    @property
    def status_label(self) -> str:
        """The status as the operator reads it (a stop is "stopped by operator", not an error)."""
        return S.status_label(self.state)

    def _persist(self) -> None:
        self.layout.persist(self.state, self.identity, self.budgets)

    def _binding(self, path: Path | None) -> dict[str, Any] | None:
        if path is None or not path.is_file():
            return None
        return {"path": str(path.resolve()), "sha256": sha256_file(path)}

    def _profile_sha256(self) -> str | None:
        p = self.settings.policy_profile
        return sha256_file(p) if p and Path(p).is_file() else None

    def _run_manifest_final(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        return S.run_manifest_final(self.inputs, self.settings, records, self._profile_sha256())

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
        return S.next_site(self.inputs, self.history, self.settings.operator)

    def _next_localization(self, site: Mapping[str, Any]) -> dict[str, Any] | None:
        """The localization document the next round binds (the latest round's is re-read)."""
        nxt = S.next_localization(self.inputs, self.history, site, site_note=self.site_note, operator=self.settings.operator)
        if nxt.reuse_from is None:
            return nxt.doc
        p = nxt.reuse_from / "semantic-localization.json"
        if not p.is_file():
            return None
        raw, _ = read_json(p)
        return raw if isinstance(raw, dict) else None

    def begin_round(self) -> RoundDraft:
        """Write the round's request and inputs (the operator saw the feedback) and open its site gate."""
        self._require_writable()
        refusal = S.begin_refusal(self.draft, self.state)
        if refusal is not None:
            raise SearchError(refusal)
        stop = self.stop_reason()
        if stop is not None:
            self.state["status"] = stop
            self._persist()
            raise SearchError(f"the search has stopped: {stop}")
        index = len(self.history)
        feedback = self.preview_feedback()
        site, needs = self.next_site()
        semdoc = self._next_localization(site)
        self._journal("comment", reason=f"start {R.round_name(index)}", data={"event": "start_round", "round": index}, round=index,
                      step_index=site.get("source_step_index"))
        config = self._write_round_inputs(index, feedback, semdoc)
        rdir = self.layout.round_dir(index)  # may exist after a crash mid-start: write-once files are then re-checked
        candidate = R.bind_candidate(self.inputs.candidate, self.inputs.trace, site, source_trace_sha256=self.inputs.trace_sha256)
        self.layout.write_jsonl(rdir / "repair_candidates.jsonl", [candidate])
        self.layout.write_json(rdir / "manifest.json", S.run_manifest_initial(self.inputs), replace=True)
        self.draft = RoundDraft(
            index=index, dir=rdir, feedback=feedback, site=site, candidate=candidate, config=config,
            relocalization_requested=needs,
        )
        self.state["status"] = "searching"
        self.state["execution_error"] = None
        self._persist()
        return self.draft

    def _write_round_inputs(self, index: int, feedback: dict[str, Any], semdoc: dict[str, Any] | None) -> dict[str, Any]:
        """The round's request, its inputs and ``run-inputs.json`` (all write-once); returns the run configuration."""
        lay = self.layout
        lay.write_bound(lay.request_path(index), {"search": canonical_sha256(self.identity), "round": index}, feedback)
        inputs_dir = lay.inputs_dir(index)
        public, media = inputs_dir / "public.json", inputs_dir / "media.json"
        public_ctx = self.inputs.public_context if isinstance(self.inputs.public_context, dict) else {}
        lay.write_json(public, {**public_ctx, "repair_search": feedback})
        lay.write_json(media, {"episodes": S.earlier_teacher_episodes(self.history)})
        semloc = None
        if semdoc is not None:
            semloc = inputs_dir / "semantic-localization.json"
            lay.write_json(semloc, semdoc)
        rdir = lay.round_dir(index)
        profile = self.settings.policy_profile
        bindings = S.RoundBindings(
            public=self._binding(public), media=self._binding(media), semantic_localization=self._binding(semloc),
            serving_profile=self._binding(Path(profile)) if profile else None,
        )
        config = S.run_config(self.settings, self.inputs, self.budgets, str(rdir.resolve()), bindings)
        lay.write_bound(rdir / "run-inputs.json", config, {"status": "initialized"})
        if semdoc is not None:
            lay.write_json(rdir / "semantic-localization.json", semdoc)
        return config

    # ================================================================ site gate
    def site_step(self) -> dict[str, Any]:
        d = self._require_stage("site", "hints", "continuation", "verdict")
        steps = R.trace_steps_of(self.inputs.trace)
        step: dict[str, Any] = steps[int(d.site["source_step_index"])]
        return step

    def accept_site(self, note: str = "") -> dict[str, Any]:
        d = self._require_stage("site")
        ev = self._journal(
            "accept_site",
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
            evidence += [d.dir / _CONT, d.dir / _EPISODE]
        ev = self._journal("relocalize", reason=note, evidence=evidence, data=reloc_data, step_index=old,
                           attempt_id=d.record.get("attempt_id") if d.record else None)
        reloc = S.operator_relocalization(old, step_index, note, category, self.settings.operator, ev["id"])
        extra = [] if d.record else [{"passed": False, "reason": OPERATOR_RELOCALIZATION_REASON}]
        self._close_round(extra_audit_rows=extra, operator_relocalization=reloc)
        return ev

    def relocalize_problem(self, step_index: int, note: str, *, category: str | None = None) -> str | None:
        """Why :meth:`relocalize` would refuse these values, or None (pure: a dialog checks
        before it closes)."""
        return S.relocalize_problem(self.inputs.trace, step_index, note, category=category)

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

    def _audit(self, d: RoundDraft, text: str, level: int) -> dict[str, Any]:
        return audit_hint(text, level=level, private_context=self.inputs.private_context, feedback=d.feedback)

    def _new_proposals(self, d: RoundDraft, texts: Sequence[str], provider: str, model: str) -> list[Proposal]:
        """Audited proposals for ``texts`` at the settings' hint level, numbered after the round's."""
        lvl = self.settings.hint_level
        return [Proposal(len(d.proposals) + i, t, lvl, provider, model, self._audit(d, t, lvl)) for i, t in enumerate(texts)]

    def _add_journaled(self, d: RoundDraft, proposals: list[Proposal], *, provider: str) -> None:
        """Journal ``proposals`` (one ``add_hints`` comment) and add them to the round."""
        ev = self._journal_proposals(proposals, provider=provider)
        for p in proposals:
            p.event_id = ev["id"]
        d.proposals.extend(proposals)

    def add_operator_hint(self, text: str, *, level: int | None = None) -> Proposal:
        """Audit a hint the operator typed and add it to the round's proposals.

        The hint is journaled (a ``comment`` with ``event: add_hints``) so that a reopened
        search shows the same proposals; nothing is written into the round's files
        until a hint is approved."""
        d = self._require_stage("hints")
        self._require_writable()
        lvl = self.settings.hint_level if level is None else level
        p = Proposal(len(d.proposals), text, lvl, "operator", self.settings.operator, self._audit(d, text, lvl))
        self._add_journaled(d, [p], provider="operator")
        return p

    def _journal_proposals(self, proposals: list[Proposal], *, provider: str) -> dict[str, Any]:
        return self._journal(
            "comment",
            reason=f"{len(proposals)} hint(s) proposed by {provider}",
            data={"event": "add_hints", "hints": S.journal_hints(proposals)},
        )

    async def fetch_proposals(self, *, base_url: str | None = None, model: str | None = None, timeout: float = 120.0) -> list[Proposal]:
        """One hint-constructor call per round (as the driver); the response is cached in
        ``proposer-response.json`` before it is parsed."""
        d = self._require_stage("hints")
        self._require_writable()
        client = ProposalClient.configured(self.settings, base_url=base_url, model=model, timeout=timeout)
        if d.proposer_called:
            raise SearchError("the hint constructor was already asked in this round (one proposer call per round); type a hint instead")
        messages = self.proposer_prompt()
        d.prompt = messages
        reply = await client.ask(messages)
        d.proposer_called = True
        cache = d.dir / "proposer-response.json"
        self.layout.write_bound(cache, client.cache_identity(messages), client.cache_payload(reply))
        if reply.error:
            raise SearchError(f"{reply.error} (the raw reply is kept in {self.layout.rel(cache)})")
        out = self._new_proposals(d, reply.hints, "openai_compatible", client.model)
        self._add_journaled(d, out, provider=client.model)
        return out

    def _proposal(self, index: int) -> Proposal:
        d = self._require_stage("hints")
        if not 0 <= index < len(d.proposals):
            raise SearchError(f"no proposal {index}")
        return d.proposals[index]

    def _hint_evidence(self, d: RoundDraft) -> list[Path]:
        paths = [self.layout.request_path(d.index), self.layout.inputs_dir(d.index) / "public.json", d.dir / "repair_candidates.jsonl"]
        if (d.dir / "proposer-response.json").is_file():
            paths.append(d.dir / "proposer-response.json")
        return paths

    def reject_hint(self, index: int, reason: str) -> dict[str, Any]:
        p = self._proposal(index)
        if not (reason or "").strip():
            raise SearchError("rejecting a hint needs a reason")
        d = self._require_stage("hints")
        ev = self._journal("reject_hint", reason=reason, evidence=self._hint_evidence(d), hint_sha256=p.hint_sha256,
                           data={"proposal_index": index, "audit_errors": list(p.audit.get("errors") or [])})
        p.status, p.reason, p.event_id = "rejected", reason, ev["id"]
        return ev

    def approve_hint(self, index: int, reason: str = "") -> dict[str, Any]:
        """Approve one audited hint to run; writes ``hint-proposals.json`` and the audits."""
        d = self._require_stage("hints")
        p = self._proposal(index)
        if not p.passed:
            raise SearchError(f"the hint failed its audit ({', '.join(p.audit.get('errors') or [])}); it cannot run")
        ev = self._journal("approve_hint", reason=reason, evidence=self._hint_evidence(d), hint_sha256=p.hint_sha256,
                           data={"proposal_index": index, "provider": p.provider})
        p.status, p.reason, p.event_id = "approved", reason, ev["id"]
        d.approved = p
        self._write_approval(d)
        return ev

    def _write_approval(self, d: RoundDraft) -> None:
        """The audits and ``hint-proposals.json`` of the approved hint; the round moves to its continuation."""
        assert d.approved is not None
        self._write_audits(d)
        self.layout.write_bound(d.dir / "hint-proposals.json", d.config, [d.approved.driver_row(d.site["step_id"])])
        d.stage = "continuation"

    def _write_audits(self, d: RoundDraft, extra: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        rows = S.audit_rows(d, extra)
        self.layout.write_json(d.dir / "proposer-hint-audits.json", {"proposals": rows}, replace=True)
        return rows

    # ================================================================ continuation
    async def run_continuation(
        self,
        runner: ContinuationRunner,
        *,
        on_event: Callable[[PolicyEvent], None] | None = None,
    ) -> ContinuationOutcome:
        """Stream the approved hint's continuation and record it into the round as the driver would.

        A failed or cancelled stream writes ``generation-last-error.json`` (type only),
        journals what it streamed, and leaves the round at the continuation gate (run
        again or relocalize)."""
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
        acc = StreamAccumulator()  # what streamed, kept for the round if the run ends early

        def forward(ev: PolicyEvent) -> None:
            acc.add(ev)
            if on_event is not None:
                on_event(ev)

        job = ContinuationJob(case=self.inputs.case, source_step_index=int(d.site["source_step_index"]), hint=d.approved.text,
                              round_index=d.index, on_event=forward)
        d.partial = None
        try:
            outcome = await runner(job)
        except asyncio.CancelledError:
            # the operator cancelled: the round stays at this gate and says so (also after a reopen)
            self._run_ended(d, ContinuationOutcome(status="cancelled", error="cancelled by the operator", error_type="cancelled"), acc)
            raise
        if outcome.attestation is not None:
            self.layout.write_json(d.dir / "live-serving-check.json", outcome.attestation, replace=True)
        if not outcome.ok:
            self._run_ended(d, outcome, acc)
            return outcome
        d.outcome = outcome
        self._record_continuation(d, outcome)
        d.stage = "verdict"
        return outcome

    def _run_ended(self, d: RoundDraft, outcome: ContinuationOutcome, acc: StreamAccumulator) -> None:
        """A run that ended cancelled or failed: ``generation-last-error.json`` as the driver writes it
        (the error's type only), and a journal comment with what streamed, so a reopen shows it."""
        d.outcome = outcome
        error_type = S.failed_error_type(outcome)
        retry = d.retries
        self.layout.write_json(d.dir / "generation-last-error.json", S.last_error_doc(retry, error_type), replace=True)
        d.retries += 1
        d.partial = S.partial_from_accumulator(acc)
        try:
            self._journal(
                "comment", reason=f"continuation {outcome.status}", evidence=[d.dir / "generation-last-error.json"],
                data={"event": "continuation_ended", "status": outcome.status, "error_type": error_type, "retry": retry,
                      "partial": S.partial_to_journal(d.partial)},
            )
        except JournalError as exc:
            # the run's end is in generation-last-error.json; only its streamed text is not kept
            self.messages.append(f"what the {outcome.status} continuation streamed is not journaled: {exc}")

    def _cached_continuation(self, d: RoundDraft) -> dict[str, Any] | None:
        """The round's stored continuation payload, when one was written before (a crash
        after generation): reused as the driver's ``cached_continuation`` does."""
        path = d.dir / _CONT
        if not path.exists():
            return None
        assert d.approved is not None
        bound = read_bound(path)
        if bound.problems or bound.identity != S.continuation_identity(d.config, d.approved.hint_sha256) or not isinstance(bound.payload, dict):
            raise SearchError(f"{self.layout.rel(path)} exists but does not bind this run and hint; it is never overwritten")
        return bound.payload

    def _teacher_output(self, d: RoundDraft, outcome: ContinuationOutcome | None) -> tuple[dict[str, Any], dict[str, Any], str]:
        """(teacher capture, episode, stop reason): from the cached continuation, or built from
        ``outcome`` and written to ``continuations/hint-00.json``."""
        cached = self._cached_continuation(d)
        if cached is not None:
            return cached["teacher_steps"][0]["metadata"]["policy_token_capture"], cached["teacher_episode_trace"], cached["stop_reason"]
        assert outcome is not None and d.approved is not None
        trace = self.inputs.trace
        source_step = R.trace_steps_of(trace)[int(d.site["source_step_index"])]
        hint_sha = d.approved.hint_sha256
        capture = R.token_capture(outcome.prompt_token_ids, outcome.completion_token_ids, outcome.logprobs, outcome.topk)
        step = R.teacher_step(
            site=d.site, source_step=source_step, content=outcome.content, reasoning=outcome.reasoning,
            tool_calls=outcome.tool_calls, capture=capture, usage=outcome.usage,
            finish_reason=outcome.finish_reason, hint_sha=hint_sha,
        )
        step["metadata"]["policy_request"] = outcome.request
        step["metadata"]["attestation_status"] = outcome.attestation_status
        if outcome.timings:
            # what the stream measured (ttft, rate), so a reopened search shows the same figures
            step["metadata"]["stream_timings"] = {k: outcome.timings.get(k) for k in ("ttft_s", "wall_s", "tokens_per_s")}
        episode = R.build_episode(trace, d.site, [step], source_runtime_store_path=S.source_runtime_store(trace), attempt_store=None)
        stop_reason = episode["stop_reason"]
        self.layout.write_bound(d.dir / _CONT, S.continuation_identity(d.config, hint_sha),
                                S.continuation_payload(step, d.approved.text, stop_reason, episode))
        return capture, episode, stop_reason

    def _record_continuation(self, d: RoundDraft, outcome: ContinuationOutcome | None) -> None:
        assert d.approved is not None
        index = int(d.site["source_step_index"])
        source_step = R.trace_steps_of(self.inputs.trace)[index]
        src_meta = _v if isinstance(_v := source_step.get("metadata"), dict) else {}
        src_capture = _v if isinstance(_v := src_meta.get("policy_token_capture"), dict) else {}
        capture, episode, stop_reason = self._teacher_output(d, outcome)
        ep_path = d.dir / _EPISODE
        self.layout.write_json(ep_path, episode)
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
        record = R.attempt_record(
            candidate=d.candidate, site=d.site, proposal=d.approved.driver_row(d.site["step_id"]), roles=roles,
            student_prompt_ids=student_ids, teacher_capture=capture,
            source_trace_sha256=self.inputs.trace_sha256,
            continuation=S.attempt_continuation(stop_reason, sha256_file(ep_path)),
            psd_media=media,
        )
        self.layout.write_jsonl(d.dir / "repair_attempts.jsonl", [record])
        self.layout.write_json(d.dir / "manifest.json", self._run_manifest_final([record]), replace=True)
        d.record, d.episode = record, episode

    def _archived_images_outcome(self, index: int) -> ContinuationOutcome | None:
        """The failure step's archived request images (for a continuation reused after a crash).
        When they cannot be read, ``psd_media`` stays absent and ``check`` reports it."""
        case = self.inputs.case
        if case is None:
            return None
        try:
            archived, _ = case.source_step_request(index)
        except (OSError, ValueError) as exc:
            self.messages.append(f"the failure step's archived images cannot be read (the attempt has no psd_media): {exc}")
            return None
        images = [(img.sha256, img.mime, img.data) for img in (archived.images if archived is not None else [])]
        return ContinuationOutcome(status="complete", images=images) if images else None

    def _write_media(self, d: RoundDraft, outcome: ContinuationOutcome) -> dict[str, Any] | None:
        if not outcome.images:
            return None
        shas, paths = self.layout.write_media(d.dir, outcome.images)
        profile = None
        if self.settings.policy_profile:
            profile, _ = read_json(self.settings.policy_profile)
        return S.media_block(S.processor_id(self.settings.policy_model, profile), shas, paths)

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
        values = S.verdict_checker(checker, accepted=accepted)
        earliest = S.earliest_error_step(earliest_error_step, accepted=accepted, site=d.site)
        hint_sha = d.approved.hint_sha256 if d.approved else None
        ev = self._journal(
            "approve_attempt" if accepted else "reject_attempt",
            reason=reason,
            evidence=[d.dir / _CONT, d.dir / _EPISODE],
            attempt_id=d.record["attempt_id"],
            hint_sha256=hint_sha,
            data={"checker": {k: v for k, v in values.items() if v is not None}, "earliest_error_step": earliest},
        )
        lv = R.local_verification(
            d.record, d.episode, operator=self.settings.operator, passed=accepted, checker=values,
            earliest_error_step=earliest, reason=reason, event_id=ev["id"],
        )
        lay = self.layout
        lay.write_json(d.dir / "judge" / "hint-00.json", lv, replace=True)
        d.record = R.apply_verdict(d.record, lv, accepted=accepted, reason=reason)
        lay.write_jsonl(d.dir / "repair_attempts.jsonl", [d.record])
        lay.write_json(d.dir / "gemini-verification-bundle.json", S.verification_bundle(hint_sha), replace=True)
        lay.write_json(d.dir / "manifest.json", self._run_manifest_final([d.record]), replace=True)
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
    def _close_audits(self, d: RoundDraft, extra: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The round's final audit rows (rewritten when anything was decided, else as on disk)."""
        audits_path = d.dir / "proposer-hint-audits.json"
        if d.proposals or extra or d.earlier_audit_rows or not audits_path.exists():
            return self._write_audits(d, list(extra))
        existing, _ = read_json(audits_path)
        return list(existing.get("proposals") or []) if isinstance(existing, dict) else []

    def _close_round(self, *, extra_audit_rows: Sequence[dict[str, Any]] = (), operator_relocalization: dict[str, Any] | None = None) -> dict[str, Any]:
        d = self.draft
        assert d is not None
        records = [d.record] if d.record is not None else []
        audit_rows = self._close_audits(d, extra_audit_rows)
        if d.proposals and not (d.dir / "hint-proposals.json").exists():
            self.layout.write_bound(d.dir / "hint-proposals.json", d.config, [])
        manifest = self._run_manifest_final(records)
        self.layout.write_json(d.dir / "manifest.json", manifest, replace=True)
        if not records:
            self.layout.replace(d.dir / "repair_attempts.jsonl", b"")
        rdir = d.dir.resolve()
        row = S.round_row(d, records=records, audit=audit_rows, status=manifest["status"], round_dir=rdir,
                          files=self.layout.round_files(rdir), operator_relocalization=operator_relocalization)
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
        S.close_pending(d, note)
        self._close_round()
        return ev

    def stop(self, note: str = "") -> dict[str, Any]:
        """The operator stops the search between rounds.

        The search files say so as the driver gate's stop does: status
        ``paused_execution_error`` with ``execution_error`` ``{round, type:
        "OperatorStoppedSearch"}`` for the round that was not started. No round
        starts until :meth:`resume`."""
        self._require_writable()
        refusal = S.stop_refusal(self.draft, self.state)
        if refusal is not None:
            raise SearchError(refusal)
        index = len(self.history)
        error = S.operator_stop_error(index)
        ev = self._journal(
            "stop_search", reason=note or "operator stopped the search", round=index, step_index=None,
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
        ev = self._journal("resume_search", reason=note or "operator resumed the search", round=index, step_index=None,
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
        rdir = self.layout.round_dir(index)
        if not (rdir.exists() or self.layout.request_path(index).exists()):
            return
        start = resume.round_start(rdir, self.layout.request_path(index))
        if start is None:
            self._finish_interrupted_start(rdir)
            return
        site = R.site_from_candidate(start.candidate, self.inputs.trace) or dict(self.inputs.site)
        _, needs = self.next_site()
        events = S.round_events(self.journal.events, index)
        d = RoundDraft(index=index, dir=rdir, feedback=start.feedback, site=site,
                       candidate=start.candidate, config=start.config, stage="hints" if S.site_accepted(events) else "site",
                       relocalization_requested=needs)
        d.proposer_called = (rdir / "proposer-response.json").is_file()
        self.draft = d
        d.proposals, d.approved = S.proposals_from_events(
            events, default_level=self.settings.hint_level, audit=lambda text, level: self._audit(d, text, level)
        )
        if d.proposer_called and not any(p.provider != "operator" for p in d.proposals):
            self._resume_fetched(d)
        self._resume_approval(d)
        d.outcome, d.retries = resume.last_error_outcome(rdir)
        if d.outcome is not None:
            d.partial = S.partial_from_journal(events)
        self._resume_attempt(d)
        self.messages.append(f"resumed {rdir.name} at the {d.stage} gate")
        if d.stage == "verdict" and d.record is not None and d.record.get("local_verification"):
            self._close_round()

    def _finish_interrupted_start(self, rdir: Path) -> None:
        """The round was interrupted while starting: its start is deterministic (write-once
        files are re-checked byte for byte), so a writable instance finishes it now."""
        if self.read_only:
            self.messages.append(f"{rdir.name} was interrupted while starting; a writable instance will finish it")
            return
        try:
            self.begin_round()
        except SearchError as exc:
            self.messages.append(f"{rdir.name} was interrupted while starting and cannot be finished: {exc}")
            return
        self.messages.append(f"finished starting {rdir.name} (it was interrupted)")

    def _resume_approval(self, d: RoundDraft) -> None:
        """The approved hint's files: read back, or written now when the approval was journaled
        but a crash came before its files (a read-only instance leaves the hint pending)."""
        try:
            row = resume.approved_row(d.dir)
        except resume.UnreadableApproval as exc:
            # the round stays at its hint gate; its file is never overwritten, so an approval
            # is refused there with the reason (the operator sees the damage, not an empty hint)
            self.messages.append(f"{exc}; the round stays at its hint gate")
            return
        if row is not None:
            if d.approved is None:
                # a journal from before proposals were journaled: only the approved hint is known
                d.approved = resume.approval_from_row(row)
                d.earlier_audit_rows = resume.earlier_audit_rows(d.dir)
            d.stage = "continuation"
        elif d.approved is not None and not self.read_only:
            self._write_approval(d)
        elif d.approved is not None:
            d.approved.status = "pending"
            d.approved = None

    def _resume_attempt(self, d: RoundDraft) -> None:
        """A recorded attempt puts the round at its verdict gate."""
        recorded = resume.recorded_attempt(d.dir)
        if recorded is None:
            return
        d.record, d.episode = recorded
        d.site = dict(d.record.get("repair_site") or d.site)
        d.stage = "verdict"
        d.outcome = ContinuationOutcome(status="complete")
        d.partial = None

    def _resume_fetched(self, d: RoundDraft) -> None:
        """The hint constructor answered (its reply is cached) but the proposals were not
        journaled (an interruption in between): add them from the cached reply now, as
        the one proposer call of the round is already spent."""
        bound = read_bound(d.dir / "proposer-response.json")
        model = str(bound.identity.get("model") or "") if isinstance(bound.identity, dict) else ""
        try:
            texts = hints_from_cache(bound.payload, limit=self.settings.hint_count)
        except HintFetchError as exc:
            self.messages.append(f"the cached hint-constructor reply gives no proposals: {exc}")
            return
        if not texts or self.read_only:
            return
        out = self._new_proposals(d, texts, "openai_compatible", model)
        self._add_journaled(d, out, provider=model or "the hint constructor")
        self.messages.append(f"{len(out)} proposal(s) taken from the cached hint-constructor reply")
