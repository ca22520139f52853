"""What the driver compares on resume that no hash covers, on a sample case laid out as
the driver writes it (moved): round requests against the search history, envelope
identities against the run's inputs, the verification bundle the finalization binds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from fault_trees import copy_case

from eviscene_tui.artifacts.integrity import check_case
from eviscene_tui.artifacts.jsonio import canonical_sha256, pretty_json_bytes
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.problems import Problem

CASE = "feedback-converged-3-rounds"


def _check(root: Path) -> list[Problem]:
    return check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))


def _load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def _rebind(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a plain bound envelope and write it back with a correct payload_sha256 (as
    anyone can: the hash binds the payload to nothing secret)."""
    doc = _load(path)
    edit(doc)
    doc["payload_sha256"] = canonical_sha256(doc["payload"])
    path.write_bytes(pretty_json_bytes(doc))


def request_deleted(root: Path) -> Path:
    path = root / "requests" / "round-01.json"
    path.unlink()
    return path


def request_replaced_by_another_rounds(root: Path) -> Path:
    path = root / "requests" / "round-01.json"
    other = _load(root / "requests" / "round-00.json")
    _rebind(path, lambda doc: doc.update(payload=other["payload"]))
    return path


def request_feedback_edited(root: Path) -> Path:
    path = root / "requests" / "round-02.json"
    _rebind(path, lambda doc: doc["payload"].update(locked_hint="Keep searching."))
    return path


def request_round_edited(root: Path) -> Path:
    path = root / "requests" / "round-01.json"
    _rebind(path, lambda doc: doc["identity"].update(round=2))
    return path


def bundle_replaced(root: Path) -> Path:
    path = root / "rounds" / "round-00" / "gemini-verification-bundle.json"
    doc = _load(path)
    doc["attempts"] = []
    path.write_bytes(pretty_json_bytes(doc))
    return path


def finalized_trace_edited(root: Path) -> Path:
    path = root / "rounds" / "round-00" / "manifest.json"
    doc = _load(path)
    doc["finalization"]["source_trace_sha256"] = "0" * 64
    path.write_bytes(pretty_json_bytes(doc))
    return path


def run_identity_edited(root: Path) -> Path:
    path = root / "rounds" / "round-01" / "run-inputs.json"
    _rebind(path, lambda doc: doc["identity"].update(policy_model="another-model"))
    return path


def run_identity_round_inputs_swapped(root: Path) -> Path:
    path = root / "rounds" / "round-01" / "run-inputs.json"
    other = _load(root / "rounds" / "round-00" / "run-inputs.json")["identity"]
    _rebind(path, lambda doc: doc["identity"].update(public_context=other["public_context"]))
    return path


def proposals_identity_edited(root: Path) -> Path:
    path = root / "rounds" / "round-02" / "hint-proposals.json"
    _rebind(path, lambda doc: doc["identity"].update(hint_level=2))
    return path


def search_budget_edited(root: Path) -> Path:
    path = root / "manifest.json"
    doc = _load(path)
    doc["attempt_budget"] = 32
    path.write_bytes(pretty_json_bytes(doc))
    return path


MUTATIONS: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "a round's request is deleted": (request_deleted, "missing_artifact", "request of round 1 is missing"),
    "a request is replaced by another round's": (request_replaced_by_another_rounds, "bound_hash_mismatch", "previous_rounds"),
    "a request's feedback is edited and rehashed": (request_feedback_edited, "bound_hash_mismatch", "locked_hint"),
    "a request names another round": (request_round_edited, "bound_hash_mismatch", "identity.round"),
    "the verification bundle is replaced after finalize": (bundle_replaced, "file_hash_mismatch", "verification_bundle_sha256"),
    "the finalized source trace is edited": (finalized_trace_edited, "bound_hash_mismatch", "source_trace_sha256"),
    "a round's run identity is edited": (run_identity_edited, "bound_hash_mismatch", "policy_model"),
    "a round's run identity names another round's inputs": (run_identity_round_inputs_swapped, "bound_hash_mismatch", "public_context"),
    "the proposals' identity is edited": (proposals_identity_edited, "bound_hash_mismatch", "identity differs from the run config"),
    "the search manifest's budget is edited": (search_budget_edited, "bound_hash_mismatch", "attempt_budget"),
}


def test_the_sample_is_clean(tmp_path: Path) -> None:
    assert _check(copy_case(CASE, tmp_path)) == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_resume_binding_mutation_is_reported(tmp_path: Path, name: str) -> None:
    root = copy_case(CASE, tmp_path)
    mutate, code, words = MUTATIONS[name]
    where = mutate(root)
    problems = _check(root)
    hits = [p for p in problems if p.code == code and Path(p.path) == where and words in p.message]
    assert hits, f"{name}: no {code} at {where} saying {words!r}: {[(p.code, p.path, p.message) for p in problems]}"


def test_the_expected_feedback_is_the_drivers_rule() -> None:
    """Round N's request is revision_context of the rows before it (§4.1): the lock, the
    exclusions, the relocalization flag and the anchor come from the attempts."""
    from eviscene_tui.artifacts.feedback import revision_context

    checker = {"source_error_confirmed": True, "repaired_at_selected_step": True, "procedural_hint": True, "anchor_matches": True}
    rows = [
        {"feedback": {"attempts": [{"hint": "A", "checker": {"anchor_matches": False}, "selected_source_step": 3, "earliest_error_step": 2}]}},
        {"feedback": {"attempts": [{"hint": "B", "checker": checker, "selected_source_step": 2, "earliest_error_step": 2}]}},
    ]
    first = revision_context(rows[:1])
    assert first["needs_relocalization"] is True and first["locked_hint"] == "" and first["excluded_hints"] == ["A"]
    assert first["anchor_feedback"] == {"selected_source_step": 3, "earliest_error_step": 2, "checker": {"anchor_matches": False}}
    both = revision_context(rows)
    assert both["locked_hint"] == "B" and both["needs_relocalization"] is False and both["excluded_hints"] == ["A", "B"]
    assert revision_context([]) == {"previous_rounds": [], "locked_hint": "", "excluded_hints": [],
                                    "needs_relocalization": False, "anchor_feedback": {}}
