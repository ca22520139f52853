"""The two layouts the check reads, composed from the concern checkers: a feedback
search root (its own files, then every round as a run directory) and a single run
directory. Slate roots are recognised only; every case ends with the generic pass."""

from __future__ import annotations

from eviscene_tui.artifacts.integrity.bindings import Bindings
from eviscene_tui.artifacts.integrity.captures import Captures, site_kind
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.continuations import Continuations
from eviscene_tui.artifacts.integrity.gate_resume import check_gate_resume
from eviscene_tui.artifacts.integrity.inputs import BoundInputs
from eviscene_tui.artifacts.integrity.judge import Judge
from eviscene_tui.artifacts.integrity.media_binding import MediaBinding
from eviscene_tui.artifacts.integrity.proposals import Proposals
from eviscene_tui.artifacts.integrity.reading import HINT_FILE_RE, as_dict, base, join
from eviscene_tui.artifacts.integrity.records import Records
from eviscene_tui.artifacts.integrity.remaining import RemainingFiles
from eviscene_tui.artifacts.integrity.rounds import Rounds
from eviscene_tui.artifacts.integrity.runtime import RuntimeStores
from eviscene_tui.artifacts.jsonio import canonical_sha256
from eviscene_tui.artifacts.layout import RUN_SCHEMA, SEARCH_SCHEMA, Layout
from eviscene_tui.artifacts.problems import ProblemCode


class CaseCheck:
    """One case's check: the concern checkers over one shared context."""

    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx
        self.rounds = Rounds(ctx)
        self.inputs = BoundInputs(ctx)
        self.captures = Captures(ctx)
        self.records = Records(ctx, self.captures, MediaBinding(ctx))
        self.continuations = Continuations(ctx, self.captures)
        self.proposals = Proposals(ctx)
        self.judge = Judge(ctx)
        self.runtime = RuntimeStores(ctx)
        self.bindings = Bindings(ctx)
        self._search_identity: dict[str, object] = {}

    def run(self) -> None:
        ctx = self.ctx
        ctx.tree.walk()
        ctx.paths.no_symlinks = not ctx.tree.has_symlinks and ctx.wrapper is None
        layout = ctx.ref.layout
        if layout == Layout.SLATE:
            ctx.add(
                ProblemCode.UNSUPPORTED_LAYOUT,
                ctx.root,
                "slate search layout (slate-state.json / slate-rounds/) is recognised but not supported",
            )
            # slate files are not read; generic checks only below
            ctx.tree.handled.update(f for f in ctx.tree.files if base(f).startswith("slate-state"))
        elif layout == Layout.FEEDBACK_SEARCH:
            self.search()
        elif layout == Layout.SINGLE_RUN:
            self.run_dir(ctx.root)
        else:
            ctx.add(
                ProblemCode.MISSING_ARTIFACT,
                ctx.root,
                "not a recognisable run directory (no manifest.json, run-inputs.json or search-state.json)",
            )
        if ctx.wrapper is not None and ctx.ref.key:
            self.inputs.wrapper_case()
        RemainingFiles(ctx).run()

    def search(self) -> None:
        """A feedback search root, then each of its rounds as a run directory."""
        root = self.ctx.root
        state_path = join(root, "search-state.json")
        manifest = self.rounds.manifest(join(root, "manifest.json"), "search manifest", SEARCH_SCHEMA, required="search manifest.json")
        identity, payload = self.rounds.search_state(state_path)
        self._search_identity = identity
        self.bindings.search_budgets(manifest, identity)
        inputs = as_dict(identity.get("inputs"))
        self.rounds.note_search_written(inputs, manifest, payload)
        self.inputs.search(inputs, state_path)
        self.rounds.listed_round_dirs(manifest)
        self.rounds.snapshots(payload, state_path)
        self.rounds.requests(identity, payload)
        self.rounds.round_inputs()
        self.records.search_attempts(join(root, "repair_attempts.jsonl"))
        self.records.candidates(join(root, "repair_candidates.jsonl"), captures=False)
        for rdir in self.rounds.round_dirs():
            self.run_dir(rdir, is_round=True)
        check_gate_resume(self.ctx)

    def run_dir(self, run: str, *, is_round: bool = False) -> None:
        """One run directory (a single run, or one round of a search)."""
        if is_round and self.rounds.empty_round(run):
            return
        label = f"round {base(run)}" if is_round else "run"
        manifest = self.rounds.manifest(join(run, "manifest.json"), f"{label} manifest", RUN_SCHEMA, required=f"{label} manifest.json")
        config = self.rounds.run_config(run, label)
        identity = as_dict(config)
        if is_round:
            self.bindings.round_config(identity, run, self._search_identity)
        self.bindings.proposals(run, config)
        self.bindings.finalization(run, manifest, identity)
        self.rounds.note_run_written(identity, run, is_round=is_round)
        attempts_path = join(run, "repair_attempts.jsonl")
        attempts = self.ctx.files.ledger(attempts_path)
        self.rounds.note_media_written(attempts, run)
        if identity:
            self.inputs.run(identity, join(run, "run-inputs.json"))
        self.proposals.run(run)
        candidates = self.records.candidates(join(run, "repair_candidates.jsonl"), captures=True)
        run_sha = canonical_sha256(config, parsed=True) if config is not None else None  # a bound file's identity, as orjson parsed it
        kind = site_kind(candidates)
        for path, bound in self.ctx.files.bound_files(join(run, "continuations"), HINT_FILE_RE):
            self.continuations.check(path, bound, run_sha, kind)
            self.runtime.continuation_steps(path, as_dict(bound.payload), run)
        for i, row in enumerate(attempts):
            self.records.run_attempt(row, i, attempts_path, run)
        self.ctx.files.ledger(join(run, "repair_attempts.pre-finalize.jsonl"))
        trace_local, trace = self.captures.source_step(identity, candidates, attempts)
        self.runtime.source(trace_local, trace, candidates)
        self.runtime.run_stores(run)
        self.judge.run(run, attempts)
