import os
import subprocess
import sys

import orjson
import pytest

from eviscene_tui.journal import (
    EventError,
    Journal,
    JournalReadOnly,
    TornTailError,
    event_hash,
    evidence_for,
    fold,
    is_stale,
    stale_paths,
    verify_chain,
)
from eviscene_tui.journal.store import JournalError, lock_path_for


def _j(tmp_path, **kw):
    return Journal(tmp_path / "w" / "journal" / "review.jsonl", operator="alice", **kw)


def test_append_writes_one_canonical_line_per_event_with_chain(tmp_path):
    j = _j(tmp_path)
    a = j.append("approve_hint", target={"case": "c1", "round": 0, "hint_sha256": "h1"}, reason="good")
    b = j.append("comment", target={"case": "c1"}, reason="note")
    raw = j.path.read_bytes()
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    first = orjson.loads(lines[0])
    assert first == a and first["seq"] == 0 and first["prev"] is None
    assert b["prev"] == a["hash"] and b["seq"] == 1
    assert a["hash"] == event_hash(a)
    assert set(a["target"]) == {"case", "round", "step_index", "hint_sha256", "attempt_id"}
    rep = verify_chain(j.path)
    assert rep.ok and rep.events == 2 and rep.head == b["hash"]
    j.close()


def test_event_validation(tmp_path):
    j = _j(tmp_path)
    with pytest.raises(EventError):
        j.append("explode")
    with pytest.raises(EventError):
        j.append("reject_hint", target={"case": "c"})  # needs a reason
    with pytest.raises(EventError):
        j.append("triage_label", target={"case": "c"}, data={"label": "Not A Label!"})
    with pytest.raises(EventError):
        j.append("comment", target={"nope": 1})
    assert not j.path.exists() or j.path.read_bytes() == b""
    j.close()


def test_fold_supersede_undo_and_triage(tmp_path):
    j = _j(tmp_path)
    t = {"case": "c1", "round": 0, "hint_sha256": "h"}
    a = j.append("approve_hint", target=t)
    r = j.append("reject_hint", target=t, reason="changed my mind")
    s = fold(j.events)
    assert s.hint_status("c1", 0, "h") == "rejected"
    assert s.by_id(a["id"]).status == "superseded"
    u = j.undo(r["id"], reason="oops")
    s = fold(j.events)
    assert s.by_id(r["id"]).status == "undone"
    assert s.hint_status("c1", 0, "h") == "approved"  # undoing the latest re-activates the earlier one
    j.undo(a["id"])
    s = fold(j.events)
    assert s.hint_status("c1", 0, "h") is None
    assert u["data"]["undoes"] == r["id"] and u["target"] == r["target"]
    with pytest.raises(JournalError, match="an undo cannot be undone"):
        j.undo(u["id"])
    # triage: one current label per case; an earlier version's "note" label is a note
    l1 = j.append("triage_label", target={"case": "c2"}, data={"label": "unrecoverable"}, reason="no site")
    j.append("triage_label", target={"case": "c3"}, data={"label": "data_problem"})
    j.append("triage_label", target={"case": "c2"}, data={"label": "note"}, reason="x")
    s = fold(j.events)
    assert s.triage_labels("c2") == {"unrecoverable"} and s.triage("c2").note == "x"
    assert s.cases_with_label("data_problem") == ["c3"]
    j.undo(l1["id"])
    assert fold(j.events).triage_labels("c2") == set() and fold(j.events).triage("c2").note == "x"
    # attempts
    j.append("reject_attempt", target={"case": "c1", "round": 0, "attempt_id": "A"}, reason="wrong")
    assert fold(j.events).attempt_verdict("c1", 0, "A") == "rejected"
    assert verify_chain(j.path).ok
    j.close()


def test_stale_evidence(tmp_path):
    base = tmp_path / "root"
    base.mkdir()
    (base / "a.json").write_text("{}")
    (base / "b.json").write_text("[]")
    ev_map = evidence_for(["a.json", base / "b.json", "missing.json"], base)
    assert set(ev_map) == {"a.json", "b.json"}
    j = _j(tmp_path)
    ev = j.append("approve_attempt", target={"case": "."}, evidence=ev_map)
    assert not is_stale(ev, base)
    (base / "a.json").write_text('{"x":1}')
    assert is_stale(ev, base) and stale_paths(ev, base) == ["a.json"]
    (base / "b.json").unlink()
    assert stale_paths(ev, base) == ["a.json", "b.json"]
    j.close()


def test_tampering_breaks_the_chain(tmp_path):
    j = _j(tmp_path)
    for i in range(4):
        j.append("comment", target={"case": "c"}, reason=f"n{i}")
    j.close()
    lines = j.path.read_bytes().split(b"\n")
    ev = orjson.loads(lines[1])
    ev["reason"] = "edited"
    lines[1] = orjson.dumps(ev, option=orjson.OPT_SORT_KEYS)
    j.path.write_bytes(b"\n".join(lines))
    rep = verify_chain(j.path)
    assert not rep.ok and any("hash does not match" in p for p in rep.problems)
    # deleting a line breaks prev/seq
    lines = j.path.read_bytes().split(b"\n")
    del lines[1]
    j.path.write_bytes(b"\n".join(lines))
    rep = verify_chain(j.path)
    assert not rep.ok and any("chain broken" in p for p in rep.problems)
    # garbage in the middle is a problem
    j.path.write_bytes(b"garbage\n")
    assert not verify_chain(j.path).ok


def test_torn_tail_is_reported_refused_then_acknowledged_on_a_new_line(tmp_path):
    j = _j(tmp_path)
    a = j.append("comment", target={"case": "c"}, reason="first")
    j.close()
    with open(j.path, "ab") as fh:
        fh.write(b'{"seq":1,"id":"x","act')  # torn write
    rep = verify_chain(j.path)
    assert rep.ok and rep.torn_tail is not None and rep.events == 1
    j2 = _j(tmp_path)
    assert j2.torn_tail is not None
    with pytest.raises(TornTailError):
        j2.append("comment", target={"case": "c"}, reason="second")
    ack = j2.acknowledge_torn_tail(note="crash at 23:00")
    b = j2.append("comment", target={"case": "c"}, reason="second")
    raw = j2.path.read_bytes()
    assert b'{"seq":1,"id":"x","act\n' in raw  # torn bytes kept, never overwritten or merged
    rep = verify_chain(j2.path)
    assert rep.ok, rep.problems
    assert rep.events == 3 and [e["seq"] for e in j2.events] == [0, 1, 2]
    assert ack["prev"] == a["hash"] and b["prev"] == ack["hash"]
    assert rep.bad_lines and rep.acknowledged == [rep.bad_lines[0].offset]
    assert rep.as_dict()["bad_lines"][0]["acknowledged"] is True
    j2.close()
    j3 = _j(tmp_path)
    assert j3.torn_tail is None  # acknowledged: appending allowed after restart
    j3.append("comment", target={"case": "c"}, reason="third")
    j3.close()


def test_second_instance_is_read_only_with_clear_message(tmp_path):
    j1 = _j(tmp_path)
    j1.append("comment", target={"case": "c"}, reason="x")
    j2 = _j(tmp_path)
    assert not j1.read_only
    assert j2.read_only and "another eviscene-tui instance" in j2.read_only_reason
    assert str(os.getpid()) in j2.read_only_reason
    assert len(j2.events) == 1
    with pytest.raises(JournalReadOnly):
        j2.append("comment", target={"case": "c"}, reason="y")
    # lock file is in the work dir next to the journal
    assert lock_path_for(j1.path).parent == j1.path.parent
    j1.close()
    j3 = _j(tmp_path)
    assert not j3.read_only
    j3.close()


def test_second_process_is_read_only(tmp_path):
    j1 = _j(tmp_path)
    code = (
        "import sys; from eviscene_tui.journal import Journal; "
        "j = Journal(sys.argv[1]); print('RO' if j.read_only else 'RW'); print(j.read_only_reason)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(j1.path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("RO"), out.stderr
    assert "read-only" in out.stdout
    j1.close()
    out = subprocess.run([sys.executable, "-c", code, str(j1.path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("RW"), out.stderr


def test_review_sidecar_triage_filter(tmp_path):
    from eviscene_tui.journal import add_triage_label, open_review_journal, review_state

    root = tmp_path / "runs"
    (root / "c1").mkdir(parents=True)
    (root / "c1" / "manifest.json").write_text("{}")
    work = tmp_path / "runs.eviscene-tui"
    j = open_review_journal(work, operator="op")
    add_triage_label(j, "c1", "needs_relocalization", "anchor off", root=root, evidence=["c1/manifest.json"])
    add_triage_label(j, "c2", "data_problem", root=root)
    with pytest.raises(ValueError):
        add_triage_label(j, "c2", "bogus", root=root)
    st = review_state(work)
    assert st.triage_by_case() == {"c1": {"needs_relocalization"}, "c2": {"data_problem"}}
    assert st.cases_with_label("needs_relocalization") == ["c1"]
    assert j.events[0]["evidence"] == {"c1/manifest.json": __import__("hashlib").sha256(b"{}").hexdigest()}
    assert not any(p.is_relative_to(root) for p in [j.path])
    j.close()


def test_an_event_id_that_is_not_a_string_is_checked_not_a_crash() -> None:
    """Journal lines are read back from disk: an ``id`` edited into a list or an object is
    reported through the chain, never a TypeError."""
    from eviscene_tui.journal.store import ChainReport, verify_events

    report = ChainReport(path="journal.jsonl")
    verify_events([{"seq": 0, "id": ["x"], "prev": None}, {"seq": 1, "id": {"a": 1}, "prev": "nope"}], report)
    assert report.problems  # the hashes and the chain do not hold
    assert not any("duplicate id" in p for p in report.problems)
