"""Find the failure step's request for a loaded case (a ``CaseBundle``).

    req = rebuild_for_case(case, round_index=None, hint="...", placement="as_run")

Raises :class:`RequestUnavailable` with an operator-readable reason when the
case has no failure site, no trace, or the request (and its images) cannot be
rebuilt from the archive nor from ``metadata.policy_input``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.case import CaseBundle, RoundBundle
from eviscene_tui.artifacts.models import ContinuationPayload, FailureSite
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.artifacts.runtime_archive import request_from_policy_input
from eviscene_tui.policy.hint_template import HintTemplate, infer_hint_template
from eviscene_tui.policy.request import RequestUnavailable, TeacherRequest, archived_messages, teacher_request_from_archived


def _problem_text(p: Problem) -> str:
    return f"{p.code.value}: {p.message}" + (f" ({p.path})" if p.path else "")


def site_for_round(case: CaseBundle, round_index: int | None) -> FailureSite | None:
    """The round's own site when it has one, else the case's current site."""
    if round_index is not None:
        rnd = case.round(round_index)
        site = rnd.failure_site() if rnd is not None else None
        if site is not None:
            return site
    return case.failure_site()


def round_hint(case: CaseBundle, round_index: int | None = None) -> str | None:
    """The hint the round ran (its attempt's hint), else its first audited-passing proposal."""
    rounds = case.rounds
    rnd = case.round(round_index) if round_index is not None else (rounds[-1] if rounds else None)
    if rnd is None:
        return next((a.hint_text for a in reversed(case.attempts) if a.hint_text), None)
    for att in rnd.attempts or []:
        if att.hint_text:
            return att.hint_text
    for prop in rnd.proposals or []:
        if prop.text and (prop.audit is None or prop.audit.passed is not False):
            return prop.text
    return None


def case_ref(case: CaseBundle, round_index: int | None = None) -> dict[str, Any]:
    root = case.root
    return {
        "case_id": case.case_id,
        "case_key": root.name if root is not None else None,  # stand-in cases in tests have no root
        "case_root": str(root) if root is not None else None,
        "round_index": round_index,
    }


def _shown(case: CaseBundle, path: Path) -> str:
    """``path`` relative to the case root when it lies inside it, else as it is."""
    try:
        return path.relative_to(case.root).as_posix()
    except ValueError:
        return str(path)


def observed_hint_template(case: CaseBundle, round_index: int | None = None, *, notes: list[str] | None = None) -> HintTemplate | None:
    """How this run's driver put a hint into a teacher request: learned from a hint try
    whose teacher request is archived (the hint's runtime store), compared with the
    unhinted failure-step request of the same site. The asked round first, then the
    latest. ``None`` when no try gives an unambiguous answer; ``notes`` then gets why, for
    each archived hinted request that could not be read as one insertion of the hint."""
    rounds = sorted(case.rounds, key=lambda r: (r.index != round_index, -r.index))
    for rnd in rounds:
        for n, cont in rnd.continuations.items():
            try:
                template = _template_from_try(case, rnd, n, cont, notes)
            except Exception:  # noqa: BLE001 - a damaged try teaches nothing; try the next
                template = None
            if template is not None:
                return template
    return None


def _template_from_try(
    case: CaseBundle, rnd: RoundBundle, n: int, cont: ContinuationPayload, notes: list[str] | None = None
) -> HintTemplate | None:
    hint = cont.hint
    if not hint:
        att = rnd.attempt_for_hint(n)
        hint = att.hint_text if att is not None else None
    first = next((s for s in cont.teacher_steps if s.context_request_id), None)
    episode = cont.teacher_episode_trace if isinstance(cont.teacher_episode_trace, dict) else {}
    state = st if isinstance(st := episode.get("state"), dict) else {}
    desc = d if isinstance(d := state.get("runtime_store"), dict) else {}
    runtime_path = desc.get("runtime_path")
    if not hint or first is None or first.context_request_id is None or not isinstance(runtime_path, str) or not runtime_path:
        return None
    store = case.runtime_store_for(runtime_path)
    if store is None:
        return None
    hinted, _ = store.reconstruct_request(first.context_request_id)
    site = site_for_round(case, rnd.index)
    index = site.source_step_index if site is not None else None
    if hinted is None or not isinstance(index, int):
        return None
    source, _ = case.source_step_request(index)
    if source is None:
        return None
    # where the request was read (a moved copy reads its own tree, not the recorded path)
    where = f"round {rnd.index}, hint {n:02d}, {_shown(case, store.path / 'context' / f'{first.context_request_id}.json')}"
    template = infer_hint_template(archived_messages(source, image_refs=True), archived_messages(hinted, image_refs=True), hint, evidence=where)
    if template is None and notes is not None:
        notes.append(f"hint placement: the hinted request of {where} differs from the failure step's request by more than one insertion of its hint")
    return template


def rebuild_for_case(case: CaseBundle, *, round_index: int | None = None, hint: str | None = None, placement: str = "as_run") -> TeacherRequest:
    site = site_for_round(case, round_index)
    if site is None:
        raise RequestUnavailable("this case has no localized failure site, so there is no failure-step request to rebuild")
    idx = site.source_step_index
    trace, trace_problems = case.trace()
    problems = [_problem_text(p) for p in trace_problems or ()]
    step = None
    if trace is not None and isinstance(idx, int):
        try:
            step = trace.step(idx)
        except IndexError:
            raise RequestUnavailable(f"the failure site points at step {idx}, but the source trace has {len(trace)} steps") from None
    req_id = site.context_request_id or (step.context_request_id if step is not None else None)
    store = None
    store_path = site.runtime_store_path
    if store_path:
        store = case.runtime_store_for(store_path, source=True)  # the site names the source rollout's store
    if store is None:
        store = case.source_runtime_store()
    archived = None
    if store is not None and req_id:
        archived, probs = store.reconstruct_request(req_id)
        if archived is None:
            problems += [_problem_text(p) for p in probs]
            problems.append(f"archived request {req_id} unavailable; falling back to the step's metadata.policy_input")
        else:
            problems += [_problem_text(p) for p in probs]
    elif not req_id:
        problems.append("the failure step has no context_request_id; using its metadata.policy_input")
    else:
        problems.append(f"no runtime store found for request {req_id}; using the step's metadata.policy_input")
    if archived is None:
        policy_input = step.metadata.policy_input if step is not None else None
        if not isinstance(policy_input, dict):
            if trace is None:
                raise RequestUnavailable("the source trace could not be loaded: " + "; ".join(problems[:3]))
            raise RequestUnavailable(
                f"the failure step's request is missing: no archived request ({req_id or 'no request id'}) and step {idx} has no metadata.policy_input"
            )
        archived, probs = request_from_policy_input(policy_input, store=store, request_id=req_id)
        problems += [_problem_text(p) for p in probs]
        if archived is None:
            raise RequestUnavailable("the step's metadata.policy_input could not be used: " + "; ".join(problems[-3:]))
    template = observed_hint_template(case, round_index, notes=problems) if placement == "as_run" else None
    return teacher_request_from_archived(
        archived, hint=hint, placement=placement, step_index=idx, round_index=round_index, problems=problems, template=template
    )
