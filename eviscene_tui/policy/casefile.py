"""Find the failure step's request for a loaded case (A1's ``CaseBundle``).

    req = rebuild_for_case(case, round_index=None, hint="...", placement="as_run")

Raises :class:`RequestUnavailable` with an operator-readable reason when the
case has no failure site, no trace, or the request (and its images) cannot be
rebuilt from the archive nor from ``metadata.policy_input``.
"""

from __future__ import annotations

from typing import Any

from eviscene_tui.policy.hint_template import HintTemplate, infer_hint_template
from eviscene_tui.policy.request import RequestUnavailable, TeacherRequest, archived_messages, teacher_request_from_archived


def _problem_text(p: Any) -> str:
    code = getattr(p, "code", None)
    code = getattr(code, "value", code)
    msg = getattr(p, "message", None) or str(p)
    path = getattr(p, "path", None)
    return f"{code}: {msg}" + (f" ({path})" if path else "")


def site_for_round(case: Any, round_index: int | None) -> Any:
    if round_index is not None:
        try:
            from eviscene_tui.artifacts import case as case_mod

            rnd = case.round(round_index)
            if rnd is not None:
                site = case_mod._site_from_attempts(rnd.attempts or []) or case_mod._site_from_candidates(rnd.candidates or [])
                if site is not None:
                    return site
        except Exception:
            pass
    return case.failure_site()


def round_hint(case: Any, round_index: int | None = None) -> str | None:
    """The hint the round ran (its attempt's hint), else its first audited-passing proposal."""
    try:
        rounds = list(case.rounds or [])
        rnd = case.round(round_index) if round_index is not None else (rounds[-1] if rounds else None)
        if rnd is None:
            for att in reversed(case.attempts or []):
                text = att.hint_text() if callable(getattr(att, "hint_text", None)) else None
                if text:
                    return text
            return None
        for att in rnd.attempts or []:
            text = att.hint_text() if callable(getattr(att, "hint_text", None)) else None
            if text:
                return text
        for prop in rnd.proposals or []:
            audit = getattr(prop, "audit", None)
            if prop.text and (audit is None or getattr(audit, "passed", True)):
                return prop.text
    except Exception:
        return None
    return None


def case_ref(case: Any, round_index: int | None = None) -> dict[str, Any]:
    cid = None
    try:
        cid = case.case_id
        cid = cid() if callable(cid) else cid
    except Exception:
        cid = None
    root = getattr(case, "root", None)
    return {
        "case_id": cid,
        "case_key": getattr(root, "name", None) if root is not None else None,
        "case_root": str(root) if root is not None else None,
        "round_index": round_index,
    }


def observed_hint_template(case: Any, round_index: int | None = None, *, notes: list[str] | None = None) -> HintTemplate | None:
    """How this run's driver put a hint into a teacher request: learned from a hint try
    whose teacher request is archived (the hint's runtime store), compared with the
    unhinted failure-step request of the same site. The asked round first, then the
    latest. ``None`` when no try gives an unambiguous answer; ``notes`` then gets why, for
    each archived hinted request that could not be read as one insertion of the hint."""
    try:
        rounds = list(case.rounds or [])
    except Exception:
        return None
    rounds.sort(key=lambda r: (r.index != round_index, -r.index))
    for rnd in rounds:
        try:
            continuations = rnd.continuations
        except Exception:
            continue
        for n, cont in continuations.items():
            try:
                template = _template_from_try(case, rnd, n, cont, notes)
            except Exception:  # noqa: BLE001 - a damaged try teaches nothing; try the next
                template = None
            if template is not None:
                return template
    return None


def _template_from_try(case: Any, rnd: Any, n: int, cont: Any, notes: list[str] | None = None) -> HintTemplate | None:
    hint = cont.hint
    if not hint:
        att = rnd.attempt_for_hint(n)
        hint = att.hint_text() if att is not None else None
    first = next((s for s in cont.teacher_steps if s.context_request_id), None)
    episode = cont.teacher_episode_trace if isinstance(cont.teacher_episode_trace, dict) else {}
    state = episode.get("state") if isinstance(episode.get("state"), dict) else {}
    desc = state.get("runtime_store") if isinstance(state.get("runtime_store"), dict) else {}
    if not hint or first is None or not desc.get("runtime_path"):
        return None
    store = case.runtime_store_for(desc["runtime_path"])
    if store is None:
        return None
    hinted, _ = store.reconstruct_request(first.context_request_id)
    site = site_for_round(case, rnd.index)
    index = getattr(site, "source_step_index", None)
    if hinted is None or not isinstance(index, int):
        return None
    source, _ = case.source_step_request(index)
    if source is None:
        return None
    where = f"round {rnd.index}, hint {n:02d}, {desc['runtime_path']}/context/{first.context_request_id}.json"
    template = infer_hint_template(archived_messages(source, image_refs=True), archived_messages(hinted, image_refs=True), hint, evidence=where)
    if template is None and notes is not None:
        notes.append(f"hint placement: the hinted request of {where} differs from the failure step's request by more than one insertion of its hint")
    return template


def rebuild_for_case(case: Any, *, round_index: int | None = None, hint: str | None = None, placement: str = "as_run") -> TeacherRequest:
    from eviscene_tui.artifacts.runtime_archive import request_from_policy_input

    site = site_for_round(case, round_index)
    if site is None:
        raise RequestUnavailable("this case has no localized failure site, so there is no failure-step request to rebuild")
    idx = getattr(site, "source_step_index", None)
    trace, trace_problems = case.trace()
    problems = [_problem_text(p) for p in trace_problems or ()]
    step = None
    if trace is not None and isinstance(idx, int):
        try:
            step = trace.step(idx)
        except IndexError:
            raise RequestUnavailable(f"the failure site points at step {idx}, but the source trace has {len(trace)} steps") from None
    req_id = getattr(site, "context_request_id", None) or (step.context_request_id if step is not None else None)
    store = None
    store_path = getattr(site, "runtime_store_path", None)
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
