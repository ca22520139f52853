"""Token captures: the candidate's source step, each attempt's teacher rollout, the teacher
action step of each continuation, and the source trace's failure step (when the trace is
reachable and small). A capture is complete when its status is ``complete``, nothing is
listed ``missing``, and both prompt and completion ids are there (§2.5)."""

from __future__ import annotations

import os

from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import MAX_PARSE_BYTES, as_dict, as_list, read_json
from eviscene_tui.artifacts.schemas import SCHEMA_TOKEN_CAPTURE
from eviscene_tui.artifacts.problems import ProblemCode

TEACHER_ACTION_REACT = ("psd_teacher_repair", "tool_call")
TEACHER_ACTION_JUDGMENT = ("psd_teacher_judgment", "output")


def capture_complete(cap: object) -> bool:
    if not isinstance(cap, dict) or cap.get("status") != "complete":
        return False
    if as_list(cap.get("missing")):
        return False
    return isinstance(cap.get("prompt_token_ids"), list) and isinstance(cap.get("completion_token_ids"), list)


def capture_detail(cap: object) -> str:
    """What is wrong with an incomplete capture, for the problem message."""
    if cap is None:
        return "is absent"
    if not isinstance(cap, dict):
        return f"is a {type(cap).__name__}, expected an object"
    status = cap.get("status")
    missing = [str(m) for m in as_list(cap.get("missing"))]
    lacking = [k for k in ("prompt_token_ids", "completion_token_ids") if not isinstance(cap.get(k), list)]
    parts = [f"status {status!r}"]
    if missing:
        parts.append(f"missing {missing}")
    if lacking:
        parts.append(f"no {', '.join(lacking)}")
    return ", ".join(parts) + " (expected status 'complete' with prompt and completion ids)"


def site_kind(candidates: list[dict[str, object]]) -> str | None:
    """``react`` / ``judgment`` from the bound candidate's repair site, else None."""
    for row in reversed(candidates):
        site = as_dict(row.get("repair_site"))
        kind = site.get("example_type")
        if kind in ("react", "judgment"):
            return str(kind)
        stage = site.get("stage")
        if stage == "unified_judgment":
            return "judgment"
        if stage == "unified_react":
            return "react"
    return None


def teacher_action(steps: list[dict[str, object]], kind: str | None) -> tuple[str, str]:
    """The (stage, action) of the teacher action: psd_teacher_repair + tool_call for a
    ReAct site, psd_teacher_judgment + output for a judgment site (§2.5 token fields)."""
    kinds = [((s.get("stage_name") or s.get("stage")), s.get("action_type")) for s in steps]
    if kind == "judgment":
        return TEACHER_ACTION_JUDGMENT
    if kind == "react" or TEACHER_ACTION_REACT in kinds:
        return TEACHER_ACTION_REACT
    return TEACHER_ACTION_JUDGMENT


def _failure_index(candidates: list[dict[str, object]], attempts: list[dict[str, object]]) -> int | None:
    """The failure site's ``source_step_index`` (the last attempt's, else the last candidate's)."""
    for row in list(reversed(attempts)) + list(reversed(candidates)):
        value = as_dict(row.get("repair_site")).get("source_step_index")
        if type(value) is int:
            return value
    return None


class Captures:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def capture(self, cap: object, path: str, label: str) -> None:
        if isinstance(cap, dict):
            self.ctx.files.schema(cap, path, f"{label} token capture", SCHEMA_TOKEN_CAPTURE)
        if capture_complete(cap):
            return
        self.ctx.add(ProblemCode.TOKEN_CAPTURE_INCOMPLETE, path, f"{label}: token capture {capture_detail(cap)}")

    def teacher_steps(self, path: str, steps: list[dict[str, object]], kind: str | None) -> None:
        """A continuation's teacher action step holds a complete policy token capture."""
        if not steps:
            return
        stage, action = wanted = teacher_action(steps, kind)
        actions = [s for s in steps if ((s.get("stage_name") or s.get("stage")), s.get("action_type")) == wanted]
        if not actions:
            self.ctx.add(
                ProblemCode.TOKEN_CAPTURE_INCOMPLETE,
                path,
                f"no teacher step {stage}/{action} holds the teacher action's token capture ({len(steps)} teacher step(s))",
            )
            return
        captures = [as_dict(s.get("metadata")).get("policy_token_capture") for s in actions]
        if any(capture_complete(c) for c in captures):
            return
        self.ctx.add(
            ProblemCode.TOKEN_CAPTURE_INCOMPLETE,
            path,
            f"teacher action ({stage}/{action}) has no complete policy_token_capture: {capture_detail(captures[0])}",
        )

    def source_step(self, identity: dict[str, object], candidates: list[dict[str, object]], attempts: list[dict[str, object]]) -> tuple[str | None, object]:
        """The source trace's failure step capture, when the trace is found and < 20 MB.
        Returns (the trace's local path, its parsed document) for the other checks of the
        source rollout (None for a trace not found or too big to parse here)."""
        local = self._small_source_trace(identity)
        if local is None:
            return None, None
        self.ctx.tree.handled.add(local)
        trace, problems = read_json(local, self.ctx.files.cache)
        self.ctx.findings.extend(problems)
        index = _failure_index(candidates, attempts)
        if index is None:
            return local, trace
        steps = as_list(as_dict(as_dict(trace).get("state")).get("all_steps"))
        if not 0 <= index < len(steps):
            self.ctx.add(
                ProblemCode.MISSING_ARTIFACT,
                local,
                f"source trace has {len(steps)} steps; the failure site source_step_index {index} is not among them",
            )
            return local, trace
        meta = as_dict(as_dict(steps[index]).get("metadata"))
        self.capture(meta.get("policy_token_capture"), local, f"source trace failure step {index} policy_token_capture")
        return local, trace

    def _small_source_trace(self, identity: dict[str, object]) -> str | None:
        binding = as_dict(identity.get("trace"))
        if not isinstance(binding.get("path"), str):
            return None
        found = self.ctx.paths.bound_input(binding.get("path"), want="file")
        local = found.path if found.ok else None
        if local is None:
            return None
        hit = self.ctx.files.cache.get(local)  # the bytes its hash was checked on: their size, no stat
        try:
            if (len(hit) if hit is not None else os.stat(local).st_size) >= MAX_PARSE_BYTES:
                return None
        except OSError:
            return None
        return local
