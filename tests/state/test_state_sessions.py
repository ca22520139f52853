"""The stream session, the runs rows' reading of a repair search, without an event loop or Textual."""

import json

from eviscene_tui.artifacts.jsonio import encode_bound
from eviscene_tui.scaffold.fake_vllm.testing import simple_request
from eviscene_tui.gate.bundled import repair_root
from eviscene_tui.journal.paths import supervised_root_path
from eviscene_tui.policy.events import Attestation, Attested, Delta, ToolCallDelta
from eviscene_tui.state.stream_session import LiveFeed, StreamSession


def _state(root, status, error=None):
    payload = {"status": status, "elapsed_seconds": 1.0, "rounds": [], **({"execution_error": error} if error else {})}
    root.mkdir(parents=True, exist_ok=True)
    for name, data in encode_bound(root / "search-state.json", {"version": "x"}, payload).items():
        (root / name).write_bytes(data)


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
    assert not session.streaming and session.last_status == "complete" and feed.state == "complete"
    assert seen[-1].state == "complete"


def test_the_runs_rows_read_a_repair_and_an_earlier_in_app_search(tmp_path):
    """The bundled driver's search of a case (its stop read as the operator's), found by
    the case's record key in any of its work directories, and an in-app search of earlier
    versions, kept and shown read-only."""
    from eviscene_tui.journal.records import RecordKey
    from eviscene_tui.state.scan import supervised_status

    work, elsewhere = tmp_path / "w", tmp_path / "w2"
    case = tmp_path / "runs" / "case"
    rk = RecordKey("id-0123456789abcdef0123", "identity", "test")
    assert supervised_status([work, elsewhere], case, rk) == ("", 0.0)
    old = supervised_root_path(work, rk.key)
    _state(old, "converged")
    assert supervised_status([work, elsewhere], case, rk)[0] == "converged (earlier in-app search, read-only)"
    new = repair_root(elsewhere, rk.key)
    _state(new, "searching")
    assert supervised_status([work, elsewhere], case, rk)[0] == "searching"
    _state(new, "paused_execution_error", {"round": 1, "type": "OperatorStoppedSearch"})
    assert supervised_status([work, elsewhere], case, rk)[0] == "stopped by operator"
    assert json.loads((new / "search-state.json").read_text())["payload"]["status"] == "paused_execution_error"


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
