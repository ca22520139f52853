"""``continuations/hint-NN.json``: bound to the run config (``identity.run``) and to its
hint text (``identity.hint``), and its teacher action step carries a token capture."""

from __future__ import annotations

from eviscene_tui.artifacts.integrity.captures import Captures
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import as_dict, as_list, short
from eviscene_tui.artifacts.jsonio import BoundRead, hint_sha256
from eviscene_tui.artifacts.problems import ProblemCode


class Continuations:
    def __init__(self, ctx: CaseContext, captures: Captures) -> None:
        self.ctx = ctx
        self.captures = captures

    def check(self, path: str, bound: BoundRead, run_sha: str | None, site_kind: str | None) -> None:
        ident = as_dict(bound.identity)
        payload = as_dict(bound.payload)
        if run_sha and isinstance(ident.get("run"), str) and ident.get("run") != run_sha:
            self.ctx.add(
                ProblemCode.BOUND_HASH_MISMATCH,
                path,
                f"continuation identity.run {short(ident.get('run'))} differs from the run config hash {short(run_sha)}",
            )
        hint = payload.get("hint")
        if isinstance(hint, str) and isinstance(ident.get("hint"), str) and ident.get("hint") != hint_sha256(hint):
            self.ctx.add(
                ProblemCode.BOUND_HASH_MISMATCH,
                path,
                f"continuation identity.hint {short(ident.get('hint'))} differs from the sha of its hint text {short(hint_sha256(hint))}",
            )
        steps = [s for s in as_list(payload.get("teacher_steps")) if isinstance(s, dict)]
        self.captures.teacher_steps(path, steps, site_kind)
