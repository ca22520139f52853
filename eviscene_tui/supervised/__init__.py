"""Operator-gated feedback search in the driver's format (no Textual import).

Public API::

    from eviscene_tui.supervised import SupervisedSearch, SearchSettings, Budgets, inputs_from_case
    search = SupervisedSearch.start(inputs_from_case(load_case(path, path_map=options.path_map)), options.workdir,
                                    settings=SearchSettings(operator="alice", ...))
    search.preview_feedback(); search.begin_round(); search.accept_site()
    search.add_operator_hint("...") / await search.fetch_proposals(); search.approve_hint(0)
    await search.run_continuation(PolicyContinuationRunner.from_options(options))
    search.reject_attempt("...", checker={...}) / search.approve_attempt() / search.relocalize(step, note)
    search.stop("note") between rounds (paused_execution_error / OperatorStoppedSearch); search.resume()

Pure rules: ``revision_context``, ``revision_rejection``, ``audit_hint``, ``next_stop``
(``feedback``, ``audit``) and the search's stage logic (``stages``). ``SupervisedSearch``
(``search``) coordinates them with the layout writer (``layout``: atomic writes in the
app's work directory) and the proposal client (``proposer``: the hint constructor's HTTP).
"""

from eviscene_tui.supervised.audit import AUDIT_CODES, audit_hint
from eviscene_tui.supervised.continuation import (
    ContinuationJob,
    ContinuationOutcome,
    outcome_from_accumulator,
    PolicyContinuationRunner,
)
from eviscene_tui.supervised.feedback import (
    BudgetError,
    Budgets,
    next_feedback,
    next_stop,
    public_attempt_feedback,
    revision_context,
    revision_rejection,
    round_feedback,
)
from eviscene_tui.supervised.hints import HintFetchError, build_prompt, parse_hints
from eviscene_tui.supervised.search import Proposal, RoundDraft, SearchError, SearchSettings, SupervisedSearch
from eviscene_tui.supervised.source import InputError, SupervisedInputs, inputs_from_case, inputs_from_files

__all__ = [
    "AUDIT_CODES",
    "BudgetError",
    "Budgets",
    "ContinuationJob",
    "ContinuationOutcome",
    "HintFetchError",
    "InputError",
    "PolicyContinuationRunner",
    "Proposal",
    "RoundDraft",
    "SearchError",
    "SearchSettings",
    "SupervisedInputs",
    "SupervisedSearch",
    "audit_hint",
    "outcome_from_accumulator",
    "build_prompt",
    "inputs_from_case",
    "inputs_from_files",
    "next_feedback",
    "next_stop",
    "parse_hints",
    "public_attempt_feedback",
    "revision_context",
    "revision_rejection",
    "round_feedback",
]
