"""Service gates without HTTP: an injected continuation runner (the e2e test uses real HTTP)."""

import pytest

from eviscene_tui.policy.events import TokenLogprob
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.jsonio import read_bound, read_json
from eviscene_tui.journal import supervised_journal_for_root, verify_chain
from eviscene_tui.supervised import Budgets, ContinuationOutcome, SearchError, SearchSettings, SupervisedSearch, inputs_from_case
from eviscene_tui.tokens.tiny import encode

from supervised_fixtures import tree_hash, write_driver_case

LOCK = {"source_error_confirmed": True, "repaired_at_selected_step": True, "procedural_hint": True, "anchor_matches": True}


async def fake_runner(job):
    return ContinuationOutcome(
        status="complete",
        content="",
        reasoning="think",
        tool_calls=[{"id": "c1", "name": "web_search", "arguments": '{"q": "x"}'}],
        prompt_token_ids=encode("prompt " + job.hint),
        completion_token_ids=encode("call"),
        logprobs=[TokenLogprob(token="", logprob=-0.5) for _ in encode("call")],
        finish_reason="tool_calls",
        usage={"prompt_tokens": 3, "completion_tokens": 2},
        attestation={"model_id": "m", "root": "/r", "max_model_len": 131072},
        attestation_status="attested",
        policy_model="m",
    )


async def failing_runner(job):
    return ContinuationOutcome(status="failed", error="HTTP 500: boom", error_type="http")


def _search(tmp_path, **budgets):
    out = tmp_path / "out"
    droot = write_driver_case(out)
    inputs = inputs_from_case(load_case(droot), label="case")
    s = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op"), budgets=Budgets(**budgets))
    return s, out


async def _attempt(s, hint, **verdict):
    s.begin_round()
    s.accept_site()
    p = s.add_operator_hint(hint)
    s.approve_hint(p.index)
    assert (await s.run_continuation(fake_runner)).ok
    if verdict.pop("approve", False):
        s.approve_attempt()
    else:
        s.reject_attempt("no", **verdict)


async def test_lock_then_changed_verified_hint(tmp_path):
    s, _ = _search(tmp_path)
    await _attempt(s, "Check the caption.", checker=dict(LOCK, anchor_matches=True))
    fb = s.preview_feedback()
    assert fb["locked_hint"] == "Check the caption." and fb["needs_relocalization"] is False
    s.begin_round()
    s.accept_site()
    bad = s.add_operator_hint("Something else entirely.")
    assert bad.audit["errors"] == ["changed_verified_hint"]
    same = s.add_operator_hint("Check the caption.")
    assert same.audit["errors"] == ["repeated_completed_hint"]
    good = s.add_operator_hint("Check the caption.\nThen compare the weather records.")
    assert good.passed
    with pytest.raises(SearchError):
        s.approve_hint(bad.index)
    s.approve_hint(good.index)
    s.close()


async def test_attempt_budget_stop(tmp_path):
    s, _ = _search(tmp_path, max_attempts=1, max_proposals=3)
    await _attempt(s, "Check the caption.", checker={"anchor_matches": True})
    assert s.status == "attempt_budget_exhausted"
    with pytest.raises(SearchError):
        s.begin_round()
    manifest, _ = read_json(s.root / "manifest.json")
    assert manifest["status"] == manifest["stop_reason"] == "attempt_budget_exhausted"
    s.close()


async def test_proposal_budget_and_site_relocalization(tmp_path):
    s, _ = _search(tmp_path, max_attempts=1, max_proposals=1)
    d = s.begin_round()
    assert d.stage == "site"
    s.relocalize(5, "the judgment step is wrong", category="evidence_interpretation_error")
    assert s.status == "proposal_budget_exhausted"
    row = s.history[0]
    assert row["feedback"] == {"attempts": [], "rejected_proposal_reasons": ["operator_relocalization"], "status": "no_admissible_hints"}
    assert row["no_further_hint"] is False
    fb = s.preview_feedback()
    assert fb["needs_relocalization"] is True
    assert fb["anchor_feedback"] == {"selected_source_step": 3, "earliest_error_step": 5, "checker": {"anchor_matches": False}}
    s.close()


async def test_site_relocalization_next_round_uses_operator_site(tmp_path):
    s, _ = _search(tmp_path)
    s.begin_round()
    with pytest.raises(SearchError):
        s.relocalize(1, "")  # a note is required
    with pytest.raises(SearchError):
        s.relocalize(0, "perception step")  # not a policy step
    s.relocalize(1, "first query was wrong")
    d = s.begin_round()
    assert d.site["source_step_index"] == 1 and d.site["localization_kind"] == "operator"
    assert d.feedback["needs_relocalization"] is True
    cand = read_json(d.dir / "semantic-localization.json")[0]
    assert cand["candidates"][0]["verifier"]["kind"] == "operator" and cand["candidates"][0]["explanation"] == "first query was wrong"
    s.close()


async def test_no_further_grounded_hint(tmp_path):
    s, _ = _search(tmp_path)
    s.begin_round()
    s.accept_site()
    s.finish_round("nothing grounded to suggest")
    assert s.history[0]["no_further_hint"] is True
    assert s.status == "no_further_grounded_hint"
    s.close()


async def test_rejected_proposals_round_continues(tmp_path):
    s, _ = _search(tmp_path)
    s.begin_round()
    s.accept_site()
    s.add_operator_hint("The photo is fake.")
    s.finish_round("only a leaking hint")
    assert s.history[0]["feedback"]["rejected_proposal_reasons"] == ["binary_verdict_leak"]
    assert s.status == "searching"
    s.close()


async def test_failed_continuation_stays_at_gate_and_resume(tmp_path):
    s, out = _search(tmp_path)
    before = tree_hash(out)
    s.begin_round()
    s.accept_site()
    p = s.add_operator_hint("Check the caption.")
    s.approve_hint(p.index)
    res = await s.run_continuation(failing_runner)
    assert not res.ok and s.draft.stage == "continuation"
    err, _ = read_json(s.draft.dir / "generation-last-error.json")
    assert err == {"hint_index": 0, "retry": 0, "error_type": "http", "archive": None}
    assert not (s.draft.dir / "repair_attempts.jsonl").exists() or (s.draft.dir / "repair_attempts.jsonl").read_bytes() == b""
    s.close()
    # reopen: resumes at the continuation gate with the approved hint
    inputs = s.inputs
    s2 = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op"))
    assert s2.draft is not None and s2.draft.stage == "continuation" and s2.draft.approved.text == "Check the caption."
    assert (await s2.run_continuation(fake_runner)).ok
    s2.close()
    s3 = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op"))
    assert s3.draft.stage == "verdict"
    s3.reject_attempt("still wrong", checker={"anchor_matches": False}, earliest_error_step=1)
    assert s3.preview_feedback()["needs_relocalization"] is True
    audits, _ = read_json(s3.history[0]["directory"] + "/proposer-hint-audits.json")
    assert audits["proposals"][0]["passed"] is True
    s3.close()
    assert verify_chain(supervised_journal_for_root(s3.root)).ok
    assert tree_hash(out) == before


async def test_identity_change_refused(tmp_path):
    s, _ = _search(tmp_path)
    s.close()
    with pytest.raises(SearchError):
        SupervisedSearch.start(s.inputs, tmp_path / "w", settings=SearchSettings(operator="op"), budgets=Budgets(max_attempts=2))


async def test_verdict_validation(tmp_path):
    s, _ = _search(tmp_path)
    s.begin_round()
    s.accept_site()
    s.approve_hint(s.add_operator_hint("Check the caption.").index)
    await s.run_continuation(fake_runner)
    with pytest.raises(SearchError):
        s.reject_attempt("")
    with pytest.raises(SearchError):
        s.reject_attempt("x", checker={"bogus": True})
    with pytest.raises(SearchError):
        s.reject_attempt("x", checker={"anchor_matches": "no"})
    s.reject_attempt("x", checker={"anchor_matches": None, "grounded_episode": False})
    judge, _ = read_json(s.history[0]["directory"] + "/judge/hint-00.json")
    assert [c["passed"] for c in judge["checks"]] == [None, None, False, None, None, None]
    assert s.history[0]["feedback"]["attempts"][0]["checker"] == {"grounded_episode": False}
    state = read_bound(s.root / "search-state.json")
    assert state.ok
    s.close()


def test_inputs_from_files(tmp_path):
    from eviscene_tui.supervised import InputError, inputs_from_files

    out = tmp_path / "out"
    write_driver_case(out)
    ci = out / "case-inputs" / "0123456789abcdef"
    cands = out / "repairs" / "0123456789abcdef" / "rounds" / "round-00" / "repair_candidates.jsonl"
    inp = inputs_from_files(ci / "trace.json", cands, public_context=ci / "public.json", private_context=ci / "private.json")
    assert inp.site["source_step_index"] == 3 and inp.candidate["candidate_status"] == "localized"
    assert inp.public_context == {"claim": "The photo shows a flood in Lyon."} and inp.private_binding["sha256"]
    with pytest.raises(InputError):
        inputs_from_files(ci / "trace.json", ci / "candidate.json")  # a seed without a site
    inp = inputs_from_files(ci / "trace.json", ci / "candidate.json", source_step_index=5)
    assert inp.site["example_type"] == "judgment" and inp.site["localization_kind"] == "operator"
    with pytest.raises(InputError):
        inputs_from_files(ci / "public.json")
