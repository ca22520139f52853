"""Judge artifacts of a run: the verification bundle and the judge files it names, each
``judge/hint-NN.json`` bound to its attempt, finalization and judge summary, and the
content-addressed ``judge-cache/``."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import EPISODE_RE, HEX64, as_dict, as_list, base, join, short
from eviscene_tui.artifacts.jsonio import canonical_sha256, hint_sha256
from eviscene_tui.artifacts.schemas import SCHEMA_FINALIZATION, SCHEMA_LOCAL_VERIFICATION, SCHEMA_VERIFICATION_BUNDLE
from eviscene_tui.artifacts.problems import ProblemCode


def _expected_bindings(row: dict[str, object]) -> list[tuple[str, object, str]]:
    """(judge key, the value the attempt gives it, what that value is) for one attempt."""
    expected: list[tuple[str, object, str]] = []
    text = as_dict(row.get("hint_record")).get("text")
    if isinstance(text, str):
        expected.append(("hint_sha256", hint_sha256(text), "the attempt's hint text"))
    for key, field in (("teacher_prompt_sha256", "teacher_prompt_ids"), ("teacher_completion_sha256", "completion_ids")):
        ids = row.get(field)
        if isinstance(ids, list):
            expected.append((key, canonical_sha256(ids), f"the attempt's {field}"))
    for key in ("source_trace_sha256", "repair_step_id"):
        if isinstance(row.get(key), str):
            expected.append((key, row.get(key), f"the attempt's {key}"))
    return expected


class Judge:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def run(self, run: str, attempts: list[dict[str, object]]) -> None:
        self.bundle(run)
        judged = self.judge_files(run)
        if judged:
            self.bindings(run, attempts, judged)
        files = self.ctx.files
        for name in ("finalization.json", "judge-summary.json"):
            path = join(run, name)
            files.schema(files.json_file(path), path, name.removesuffix(".json"), SCHEMA_FINALIZATION)
        for path in self.ctx.tree.list_files(join(run, "judge-cache")):
            if path.endswith(".json"):
                self.cache_file(path)

    def bundle(self, run: str) -> None:
        """``gemini-verification-bundle.json`` and the judge files its attempts name."""
        files = self.ctx.files
        bundle_path = join(run, "gemini-verification-bundle.json")
        bundle = files.json_file(bundle_path)
        files.schema(bundle, bundle_path, "verification bundle", SCHEMA_VERIFICATION_BUNDLE)
        for j, att in enumerate(as_list(as_dict(bundle).get("attempts"))):
            lv = as_dict(att).get("local_verification")
            if isinstance(lv, str):
                self.ctx.refs.written(
                    lv, None, rel_base=run, referrer=bundle_path, what=f"verification bundle attempt {j} judge file",
                )

    def judge_files(self, run: str) -> dict[str, dict[str, object]]:
        """The readable ``judge/*.json`` local verifications, by path."""
        judged: dict[str, dict[str, object]] = {}
        for path in self.ctx.tree.list_files(join(run, "judge")):
            if path.endswith(".json"):
                value = self.ctx.files.json_file(path)
                self.ctx.files.schema(value, path, "local verification", SCHEMA_LOCAL_VERIFICATION)
                if isinstance(value, dict):
                    judged[path] = value
        return judged

    def bindings(self, run: str, attempts: list[dict[str, object]], judged: dict[str, dict[str, object]]) -> None:
        """``judge/hint-NN.json`` binds its attempt: hint, teacher token ids, source trace, step."""
        for i, row in enumerate(attempts):
            episode = as_dict(row.get("continuation")).get("hinted_teacher_episode_trace")
            m = EPISODE_RE.match(posixpath.basename(episode)) if isinstance(episode, str) else None
            if m is None:
                continue
            path = join(run, "judge", f"hint-{m.group(1)}.json")
            judge = judged.get(path)
            if judge is not None:
                self._binding(path, judge, row, i)

    def _binding(self, path: str, judge: dict[str, object], row: dict[str, object], i: int) -> None:
        for key, want, what in _expected_bindings(row):
            found = judge.get(key)
            if isinstance(found, str) and found != want:
                self.ctx.add(
                    ProblemCode.BOUND_HASH_MISMATCH,
                    path,
                    f"{key} {short(found)} does not match {what} (attempt row {i + 1}: {short(want)}); "
                    "the verdict was given for a different attempt",
                )

    def cache_file(self, path: str) -> None:
        """A ``judge-cache/<sha>.json``: its response hash, and its name the hash of its identity."""
        value = self.ctx.files.json_file(path)
        if not isinstance(value, dict):
            return
        recorded = value.get("response_sha256")
        if isinstance(recorded, str) and "response" in value:
            self._hash_of(path, value.get("response"), recorded,
                          lambda actual: f"judge-cache response_sha256 {short(recorded)} does not match the cached response ({short(actual)})")
        stem = base(path)[: -len(".json")]
        if HEX64.match(stem) and "identity" in value:
            self._hash_of(path, value.get("identity"), stem,
                          lambda actual: f"judge-cache file name {short(stem)} is not the hash of its identity ({short(actual)})")

    def _hash_of(self, path: str, value: object, expected: str, message: Callable[[str], str]) -> None:
        """A ``bound_hash_mismatch`` when ``value``'s canonical sha256 is not ``expected``."""
        actual = canonical_sha256(value)
        if actual != expected:
            self.ctx.add(ProblemCode.BOUND_HASH_MISMATCH, path, message(actual))
