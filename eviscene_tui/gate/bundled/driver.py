"""The bundled driver: a feedback search from an existing case, always under the gate.

``eviscene-tui repair CASE_PATH`` runs it in its own process. It searches as the
EviScene driver does (psd-run-format §4: the protocol's rules, the driver's
layout) from the case's source trace, localization and archived failure-step
request, and every step an operator decides is a gate it declares in its sidecar
(``<root>.eviscene-gate``), the same files ``eviscene-tui gate -- DRIVER.py``
writes for the real driver:

- the round gate (every feedback search): ``approve-round``, ``relocalize [--step K]``
  (the step must be a policy step of the trace), ``stop``;
- a hint gate per hint: ``approve-hint``, ``reject-hint``, ``add-hint --text`` (typed or
  edited: audited as any proposal, then asked again at the next hint gate), ``stop``.
  With a hint constructor (``--hint-url``) its proposals (one call a round, cached in
  ``proposer-response.json``) come first; without one the hint gate is pending with no
  hint until ``add-hint``, and a ``reject-hint`` there ends the round without an attempt;
- while the approved hint's continuation streams, the attempt gate offers
  ``cancel-continuation``; a cancelled or failed continuation offers its hint again;
- the attempt gate (this driver has no judge): ``accept-attempt``, ``reject-attempt
  [--checker K=V]… --reason``, ``stop``.

A stop at any gate pauses the search as any driver records a failed round
(``paused_execution_error``, ``OperatorStoppedSearch``); ``--resume`` re-enters
the round and replays the decisions taken (a one-shot decision is asked again).
Each continuation's deltas go to the sidecar's live channel as vLLM sends them.

The rounds run only inside the gate's ``run_search`` wrapper: a round entered
any other way refuses to start (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_sha256, read_bound, read_json, read_jsonl, sha256_file
from eviscene_tui.gate import inproc
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.bundled import records as R
from eviscene_tui.gate.bundled import stages as S
from eviscene_tui.gate.bundled.audit import audit_hint, driver_audit
from eviscene_tui.gate.bundled.continuation import ContinuationJob, ContinuationOutcome, ContinuationRunner
from eviscene_tui.gate.bundled.hints import HintFetchError, build_prompt
from eviscene_tui.gate.bundled.layout import LayoutWriter
from eviscene_tui.gate.bundled.live import LiveWriter
from eviscene_tui.gate.bundled.proposer import ProposalClient, hints_from_cache
from eviscene_tui.gate.bundled.source import CaseInputs
from eviscene_tui.gate.bundled.stages import Budgets, SearchError, SearchSettings
from eviscene_tui.storage import WorkDir

try:  # pragma: no cover - POSIX only
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]  # Windows has no flock

CONT = S.CONTINUATION_FILE
EPISODE = S.EPISODE_FILE


@dataclass
class Hint:
    """A hint of the round's queue (the constructor's, or one the operator added)."""

    text: str
    level: int
    provider: str
    model: str
    audit: dict[str, Any]
    note: str = ""  # why it is offered (again): "the continuation was cancelled", …

    @property
    def sha256(self) -> str:
        return P.hint_sha256(self.text)

    def driver_row(self, site_step_id: str) -> dict[str, Any]:
        return {"text": self.text, "level": self.level, "proposal_id": R.proposal_id_for(site_step_id, self.text, self.level),
                "provider": self.provider, "model": self.model, "audit": driver_audit(self.audit)}

    def public(self, site_step_id: str) -> dict[str, Any]:
        return {**self.driver_row(site_step_id), "hint_sha256": self.sha256, "note": self.note or None}


@dataclass
class Round:
    """The round being run (what its gates show and what its files get)."""

    index: int
    dir: Path
    feedback: dict[str, Any]
    site: dict[str, Any]
    candidate: dict[str, Any]
    config: dict[str, Any]
    search: inproc.SearchGate
    queue: list[Hint] = field(default_factory=list)  # the hints not shown yet, the next gate's first
    audits: list[dict[str, Any]] = field(default_factory=list)  # proposer-hint-audits.json rows
    approved: Hint | None = None
    record: dict[str, Any] | None = None
    episode: dict[str, Any] | None = None
    retries: int = 0
    gate: int = 0  # the next hint gate's index
    notice: str = ""  # what happened at the previous hint gate (an added hint that failed its audit)

    @property
    def name(self) -> str:
        return R.round_name(self.index)


class BundledDriver:
    """One bundled-driver search root (``root``, in the app's work directory)."""

    def __init__(self, inputs: CaseInputs, root: Path, work: WorkDir, *, settings: SearchSettings, budgets: Budgets,
                 runner: ContinuationRunner, gate: inproc.Gate) -> None:
        self.inputs = inputs
        self.root = root
        self.work = work
        self.settings = settings
        self.budgets = budgets
        self.runner = runner
        self.gate = gate
        self.layout = LayoutWriter(root, work)
        self.identity = S.search_identity(inputs, str(root.resolve()), budgets)
        self.policy_steps = R.policy_step_indices(inputs.trace)
        gate.round_offers = self.round_offers

    # ================================================================ the search
    async def run(self, *, resume: bool) -> dict[str, Any]:
        """The search, through the gate's ``run_search`` wrapper (its round gate, its sidecar)."""
        search = self.gate.gated_search(self.run_search)
        result: dict[str, Any] = await search(root=self.root, identity=self.identity, resume=resume, execute_round=self.execute_round,
                                              max_attempts=self.budgets.max_attempts, max_proposals=self.budgets.max_proposals,
                                              max_seconds=self.budgets.max_seconds)
        return result

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """``search.lock`` as the driver takes it: a second writer of this root fails at once."""
        fd = os.open(self.work.guard(self.root / "search.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    raise SearchError(f"another driver runs this search ({self.root} is locked)") from None
            yield
        finally:
            os.close(fd)

    def _open_state(self, resume: bool, identity: dict[str, Any]) -> dict[str, Any]:
        path = self.root / "search-state.json"
        if not resume:
            if path.exists():
                raise SearchError(f"{self.root} holds a search already; run it again with --resume")
            return {"status": "searching", "elapsed_seconds": 0.0, "rounds": [], "execution_error": None}
        bound = read_bound(path)
        if bound.problems:
            raise SearchError(f"nothing to resume in {self.root}: {bound.problems[0].message}")
        if bound.identity != identity:
            raise SearchError(f"{self.root} belongs to a search with other inputs or budgets (its search-state identity differs)")
        payload = bound.payload if isinstance(bound.payload, dict) else {}
        for row in payload.get("rounds") or []:
            for name, digest in (row.get("files") or {}).items():
                if sha256_file(name) != digest:
                    raise SearchError(f"search snapshot changed: {name}")
        return {"status": payload.get("status", "searching"), "elapsed_seconds": float(payload.get("elapsed_seconds") or 0.0),
                "rounds": list(payload.get("rounds") or []), "execution_error": None}

    async def run_search(self, *, root: Path, identity: dict[str, Any], resume: bool, execute_round: Any, max_attempts: int,
                         max_proposals: int, max_seconds: float) -> dict[str, Any]:
        """The driver's feedback loop (§4.3), its files written through the layout writer."""
        P.validate_budgets(max_attempts, max_proposals, max_seconds)
        self.layout.sweep_tmp()
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock():
            state = self._open_state(resume, identity)
            while True:
                stop = P.next_stop(state, max_attempts, max_proposals, max_seconds, S.tree_size(self.root))
                if stop:
                    state["status"] = stop
                    return self._persist(state)
                index = len(state["rounds"])
                feedback = P.revision_context(state["rounds"])
                self._write_request(index, feedback)
                state["status"], state["execution_error"] = "searching", None
                self._persist(state)
                started = time.monotonic()
                try:
                    await execute_round(self.layout.round_dir(index), feedback, copy.deepcopy(state["rounds"]))
                except Exception as exc:  # noqa: BLE001 - as the driver: any round failure pauses the search, recorded
                    inproc._say(f"round {index} paused: {type(exc).__name__}: {exc}")
                    state["elapsed_seconds"] += time.monotonic() - started
                    state["status"] = P.PAUSED_EXECUTION_ERROR
                    state["execution_error"] = {"round": index, "type": type(exc).__name__}
                    return self._persist(state)
                state["elapsed_seconds"] += time.monotonic() - started
                row = self._inspect_round(index)
                if row is None:
                    state["status"] = "paused_pending_verifier"
                    return self._persist(state)
                state["rounds"].append(row)
                self._persist(state)

    def _persist(self, state: dict[str, Any]) -> dict[str, Any]:
        self.layout.persist(state, self.identity, self.budgets)
        return S.search_manifest(S.search_state_payload(state), self.budgets)

    def _write_request(self, index: int, feedback: dict[str, Any]) -> None:
        path = self.layout.request_path(index)
        identity = {"search": canonical_sha256(self.identity), "round": index}
        if path.exists():
            bound = read_bound(path)
            if bound.problems or bound.identity != identity or bound.payload != feedback:
                raise SearchError("search feedback changed on resume")
            return
        self.layout.write_bound(path, identity, feedback)

    def _inspect_round(self, index: int) -> dict[str, Any] | None:
        """The round's history row from its files; None while its attempt waits for a verdict."""
        rdir = self.layout.round_dir(index).resolve()
        manifest, _ = read_json(rdir / "manifest.json")
        records, _ = read_jsonl(rdir / "repair_attempts.jsonl") if (rdir / "repair_attempts.jsonl").is_file() else ([], [])
        if any(not r.get("local_verification") for r in records):
            return None
        audits, _ = read_json(rdir / "proposer-hint-audits.json")
        rows = list(audits.get("proposals") or []) if isinstance(audits, dict) else []
        candidates, _ = read_jsonl(rdir / "repair_candidates.jsonl")
        episode, _ = read_json(rdir / EPISODE) if records else (None, [])
        status = str(manifest.get("status") if isinstance(manifest, dict) else "no_admissible_hints")
        return S.round_row(candidate=candidates[-1] if candidates else None, episode=episode if isinstance(episode, dict) else None,
                           records=records, audit=rows, status=status, round_dir=rdir, files=self.layout.round_files(rdir))

    # ================================================================ the round gate's offers
    def round_offers(self, round_index: int, feedback: Any, history: Any) -> list[dict[str, Any]]:
        """What this driver's round gate offers: relocalize at a policy step of the trace;
        approve only when the round has a site to run at (round 0 of a case without one
        needs the operator's step)."""
        steps = self.policy_steps
        site = P.current_site(history, feedback) if history else (self.inputs.site or {}).get("source_step_index")
        after = next((s for s in steps if site is not None and s > site), None)
        why = ("without --step: the next policy step after the current site" + (f" (step {after})" if after is not None else " (none: name one)"))
        relocalize = P.offer(P.RELOCALIZE, step_range=[0, len(R.trace_steps_of(self.inputs.trace)) - 1], steps=steps, why=why,
                             step_required=site is None or after is None or None)
        if site is None:
            return [relocalize, P.offer(P.STOP)]
        return [P.offer(P.APPROVE_ROUND), relocalize, P.offer(P.STOP)]

    # ================================================================ one round
    async def execute_round(self, directory: Path, feedback: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """One round under its gates (see the module doc). Refuses to run ungated."""
        ctx = inproc.current_round()
        if ctx is None:
            raise inproc.GateError("the bundled driver runs a round only after its round gate; refusing to run it ungated")
        rnd = self._start_round(ctx["search"], int(ctx["round"]), Path(directory), ctx["feedback"], history, ctx["decision"])
        await self._proposals(rnd)
        while rnd.record is None:
            hint = await self._hint_gates(rnd)
            if hint is None:
                break
            await self._continuation(rnd, hint)
        if rnd.record is not None and not rnd.record.get("local_verification"):
            await self._attempt_gate(rnd)
        self._close_round(rnd)

    def _start_round(self, search: inproc.SearchGate, index: int, rdir: Path, feedback: dict[str, Any], history: list[dict[str, Any]],
                     decision: dict[str, Any]) -> Round:
        """The round's inputs and site (write-once files re-checked byte for byte on resume)."""
        site, semdoc = self._round_site(feedback, history, decision)
        config = self._write_round_inputs(index, feedback, history, semdoc)
        candidate = R.bind_candidate(self.inputs.candidate, self.inputs.trace, site, source_trace_sha256=self.inputs.trace_sha256)
        self.layout.write_jsonl(rdir / "repair_candidates.jsonl", [candidate])
        if not (rdir / "manifest.json").exists():
            self.layout.write_json(rdir / "manifest.json", S.run_manifest_initial(self.inputs), replace=True)
        return Round(index, rdir, feedback, site, candidate, config, search)

    def _round_site(self, feedback: dict[str, Any], history: list[dict[str, Any]], decision: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(site, semantic-localization document) of the round: the operator's step when
        relocalized, else the latest round's site (its localization reused), else the case's."""
        trace = self.inputs.trace
        if feedback.get("needs_relocalization"):
            anchor = feedback.get("anchor_feedback") or {}
            step = anchor.get("earliest_error_step")
            if type(step) is not int or step not in self.policy_steps:
                selected = anchor.get("selected_source_step")
                step = next((s for s in self.policy_steps if type(selected) is int and s > selected), None)
            if step is None:
                raise SearchError("relocalize needs a step: there is no policy step after the current site")
            operator = str(decision.get("operator") or self.settings.operator)
            note = str(decision.get("reason") or "relocalized at the round gate")
            site = R.site_from_trace(trace, step, localization_kind="operator", localization_verifier=f"operator:{operator}",
                                     basis={"source_step_index": step, "note": note, "operator": operator})
            return site, R.operator_localization(trace, step, note=note, operator=operator, category=None)
        if history:
            last = history[-1]
            site = S.reused_site(last, trace) or dict(self.inputs.site or {})
            reused, _ = read_json(Path(str(last.get("directory"))) / "semantic-localization.json")
            return site, reused if isinstance(reused, dict) else None
        if self.inputs.site is None:
            raise SearchError("the case has no failure site; relocalize round 0 at a step")
        return dict(self.inputs.site), self.inputs.semantic_localization

    def _write_round_inputs(self, index: int, feedback: dict[str, Any], history: list[dict[str, Any]],
                            semdoc: dict[str, Any] | None) -> dict[str, Any]:
        """The round's inputs and ``run-inputs.json`` (write-once); returns the run configuration."""
        lay = self.layout
        inputs_dir = lay.inputs_dir(index)
        public, media = inputs_dir / "public.json", inputs_dir / "media.json"
        context = self.inputs.public_context if isinstance(self.inputs.public_context, dict) else {}
        try:
            lay.write_json(public, {**context, "repair_search": feedback})
            lay.write_json(media, {"episodes": S.earlier_teacher_episodes(history)})
        except SearchError:
            raise SearchError(P.CHANGED_ON_RESUME) from None
        semloc = None
        if semdoc is not None:
            semloc = inputs_dir / "semantic-localization.json"
            lay.write_json(semloc, semdoc)
        rdir = lay.round_dir(index)
        profile = self.settings.policy_profile
        bindings = S.RoundBindings(public=self._binding(public), media=self._binding(media), semantic_localization=self._binding(semloc),
                                   serving_profile=self._binding(Path(profile)) if profile else None)
        config = S.run_config(self.settings, self.inputs, self.budgets, str(rdir.resolve()), bindings)
        lay.write_bound(rdir / "run-inputs.json", config, {"status": "initialized"})
        if semdoc is not None:
            lay.write_json(rdir / "semantic-localization.json", semdoc)
        return config

    @staticmethod
    def _binding(path: Path | None) -> dict[str, Any] | None:
        if path is None or not path.is_file():
            return None
        return {"path": str(path.resolve()), "sha256": sha256_file(path)}

    # ================================================================ hints
    def _audit(self, rnd: Round, text: str) -> dict[str, Any]:
        return audit_hint(text, level=self.settings.hint_level, private_context=self.inputs.private_context, feedback=rnd.feedback)

    def _admit(self, rnd: Round, hint: Hint, at: int | None = None) -> bool:
        """A hint that passes its audit joins the queue (at ``at``); one that fails leaves its
        reason in the audit rows, as the driver records a rejected proposal."""
        if not hint.audit.get("passed"):
            rnd.audits.append({"passed": False, "reason": hint.audit.get("reason") or "hint_audit_failed"})
            return False
        rnd.queue.insert(len(rnd.queue) if at is None else at, hint)
        return True

    async def _proposals(self, rnd: Round) -> None:
        """The hint constructor's proposals of the round (one call a round, its reply cached
        in ``proposer-response.json`` before it is parsed; on resume the cached reply),
        audited and admitted in order."""
        if not (self.settings.hint_url and self.settings.hint_model):
            return
        client = ProposalClient.configured(self.settings)
        cache = rnd.dir / "proposer-response.json"
        if not cache.is_file():
            step = R.trace_steps_of(self.inputs.trace)[int(rnd.site["source_step_index"])]
            messages = build_prompt(feedback=rnd.feedback, site=rnd.site, public_context=self.inputs.public_context,
                                    failure_step=step if isinstance(step, dict) else {}, level=self.settings.hint_level,
                                    count=self.settings.hint_count)
            reply = await client.ask(messages)
            self.layout.write_bound(cache, client.cache_identity(messages), client.cache_payload(reply))
        try:
            texts = hints_from_cache(read_bound(cache).payload, limit=self.settings.hint_count)
        except HintFetchError as exc:
            rnd.notice = f"the hint constructor's reply gives no hints ({exc}); add one"
            return
        for text in texts:
            self._admit(rnd, Hint(text, self.settings.hint_level, "openai_compatible", client.model, self._audit(rnd, text)))

    async def _hint_gates(self, rnd: Round) -> Hint | None:
        """Ask hint gate after hint gate until one is approved (returned) or the round ends
        without an attempt (None)."""
        while True:
            index = rnd.gate
            hint = rnd.queue.pop(0) if rnd.queue else None
            offers = [P.offer(P.APPROVE_HINT)] if hint is not None else []
            offers += [P.offer(P.REJECT_HINT, why=None if hint is not None else "no hint: the round ends without an attempt"),
                       P.offer(P.ADD_HINT), P.offer(P.STOP)]
            decision = await rnd.search.ask("hint", rnd.index, index, offers, **self._hint_body(rnd, hint))
            rnd.notice = ""
            rnd.gate = index + 1
            name = P.gate_name(rnd.index, "hint", index)
            if decision["action"] == P.APPROVE_HINT and hint is not None:
                ended = self._ended_before(rnd, name, decision)
                if ended is None:
                    rnd.approved = hint
                    return hint
                self._offer_again(rnd, hint, ended)
                continue
            rnd.search.applied(name, decision, {"hint_sha256": hint.sha256 if hint else None})
            if hint is not None:
                rnd.audits.append({"passed": False, "reason": P.OPERATOR_REJECTED})
            if decision["action"] == P.ADD_HINT:
                self._add_hint(rnd, decision)
            elif hint is None:
                return None  # rejected with no hint: the round ends without an attempt

    def _ended_before(self, rnd: Round, gate: str, decision: dict[str, Any]) -> str | None:
        """How the continuation of this approval ended in an earlier run of this round, when
        it ended early and the operator decided at the gate that offered its hint again (a
        resume follows that path). Without such a decision (a stop there, consumed) the
        approval stands and its continuation runs again."""
        applied, _ = P.read_document(rnd.search.gate_dir / P.APPLIED_DIR / f"{gate}.json")
        if not applied or applied.get("decision_id") != decision.get("decision_id"):
            return None
        ended = applied.get("continuation")
        if not isinstance(ended, str) or ended == "complete":
            return None
        following = rnd.search.gate_dir / P.DECISIONS_DIR / f"{P.gate_name(rnd.index, 'hint', rnd.gate)}.json"
        return ended if following.exists() else None

    def _offer_again(self, rnd: Round, hint: Hint, ended: str) -> None:
        """A continuation that was cancelled or failed: its hint is offered again at the next gate."""
        again = Hint(hint.text, hint.level, hint.provider, hint.model, hint.audit, note=f"its continuation {ended}; approve to run it again")
        rnd.queue.insert(0, again)

    def _add_hint(self, rnd: Round, decision: dict[str, Any]) -> None:
        text = str(decision.get("text") or "")
        who = str(decision.get("operator") or self.settings.operator)
        hint = Hint(text, self.settings.hint_level, "operator", who, self._audit(rnd, text), note=f"added by {who}")
        if not self._admit(rnd, hint, 0):
            errors = ", ".join(hint.audit.get("errors") or []) or "hint_audit_failed"
            rnd.notice = f"the hint {who} added failed its audit ({errors}); it is not offered"

    def _hint_body(self, rnd: Round, hint: Hint | None) -> dict[str, Any]:
        """What a hint gate shows: the hint and its audit, the site and what the agent did
        there, the feedback, what was rejected before this gate."""
        step_id = str(rnd.site.get("step_id"))
        digest = P.sha256_file(rnd.dir / "proposer-response.json")
        return {
            "round_directory": str(rnd.dir), "request_file": f"requests/{rnd.name}.json",
            "request_sha256": P.sha256_file(self.layout.request_path(rnd.index)), "feedback": rnd.feedback,
            "site": site_view(self.inputs.trace, rnd.site), "hint": hint.public(step_id) if hint is not None else None,
            "revision_rejection": P.revision_rejection(hint.text, rnd.feedback) if hint is not None else None,
            "rejected_before": [r.get("reason") for r in rnd.audits], "notice": rnd.notice or None,
            "hint_constructor": self.settings.hint_model if self.settings.hint_url else None,
            "files": {os.path.relpath(rnd.dir / "proposer-response.json", self.root): digest} if digest else {},
        }

    # ================================================================ the continuation
    async def _continuation(self, rnd: Round, hint: Hint) -> None:
        """The approved hint's continuation: the cached one (never re-sampled), else streamed
        under the cancel gate. One that ends early is offered again at the next hint gate."""
        gate = P.gate_name(rnd.index, "hint", rnd.gate - 1)
        decision = self._decision_of(rnd, gate)
        cached = self._cached_continuation(rnd, hint)
        outcome: ContinuationOutcome | None = None
        if cached is None:
            outcome = await self._stream(rnd, hint)
            if outcome.attestation is not None:
                self.layout.write_json(rnd.dir / "live-serving-check.json", outcome.attestation, replace=True)
            if not outcome.ok:
                ended = "cancelled" if outcome.status == "cancelled" else f"failed ({outcome.error_type}: {outcome.error})"
                self.layout.write_json(rnd.dir / "generation-last-error.json",
                                       {"hint_index": 0, "retry": rnd.retries, "error_type": outcome.error_type or outcome.status,
                                        "archive": None}, replace=True)
                rnd.retries += 1
                rnd.search.applied(gate, decision, {"hint_sha256": hint.sha256, "continuation": ended})
                self._offer_again(rnd, hint, ended)
                return
            cached = self._write_continuation(rnd, hint, outcome)
        rnd.search.applied(gate, decision, {"hint_sha256": hint.sha256, "continuation": "complete"})
        self._record_attempt(rnd, hint, cached, outcome)

    def _decision_of(self, rnd: Round, gate: str) -> dict[str, Any]:
        doc, _ = P.read_document(rnd.search.gate_dir / P.DECISIONS_DIR / f"{gate}.json")
        return doc or {}

    async def _stream(self, rnd: Round, hint: Hint) -> ContinuationOutcome:
        """Stream the continuation, its deltas into the live channel, while the attempt gate
        offers ``cancel-continuation``."""
        call = f"{rnd.name}.hint-{rnd.gate - 1:02d}.try-{rnd.retries}"
        live = LiveWriter(rnd.search.live, call, round_index=rnd.index, hint_index=rnd.gate - 1, hint=hint.text)
        watch = rnd.search.open_watch("attempt", rnd.index, 0, [P.offer(P.CANCEL_CONTINUATION)], phase="streaming",
                                      hint=hint.public(str(rnd.site.get("step_id"))), site=site_view(self.inputs.trace, rnd.site),
                                      live_call=call)
        job = ContinuationJob(case=self.inputs.case, source_step_index=int(rnd.site["source_step_index"]), hint=hint.text,
                              round_index=rnd.index, on_event=live.event, on_request=live.request)
        task = asyncio.ensure_future(self.runner(job))
        while not task.done():
            await asyncio.wait({task}, timeout=P.poll_seconds())
            found = watch.poll() if not task.done() else None
            if found is not None and found["action"] == P.CANCEL_CONTINUATION:
                task.cancel()
        try:
            outcome = task.result()
        except asyncio.CancelledError:
            outcome = ContinuationOutcome(status="cancelled", error="cancelled by the operator", error_type="cancelled")
        watch.close(outcome.status)
        live.finish(outcome)
        return outcome

    def _cached_continuation(self, rnd: Round, hint: Hint) -> dict[str, Any] | None:
        """The round's stored continuation payload for this hint (a resume: reused, as the
        driver's ``cached_continuation`` does); one bound to another hint is refused."""
        path = rnd.dir / CONT
        if not path.exists():
            return None
        bound = read_bound(path)
        if bound.problems or bound.identity != S.continuation_identity(rnd.config, hint.sha256) or not isinstance(bound.payload, dict):
            raise SearchError(f"{self.layout.rel(path)} exists but does not bind this run and hint; it is never overwritten")
        return bound.payload

    def _write_continuation(self, rnd: Round, hint: Hint, outcome: ContinuationOutcome) -> dict[str, Any]:
        """``continuations/hint-00.json`` from a complete stream (the teacher step and episode)."""
        trace = self.inputs.trace
        source_step = R.trace_steps_of(trace)[int(rnd.site["source_step_index"])]
        capture = R.token_capture(outcome.prompt_token_ids, outcome.completion_token_ids, outcome.logprobs, outcome.topk)
        step = R.teacher_step(site=rnd.site, source_step=source_step, content=outcome.content, reasoning=outcome.reasoning,
                              tool_calls=outcome.tool_calls, capture=capture, usage=outcome.usage, finish_reason=outcome.finish_reason,
                              hint_sha=hint.sha256)
        step["metadata"]["policy_request"] = outcome.request
        step["metadata"]["attestation_status"] = outcome.attestation_status
        if outcome.timings:
            step["metadata"]["stream_timings"] = {k: outcome.timings.get(k) for k in ("ttft_s", "wall_s", "tokens_per_s")}
        episode = R.build_episode(trace, rnd.site, [step], source_runtime_store_path=S.source_runtime_store(trace), attempt_store=None)
        payload = S.continuation_payload(step, hint.text, episode["stop_reason"], episode)
        self.layout.write_bound(rnd.dir / CONT, S.continuation_identity(rnd.config, hint.sha256), payload)
        return payload

    def _record_attempt(self, rnd: Round, hint: Hint, payload: dict[str, Any], outcome: ContinuationOutcome | None) -> None:
        """The episode, the pending attempt record and the round manifest (as the driver writes them)."""
        step = payload["teacher_steps"][0]
        capture = step["metadata"]["policy_token_capture"]
        episode = payload["teacher_episode_trace"]
        ep_path = rnd.dir / EPISODE
        self.layout.write_json(ep_path, episode)
        source_step = R.trace_steps_of(self.inputs.trace)[int(rnd.site["source_step_index"])]
        src_meta = _v if isinstance(_v := source_step.get("metadata"), dict) else {}
        src_capture = _v if isinstance(_v := src_meta.get("policy_token_capture"), dict) else {}
        student_ids = list(src_capture.get("prompt_token_ids") or [])
        media = self._media(rnd, outcome, student_ids, capture)
        roles = R.model_roles(hint_provider=hint.provider, hint_model=hint.model,
                              policy_model=(outcome.policy_model if outcome is not None else None) or self.settings.policy_model or "",
                              checkpoint=None, manifest_sha=None)
        record = R.attempt_record(candidate=rnd.candidate, site=rnd.site, proposal=hint.driver_row(str(rnd.site["step_id"])), roles=roles,
                                  student_prompt_ids=student_ids, teacher_capture=capture, source_trace_sha256=self.inputs.trace_sha256,
                                  continuation=S.attempt_continuation(payload["stop_reason"], sha256_file(ep_path)), psd_media=media)
        existing, _ = read_jsonl(rnd.dir / "repair_attempts.jsonl") if (rnd.dir / "repair_attempts.jsonl").is_file() else ([], [])
        if existing and existing[-1].get("attempt_id") == record["attempt_id"] and existing[-1].get("local_verification"):
            record = existing[-1]  # judged before an interruption: the verdict stays
        self.layout.write_jsonl(rnd.dir / "repair_attempts.jsonl", [record])
        self.layout.write_json(rnd.dir / "manifest.json", self._run_manifest_final([record]), replace=True)
        rnd.approved, rnd.record, rnd.episode = hint, record, episode

    def _media(self, rnd: Round, outcome: ContinuationOutcome | None, student_ids: list[int], capture: dict[str, Any]) -> dict[str, Any] | None:
        """The attempt's ``psd_media`` when either prompt holds image tokens (the request's images)."""
        if not (R.has_image_pads(student_ids) or R.has_image_pads(capture.get("prompt_token_ids") or [])):
            return None
        images = outcome.images if outcome is not None else []
        if not images and self.inputs.case is not None:
            try:
                archived, _ = self.inputs.case.source_step_request(int(rnd.site["source_step_index"]))
            except (OSError, ValueError):
                archived = None
            images = [(img.sha256, img.mime, img.data) for img in (archived.images if archived is not None else [])]
        if not images:
            return None
        shas, paths = self.layout.write_media(rnd.dir, images)
        profile = read_json(self.settings.policy_profile)[0] if self.settings.policy_profile else None
        return S.media_block(S.processor_id(self.settings.policy_model, profile), shas, paths)

    def _run_manifest_final(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        p = self.settings.policy_profile
        return S.run_manifest_final(self.inputs, self.settings, records, sha256_file(p) if p and Path(p).is_file() else None)

    # ================================================================ the attempt gate
    async def _attempt_gate(self, rnd: Round) -> None:
        """This driver has no judge: the operator accepts or rejects the attempt."""
        assert rnd.record is not None and rnd.episode is not None and rnd.approved is not None
        offers = [P.offer(P.ACCEPT_ATTEMPT), P.offer(P.REJECT_ATTEMPT), P.offer(P.STOP)]
        decision = await rnd.search.ask("attempt", rnd.index, 0, offers, **self._attempt_body(rnd))
        accepted = decision["action"] == P.ACCEPT_ATTEMPT
        checker = S.verdict_checker(decision.get("checker") if isinstance(decision.get("checker"), dict) else None, accepted=accepted)
        reason = str(decision.get("reason") or ("accepted by the operator" if accepted else "rejected by the operator"))
        earliest = S.earliest_error_step(None, accepted=accepted, site=rnd.site)
        lv = R.local_verification(rnd.record, rnd.episode, operator=str(decision.get("operator") or self.settings.operator), passed=accepted,
                                  checker=checker, earliest_error_step=earliest, reason=reason, event_id=str(decision.get("decision_id")))
        self.layout.write_json(rnd.dir / "judge" / "hint-00.json", lv, replace=True)
        rnd.record = R.apply_verdict(rnd.record, lv, accepted=accepted, reason=reason)
        self.layout.write_jsonl(rnd.dir / "repair_attempts.jsonl", [rnd.record])
        self.layout.write_json(rnd.dir / "gemini-verification-bundle.json", S.verification_bundle(rnd.approved.sha256), replace=True)
        self.layout.write_json(rnd.dir / "manifest.json", self._run_manifest_final([rnd.record]), replace=True)
        rnd.search.applied(P.gate_name(rnd.index, "attempt", 0), decision, {"accepted": accepted, "checker": checker})

    def _attempt_body(self, rnd: Round) -> dict[str, Any]:
        assert rnd.record is not None and rnd.episode is not None and rnd.approved is not None
        step = teacher_step_of(rnd.episode)
        meta = _v if isinstance(_v := step.get("metadata"), dict) else {}
        timings = meta.get("stream_timings") if isinstance(meta.get("stream_timings"), dict) else None
        return {
            "round_directory": str(rnd.dir), "request_file": f"requests/{rnd.name}.json",
            "request_sha256": P.sha256_file(self.layout.request_path(rnd.index)), "phase": "judge",
            "site": site_view(self.inputs.trace, rnd.site), "hint": rnd.approved.public(str(rnd.site.get("step_id"))),
            "attempt": {"attempt_id": rnd.record.get("attempt_id"), "completion_tokens": len(rnd.record.get("completion_ids") or []),
                        "stop_reason": (rnd.record.get("continuation") or {}).get("stop_reason"), "finish_reason": meta.get("finish_reason"),
                        "action_type": step.get("action_type"), "tool_name": step.get("tool_name"), "tool_args": step.get("tool_args"),
                        "thought": step.get("thought"), "output": step.get("output"), "timings": timings},
            "checker_names": list(P.CHECK_NAMES),
            "files": {os.path.relpath(rnd.dir / f, self.root): d for f in (CONT, EPISODE) if (d := P.sha256_file(rnd.dir / f))},
        }

    # ================================================================ closing the round
    def _close_round(self, rnd: Round) -> None:
        """The round's final audits, proposals and manifest (run_search then reads its row)."""
        rows = list(rnd.audits)
        if rnd.approved is not None:
            rows.append({"passed": True, "audit": driver_audit(rnd.approved.audit)})
        self.layout.write_json(rnd.dir / "proposer-hint-audits.json", {"proposals": rows}, replace=True)
        approved = [rnd.approved.driver_row(str(rnd.site["step_id"]))] if rnd.approved is not None and rnd.record is not None else []
        path = rnd.dir / "hint-proposals.json"
        if not path.exists():
            self.layout.write_bound(path, rnd.config, approved)
        records = [rnd.record] if rnd.record is not None else []
        self.layout.write_json(rnd.dir / "manifest.json", self._run_manifest_final(records), replace=True)
        if not records:
            self.layout.replace(rnd.dir / "repair_attempts.jsonl", b"")


# ---------------------------------------------------------------------- what gates show
def site_view(trace: Mapping[str, Any], site: Mapping[str, Any]) -> dict[str, Any]:
    """The site and what the agent did there (its action, tool, arguments, thought, output)."""
    index = site.get("source_step_index")
    steps = R.trace_steps_of(trace)
    step = steps[index] if type(index) is int and 0 <= index < len(steps) and isinstance(steps[index], dict) else {}
    return {"source_step_index": index, "step_id": site.get("step_id"), "stage": site.get("stage"),
            "localization_kind": site.get("localization_kind"), "action_type": step.get("action_type"), "tool_name": step.get("tool_name"),
            "tool_args": step.get("tool_args"), "thought": step.get("thought"), "output": step.get("output"),
            "tool_result": str(step.get("tool_result") or "")[:600] or None}


def teacher_step_of(episode: Mapping[str, Any]) -> dict[str, Any]:
    """The first teacher (suffix) step of an episode."""
    for step in R.trace_steps_of(episode):
        if isinstance(step, dict) and isinstance(step.get("metadata"), dict) and step["metadata"].get("psd_suffix_step"):
            return step
    return {}

