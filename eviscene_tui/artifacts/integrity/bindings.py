"""What the driver compares on ``--resume`` that no hash covers (psd-run-format §4.4,
§6): an envelope's ``identity`` must be what the run's inputs make it, and the
finalization block binds the verification bundle it was made from.

- a round's ``run-inputs.json`` identity holds the search's inputs (``search-state.json``)
  with the round's own values (a key only one of them has is not compared: another
  writer, such as the app's own supervised search, records more): ``output_dir`` its round directory, ``search_mode``
  ``single``, ``hint_count`` 1, ``public_context`` / ``search_media`` its
  ``round-inputs/round-NN/`` files (``semantic_verification`` is the round's localization
  input and may differ; ``output_dir`` is recorded as the driver was given it, so it is
  not compared); ``resume``, ``skip_auto_judge`` and ``generation_retries`` are not part
  of it; with an indexed candidate the ``candidate`` / ``trace`` bindings are the row's;
- ``hint-proposals.json`` is bound to the run config: its identity is that config;
- a run manifest's ``finalization.verification_bundle_sha256`` is the file hash of its
  ``gemini-verification-bundle.json``, ``finalization.source_trace_sha256`` the source
  trace the run config binds;
- the search manifest's budgets are the search identity's.
"""

from __future__ import annotations

import posixpath

from eviscene_tui.artifacts.feedback import first_difference
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import as_dict, base, join, short
from eviscene_tui.artifacts.problems import ProblemCode

#: search inputs that are not part of a run config (§2.2), and the ones a round sets itself
NOT_IN_RUN_CONFIG = frozenset({"resume", "skip_auto_judge", "generation_retries"})
ROUND_OWN = frozenset({"output_dir", "search_mode", "hint_count", "public_context", "search_media", "semantic_verification"})
BUDGETS = (("attempt_budget", "max_attempts"), ("proposal_budget", "max_proposals"))


def _text(value: object) -> str:
    return repr(value)[:60] if not isinstance(value, dict) else "{…}"


class Bindings:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def round_config(self, config: dict[str, object], run: str, search_identity: dict[str, object]) -> None:
        """A round's run config against the search's inputs."""
        inputs = as_dict(search_identity.get("inputs"))
        if not inputs or not config:
            return
        path = join(run, "run-inputs.json")
        name = base(run)
        # an indexed candidate binds the row's slice and the trace's frozen digest instead
        indexed = {"candidate", "trace"} if config.get("candidate_offset") is not None else set()
        for key in sorted(inputs):
            if key in NOT_IN_RUN_CONFIG or key in ROUND_OWN or key in indexed:
                continue
            if key in config and first_difference(config[key], inputs[key]) is not None:
                self._identity(path, f"identity {key} {_text(config[key])} differs from the search's input ({_text(inputs[key])})")
        search_out = inputs.get("output_dir")
        own: dict[str, object] = {"search_mode": "single", "hint_count": 1}
        if isinstance(search_out, str) and search_out.startswith("/"):
            out = posixpath.normpath(search_out)  # resolved, as the round-inputs paths are
            for key, file in (("public_context", "public.json"), ("search_media", "media.json")):
                recorded = as_dict(config.get(key)).get("path")
                if isinstance(recorded, str) and posixpath.normpath(recorded) != f"{out}/round-inputs/{name}/{file}":
                    self._identity(path, f"identity {key} names {recorded[:120]}, not this round's round-inputs/{name}/{file}")
        for key, want in own.items():
            if key in config and config[key] != want:
                self._identity(path, f"identity {key} {_text(config[key])} is not this round's ({_text(want)})")

    def _identity(self, path: str, what: str) -> None:
        self.ctx.add(ProblemCode.BOUND_HASH_MISMATCH, path,
                     f"{what}: the driver compares this identity on resume and refuses a changed one")

    def proposals(self, run: str, config: object) -> None:
        """``hint-proposals.json`` is bound to the run config."""
        if config is None:
            return
        path = join(run, "hint-proposals.json")
        if not self.ctx.tree.exists(path) or not self.ctx.files.readable(path):
            return
        bound = self.ctx.files.bound_file(path)
        if bound is None or bound.form not in ("plain", "gzip") or bound.identity is None:
            return
        where = first_difference(bound.identity, config)
        if where is not None:
            self._identity(path, f"identity differs from the run config in run-inputs.json (at {where})")

    def finalization(self, run: str, manifest: object, config: dict[str, object]) -> None:
        """The manifest's finalization block binds the bundle and the source trace."""
        final = as_dict(as_dict(manifest).get("finalization"))
        if not final:
            return
        mpath = join(run, "manifest.json")
        bundle = join(run, "gemini-verification-bundle.json")
        want = final.get("verification_bundle_sha256")
        if isinstance(want, str) and want:
            if not self.ctx.tree.exists(bundle):
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, bundle,
                             "verification bundle is missing, though the manifest's finalization binds it")
            elif self.ctx.files.readable(bundle):
                actual = self.ctx.files.file_sha(bundle)
                if actual is not None and actual != want.lower():
                    self.ctx.add(ProblemCode.FILE_HASH_MISMATCH, bundle,
                                 f"manifest.json finalization binds verification_bundle_sha256 {short(want)}, the file has {short(actual)} "
                                 "(the bundle was replaced after finalize)")
        trace_sha = as_dict(config.get("trace")).get("sha256")
        recorded = final.get("source_trace_sha256")
        if isinstance(recorded, str) and isinstance(trace_sha, str) and recorded.lower() != trace_sha.lower():
            self.ctx.add(ProblemCode.BOUND_HASH_MISMATCH, mpath,
                         f"finalization.source_trace_sha256 {short(recorded)} is not the source trace run-inputs.json binds ({short(trace_sha)})")

    def search_budgets(self, manifest: object, identity: dict[str, object]) -> None:
        """The search manifest's budgets are the search identity's."""
        m = as_dict(manifest)
        for mkey, ikey in BUDGETS:
            if mkey in m and ikey in identity and m[mkey] != identity[ikey]:
                self.ctx.add(ProblemCode.BOUND_HASH_MISMATCH, join(self.ctx.root, "manifest.json"),
                             f"{mkey} {_text(m[mkey])} is not the search identity's {ikey} ({_text(identity[ikey])})")
