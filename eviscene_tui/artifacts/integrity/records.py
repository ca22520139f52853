"""The ledgers: ``repair_candidates.jsonl`` and ``repair_attempts.jsonl`` rows, of a search
root (schemas and teacher episodes; each round checks the rest) and of a run directory
(captures, episodes and their continuations, media)."""

from __future__ import annotations

import posixpath

from eviscene_tui.artifacts.integrity.captures import Captures
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.media_binding import MediaBinding
from eviscene_tui.artifacts.integrity.reading import EPISODE_RE, as_dict, join
from eviscene_tui.artifacts.schemas import SCHEMA_ATTEMPT, SCHEMA_CANDIDATE, SCHEMA_HINT_AUDIT
from eviscene_tui.artifacts.problems import ProblemCode


class Records:
    def __init__(self, ctx: CaseContext, captures: Captures, media: MediaBinding) -> None:
        self.ctx = ctx
        self.captures = captures
        self.media = media

    def _episode(self, row: dict[str, object], *, rel_base: str | None, referrer: str, label: str) -> object:
        """An attempt's teacher episode reference checked; returns the recorded path."""
        cont = as_dict(row.get("continuation"))
        episode = cont.get("hinted_teacher_episode_trace")
        if episode is not None:
            self.ctx.refs.written(
                episode, cont.get("hinted_teacher_episode_trace_sha256"),
                rel_base=rel_base, referrer=referrer, what=f"{label} teacher episode",
            )
        return episode

    def candidates(self, path: str, *, captures: bool) -> list[dict[str, object]]:
        """The candidate rows, schemas checked (and, in a run directory, each repair
        site's source step capture)."""
        rows = self.ctx.files.ledger(path)
        for i, row in enumerate(rows):
            self.ctx.files.schema(row, path, f"candidate row {i + 1}", SCHEMA_CANDIDATE)
            site = as_dict(row.get("repair_site"))
            if captures and "rollout_token_capture" in site:
                self.captures.capture(site.get("rollout_token_capture"), path, f"candidate row {i + 1} repair_site source step")
        return rows

    def search_attempts(self, path: str) -> None:
        """A search root's attempt rows: schemas and teacher episodes."""
        for i, row in enumerate(self.ctx.files.ledger(path)):
            self.ctx.files.schema(row, path, f"attempt row {i + 1}", SCHEMA_ATTEMPT)
            self._episode(row, rel_base=None, referrer=path, label=f"attempt row {i + 1}")

    def run_attempt(self, row: dict[str, object], i: int, path: str, run: str) -> None:
        """One attempt row of a run directory."""
        label = f"attempt row {i + 1}"
        files = self.ctx.files
        files.schema(row, path, label, SCHEMA_ATTEMPT)
        audit = as_dict(as_dict(row.get("hint_record")).get("audit"))
        files.schema(audit, path, f"{label} hint audit", SCHEMA_HINT_AUDIT)
        self.captures.capture(row.get("repair_rollout_token_capture"), path, f"{label} repair_rollout_token_capture")
        episode = self._episode(row, rel_base=run, referrer=path, label=label)
        if episode is not None:
            self._continuation_exists(episode, run, label)
        self.media.attempt(row, i, path, run)

    def _continuation_exists(self, episode: object, run: str, label: str) -> None:
        name = posixpath.basename(episode) if isinstance(episode, str) else ""
        m = EPISODE_RE.match(name)
        if m:
            expected = join(run, "continuations", f"hint-{m.group(1)}.json")
            if not self.ctx.tree.exists(expected):
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, expected, f"continuation for {label} (hint-{m.group(1)}) is missing")
