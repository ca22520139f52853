"""One current triage label per case: relabel replaces, clear removes, undo brings the one
before back, also across the journals of several work directories; the label set is
the configured one; an earlier version's labels keep reading."""

from __future__ import annotations

import pytest

from eviscene_tui.journal import Journal, review_journal_path
from eviscene_tui.journal.fold import fold
from eviscene_tui.journal.records import CaseRecords, RecordIndex, RecordKey
from eviscene_tui.journal.review import add_triage_label, clear_triage_label, merged_events, merged_triage, open_review_journal
from eviscene_tui.settings import DEFAULT_TRIAGE_LABELS, load_settings


def test_the_default_label_set_and_a_configured_one(tmp_path):
    assert DEFAULT_TRIAGE_LABELS == ("agent_correct", "localizer_miss", "needs_relocalization", "data_problem", "unrecoverable")
    config = tmp_path / "c.toml"
    config.write_text('[triage]\nlabels = ["keep", "drop_it"]\nadvance_after_label = false\n')
    s = load_settings(config)
    assert s.triage.labels == ["keep", "drop_it"] and s.triage.advance_after_label is False and not s.problems
    for bad in ('labels = []', 'labels = ["Bad Name"]', 'labels = ["a", "a"]', f'labels = {[f"l{i}" for i in range(10)]!r}'.replace("'", '"')):
        config.write_text(f"[triage]\n{bad}\n")
        got = load_settings(config)
        assert got.triage.labels == list(DEFAULT_TRIAGE_LABELS) and got.problems, bad
    j = open_review_journal(tmp_path / "w", operator="op")
    with pytest.raises(ValueError, match="must be one of keep, drop_it"):
        add_triage_label(j, "id-x", "unrecoverable", labels=["keep", "drop_it"])
    add_triage_label(j, "id-x", "drop_it", labels=["keep", "drop_it"])
    j.close()


def test_relabel_replaces_clear_removes_undo_restores(tmp_path):
    j = open_review_journal(tmp_path / "w", operator="alice")
    first = add_triage_label(j, "id-a", "data_problem", "bad image\nsecond line", case_id="case-1", candidate_id="psd-candidate:1")
    assert first["data"] == {"label": "data_problem", "case_id": "case-1", "candidate_id": "psd-candidate:1"}
    second = add_triage_label(j, "id-a", "unrecoverable", "no tool could reach it")
    state = fold(j.events)
    t = state.triage("id-a")
    assert t is not None and t.label == "unrecoverable" and t.event_id == second["id"]
    assert [d.status for d in state.decisions] == ["superseded", "active"]  # one current label, not two
    cleared = clear_triage_label(j, "id-a", "kept note")
    t = fold(j.events).triage("id-a")
    assert t is not None and t.label == "" and t.note == "kept note" and t.event_id == cleared["id"]
    j.undo(cleared["id"])
    assert fold(j.events).triage("id-a").label == "unrecoverable"
    j.undo(second["id"])
    t = fold(j.events).triage("id-a")
    assert t.label == "data_problem" and t.note == "bad image\nsecond line"  # the note is multi-line
    j.close()


def test_one_history_over_several_work_directories(tmp_path):
    """Labelled from a case's folder, relabelled and undone from a parent's."""
    near = open_review_journal(tmp_path / "case.eviscene-tui", operator="alice")
    add_triage_label(near, "id-a", "localizer_miss", "from the case")
    near.close()
    far = open_review_journal(tmp_path / "tree.eviscene-tui", operator="bob")
    relabel = add_triage_label(far, "id-a", "agent_correct", "from the tree")
    journals = [review_journal_path(tmp_path / "case.eviscene-tui"), review_journal_path(tmp_path / "tree.eviscene-tui")]
    assert merged_triage(journals)["id-a"].label == "agent_correct"
    far.append("undo", target={"case": "id-a"}, data={"undoes": relabel["id"]})
    far.close()
    got = merged_triage(journals)["id-a"]
    assert got.label == "localizer_miss" and got.operator == "alice"


def test_an_earlier_versions_path_keys_and_note_label(tmp_path):
    """Work directories written by earlier versions: keys relative to the tree, several
    active labels per case, "note" as a label."""
    tree = tmp_path / "runs"
    case = tree / "caseA"
    case.mkdir(parents=True)
    old = Journal(review_journal_path(tmp_path / "runs.eviscene-tui"), operator="bob")
    old.append("triage_label", target={"case": "caseA"}, data={"label": "unrecoverable"}, reason="no site")
    old.append("triage_label", target={"case": "caseA"}, data={"label": "data_problem"}, reason="bad image")
    old.append("triage_label", target={"case": "caseA"}, data={"label": "note"}, reason="check the crop")
    old.close()
    rk = RecordKey("id-" + "1" * 20, "identity", "test")
    index = RecordIndex([CaseRecords("caseA", str(case), rk)], opened=tree)
    journals = [review_journal_path(tmp_path / "runs.eviscene-tui")]
    assert all(e["target"]["case"] == rk.key for e in merged_events(journals, index))
    t = merged_triage(journals, index)[rk.key]
    assert t.label == "data_problem" and t.note == "check the crop"
    # the file itself is never rewritten
    assert b'"case":"caseA"' in journals[0].read_bytes()
