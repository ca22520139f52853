"""CaseSummary counting rules and the live-update fingerprint."""

from __future__ import annotations

import os
from pathlib import Path

import test_integrity_fixtures as fx

from eviscene_tui.artifacts.jsonio import canonical_jsonl_bytes
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.summary import summarize_case, summary_fingerprint


def rows_for_counts() -> list[dict]:
    base = fx.attempt_row(episode_path="episodes/hint-00-teacher.json", episode_sha="0" * 64)
    accepted = dict(base, accepted=True, local_verification={"passed": True})
    rejected = dict(base, accepted=False, local_verification={"passed": False})
    pending_empty = dict(base, accepted=False, local_verification={})
    pending_missing = {k: v for k, v in base.items() if k != "local_verification"}
    pending_missing["accepted"] = False
    last = dict(rejected)
    last["repair_site"] = {"localization_kind": "strict_trace_audit", "semantic_category": None}
    last["hint_record"] = {"text": "the last hint"}
    return [accepted, rejected, pending_empty, pending_missing, last]


def test_search_counts_come_from_the_root_ledger(tmp_path: Path) -> None:
    root = tmp_path / "s"
    fx.build_search(root)
    rows = rows_for_counts()
    (root / "repair_attempts.jsonl").write_bytes(canonical_jsonl_bytes(rows) + b'{"torn":')
    (root / "rounds" / "round-01").mkdir()
    (root / "rounds" / "round-02").mkdir()
    (root / "rounds" / "not-a-round").mkdir()
    (root / "rounds" / "round-03.txt").write_text("")
    s = summarize_case(CaseRef(root, Layout.FEEDBACK_SEARCH), tmp_path)
    assert (s.status, s.rounds, s.attempts, s.accepted, s.pending) == ("converged", 3, 5, 1, 2)
    assert s.rel_path == "s" and s.path == root.resolve()
    assert s.localization_kind == "strict_trace_audit" and s.semantic_category is None
    assert s.case_id == "case-001" and s.candidate_id == "psd-candidate:case-001"
    assert s.hint_texts[-1] == "the last hint" and fx.HINT in s.hint_texts
    assert [p.code for p in s.problems] == ["jsonl_torn_line"]
    assert s.mtime > 0
    assert "the last hint" in s.search_text()


def test_single_run_counts(tmp_path: Path) -> None:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/r", accepted=False)
    s = summarize_case(CaseRef(run, Layout.SINGLE_RUN), tmp_path)
    assert (s.status, s.rounds, s.attempts, s.accepted, s.pending) == ("generated", 1, 1, 0, 0)
    assert s.localization_kind == "semantic_task_verifier" and s.semantic_category == "wrong_search_direction"
    assert s.problems == []


def test_localization_falls_back_to_candidate(tmp_path: Path) -> None:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/r")
    (run / "repair_attempts.jsonl").write_bytes(b"")
    fx.write_jsonl(
        run / "repair_candidates.jsonl",
        [{"case_id": "c9", "candidate_id": "psd-candidate:9",
          "repair_site": {"localization_kind": "runtime_action_failure", "semantic_category": "x"}}],
    )
    s = summarize_case(CaseRef(run, Layout.SINGLE_RUN), tmp_path)
    assert (s.attempts, s.localization_kind, s.semantic_category, s.case_id) == (0, "runtime_action_failure", "x", "c9")


def test_unreadable_manifest(tmp_path: Path) -> None:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/r")
    (run / "manifest.json").write_bytes(b'{"status": "gen')
    s = summarize_case(CaseRef(run, Layout.SINGLE_RUN), tmp_path)
    assert s.status == "unreadable" and s.attempts == 1
    assert [p.code for p in s.problems] == ["json_invalid"]


def test_missing_manifest_is_unreadable(tmp_path: Path) -> None:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/r")
    (run / "manifest.json").unlink()
    s = summarize_case(CaseRef(run, Layout.SINGLE_RUN), tmp_path)
    assert s.status == "unreadable" and [p.code for p in s.problems] == ["missing_artifact"]


def test_no_recoverable_site_minimal(tmp_path: Path) -> None:
    fx.write_json(tmp_path / "manifest.json", {"status": "no_recoverable_site", "candidate_count": 0,
                                                "accepted_count": 0, "pending_hinted_episode_count": 0})
    fx.write_jsonl(tmp_path / "repair_candidates.jsonl", [])
    s = summarize_case(CaseRef(tmp_path, Layout.SINGLE_RUN), tmp_path)
    assert (s.rel_path, s.status, s.rounds, s.attempts, s.localization_kind) == (".", "no_recoverable_site", 1, 0, None)


def test_slate_summary(tmp_path: Path) -> None:
    fx.write_bound(tmp_path / "slate-state.json", {"mode": "slate"}, {"status": "searching"})
    (tmp_path / "slate-rounds" / "00").mkdir(parents=True)
    (tmp_path / "slate-rounds" / "01").mkdir(parents=True)
    s = summarize_case(CaseRef(tmp_path, Layout.SLATE), tmp_path)
    assert (s.status, s.rounds) == ("searching", 2)
    assert [p.code for p in s.problems] == ["unsupported_layout"]
    (tmp_path / "slate-state.json").write_bytes(b"garbage")
    assert summarize_case(CaseRef(tmp_path, Layout.SLATE), tmp_path).status == "unsupported"


def test_wrapper_case_name(tmp_path: Path) -> None:
    (tmp_path / "repairs" / "k2").mkdir(parents=True)
    s = summarize_case(CaseRef(tmp_path / "repairs" / "k2", Layout.UNKNOWN, wrapper=tmp_path, key="k2"), tmp_path)
    assert (s.status, s.key, s.name, s.wrapper) == ("unreadable", "k2", "k2", tmp_path)


def test_fingerprint_changes_with_new_rounds_and_rewrites(tmp_path: Path) -> None:
    root = tmp_path / "s"
    fx.build_search(root)
    ref = CaseRef(root, Layout.FEEDBACK_SEARCH)
    first = summary_fingerprint(ref)
    assert summary_fingerprint(ref) == first
    with open(root / "repair_attempts.jsonl", "ab") as fh:
        fh.write(b"{}\n")
    second = summary_fingerprint(ref)
    assert second != first
    (root / "rounds" / "round-01").mkdir()
    third = summary_fingerprint(ref)
    assert third != second
    fx.write_json(root / "rounds" / "round-01" / "manifest.json", {"status": "generating"})
    assert summary_fingerprint(ref) != third
    os.utime(root / "manifest.json", ns=(1, 1))
    assert summary_fingerprint(ref) != third


def test_summary_from_check_cache_equals_plain_summary(tmp_path: Path) -> None:
    from eviscene_tui.artifacts.integrity import check_case

    root = tmp_path / "s"
    fx.build_search(root)
    ref = CaseRef(root, Layout.FEEDBACK_SEARCH)
    cache: dict[str, bytes] = {}
    check_case(ref, cache=cache)
    assert str(root / "repair_attempts.jsonl") in cache
    cached = summarize_case(ref, tmp_path, cache=cache, fingerprint=False)
    plain = summarize_case(ref, tmp_path)
    for field in ("status", "rounds", "attempts", "accepted", "pending", "case_id", "localization_kind", "hint_texts"):
        assert getattr(cached, field) == getattr(plain, field)
    assert cached.fingerprint == () and plain.fingerprint != ()


def test_summary_from_what_the_check_parsed_equals_plain_summary(tmp_path: Path) -> None:
    """The summary takes the check's parse of the very bytes it read (ledgers, manifest):
    the same counts and the same problems as parsing them itself, a torn line included."""
    from eviscene_tui.artifacts.integrity import check_case
    from eviscene_tui.artifacts.jsonio import Parsed

    root = tmp_path / "s"
    fx.build_search(root)
    with open(root / "repair_attempts.jsonl", "ab") as fh:
        fh.write(b'{"torn": \n')
    ref = CaseRef(root, Layout.FEEDBACK_SEARCH)
    cache: dict[str, bytes] = {}
    parsed: Parsed = {}
    check_case(ref, cache=cache, parsed=parsed)
    ledger, manifest = str(root / "repair_attempts.jsonl"), str(root / "manifest.json")
    assert parsed[ledger][0] is cache[ledger] and parsed[manifest][0] is cache[manifest]
    assert parsed[ledger][2], "the torn line is among the problems the check parsed"
    reused = summarize_case(ref, tmp_path, cache=cache, parsed=parsed, fingerprint=False)
    plain = summarize_case(ref, tmp_path, fingerprint=False)
    for field in ("status", "rounds", "attempts", "accepted", "pending", "case_id", "localization_kind", "hint_texts"):
        assert getattr(reused, field) == getattr(plain, field)
    assert [(p.code, p.path, p.message) for p in reused.problems] == [(p.code, p.path, p.message) for p in plain.problems]
    assert reused.problems
    # what the summary takes is the check's parse: a stand-in parse is seen in its counts
    parsed[ledger] = (cache[ledger], [], [])
    assert summarize_case(ref, tmp_path, cache=cache, parsed=parsed, fingerprint=False).attempts == 0 != plain.attempts
