"""The feedback and revision rules of a feedback search (psd-run-format §4), as the gate
protocol spells them once: the bundled driver, the card's preview and the stand-in apply them."""

import pytest

from eviscene_tui.artifacts.jsonio import hint_sha256
from eviscene_tui.gate.bundled.audit import audit_hint, verdict_words
from eviscene_tui.gate.bundled.stages import Budgets
from eviscene_tui.gate.protocol import (
    checker_values,
    next_stop,
    public_attempt_feedback,
    revision_context,
    revision_rejection,
    round_feedback,
    trace_steps,
)

BudgetError = ValueError


ALL_TRUE = {
    "source_error_confirmed": True,
    "repaired_at_selected_step": True,
    "grounded_episode": True,
    "procedural_hint": True,
    "anchor_matches": True,
    "episode_complete": True,
}


def att(hint, checker, step=7, earliest=7, accepted=False):
    return {
        "hint": hint,
        "selected_source_step": step,
        "checker": checker,
        "earliest_error_step": earliest,
        "task_passed": False,
        "strict_trace_passed": True,
        "accepted": accepted,
        "repaired_steps": [],
    }


def row(*attempts, reasons=(), status="generated", **extra):
    r = {"feedback": {"attempts": list(attempts), "rejected_proposal_reasons": list(reasons), "status": status}}
    r.update(extra)
    return r


def test_empty_history():
    assert revision_context([]) == {
        "previous_rounds": [],
        "locked_hint": "",
        "excluded_hints": [],
        "needs_relocalization": False,
        "anchor_feedback": {},
    }


def test_single_rejected_attempt_anchor_mismatch():
    checker = dict(ALL_TRUE, anchor_matches=False, repaired_at_selected_step=False)
    h = [row(att("Check the date.", checker, step=7, earliest=4), reasons=["binary_verdict_leak"])]
    assert revision_context(h) == {
        "previous_rounds": [h[0]["feedback"]],
        "locked_hint": "",
        "excluded_hints": ["Check the date."],
        "needs_relocalization": True,
        "anchor_feedback": {"selected_source_step": 7, "earliest_error_step": 4, "checker": checker},
    }


def test_lock_rules_walk_attempts_in_order():
    lock_ok = dict(ALL_TRUE, grounded_episode=False, episode_complete=False)  # the 4 lock checks true
    h = [
        row(att("A", lock_ok)),  # sets lock "A"
        row(att("B", lock_ok)),  # different hint: does not move the lock
        row(att("A\nmore", lock_ok)),  # starts with lock + "\n": extends the lock
        row(att("A\nmore", dict(lock_ok, anchor_matches=False))),  # fails a lock check
    ]
    fb = revision_context(h)
    assert fb["locked_hint"] == "A\nmore"
    assert fb["excluded_hints"] == ["A", "B", "A\nmore"]
    # last attempt anchor false but a lock exists -> no relocalization
    assert fb["needs_relocalization"] is False
    assert fb["anchor_feedback"] == {
        "selected_source_step": 7,
        "earliest_error_step": 7,
        "checker": dict(lock_ok, anchor_matches=False),
    }
    # "Ab" does not start with "A\n": no lock change
    assert revision_context([row(att("A", lock_ok)), row(att("Ab", lock_ok))])["locked_hint"] == "A"


def test_needs_relocalization_requires_a_real_false():
    fb = revision_context([row(att("x", {"source_error_confirmed": True}))])
    assert fb["needs_relocalization"] is False  # anchor_matches missing is not false
    assert fb["anchor_feedback"]["checker"] == {"source_error_confirmed": True}


def test_checker_keeps_only_real_booleans():
    lv = {
        "checks": [
            {"name": "source_error_confirmed", "passed": True},
            {"name": "anchor_matches", "passed": "yes"},
            {"name": "grounded_episode", "passed": None},
            {"name": "bogus", "passed": True},
            {"name": "procedural_hint", "passed": 1},
        ],
        "review": {"anchor_matches": False, "explanation": "secret", "episode_complete": True},
    }
    assert checker_values(lv) == {"source_error_confirmed": True, "anchor_matches": False, "episode_complete": True}
    assert checker_values({}) == {} and checker_values(None) == {}


def test_public_attempt_feedback_and_trace_steps():
    episode = {
        "state": {
            "all_steps": [
                {"stage": "unified_react", "action_type": "tool_call", "metadata": {}},
                {
                    "stage": "unified_react",
                    "action_type": "tool_call",
                    "tool_name": "search",
                    "tool_args": {"q": "x"},
                    "tool_result": "r",
                    "thought": "t",
                    "metadata": {"psd_suffix_step": True, "psd_role": "teacher", "policy_action": {"a": 1}, "policy_token_capture": {"x": 1}},
                },
            ]
        }
    }
    steps = trace_steps(episode)
    assert steps == [
        {
            "stage": "unified_react",
            "action_type": "tool_call",
            "tool_name": "search",
            "tool_args": {"q": "x"},
            "tool_result": "r",
            "thought": "t",
            "output": None,
            "index": 1,
            "policy_action": {"a": 1},
            "function_call_id": None,
        }
    ]
    record = {
        "hint_record": {"text": "H"},
        "repair_site": {"source_step_index": 5},
        "local_verification": {"review": {"earliest_error_step": 5, "anchor_matches": True}, "checks": []},
        "hinted_episode_pass": True,
        "hinted_strict_trace_audit_pass": True,
        "accepted": True,
    }
    assert public_attempt_feedback(record, episode) == {
        "hint": "H",
        "selected_source_step": 5,
        "checker": {"anchor_matches": True},
        "earliest_error_step": 5,
        "task_passed": True,
        "strict_trace_passed": True,
        "accepted": True,
        "repaired_steps": steps,
    }
    pending = dict(record, local_verification={}, accepted=False)
    fb = round_feedback([pending], [{"passed": True, "audit": {}}, {"passed": False, "reason": "hint_too_long"}, {"passed": False}], "generated", [])
    assert fb["rejected_proposal_reasons"] == ["hint_too_long", "hint_audit_failed"]
    assert fb["attempts"][0]["earliest_error_step"] == -1 and fb["attempts"][0]["checker"] == {}


def test_revision_rejection():
    fb = {"excluded_hints": ["Look at the sky. "], "locked_hint": ""}
    assert revision_rejection("  Look at the sky.\n", fb) == "repeated_completed_hint"
    assert revision_rejection("Other", fb) == ""
    fb = {"excluded_hints": ["L"], "locked_hint": "L"}
    assert revision_rejection("L", fb) == "repeated_completed_hint"
    assert revision_rejection("L more", fb) == "changed_verified_hint"
    assert revision_rejection("X\nL", fb) == "changed_verified_hint"
    assert revision_rejection("L\nAlso check the caption.", fb) == ""


def test_audit_codes_each():
    ok = audit_hint("Re-check the shadow direction against the stated time of day.")
    assert ok["passed"] and ok["errors"] == [] and ok["schema_version"] == "ifv-psd-hint-audit-v1"
    assert ok["hint_sha256"] == hint_sha256("Re-check the shadow direction against the stated time of day.")
    assert ok["hint_chars"] == len("Re-check the shadow direction against the stated time of day.")
    assert audit_hint("   \n")["errors"] == ["hint_empty"]
    assert audit_hint("x" * 1201)["errors"] == ["hint_too_long"]
    assert audit_hint("x" * 1200)["passed"]
    assert audit_hint("ok hint", level=7)["errors"] == ["hint_level_invalid"]
    assert audit_hint("The image is fake; say so.")["errors"] == ["binary_verdict_leak"]
    assert audit_hint("Consider real-world scale of the bus.")["passed"]
    assert verdict_words("REAL. Authentic? fake-looking") == ["REAL", "Authentic"]
    priv = {"gold": {"expected_verdict": "fake", "source": {"title": "Flooded Metro Station Lyon"}}, "n": 3}
    leak = audit_hint("Search for   flooded metro station lyon archives.", private_context=priv)
    assert leak["errors"] == ["private_value_leak"] and leak["leak_paths"] == ["$.gold.source.title"]
    assert audit_hint("fake", private_context=priv)["errors"] == ["binary_verdict_leak"]  # short value: verdict rule
    fb = {"excluded_hints": ["Check the caption date."], "locked_hint": ""}
    assert audit_hint("Check the caption date.", feedback=fb)["errors"] == ["repeated_completed_hint"]
    fb = {"excluded_hints": ["Check the caption date."], "locked_hint": "Check the caption date."}
    r = audit_hint("Check the weather.", feedback=fb)
    assert r["errors"] == ["changed_verified_hint"] and r["reason"] == "changed_verified_hint"
    assert audit_hint("Check the caption date.\nThen the weather.", feedback=fb)["passed"]


def test_budgets_validation_and_stop_order():
    Budgets()
    for bad in [dict(max_attempts=0), dict(max_attempts=33, max_proposals=40), dict(max_attempts=True),
                dict(max_attempts=6, max_proposals=5), dict(max_proposals=65), dict(max_seconds=0),
                dict(max_seconds=86401), dict(max_attempts=2.0)]:
        with pytest.raises(BudgetError):
            Budgets(**bad)
    b = Budgets(max_attempts=2, max_proposals=3, max_seconds=10)

    def st(rows, elapsed=0):
        return {"rounds": rows, "elapsed_seconds": elapsed}

    rec = {"accepted": False}
    assert next_stop(st([]), b.max_attempts, b.max_proposals, b.max_seconds) is None
    assert next_stop(st([{"records": [rec]}]), b.max_attempts, b.max_proposals, b.max_seconds) is None
    assert next_stop(st([{"records": [rec]}, {"records": [{"accepted": True}]}]), b.max_attempts, b.max_proposals, b.max_seconds) == "converged"
    assert next_stop(st([{"records": [rec]}, {"records": [rec]}]), b.max_attempts, b.max_proposals, b.max_seconds) == "attempt_budget_exhausted"
    assert next_stop(st([{"records": []}, {"records": []}, {"records": [rec]}]), b.max_attempts, b.max_proposals, b.max_seconds) == "proposal_budget_exhausted"
    assert next_stop(st([{"records": [rec]}], elapsed=10), b.max_attempts, b.max_proposals, b.max_seconds) == "time_budget_exhausted"
    assert next_stop(st([{"records": [], "no_further_hint": True}]), b.max_attempts, b.max_proposals, b.max_seconds) == "no_further_grounded_hint"
    # order: converged wins over every budget
    assert next_stop(st([{"records": [{"accepted": True}]}, {"records": [rec]}, {"records": []}], elapsed=99), b.max_attempts, b.max_proposals, b.max_seconds) == "converged"
    # attempts before proposals before time
    assert next_stop(st([{"records": [rec, rec]}, {}, {}], elapsed=99), b.max_attempts, b.max_proposals, b.max_seconds) == "attempt_budget_exhausted"
    assert next_stop(st([{}, {}, {}], elapsed=99), b.max_attempts, b.max_proposals, b.max_seconds) == "proposal_budget_exhausted"
    assert next_stop(st([{"no_further_hint": True}], elapsed=99), b.max_attempts, b.max_proposals, b.max_seconds) == "time_budget_exhausted"


def test_storage_budget():
    assert next_stop({"rounds": []}, 6, 12, 1800, 2 << 30) == "paused_storage_budget"
    assert next_stop({"rounds": []}, 6, 12, 1800, (2 << 30) - 1) is None


def test_a_declared_action_that_is_not_a_name_is_dropped_not_a_crash() -> None:
    """A gate request's ``actions`` is the driver's file: an entry whose action is a list or
    an object is dropped like an unknown one, and the valid entries are kept."""
    from eviscene_tui.gate.protocol import offered

    doc = {"actions": [{"action": []}, {"action": {"a": 1}}, ["stop"], "approve-round", {"action": "stop", "why": "x"}]}
    assert offered(doc, "round") == [{"action": "approve-round"}, {"action": "stop", "why": "x"}]
