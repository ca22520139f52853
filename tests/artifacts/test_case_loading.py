"""load_case: layouts, rounds, attempts, feedback, failure site, trace, runtime stores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_case_builders import build_search, build_single, write, write_bound, write_json

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.models import SearchManifest, RunManifest
from eviscene_tui.artifacts.problems import ProblemCode


def _tree_snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mode, st.st_mtime_ns, p.read_bytes() if p.is_file() else b"")
    return out


def test_feedback_search_layout_and_rounds(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s")
    case = load_case(root)
    assert case.layout == "feedback_search"
    assert isinstance(case.manifest, SearchManifest)
    assert case.status == "paused_pending_verifier"
    assert [r.index for r in case.rounds] == [0, 1]
    assert case.search_state is not None and case.search_state.rounds[0].records[0].state == "rejected"
    assert case.search_identity is not None and case.search_identity.max_attempts == 6
    states = [a.state for a in case.attempts]
    assert states == ["rejected", "pending"]
    r0, r1 = case.rounds
    assert not r0.relocalized and r1.relocalized
    assert r1.feedback is not None and r1.feedback.excluded_hints == ["Check the date first."]
    assert r1.feedback.anchor_feedback.checker.anchor_matches is False
    assert r0.judge[0].checker["anchor_matches"] is False
    assert r0.judge[0].earliest_error_step == 3
    assert r1.judge == {}
    assert r0.proposals is not None and r0.proposals[0].text == "Check the date first."
    assert [row.reason_code for row in r0.proposer_audits] == [None, "binary_verdict_leak", "hint_audit_failed"]
    assert r0.proposer_response.prompt_tokens == 10 and r0.proposer_response.hints() == ["Check the date first."]
    assert r0.continuations[0].teacher_steps[0].stage == "psd_teacher_repair"
    assert r0.episode_paths[0].name == "hint-00-teacher.json"
    ep, probs = r0.episode(0)
    assert ep is not None and ep.step_count == 4 and probs == []
    assert r0.live_serving_check.max_model_len == 131072
    assert r0.generation_last_error.error_type == "ReadTimeout"
    assert r0.finalization.status == "ready_for_assembly"
    assert r0.judge_summary.judge_model == "g"
    assert r0.verification_bundle.attempts[0].local_verification == "judge/hint-00.json"
    assert r1.finalization is None and r1.live_serving_check is not None
    assert r0.round_public.repair_search is not None
    assert r0.round_media.episodes == []
    assert r0.semantic_localization.selected_candidate().observed_basis[0].quote == "literal text"
    assert r0.run_inputs.binding("trace").path == "../../inputs/trace.json"
    assert r0.run_inputs_status == "initialized"
    assert case.feedback_for(1).needs_relocalization is True
    assert case.feedback_for(7) is None
    assert case.problems == []


def test_failure_site_is_latest_round(tmp_path: Path) -> None:
    case = load_case(build_search(tmp_path / "s"))
    site = case.failure_site()
    assert site is not None
    assert site.source_step_index == 1 and site.origin == "attempt"
    assert site.localization_kind == "semantic_task_verifier"
    assert site.semantic_category == "wrong_search_direction"


def test_failure_site_from_candidate_only(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s")
    for p in root.rglob("repair_attempts.jsonl"):
        p.write_bytes(b"")
    case = load_case(root)
    site = case.failure_site()
    assert site is not None and site.origin == "candidate" and site.source_step_index == 1


def test_trace_and_runtime_store_from_case(tmp_path: Path) -> None:
    case = load_case(build_search(tmp_path / "s"))
    assert case.source_trace_path == (case.root / "inputs" / "trace.json")
    trace, problems = case.trace()
    assert trace is not None and problems == [] and trace.step_count == 6
    store = case.source_runtime_store()
    assert store is not None and store.path == case.root / "source-runtime" / "case-1" / "src-attempt"
    req, probs = case.source_step_request(1)
    assert probs == [] and req is not None and req.source == "archive"
    assert len(req.images) == 1 and req.images[0].width == 4
    assert case.runtime_store_for("/etc") is None
    assert any(p.code == ProblemCode.PATH_OUTSIDE_ROOT for p in case.problems)


def test_single_run_layout(tmp_path: Path) -> None:
    case = load_case(build_single(tmp_path / "run"))
    assert case.layout == "single_run"
    assert isinstance(case.manifest, RunManifest)
    assert case.status == "generated"
    assert len(case.rounds) == 1 and case.rounds[0].dir == case.root
    assert case.rounds[0].feedback is None and not case.rounds[0].relocalized
    assert [a.state for a in case.attempts] == ["accepted"]
    trace, _ = case.trace()
    assert trace is not None and trace.episode_id == "episode-1"
    assert case.all_problems() == []


def test_single_run_generating_without_manifest_schema(tmp_path: Path) -> None:
    run = tmp_path / "gen"
    write_json(run / "manifest.json", {"status": "no_recoverable_site", "candidate_count": 0, "accepted_count": 0,
                                       "pending_hinted_episode_count": 0})
    write(run / "repair_candidates.jsonl", b"")
    case = load_case(run)
    assert case.layout == "single_run" and case.status == "no_recoverable_site"
    assert case.attempts == [] and case.candidates == [] and case.failure_site() is None
    assert case.trace() == (None, [])


def test_slate_and_unknown_layouts(tmp_path: Path) -> None:
    slate = tmp_path / "slate"
    write_bound(slate / "slate-state.json", {"v": 1}, {"status": "searching"})
    case = load_case(slate)
    assert case.layout == "slate" and case.status == "searching"
    assert [p.code for p in case.problems] == [ProblemCode.UNSUPPORTED_LAYOUT]
    empty = tmp_path / "empty"
    empty.mkdir()
    unknown = load_case(empty)
    assert unknown.layout == "unknown" and unknown.status == "unreadable" and unknown.rounds == []
    missing = load_case(tmp_path / "nope")
    assert missing.layout == "unknown"
    assert any(p.code == ProblemCode.MISSING_ARTIFACT for p in missing.problems)


def test_truncated_and_tampered_files(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s")
    r0 = root / "rounds" / "round-00"
    data = (r0 / "manifest.json").read_bytes()
    (r0 / "manifest.json").write_bytes(data[: len(data) // 2])
    attempts = (root / "repair_attempts.jsonl").read_bytes()
    (root / "repair_attempts.jsonl").write_bytes(attempts[:-40])  # torn last row
    hp = (r0 / "hint-proposals.json").read_bytes()
    (r0 / "hint-proposals.json").write_bytes(hp.replace(b"Check the date first.", b"Check the date later."))
    (root / "manifest.json").write_bytes(b"{not json")
    case = load_case(root)
    assert case.status == "paused_pending_verifier"  # falls back to search-state
    assert len(case.attempts) == 1
    assert case.rounds[0].manifest is None
    assert case.rounds[0].proposals[0].text == "Check the date later."
    codes = {p.code for p in case.all_problems()}
    assert {ProblemCode.JSON_INVALID, ProblemCode.JSONL_TORN_LINE, ProblemCode.BOUND_HASH_MISMATCH} <= codes


def test_gzip_continuation_and_legacy_shapes(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s", gzip_continuation=True)
    r1 = root / "rounds" / "round-01"
    assert any(p.name.endswith(".json.gz") for p in (r1 / "continuations").iterdir())
    # legacy: bare-list audits, records without optional fields
    write_json(r1 / "proposer-hint-audits.json", [{"passed": False, "reason": "hint_too_long"}])
    write(r1 / "repair_attempts.jsonl", b'{"schema_version":"ifv-psd-repair-attempt-v1","accepted":false}\n')
    case = load_case(root)
    r = case.round(1)
    assert r.continuations[0].teacher_steps[1].stage == "psd_teacher_judgment"
    assert r.continuations[0].hint == "Verify the location.\nThen the date."
    assert r.proposer_audits[0].reason_code == "hint_too_long"
    assert r.attempts[0].state == "pending" and r.attempts[0].repair_site is None
    assert r.problems == []


def test_reading_never_writes_or_locks(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s")
    (root / "search.lock").write_bytes(b"")
    before = _tree_snapshot(root)
    case = load_case(root)
    case.all_problems()
    case.failure_site()
    case.source_step_request(1)
    for r in case.rounds:
        r.episode(0)
    assert _tree_snapshot(root) == before


def test_wrapper_case_inputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    root = build_search(out / "repairs" / "abcd0123abcd0123")
    write_json(out / "case-inputs" / "abcd0123abcd0123" / "private.json", {"secret": 1})
    write_json(out / "case-inputs" / "abcd0123abcd0123" / "public.json", {"public": 1})
    case = load_case(root)
    assert case.wrapper_root == out.resolve()
    assert case.case_inputs_dir is not None
    assert case.private_context == {"secret": 1}
    assert case.public_context == {"public": 1}


def test_trace_outside_root_is_read_where_it_is(tmp_path: Path) -> None:
    # the source trace is a bound input: read wherever it is, and said to be outside
    root = build_search(tmp_path / "s")
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes((root / "inputs" / "trace.json").read_bytes())
    (root / "inputs" / "trace.json").unlink()
    (root / "inputs" / "trace.json").symlink_to(outside)
    case = load_case(root)
    assert case.source_trace_path is not None and case.source_trace_path.resolve() == outside.resolve()
    trace, _ = case.trace()
    assert trace is not None and trace.step_count == 6
    prov = {p.key: p for p in case.input_provenance(verify=True)}
    assert prov["trace"].inside_root is False and prov["trace"].found is not None
    assert not any(p.code == ProblemCode.PATH_OUTSIDE_ROOT for p in case.problems)
    # a store the run wrote may not leave the root, even through a symlink
    (root / "rounds" / "round-00" / "runtime").mkdir(exist_ok=True)
    (root / "rounds" / "round-00" / "runtime" / "out").symlink_to(tmp_path)
    assert case.runtime_store_for("rounds/round-00/runtime/out") is None
    assert any(p.code == ProblemCode.PATH_OUTSIDE_ROOT for p in case.problems)


def test_torn_tail_and_incomplete_round(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s")
    data = (root / "repair_attempts.jsonl").read_bytes()
    (root / "repair_attempts.jsonl").write_bytes(data[:-30])
    (root / "rounds" / "round-02").mkdir()
    case = load_case(root)
    assert len(case.attempts) == 1
    assert case.torn_tail_paths == {str(root / "repair_attempts.jsonl")}
    assert [r.incomplete for r in case.rounds] == [False, False, True]
    assert case.rounds[2].attempts is None and case.rounds[2].run_inputs is None
    lines = data.split(b"\n")
    (root / "repair_attempts.jsonl").write_bytes(lines[0][:50] + b"\n" + lines[1] + b"\n")
    again = case.reloaded()
    assert len(again.attempts) == 1 and again.torn_tail_paths == set()
    assert any(p.code == ProblemCode.JSONL_TORN_LINE for p in again.problems)


@pytest.mark.timeout(30)
def test_fifos_devices_and_escaping_symlinks_are_not_read(tmp_path: Path) -> None:
    root = build_search(tmp_path / "s")
    r0 = root / "rounds" / "round-00"
    (r0 / "manifest.json").unlink()
    os.mkfifo(r0 / "manifest.json")
    (r0 / "live-serving-check.json").unlink()
    (r0 / "live-serving-check.json").symlink_to("/dev/zero")
    (r0 / "finalization.json").unlink()
    outside = tmp_path / "outside.json"
    outside.write_text('{"status": "ready_for_assembly"}')
    (r0 / "finalization.json").symlink_to(outside)
    store = root / "source-runtime" / "case-1" / "src-attempt"
    (store / "events.jsonl").unlink()
    os.mkfifo(store / "events.jsonl")
    (root / "inputs" / "trace.json").unlink()
    os.mkfifo(root / "inputs" / "trace.json")
    case = load_case(root)
    r = case.rounds[0]
    assert r.manifest is None and r.live_serving_check is None and r.finalization is None
    codes = {p.code for p in case.all_problems()}
    assert ProblemCode.PATH_OUTSIDE_ROOT in codes and ProblemCode.NOT_REGULAR_FILE in codes
    from eviscene_tui.artifacts.runtime_archive import RuntimeStore
    from eviscene_tui.artifacts.trace import load_trace

    events, problems = RuntimeStore(store).events()
    assert events == [] and problems
    trace, problems = load_trace(root / "inputs" / "trace.json")
    assert trace is None and problems
