"""The supervised and stream sessions, without an event loop or Textual."""


from eviscene_tui.artifacts.case import load_case
from eviscene_tui.fake_vllm.testing import simple_request
from eviscene_tui.policy.events import Attestation, Attested, Delta, ToolCallDelta
from eviscene_tui.state.stream_session import LiveFeed, StreamSession
from eviscene_tui.state.supervised_session import BETWEEN, ENDED, SupervisedSession, trace_listing
from eviscene_tui.supervised import SearchSettings, SupervisedSearch, inputs_from_case

from supervised_fixtures import write_driver_case


def _search(tmp_path):
    out = tmp_path / "out"
    if not out.exists():
        write_driver_case(out)
    inputs = inputs_from_case(load_case(out / "repairs" / "0123456789abcdef"), label="case")
    return SupervisedSearch.start(inputs, tmp_path / "w", settings=SearchSettings(operator="op"))


def test_supervised_session_snapshots_follow_the_search_and_notify_subscribers(tmp_path):
    session = SupervisedSession()
    seen = []
    unsubscribe = session.subscribe(seen.append)
    assert not session.snapshot().opened
    session.opened(_search(tmp_path))
    assert seen and seen[-1].opened and seen[-1].gate == BETWEEN
    assert seen[-1].next.kind == "feedback" and seen[-1].site.upcoming
    # one operation at a time
    assert session.begin("start round")
    assert not session.begin("stop") and "busy" in session.message.text
    session.search.begin_round()
    session.finished("start round", saved=True)
    snap = session.snapshot()
    assert snap.gate == "site" and snap.busy is None and not snap.site.upcoming
    assert "next: the Site card" in snap.message.text
    assert snap.detail.startswith("round-00 feedback")
    # a shown prompt stays until the gate changes
    session.show_detail("the prompt")
    assert session.snapshot().detail == "the prompt"
    session.search.accept_site()
    assert session.snapshot().detail.startswith("round-00 feedback")
    unsubscribe()
    n = len(seen)
    session.say("x")
    assert len(seen) == n
    session.close()
    assert session.search is None


def test_supervised_session_snapshot_is_the_same_after_a_reopen(tmp_path):
    session = SupervisedSession()
    session.opened(_search(tmp_path))
    s = session.search
    s.begin_round()
    s.accept_site()
    s.add_operator_hint("Compare the dates.\nThen quote them.")
    s.add_operator_hint("Quote the caption.")
    s.reject_hint(1, "vague")
    before = session.snapshot()
    assert [(p.index, p.status) for p in before.proposals] == [(0, "pending"), (1, "rejected")]
    session.close()
    again = SupervisedSession()
    again.opened(_search(tmp_path))
    assert again.snapshot().panels() == before.panels()
    again.close()


def test_stopped_search_snapshot(tmp_path):
    session = SupervisedSession()
    session.opened(_search(tmp_path))
    session.search.stop()
    snap = session.snapshot()
    assert snap.title.status == "stopped by operator" and snap.next.kind == "stopped"
    session.close()


def test_an_ended_search_points_at_no_next_round(tmp_path):
    """Once the verdict ends the search (converged here: the search's own status, as
    approve_attempt leaves it), the message says it ended instead of pointing at the Next
    round card, and the title's gate is not "between rounds"."""
    session = SupervisedSession()
    session.opened(_search(tmp_path))
    assert session.begin("approve attempt")
    session.search.state["status"] = "converged"
    session.finished("approve attempt", saved=True)
    snap = session.snapshot()
    assert "the search has ended (converged)" in snap.message.text and "next:" not in snap.message.text
    assert snap.title.gate == ENDED and snap.gate == BETWEEN
    session.close()


def test_trace_listing_marks_policy_steps(tmp_path):
    s = _search(tmp_path)
    rows = trace_listing(s.inputs.trace)
    assert [policy for _, policy, _ in rows][:4] == [False, True, False, True]
    assert rows[1][0] == 1 and "search news" in rows[1][2]
    assert trace_listing(None) == []
    s.close()


def test_live_feed_buffers_until_taken():
    feed = LiveFeed(accumulate=True)
    feed.push(Delta("content", "hel"))
    feed.push(Delta("content", "lo"))
    feed.push(Delta("reasoning", "hmm"))
    feed.push(ToolCallDelta(0, name="web_search"))
    feed.push(Attested(Attestation(status="attested", base_url="http://x")))
    texts, tools = feed.take()
    assert texts == {"content": "hello", "reasoning": "hmm"} and tools and feed.badge == "attested"
    assert feed.take() == ({}, False) and not feed.dirty
    assert "".join(feed.acc.content) == "hello"  # accumulate: the feed keeps the accumulator
    plain = LiveFeed()
    plain.push(Delta("content", "x"))
    assert plain.acc.content == []  # the producer adds to its own accumulator
    plain.finish("cancelled")
    assert plain.state == "cancelled" and plain.dirty


def test_stream_session_prefills_the_hint_once_and_tracks_the_stream():
    session = StreamSession()
    seen = []
    session.subscribe(seen.append)
    assert session.state == "idle" and not session.streaming
    req = simple_request(hint=None)
    session.request_ready(req, None, run_hint="Run hint\nsecond line")
    assert session.hint == "Run hint\nsecond line" and seen[-1].request_ready
    session.set_hint("typed")
    session.request_ready(req, None, run_hint="other")
    assert session.hint == "typed"  # a later rebuild never overwrites what was typed
    feed = session.start(req)
    assert session.streaming and session.sent_request is req and feed is session.feed
    session.ended("complete")
    assert not session.streaming and session.last_status == "complete" and session.last_acc is feed.acc
    assert seen[-1].state == "complete"


def test_the_runs_rows_read_a_stop_as_stopped_by_operator(tmp_path):
    from eviscene_tui.journal.records import RecordKey
    from eviscene_tui.state.scan import supervised_status

    s = _search(tmp_path)
    case = tmp_path / "out" / "repairs" / "0123456789abcdef"
    # the search was started (as by an earlier version) under the name of its label
    rk = RecordKey(s.root.name, "location", "test")
    assert supervised_status([tmp_path / "w"], case, rk)[0] == "searching"
    s.stop()
    assert supervised_status([tmp_path / "w"], case, rk)[0] == "stopped by operator"
    s.resume()
    assert supervised_status([tmp_path / "w"], case, rk)[0] == "searching"
    s.close()


def test_stream_session_snapshot_holds_the_title_and_the_policy_line():
    from eviscene_tui.policy.profile import unattested_target
    from eviscene_tui.state.stream_session import PolicyLine, StreamTitle

    session = StreamSession()
    seen = []
    session.subscribe(seen.append)
    assert session.snapshot().title == StreamTitle("?", "current")
    assert session.snapshot().policy == PolicyLine(None, False, "", "", None)
    session.set_target(None, "no policy configured")
    assert session.snapshot().policy.error == "no policy configured"
    session.set_case("case-7", 2)
    session.set_target(unattested_target("http://127.0.0.1:9/v1", "m"), None)
    snap = session.snapshot()
    assert snap.title == StreamTitle("case-7", "2")
    # the servers' base URLs until the first status poll answers, then its summary
    assert snap.policy == PolicyLine("unattested", False, "m", "http://127.0.0.1:9/v1", None)
    session.set_server_status("127.0.0.1:9 healthy")
    assert session.snapshot().policy.status == "127.0.0.1:9 healthy"
    n = len(seen)
    session.set_server_status("127.0.0.1:9 healthy")  # the same summary: no change, no notice
    assert len(seen) == n and seen[-1] == session.snapshot()
