"""The hint proposer's files of a run (proposals and their audits, the raw response,
semantic localization) and the serving / generation status files."""

from __future__ import annotations

from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import as_dict, as_list, join
from eviscene_tui.artifacts.schemas import SCHEMA_HINT_AUDIT, SCHEMA_SEMANTIC_LOCALIZATION


class Proposals:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def run(self, run: str) -> None:
        files = self.ctx.files
        proposals_path = join(run, "hint-proposals.json")
        proposals = files.bound_file(proposals_path)
        if proposals is not None:
            for i, prop in enumerate(as_list(proposals.payload)):
                audit = as_dict(as_dict(prop).get("audit"))
                files.schema(audit, proposals_path, f"proposal {i} audit", SCHEMA_HINT_AUDIT)
        files.bound_file(join(run, "proposer-response.json"))
        files.json_file(join(run, "proposer-hint-audits.json"))
        semloc_path = join(run, "semantic-localization.json")
        files.schema(files.json_file(semloc_path), semloc_path, "semantic localization", SCHEMA_SEMANTIC_LOCALIZATION)
        for name in ("live-serving-check.json", "generation-last-error.json"):
            files.json_file(join(run, name))
