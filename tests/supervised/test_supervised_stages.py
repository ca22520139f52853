"""The supervised search's stage logic, without files, servers or an event loop."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.events import Delta, ToolCallDelta
from eviscene_tui.supervised import records as R
from eviscene_tui.supervised import stages as S
from eviscene_tui.supervised.feedback import CHECK_NAMES, Budgets
from eviscene_tui.supervised.source import SupervisedInputs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from supervised_fixtures import make_trace

TRACE_PATH = Path("/data/eviscene/inputs/c/trace.json")  # recorded, never read here


def _inputs(step: int = 3, kind: str = "semantic") -> SupervisedInputs:
    trace = make_trace()
    site = R.site_from_trace(trace, step, localization_kind=kind)
    return SupervisedInputs(label="repairs/c", trace=trace, trace_path=TRACE_PATH, trace_sha256="0" * 64, site=site)


def _draft(stage: str = "hints", **kw) -> S.RoundDraft:
    return S.RoundDraft(index=0, dir=Path("/w/rounds/round-00"), feedback={}, site=_inputs().site, candidate={"candidate_id": "c0"},
                        config={}, stage=stage, **kw)


def _passing(index: int, text: str = "Quote the caption.") -> S.Proposal:
    return S.Proposal(index, text, 1, "operator", "op", {"passed": True, "errors": []})


def _stopped_state() -> dict:
    return {"status": S.PAUSED_EXECUTION_ERROR, "execution_error": S.operator_stop_error(2), "rounds": []}


# ------------------------------------------------------------------ gates and status
def test_require_stage_names_where_the_round_is():
    assert S.require_stage(_draft("hints"), "hints").stage == "hints"
    with pytest.raises(S.SearchError, match="the round is at 'site'; expected hints or continuation"):
        S.require_stage(_draft("site"), "hints", "continuation")
    with pytest.raises(S.SearchError, match="no round in progress"):
        S.require_stage(None, "site")


def test_begin_and_stop_refusals():
    searching = {"status": "searching", "execution_error": None}
    assert S.begin_refusal(None, searching) is None and S.begin_refusal(_draft("closed"), searching) is None
    assert "round-00 is still open (at 'verdict')" == S.begin_refusal(_draft("verdict"), searching)
    assert "resume it first" in (S.begin_refusal(None, _stopped_state()) or "")
    assert S.stop_refusal(None, searching) is None
    assert "finish or relocalize it first" in (S.stop_refusal(_draft("site"), searching) or "")
    assert "already stopped" in (S.stop_refusal(None, _stopped_state()) or "")
    assert "already ended: converged" in (S.stop_refusal(None, {"status": "converged"}) or "")


def test_an_operator_stop_reads_as_such_and_other_pauses_do_not():
    assert S.stopped_by_operator(_stopped_state()) and S.status_label(_stopped_state()) == "stopped by operator"
    other = {"status": S.PAUSED_EXECUTION_ERROR, "execution_error": {"round": 1, "type": "RuntimeError"}}
    assert not S.stopped_by_operator(other) and S.status_label(other) == S.PAUSED_EXECUTION_ERROR


# ------------------------------------------------------------------ sites
def _round(records=(), reloc=None, directory="/w/rounds/round-00", checker=None):
    recs = [dict(r) for r in records]
    row = {"directory": directory, "records": recs, "candidates": [],
           "feedback": {"attempts": [{"hint": "h", "checker": checker or {}, "selected_source_step": 3, "earliest_error_step": 1}] if recs else [],
                        "rejected_proposal_reasons": [], "status": "generated"}}
    if reloc is not None:
        row["operator_relocalization"] = reloc
    return row


def test_next_site_first_round_reuse_and_relocalization():
    inputs = _inputs()
    site, needs = S.next_site(inputs, [], "alice")
    assert site == inputs.site and not needs
    op_site, _ = S.next_site(_inputs(kind="operator"), [], "alice")
    assert op_site["localization_verifier"] == "operator:alice"
    # the last attempt's site is reused; its feedback asks for a relocalization (anchor_matches false)
    attempt = {"repair_site": dict(inputs.site, semantic_category="x")}
    site, needs = S.next_site(inputs, [_round([attempt], checker={"anchor_matches": False})], "alice")
    assert site["semantic_category"] == "x" and needs
    # an operator relocalization moves the site (and is not asked for again)
    reloc = S.operator_relocalization(3, 1, "first search", None, "bob", "ev1")
    site, needs = S.next_site(inputs, [_round(reloc=reloc)], "alice")
    assert site["source_step_index"] == 1 and site["localization_kind"] == "operator" and not needs
    assert site["localization_verifier"] == "operator:bob"


def test_next_localization_writes_an_operator_doc_or_reuses_the_last_rounds():
    inputs = _inputs()
    first = S.next_localization(inputs, [], inputs.site, site_note=None, operator="a")
    assert first.doc is None and first.reuse_from is None  # the case has no localization input
    reused = S.next_localization(inputs, [_round(directory="/w/rounds/round-04")], inputs.site, site_note=None, operator="a")
    assert reused.reuse_from == Path("/w/rounds/round-04") and reused.doc is None
    reloc = S.operator_relocalization(3, 1, "why", None, "bob", "ev1")
    moved = S.next_localization(inputs, [_round(reloc=reloc)], inputs.site, site_note=None, operator="a")
    assert moved.doc is not None and moved.reuse_from is None


def test_relocalize_problem():
    trace = make_trace()
    assert S.relocalize_problem(trace, 1, "") == "relocalization needs a note saying why"
    assert "unknown category 'nope'" in (S.relocalize_problem(trace, 1, "n", category="nope") or "")
    assert "not a policy step" in (S.relocalize_problem(trace, 2, "n") or "")
    assert "there is no step 99" in (S.relocalize_problem(trace, 99, "n") or "")
    assert S.relocalize_problem(trace, 1, "n", category=R.SEMANTIC_CATEGORIES[0]) is None


# ------------------------------------------------------------------ hints
def test_audit_rows_list_decided_and_failing_hints_only():
    d = _draft()
    pending, rejected, failing = _passing(0), _passing(1), S.Proposal(2, "It is fake.", 1, "op", "op", {"passed": False, "reason": "verdict_leak"})
    rejected.status = "rejected"
    d.proposals = [pending, rejected, failing]
    d.earlier_audit_rows = [{"passed": False, "reason": "from_disk"}]
    rows = S.audit_rows(d, [{"passed": False, "reason": S.OPERATOR_RELOCALIZATION_REASON}])
    assert [r.get("reason") for r in rows] == ["from_disk", S.OPERATOR_REJECTED_REASON, "verdict_leak", S.OPERATOR_RELOCALIZATION_REASON]
    d.approved = pending
    assert S.audit_rows(d)[1]["passed"] is True  # the approved hint is listed with its audit
    S.close_pending(d, "nothing worth running")
    assert pending.status == "rejected" and pending.reason == "nothing worth running" and failing.status == "pending"


def test_proposals_rebuilt_from_journal_events():
    hints = S.journal_hints([_passing(0, "A."), _passing(1, "B.")])
    events = [
        {"id": "e1", "action": "comment", "data": {"event": "add_hints", "hints": hints + [{"text": 7}]}},
        {"id": "e2", "action": "reject_hint", "reason": "vague", "data": {"proposal_index": 0}},
        {"id": "e3", "action": "approve_hint", "data": {"proposal_index": 1}},
        {"id": "e4", "action": "approve_hint", "data": {"proposal_index": 9}},  # no such proposal: ignored
        {"id": "e5", "action": "comment", "data": {"event": "add_hints", "hints": [{"text": "C.", "level": True}]}},
    ]
    seen = []

    def audit(text, level):
        seen.append((text, level))
        return {"passed": True}

    props, approved = S.proposals_from_events(events, default_level=2, audit=audit)
    assert [(p.index, p.text, p.status, p.event_id) for p in props] == [
        (0, "A.", "rejected", "e2"), (1, "B.", "approved", "e3"), (2, "C.", "pending", "e5"),
    ]
    assert approved is props[1] and props[0].reason == "vague"
    assert seen == [("A.", 1), ("B.", 1), ("C.", 2)]  # a bool is no level: the default applies
    assert S.site_accepted([{"data": {"event": "accept_site"}}]) and not S.site_accepted(events)
    assert S.round_events([{"target": {"round": 1}}, {"target": None}, {"target": {"round": 0}}], 0) == [{"target": {"round": 0}}]


# ------------------------------------------------------------------ continuation
def test_a_runs_end_gives_the_retry_and_the_status():
    assert S.outcome_from_last_error(None) == (None, 0)
    outcome, retry = S.outcome_from_last_error(S.last_error_doc(2, "cancelled"))
    assert outcome is not None and outcome.status == "cancelled" and retry == 3
    outcome, retry = S.outcome_from_last_error({"error_type": "http", "retry": "x"})
    assert outcome is not None and outcome.status == "failed" and outcome.error_type == "http" and retry == 1


def test_partial_output_survives_the_journal_round_trip():
    acc = StreamAccumulator()
    for ev in (Delta("reasoning", "look "), Delta("reasoning", "again"), Delta("content", "ok", token_ids=(5, 6, 7)),
               ToolCallDelta(0, id="t1", name="web_search", arguments='{"q":')):
        acc.add(ev)
    partial = S.partial_from_accumulator(acc)
    assert (partial.reasoning, partial.content, partial.completion_token_ids) == ("look again", "ok", [5, 6, 7])
    assert partial.tool_calls == [{"id": "t1", "name": "web_search", "arguments": '{"q":'}]
    events = [{"action": "comment", "data": {"event": "continuation_ended", "partial": S.partial_to_journal(partial)}},
              {"action": "comment", "data": {"event": "accept_site"}}]
    assert S.partial_from_journal(events) == partial
    assert S.partial_from_journal([]) is None and S.PartialOutput().empty


def test_the_texts_of_a_partial_output_are_cut_the_same_before_and_after_the_journal():
    acc = StreamAccumulator()
    acc.add(Delta("content", "x" * (S.PARTIAL_TEXT_LIMIT + 10)))
    partial = S.partial_from_accumulator(acc)
    assert len(partial.content) == S.PARTIAL_TEXT_LIMIT
    assert S.partial_from_journal([{"action": "comment", "data": {"event": "continuation_ended", "partial": S.partial_to_journal(partial)}}]) == partial


def test_media_processor_comes_from_the_profile():
    assert S.processor_id("m", {"engine_model_path": "/models/q"}) == "/models/q"
    assert S.processor_id("m", None) == "m"
    block = S.media_block("m", ["a" * 64], ["/w/media/a.image"])
    assert block["image_sha256"] == ["a" * 64] and block["merge_size"] == 2


# ------------------------------------------------------------------ verdict
def test_verdict_checker_values():
    with pytest.raises(S.SearchError, match="unknown checker values: bogus"):
        S.verdict_checker({"bogus": True}, accepted=False)
    with pytest.raises(S.SearchError, match="true, false or unset: anchor_matches"):
        S.verdict_checker({"anchor_matches": "yes"}, accepted=False)
    assert S.verdict_checker({"anchor_matches": False, "procedural_hint": None}, accepted=False) == {"anchor_matches": False, "procedural_hint": None}
    approved = S.verdict_checker({"anchor_matches": False}, accepted=True)
    assert set(approved) == set(CHECK_NAMES) and approved["anchor_matches"] is False
    assert all(v is True for k, v in approved.items() if k != "anchor_matches")
    site = {"source_step_index": 3}
    assert S.earliest_error_step(None, accepted=True, site=site) == 3
    assert S.earliest_error_step(None, accepted=False, site=site) == -1
    assert S.earliest_error_step(1, accepted=True, site=site) == 1


# ------------------------------------------------------------------ documents
def test_search_state_and_manifest_from_the_rounds():
    rec = {"accepted": True, "continuation": {"hinted_teacher_episode_trace": "episodes/hint-00-teacher.json"}}
    d = _draft("verdict", record=rec)
    row = S.round_row(d, records=[rec], audit=[], status="generated", round_dir=Path("/w/rounds/round-00"), files={"f": "s"},
                      operator_relocalization=None)
    assert row["records"][0]["continuation"]["hinted_teacher_episode_trace"] == "/w/rounds/round-00/episodes/hint-00-teacher.json"
    assert rec["continuation"]["hinted_teacher_episode_trace"] == "episodes/hint-00-teacher.json"  # the round's own record is unchanged
    assert row["no_further_hint"] is False and "operator_relocalization" not in row
    empty = S.round_row(_draft(), records=[], audit=[], status="no_admissible_hints", round_dir=Path("/w/r"), files={},
                        operator_relocalization={"to_source_step": 1})
    assert empty["no_further_hint"] is True and empty["operator_relocalization"] == {"to_source_step": 1}
    state = {"status": "converged", "elapsed_seconds": 1.23456, "rounds": [row, empty], "execution_error": None}
    payload = S.search_state_payload(state)
    assert payload["elapsed_seconds"] == 1.235 and "execution_error" not in payload
    manifest = S.search_manifest(payload, Budgets(max_attempts=2, max_proposals=3))
    assert (manifest["converged"], manifest["candidate_count"], manifest["accepted_count"], manifest["proposal_rounds"]) == (True, 1, 1, 2)
    assert manifest["rounds"] == ["/w/rounds/round-00", "/w/r"] and manifest["attempt_budget"] == 2
    assert S.search_state_payload(_stopped_state() | {"elapsed_seconds": 0})["execution_error"]["type"] == S.OPERATOR_STOPPED


def test_candidates_merge_by_id_and_earlier_episodes_feed_the_media_input():
    history = [{"candidates": [{"candidate_id": "a", "v": 1}], "files": {"/r0/episodes/hint-00-teacher.json": "s0", "/r0/manifest.json": "m"}},
               {"candidates": [{"candidate_id": "a", "v": 2}, {"candidate_id": "b"}, "junk"]}]
    assert S.merged_candidates(history) == [{"candidate_id": "a", "v": 1}, {"candidate_id": "b"}]
    assert S.earlier_teacher_episodes(history) == [{"path": "/r0/episodes/hint-00-teacher.json", "sha256": "s0"}]


def test_run_config_names_the_operator_as_hint_constructor_without_a_url():
    inputs = _inputs()
    none = S.RoundBindings(None, None, None, None)
    cfg = S.run_config(S.SearchSettings(operator="alice"), inputs, Budgets(), "/w/rounds/round-00", none)
    assert (cfg["hint_constructor_provider"], cfg["hint_constructor_model"], cfg["hint_constructor_base_url"]) == ("operator", "alice", None)
    cfg = S.run_config(S.SearchSettings(hint_url="http://h/v1", hint_model="hm"), inputs, Budgets(), "/w/r", none)
    assert (cfg["hint_constructor_provider"], cfg["hint_constructor_model"]) == ("openai_compatible", "hm")
    assert cfg["trace"] == {"path": str(TRACE_PATH), "sha256": "0" * 64} and cfg["operator_gated"] is True
    identity = S.search_identity(inputs, "/w", Budgets(max_attempts=4, max_proposals=8))
    assert identity["inputs"]["initial_site"]["source_step_index"] == 3 and identity["max_attempts"] == 4


def test_the_teacher_episode_keeps_the_source_prefix_as_it_is_and_leaves_the_source_untouched() -> None:
    trace = make_trace()
    before = orjson.dumps(trace)
    site = R.site_from_trace(trace, 3, localization_kind="semantic")
    teacher = {"stage_name": "psd_teacher_react", "metadata": {}, "output": "search the archive"}
    episode = R.build_episode(trace, site, [teacher], source_runtime_store_path=None, attempt_store=None)
    steps = R.trace_steps_of(trace)
    written = orjson.loads(orjson.dumps(episode))
    assert written["state"]["all_steps"][:3] == orjson.loads(orjson.dumps(steps[:3]))  # the prefix, byte-equal
    assert written["state"]["all_steps"][3]["metadata"]["psd_role"] == "teacher"
    assert len(written["state"]["all_steps"]) == 4
    # the episode's own fields are copies: changing them leaves the source as it was
    episode["state"]["termination"] = "changed"
    episode["state"].setdefault("errors", []).append("x")
    for key in episode:
        if key != "state" and isinstance(episode[key], dict):
            episode[key]["changed"] = True
    assert orjson.dumps(trace) == before
