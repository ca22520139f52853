"""A stop ends the search in its files; a reopened search holds what it held before."""

import asyncio

import orjson
import pytest

from eviscene_tui.policy.events import TokenLogprob
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.jsonio import canonical_sha256, read_bound, read_json
from eviscene_tui.journal import supervised_journal_for_root
from eviscene_tui.supervised import ContinuationOutcome, SearchError, SearchSettings, SupervisedSearch, inputs_from_case
from eviscene_tui.tokens.tiny import encode

from supervised_fixtures import ScriptedHintServer, write_driver_case


async def fake_runner(job):
    return ContinuationOutcome(
        status="complete", reasoning="think", tool_calls=[{"id": "c1", "name": "web_search", "arguments": "{}"}],
        prompt_token_ids=encode("prompt " + job.hint), completion_token_ids=encode("call"),
        logprobs=[TokenLogprob(token="", logprob=-0.5) for _ in encode("call")],
        finish_reason="tool_calls", usage={"prompt_tokens": 3, "completion_tokens": 2}, policy_model="m",
    )


async def hanging_runner(job):
    await asyncio.Event().wait()


def _open(tmp_path, **settings):
    out = tmp_path / "out"
    if not out.exists():
        write_driver_case(out)
    droot = out / "repairs" / "0123456789abcdef"
    inputs = inputs_from_case(load_case(droot), label="case")
    return SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op", **settings))


def _events(s):
    return [orjson.loads(x) for x in supervised_journal_for_root(s.root).read_bytes().splitlines()]


def test_stop_is_written_as_the_driver_gate_writes_it_and_blocks_the_next_round(tmp_path):
    s = _open(tmp_path)
    s.stop("enough for today")
    state = read_bound(s.root / "search-state.json").payload
    manifest, _ = read_json(s.root / "manifest.json")
    for doc in (state, manifest):
        assert doc["status"] == "paused_execution_error"
        assert doc["execution_error"] == {"round": 0, "type": "OperatorStoppedSearch"}
    assert manifest["stop_reason"] == "paused_execution_error"
    stop = _events(s)[-1]
    assert stop["data"]["event"] == "stop" and stop["data"]["status"] == "paused_execution_error"
    assert stop["action"] == "stop_search"  # the driver gate's word: a stop reads as a stop in `decisions`
    assert s.status_label == "stopped by operator"
    with pytest.raises(SearchError, match="stopped by the operator"):
        s.begin_round()
    s.close()
    # reopened: still stopped, still refuses; an explicit resume goes on
    s = _open(tmp_path)
    assert s.stopped_by_operator and s.stopped
    with pytest.raises(SearchError, match="stopped by the operator"):
        s.begin_round()
    s.resume("back at it")
    assert read_bound(s.root / "search-state.json").payload["status"] == "searching"
    assert "execution_error" not in read_bound(s.root / "search-state.json").payload
    assert read_json(s.root / "manifest.json")[0]["execution_error"] is None
    assert _events(s)[-1]["data"] == {"event": "resume", "status": "searching"}
    assert _events(s)[-1]["action"] == "resume_search"
    s.begin_round()
    assert s.draft.index == 0
    s.close()


def test_resume_only_after_a_stop(tmp_path):
    s = _open(tmp_path)
    with pytest.raises(SearchError, match="not stopped"):
        s.resume()
    s.begin_round()
    with pytest.raises(SearchError, match="is open"):
        s.stop()
    s.close()


def test_typed_and_rejected_hints_survive_a_reopen_at_the_hints_gate(tmp_path):
    s = _open(tmp_path)
    s.begin_round()
    s.accept_site()
    s.add_operator_hint("Compare the dates of the first copies.")
    s.add_operator_hint("Quote the caption\nthen search it verbatim.")
    s.reject_hint(0, "too vague")
    before = [(p.index, p.text, p.status, p.reason, p.passed) for p in s.draft.proposals]
    s.close()
    s = _open(tmp_path)
    assert s.draft.stage == "hints"
    assert [(p.index, p.text, p.status, p.reason, p.passed) for p in s.draft.proposals] == before
    s.approve_hint(1)
    assert s.draft.stage == "continuation"
    s.close()


async def test_proposals_and_a_cancelled_run_survive_a_reopen_at_the_continuation_gate(tmp_path):
    s = _open(tmp_path)
    s.begin_round()
    s.accept_site()
    s.add_operator_hint("Search the caption text in quotes.")
    s.approve_hint(0)
    task = asyncio.ensure_future(s.run_continuation(hanging_runner))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert s.draft.outcome.status == "cancelled"
    s.close()
    s = _open(tmp_path)
    d = s.draft
    assert d.stage == "continuation"
    assert [(p.text, p.status) for p in d.proposals] == [("Search the caption text in quotes.", "approved")]
    assert d.approved is d.proposals[0]
    assert d.outcome.status == "cancelled"
    assert (await s.run_continuation(fake_runner)).ok
    assert s.draft.stage == "verdict"
    s.close()


def test_the_next_site_follows_a_relocalization_at_once(tmp_path):
    s = _open(tmp_path)
    s.begin_round()
    assert s.next_site()[0]["source_step_index"] == s.draft.site["source_step_index"]
    assert s.relocalize_problem(3, "") == "relocalization needs a note saying why"
    assert s.relocalize_problem(2, "x") is not None  # step 2 is a tool step, not a policy step
    s.relocalize(1, "the first search went wrong")
    site, needs = s.next_site()
    assert site["source_step_index"] == 1 and site["localization_kind"] == "operator" and not needs
    s.close()


async def test_fetched_proposals_survive_a_reopen_even_when_the_fetch_was_interrupted(tmp_path):
    h1, h2 = "Open the oldest copy first.", "Quote the caption, then search it."
    with ScriptedHintServer([[h1, h2]]) as hints:
        s = _open(tmp_path, hint_url=hints.url, hint_model="hint-model")
        s.begin_round()
        s.accept_site()

        def interrupted(*args, **kwargs):
            raise OSError("the process died before the proposals were journaled")

        s._journal_proposals = interrupted
        with pytest.raises(OSError):
            await s.fetch_proposals()
        assert (s.draft.dir / "proposer-response.json").is_file()
        s.close()
    # the reply is cached: the reopened round has its proposals (the proposer call is spent)
    s = _open(tmp_path, hint_url="http://127.0.0.1:9/v1", hint_model="hint-model")
    d = s.draft
    assert [(p.text, p.provider, p.model) for p in d.proposals] == [(h1, "openai_compatible", "hint-model"), (h2, "openai_compatible", "hint-model")]
    assert d.proposer_called and any("cached hint-constructor reply" in m for m in s.messages)
    s.reject_hint(0, "too vague")
    s.close()
    s = _open(tmp_path)
    assert [(p.text, p.status) for p in s.draft.proposals] == [(h1, "rejected"), (h2, "pending")]
    s.close()


def test_decisions_export_shows_the_stop_and_the_resume(tmp_path, capsys):
    """`decisions` lists an operator stop as stop_search (as the driver gate's) and the
    resume as resume_search, not as two comments."""
    from eviscene_tui.cli import main

    s = _open(tmp_path)
    s.stop("end of day")
    s.resume("back")
    s.close()
    assert main(["decisions", str(tmp_path / "out"), "--workdir", str(tmp_path / "w"), "--csv"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "end of day" in line or ",back" in line]
    assert any("stop_search" in r and "end of day" in r for r in rows), out
    assert any("resume_search" in r for r in rows), out


def test_a_damaged_approved_row_is_said_on_reopen_and_never_resumed_as_an_empty_hint(tmp_path):
    s = _open(tmp_path)
    s.begin_round()
    s.accept_site()
    s.add_operator_hint("Search the caption text in quotes.")
    s.approve_hint(0)
    rdir = s.draft.dir
    s.close()
    envelope = orjson.loads((rdir / "hint-proposals.json").read_bytes())
    envelope["payload"] = ["not an object"]
    envelope["payload_sha256"] = canonical_sha256(envelope["payload"])  # bound and well formed, but damaged
    (rdir / "hint-proposals.json").write_bytes(orjson.dumps(envelope))
    s = _open(tmp_path)
    assert s.draft.stage != "continuation"
    assert not any(p.text == "" for p in s.draft.proposals)
    said = [m for m in s.messages if "hint-proposals.json" in m]
    assert said and "not an object" in said[0] and "hint gate" in said[0]
    s.close()
