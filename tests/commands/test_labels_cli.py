"""``eviscene-tui labels PATH``: one row per case with its case id and its one current
label, in columns a dataset pipeline loads as they are; ``check --json`` names the case
and candidate of a no-site case too."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from eviscene_tui.cli import main
from eviscene_tui.commands.labels import COLUMNS
from eviscene_tui.journal import Journal, review_journal_path
from eviscene_tui.journal.records import record_key
from eviscene_tui.journal.review import add_triage_label, open_review_journal

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="sample_runs not generated")
NO_SITE = "search-no-recoverable-site"


def _tree(tmp_path: Path) -> Path:
    from eviscene_tui.scaffold.samples import copy_case

    tree = tmp_path / "runs"
    for name in (NO_SITE, "single-generating", "multi-case"):
        copy_case(SAMPLES, name, tree)
    return tree


def test_the_columns_and_one_row_per_case(tmp_path, capsys):
    tree = _tree(tmp_path)
    j = open_review_journal(tmp_path / "elsewhere-work", operator="alice")
    add_triage_label(j, record_key(tree / NO_SITE).key, "data_problem", "first")
    add_triage_label(j, record_key(tree / NO_SITE).key, "unrecoverable", "no tool reaches the source\nsee the crop")
    j.close()
    assert main(["labels", str(tree), "--csv", "--workdir", str(tmp_path / "elsewhere-work")]) == 0
    out = capsys.readouterr().out
    reader = csv.DictReader(io.StringIO(out))
    assert tuple(reader.fieldnames or ()) == COLUMNS == (
        "case", "case_id", "candidate_id", "status", "category", "no_site_reasons", "label", "note", "operator", "labelled_at")
    rows = {r["case"]: r for r in reader}
    assert sorted(rows) == ["multi-case/repairs/8301050608582e18", "multi-case/repairs/dfed9aca8c89c222", NO_SITE, "single-generating"]
    no_site = rows[NO_SITE]
    assert no_site["case_id"] == "case-rally-tbilisi-0042" and no_site["candidate_id"].startswith("psd-candidate:")
    assert no_site["status"] == "no_further_grounded_hint" and "localizer_failed" in no_site["no_site_reasons"]
    assert no_site["category"] == "evidence_interpretation_error"  # what the localizer proposed
    assert no_site["label"] == "unrecoverable" and no_site["note"] == "no tool reaches the source\nsee the crop"
    assert no_site["operator"] == "alice" and no_site["labelled_at"].endswith("Z")
    assert rows["single-generating"]["label"] == "" and rows["single-generating"]["case_id"] == "case-flood-valencia-0420"
    assert rows["multi-case/repairs/8301050608582e18"]["case_id"] == "case-flood-valencia-0512"


def test_json_is_flat_and_loads_into_a_frame(tmp_path, capsys):
    tree = _tree(tmp_path)
    old = Journal(review_journal_path(tmp_path / "runs.eviscene-tui"), operator="bob")  # an earlier version's key
    old.append("triage_label", target={"case": "single-generating"}, data={"label": "data_problem"}, reason="blurred")
    old.close()
    assert main(["labels", str(tree), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and len(rows) == 4
    assert all(tuple(r) == COLUMNS and all(isinstance(v, (str, int, float)) for v in r.values()) for r in rows)
    assert next(r for r in rows if r["case"] == "single-generating")["label"] == "data_problem"
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_json(io.StringIO(json.dumps(rows)))
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 4


def test_the_text_table_and_no_case(tmp_path, capsys):
    tree = _tree(tmp_path)
    assert main(["labels", str(tree)]) == 0
    out = capsys.readouterr().out
    assert "case-rally-tbilisi-0042" in out and "4 case(s), 0 labelled" in out
    (tmp_path / "empty").mkdir()
    assert main(["labels", str(tmp_path / "empty"), "--csv"]) == 3  # as check
    assert "no PSD cases" in capsys.readouterr().err
    assert main(["labels", str(tmp_path / "nope")]) == 2


def test_check_json_names_the_case_and_candidate_of_a_no_site_case(tmp_path, capsys):
    tree = _tree(tmp_path)
    main(["check", str(tree), "--json"])
    doc = json.loads(capsys.readouterr().out)
    entry = next(c for c in doc["cases"] if c["path"] == NO_SITE)
    assert entry["case_id"] == "case-rally-tbilisi-0042"
    assert entry["candidate_id"] == "psd-candidate:03c05bf1f568306d4be1b02c141a70128e146757fbc19714e1193ad8f39758ca"


HOSTILE = "bidi \u202eevil\u202c, csi \x9b2J, line\u2028sep, esc \x1b[2J"


def test_hostile_notes_leave_json_lossless_and_terminal_safe(tmp_path, capsys, monkeypatch):
    """A note holding controls a terminal acts on: ``--json`` escapes them (and parses to
    the very note), ``--csv`` into a pipe keeps the note exact, ``--csv`` to a terminal
    shows it through safe_text."""
    tree = _tree(tmp_path)
    j = open_review_journal(tmp_path / "w", operator="alice")
    add_triage_label(j, record_key(tree / NO_SITE).key, "unrecoverable", HOSTILE)
    j.close()
    assert main(["labels", str(tree), "--json", "--workdir", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\u202e\u202c\x9b\u2028\x1b")
    assert {r["case"]: r for r in json.loads(out)}[NO_SITE]["note"] == HOSTILE
    assert main(["labels", str(tree), "--csv", "--workdir", str(tmp_path / "w")]) == 0
    piped = {r["case"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert piped[NO_SITE]["note"] == HOSTILE
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main(["labels", str(tree), "--csv", "--workdir", str(tmp_path / "w")]) == 0
    shown = capsys.readouterr().out
    assert not any(c in shown for c in "\u202e\x9b\x1b") and "\u241b[2J" in shown
