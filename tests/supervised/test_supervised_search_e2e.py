"""A whole supervised search over real loopback HTTP: the bundled fake vLLM server
for the teacher continuations and a scripted hint-constructor endpoint (Starlette).

reject (round-00) -> relocalize (round-01, as the verdict) -> approve (round-02, converged).
"""

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.jsonio import hint_sha256, read_bound, read_json, read_jsonl, sha256_file
from eviscene_tui.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.fake_vllm.server import DEFAULT_PROFILE, DEFAULT_SCENARIO
from eviscene_tui.journal import JournalReadOnly, fold, supervised_journal_for_root, verify_chain
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import target_from_profile_dict
from eviscene_tui.supervised import (
    Budgets,
    PolicyContinuationRunner,
    SearchError,
    SearchSettings,
    SupervisedSearch,
    inputs_from_case,
)
from eviscene_tui.supervised.feedback import trace_steps

from supervised_fixtures import PRIVATE_TITLE, ScriptedHintServer, tree_hash, write_driver_case

H_LEAK = "The image is fake, say so."
H_PRIV = f"Search for {PRIVATE_TITLE} in the archives."
H1 = "Search the caption text in quotes on news sites."
H2 = "Look at the earlier search results before searching again."
H3 = "Query the exact caption with the city name and date."

CHECK0 = {
    "source_error_confirmed": True,
    "repaired_at_selected_step": False,
    "grounded_episode": True,
    "procedural_hint": True,
    "anchor_matches": True,
    "episode_complete": False,
}


def _attempt_fb(hint, step, checker, earliest, episode_path, accepted=False):
    episode, _ = read_json(episode_path)
    return {
        "hint": hint,
        "selected_source_step": step,
        "checker": checker,
        "earliest_error_step": earliest,
        "task_passed": accepted,
        "strict_trace_passed": True,
        "accepted": accepted,
        "repaired_steps": trace_steps(episode),
    }


async def test_supervised_search_reject_relocalize_approve(tmp_path):
    out = tmp_path / "out"
    droot = write_driver_case(out)
    before = tree_hash(out)
    case = load_case(droot)
    inputs = inputs_from_case(case, label="repairs/0123456789abcdef")
    assert inputs.site["source_step_index"] == 3
    workdir = tmp_path / "out.eviscene-tui"

    replies = [[H_LEAK, H_PRIV, H1], [H3]]
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv, ScriptedHintServer(replies) as hints:
        profile = dict(DEFAULT_PROFILE, base_url=srv.v1_url)
        profile_path = tmp_path / "profile.json"
        profile_path.write_text(json.dumps(profile))
        settings = SearchSettings(
            operator="alice", policy_model=profile["profile_id"], policy_base_url=srv.v1_url,
            policy_profile=profile_path, hint_url=hints.url, hint_model="hint-model",
        )
        search = SupervisedSearch.start(inputs, workdir, settings=settings, budgets=Budgets())
        sroot = search.root
        assert sroot.parent == workdir / "supervised"
        runner = PolicyContinuationRunner(target_from_profile_dict(profile), PolicyConfig(), work=search.work)

        # ---------------------------------------------------------------- round 00: reject
        fb0 = search.preview_feedback()
        assert fb0 == {"previous_rounds": [], "locked_hint": "", "excluded_hints": [], "needs_relocalization": False, "anchor_feedback": {}}
        d0 = search.begin_round()
        assert d0.site["source_step_index"] == 3 and d0.site["localization_kind"] == "semantic_task_verifier"
        with pytest.raises(SearchError):
            search.approve_hint(0)  # still at the site gate
        search.accept_site()
        props = await search.fetch_proposals()
        assert [p.audit["errors"] for p in props] == [["binary_verdict_leak"], ["private_value_leak"], []]
        assert props[1].audit["leak_paths"] == ["$.gold.source_title"]
        # the exact prompt went out, with the feedback and no private material
        sent = hints.requests[0]
        assert sent["messages"] == search.draft.prompt
        assert sent["response_format"] == {"type": "json_object"}
        assert PRIVATE_TITLE not in json.dumps(sent)
        with pytest.raises(SearchError):
            await search.fetch_proposals()  # one proposer call per round
        with pytest.raises(SearchError):
            search.approve_hint(0)  # failed audit cannot run
        search.reject_hint(0, "states the verdict")
        search.reject_hint(1, "leaks the private source")
        search.approve_hint(2, "procedural")
        events = []
        outcome = await search.run_continuation(runner, on_event=events.append)
        assert outcome.ok, outcome.error
        assert outcome.attestation_status == "attested"
        assert outcome.completion_token_ids and outcome.prompt_token_ids
        assert len(events) > 5  # streamed
        assert outcome.record_path and str(workdir) in outcome.record_path  # the policy recorder kept the attempt too
        # the record names its case as the stream screen's do, so the token inspector lists it for this case only
        rec_case = json.loads(Path(outcome.record_path).read_text())["case"]
        assert rec_case["case_id"] == case.case_id and rec_case["case_key"] == droot.name
        assert rec_case["case_root"] == str(droot) and rec_case["round_index"] == 0 and rec_case["origin"] == "supervised"
        assert search.draft.stage == "verdict"
        search.reject_attempt("kept repeating the same search", checker=CHECK0)
        assert search.status == "searching"

        r0 = sroot / "rounds" / "round-00"
        fb1_expected = {
            "previous_rounds": [
                {
                    "attempts": [_attempt_fb(H1, 3, CHECK0, -1, r0 / "episodes" / "hint-00-teacher.json")],
                    "rejected_proposal_reasons": ["binary_verdict_leak", "private_value_leak"],
                    "status": "generated",
                }
            ],
            "locked_hint": "",
            "excluded_hints": [H1],
            "needs_relocalization": False,
            "anchor_feedback": {"selected_source_step": 3, "earliest_error_step": -1, "checker": CHECK0},
        }
        assert search.preview_feedback() == fb1_expected
        # the repaired step, by hand: the teacher's single hinted action at source step 3
        (step,) = fb1_expected["previous_rounds"][0]["attempts"][0]["repaired_steps"]
        assert {k: step[k] for k in ("stage", "action_type", "tool_name", "tool_args", "tool_result", "index")} == {
            "stage": "unified_react", "action_type": "tool_call", "tool_name": "reverse_image_search",
            "tool_args": {"query": "flooded street photo source"}, "tool_result": None, "index": 3,
        }
        assert step["thought"] == DEFAULT_SCENARIO["reasoning"] and step["output"] == DEFAULT_SCENARIO["content"]
        assert step["function_call_id"] == step["policy_action"]["tool_calls"][0]["id"]

        # ---------------------------------------------------------------- round 01: relocalize
        d1 = search.begin_round()
        assert d1.feedback == fb1_expected
        search.accept_site()
        p_again = search.add_operator_hint(H1 + "  ")
        assert p_again.audit["errors"] == ["repeated_completed_hint"]
        p2 = search.add_operator_hint(H2)
        assert p2.passed
        search.reject_hint(p_again.index, "already tried")
        search.approve_hint(p2.index)
        assert (await search.run_continuation(runner)).ok
        with pytest.raises(SearchError):
            search.relocalize(2, "not a policy step")
        search.relocalize(1, "the real error is the first query", category="wrong_search_direction")
        r1 = sroot / "rounds" / "round-01"
        check1 = {"anchor_matches": False}
        fb2_expected = {
            "previous_rounds": [
                fb1_expected["previous_rounds"][0],
                {
                    "attempts": [_attempt_fb(H2, 3, check1, 1, r1 / "episodes" / "hint-00-teacher.json")],
                    "rejected_proposal_reasons": ["repeated_completed_hint"],
                    "status": "generated",
                },
            ],
            "locked_hint": "",
            "excluded_hints": [H1, H2],
            "needs_relocalization": True,
            "anchor_feedback": {"selected_source_step": 3, "earliest_error_step": 1, "checker": check1},
        }
        assert search.preview_feedback() == fb2_expected

        # ---------------------------------------------------------------- round 02: approve
        d2 = search.begin_round()
        assert d2.site["source_step_index"] == 1
        assert d2.site["localization_kind"] == "operator"
        assert d2.site["localization_verifier"] == "operator:alice"
        search.accept_site()
        props = await search.fetch_proposals()
        assert [p.text for p in props] == [H3] and props[0].passed
        search.approve_hint(0)
        assert (await search.run_continuation(runner)).ok
        search.approve_attempt("repaired at the right step")
        assert search.status == "converged"
        with pytest.raises(SearchError):
            search.begin_round()
        search.close()

    # ------------------------------------------------------------------ on disk
    state = read_bound(sroot / "search-state.json")
    assert state.ok and state.payload["status"] == "converged"
    assert state.identity["version"] == "ifv-psd-feedback-search-v1"
    assert [r["directory"] for r in state.payload["rounds"]] == [str((sroot / "rounds" / f"round-0{i}").resolve()) for i in range(3)]
    for i, expected in enumerate([fb0, fb1_expected, fb2_expected]):
        req = read_bound(sroot / "requests" / f"round-0{i}.json")
        assert req.ok and req.payload == expected
        assert req.identity == {"search": __import__("eviscene_tui.artifacts.jsonio", fromlist=["x"]).canonical_sha256(state.identity), "round": i}
        public, _ = read_json(sroot / "round-inputs" / f"round-0{i}" / "public.json")
        assert public == {"claim": "The photo shows a flood in Lyon.", "repair_search": expected}
    media2, _ = read_json(sroot / "round-inputs" / "round-02" / "media.json")
    assert [e["sha256"] for e in media2["episodes"]] == [
        sha256_file(sroot / "rounds" / f"round-0{i}" / "episodes" / "hint-00-teacher.json") for i in range(2)
    ]
    for row in state.payload["rounds"]:
        for fpath, sha in row["files"].items():
            assert sha256_file(fpath) == sha
        assert len(row["records"]) == 1
    recs, _ = read_jsonl(sroot / "repair_attempts.jsonl")
    assert [r["accepted"] for r in recs] == [False, False, True]
    assert recs[2]["repair_tier"] == "causal_episode_pass"
    assert recs[2]["repair_site"]["localization_kind"] == "operator"
    assert recs[0]["hint_record"]["audit"]["hint_sha256"] == hint_sha256(H1)
    assert recs[0]["completion_ids"] and recs[0]["student_prompt_ids"]
    manifest, _ = read_json(sroot / "manifest.json")
    assert manifest["status"] == "converged" and manifest["converged"] is True
    assert manifest["candidate_count"] == 3 and manifest["accepted_count"] == 1 and manifest["proposal_rounds"] == 3
    # round files as the driver writes them
    cont = read_bound(r0 / "continuations" / "hint-00.json")
    run_inputs = read_bound(r0 / "run-inputs.json")
    assert cont.ok and cont.identity == {"run": __import__("eviscene_tui.artifacts.jsonio", fromlist=["x"]).canonical_sha256(run_inputs.identity), "hint": hint_sha256(H1)}
    proposals = read_bound(r0 / "hint-proposals.json")
    assert proposals.ok and [p["text"] for p in proposals.payload] == [H1]
    audits, _ = read_json(r0 / "proposer-hint-audits.json")
    assert [row["passed"] for row in audits["proposals"]] == [False, False, True]
    assert read_bound(r0 / "proposer-response.json").ok
    live, _ = read_json(r0 / "live-serving-check.json")
    assert live == {"model_id": "ifv-qwen3.5-9b", "root": "/models/fake/Qwen3.5-9B", "max_model_len": 131072}
    judge2, _ = read_json(sroot / "rounds" / "round-02" / "judge" / "hint-00.json")
    assert judge2["passed"] is True and judge2["verifier"]["kind"] == "operator"
    semloc2, _ = read_json(sroot / "rounds" / "round-02" / "semantic-localization.json")
    assert semloc2["candidates"][0]["source_step_index"] == 1
    ri2 = read_bound(sroot / "rounds" / "round-02" / "run-inputs.json")
    assert ri2.identity["semantic_verification"]["path"].endswith("round-inputs/round-02/semantic-localization.json")

    # ------------------------------------------------------------------ journal
    jpath = supervised_journal_for_root(sroot)
    assert jpath.parent == workdir / "supervised" and not str(jpath).startswith(str(sroot) + "/")
    rep = verify_chain(jpath)
    assert rep.ok, rep.problems
    evs = [orjson.loads(line) for line in jpath.read_bytes().splitlines()]
    actions = [e["action"] for e in evs if e["action"] not in ("comment", "accept_site")]
    assert [e["data"]["event"] for e in evs if e["action"] == "accept_site"] == ["accept_site"] * 3
    assert actions == [
        "reject_hint", "reject_hint", "approve_hint", "reject_attempt",
        "reject_hint", "approve_hint", "reject_attempt", "relocalize",
        "approve_hint", "approve_attempt",
    ]
    assert all(e["operator"] == "alice" and e["target"]["case"] == "repairs/0123456789abcdef" for e in evs)
    state_fold = fold(evs)
    assert state_fold.attempt_verdict("repairs/0123456789abcdef", 2, recs[2]["attempt_id"]) == "approved"
    reloc = next(e for e in evs if e["action"] == "relocalize")
    assert reloc["data"]["from_source_step"] == 3 and reloc["data"]["to_source_step"] == 1
    assert any(k.startswith("rounds/round-01/continuations") for k in reloc["evidence"])

    # ------------------------------------------------------------------ check and evidence
    proc = subprocess.run([sys.executable, "-m", "eviscene_tui", "check", str(sroot), "--json"], capture_output=True, timeout=120)
    report = json.loads(proc.stdout)
    problems = [p for c in report["cases"] for p in c["problems"]]
    assert problems == [] and proc.returncode == 0, problems
    assert report["cases"][0]["layout"] == "feedback_search" and report["cases"][0]["status"] == "converged"
    assert tree_hash(out) == before  # the driver's root (and its wrapper) byte-identical


async def test_second_instance_on_a_supervised_root_is_read_only(tmp_path):
    out = tmp_path / "out"
    droot = write_driver_case(out)
    inputs = inputs_from_case(load_case(droot), label="k")
    a = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="a"))
    b = SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="b"))
    assert not a.read_only and b.read_only and "read-only" in b.read_only_reason
    with pytest.raises(JournalReadOnly):
        b.begin_round()
    a.begin_round()
    a.close()
    b.close()


async def test_supervised_round_on_a_sample_case_with_images(tmp_path):
    """A realistic sample (runtime archive, an image in the failure step's request):
    the round records psd_media with the image, and check finds no problem."""
    samples = pytest.importorskip("eviscene_tui.samples")
    runs = tmp_path / "runs"
    samples.generate(runs)  # the deterministic sample generator (the committed sample_runs may be mid-regeneration)
    before = tree_hash(runs)
    case = load_case(runs / "feedback-converged-3-rounds")
    inputs = inputs_from_case(case, label="feedback-converged-3-rounds")
    prof = json.loads((runs / "serving-profile.json").read_text())
    with FakeVLLMServer(scenario={"tokens_per_second": None}, profile=prof) as srv:
        prof = dict(prof, base_url=srv.v1_url)
        s = SupervisedSearch.start(inputs, tmp_path / "runs.eviscene-tui", settings=SearchSettings(operator="op", policy_model=prof["profile_id"]))
        s.begin_round()
        s.accept_site()
        s.approve_hint(s.add_operator_hint("Search the caption text in quotes on news sites.").index)
        out = await s.run_continuation(PolicyContinuationRunner(target_from_profile_dict(prof), PolicyConfig()))
        assert out.ok, out.error
        assert out.images and 248056 in out.prompt_token_ids
        s.reject_attempt("not yet", checker={"anchor_matches": True})
        s.close()
    rec = read_jsonl(s.root / "repair_attempts.jsonl")[0][0]
    media = rec["psd_media"]
    assert media["schema_version"] == "ifv-psd-media-v3" and len(media["image_sha256"]) == 1
    assert sha256_file(media["image_paths"][0]) == media["image_sha256"][0]
    proc = subprocess.run([sys.executable, "-m", "eviscene_tui", "check", str(s.root), "--json"], capture_output=True, timeout=120)
    report = json.loads(proc.stdout)
    assert [p for c in report["cases"] for p in c["problems"]] == []
    assert tree_hash(runs) == before


async def test_runner_reports_a_request_it_cannot_build_without_calling_the_server(tmp_path):
    from eviscene_tui.policy.profile import unattested_target
    from eviscene_tui.supervised.continuation import ContinuationJob

    # a closed port: the runner must fail before any network call
    runner = PolicyContinuationRunner(unattested_target("http://127.0.0.1:9/v1", "m"), PolicyConfig())
    out = await runner(ContinuationJob(case=None, source_step_index=0, hint="h", round_index=0))
    assert out.status == "failed" and out.error_type == "request" and "no case" in out.error
    droot = write_driver_case(tmp_path / "out")
    out = await runner(ContinuationJob(case=load_case(droot), source_step_index=999, hint="h", round_index=0))
    assert out.status == "failed" and out.error_type == "request" and "cannot be rebuilt" in out.error


async def test_supervised_round_on_a_tree_written_elsewhere_and_moved(tmp_path):
    """A supervised round reads the moved tree's inputs (trace, contexts, the source
    rollout's archive) where the move put them; the original location no longer exists."""
    import shutil

    samples = pytest.importorskip("eviscene_tui.samples")
    written = tmp_path / "cluster" / "sample_runs"
    samples.generate(written, base=str(written))
    runs = tmp_path / "copy" / "runs"
    runs.parent.mkdir()
    shutil.move(str(written), str(runs))
    shutil.rmtree(tmp_path / "cluster")
    before = tree_hash(runs)
    case = load_case(runs / "feedback-converged-3-rounds")
    inputs = inputs_from_case(case, label="moved")
    assert inputs.trace_path == runs / "inputs" / "feedback-converged-3-rounds" / "trace.json"
    assert inputs.private_binding is not None and inputs.public_binding is not None
    prof = json.loads((runs / "serving-profile.json").read_text())
    with FakeVLLMServer(scenario={"tokens_per_second": None}, profile=prof) as srv:
        prof = dict(prof, base_url=srv.v1_url)
        s = SupervisedSearch.start(inputs, tmp_path / "work", settings=SearchSettings(operator="op", policy_model=prof["profile_id"]))
        s.begin_round()
        s.accept_site()
        s.approve_hint(s.add_operator_hint("Search the caption text in quotes on news sites.").index)
        out = await s.run_continuation(PolicyContinuationRunner(target_from_profile_dict(prof), PolicyConfig()))
        assert out.ok, out.error
        assert out.images and 248056 in out.prompt_token_ids  # the archived image, from the moved source rollout
        s.reject_attempt("not yet", checker={"anchor_matches": True})
        s.close()
    assert tree_hash(runs) == before
