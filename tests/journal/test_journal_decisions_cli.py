import csv
import io
import json

import orjson

from eviscene_tui.cli import main
from eviscene_tui.journal import Journal, evidence_for, review_journal_path, supervised_journal_path
from eviscene_tui.storage import default_workdir


def _setup(tmp_path):
    root = tmp_path / "runs"
    (root / "caseA").mkdir(parents=True)
    (root / "caseA" / "manifest.json").write_text('{"status":"no_recoverable_site"}')
    work = default_workdir(root)
    j = Journal(review_journal_path(work), operator="bob")
    e1 = j.append("triage_label", target={"case": "caseA"}, data={"label": "unrecoverable"}, reason="no site",
                  evidence=evidence_for(["caseA/manifest.json"], root))
    j.append("comment", target={"case": "caseA"}, reason="look \x1b[2J again")
    j.undo(e1["id"], reason="wrong label")
    j.append("triage_label", target={"case": "caseA"}, data={"label": "data_problem"}, reason="bad image",
             evidence=evidence_for(["caseA/manifest.json"], root))
    j.close()
    sroot = work / "supervised" / "k1"
    sroot.mkdir(parents=True)
    (sroot / "x.json").write_text("{}")
    s = Journal(supervised_journal_path(work, "k1"), operator="bob")
    s.append("approve_attempt", target={"case": "caseA", "round": 0, "attempt_id": "A"}, evidence=evidence_for(["x.json"], sroot))
    s.close()
    return root, work, sroot


def test_decisions_json_from_opened_root_with_stale(tmp_path, capsys):
    root, work, sroot = _setup(tmp_path)
    (root / "caseA" / "manifest.json").write_text('{"status":"changed"}')
    assert main(["decisions", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["journals"]) == 2 and all(j["ok"] for j in doc["journals"])
    rows = doc["decisions"]
    assert [r["action"] for r in rows] == ["triage_label", "comment", "triage_label", "approve_attempt"]
    assert [r["status"] for r in rows] == ["undone", "active", "active", "active"]
    assert rows[2]["label"] == "data_problem" and rows[2]["stale"] is True
    assert rows[3]["stale"] is False  # supervised evidence relative to the supervised root


def test_decisions_csv_workdir_and_supervised_root(tmp_path, capsys):
    root, work, sroot = _setup(tmp_path)
    assert main(["decisions", str(work), "--csv"]) == 0
    out = capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4 and rows[0]["action"] == "triage_label" and rows[0]["status"] == "undone"
    assert main(["decisions", str(sroot), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["action"] for r in doc["decisions"]] == ["approve_attempt"]


def test_decisions_events_verified_and_broken_chain(tmp_path, capsys):
    root, work, sroot = _setup(tmp_path)
    jp = review_journal_path(work)
    assert main(["decisions", str(jp), "--events", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e["seq"] for e in doc["events"]] == [0, 1, 2, 3] and doc["events"][2]["action"] == "undo"
    # human output is sanitised
    assert main(["decisions", str(jp)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "4 decisions" not in out and "3 decisions" in out
    lines = jp.read_bytes().split(b"\n")
    ev = orjson.loads(lines[1])
    ev["reason"] = "tampered"
    lines[1] = orjson.dumps(ev, option=orjson.OPT_SORT_KEYS)
    jp.write_bytes(b"\n".join(lines))
    assert main(["decisions", str(jp), "--events"]) == 1
    err = capsys.readouterr().err
    assert "does not verify" in err and "hash does not match" in err


def test_decisions_missing(tmp_path, capsys):
    assert main(["decisions", str(tmp_path / "nope")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["decisions", str(tmp_path / "empty")]) == 1
    assert "no decision journal" in capsys.readouterr().err


def test_decisions_with_the_apps_workdir_option(tmp_path, capsys):
    root, work, _sroot = _setup(tmp_path)
    elsewhere = tmp_path / "elsewhere-work"
    work.rename(elsewhere)
    assert main(["decisions", str(root)]) == 1
    err = capsys.readouterr().err
    assert "no decision journal found" in err and "--workdir" in err
    assert main(["decisions", str(root), "--workdir", str(elsewhere), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["decisions"]) == 4


def test_decisions_for_a_case_inside_the_opened_root(tmp_path, capsys):
    root, _work, _sroot = _setup(tmp_path)
    assert main(["decisions", str(root / "caseA"), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["decisions"]) == 4


def test_decisions_table_keeps_the_whole_case_and_the_label(tmp_path, capsys):
    root = tmp_path / "runs"
    long_case = "multi-case/repairs/8301050608582e18-with-a-long-distinguishing-tail"
    (root / long_case).mkdir(parents=True)
    j = Journal(review_journal_path(default_workdir(root)), operator="bob")
    j.append("triage_label", target={"case": long_case}, data={"label": "needs_relocalization"}, reason="wrong step")
    j.close()
    assert main(["decisions", str(root)]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert "label" in header.split()
    assert long_case in row and "needs_relocalization" in row


def test_decisions_into_a_closed_pipe_exits_quietly(tmp_path):
    """``decisions … | head -1``: no BrokenPipeError traceback, exit status 0."""
    import subprocess
    import sys

    from eviscene_tui.artifacts.jsonio import canonical_json_bytes
    from eviscene_tui.journal.events import build_event

    root = tmp_path / "runs"
    (root / "c").mkdir(parents=True)
    # a table well past a pipe's buffer, so the command is still writing when the reader goes:
    # its events chained as Journal.append chains them, written at once (3000 appends would
    # be 3000 fsyncs), then one real append checks the chain and anchors its head
    path = review_journal_path(default_workdir(root))
    path.parent.mkdir(parents=True)
    events: list[dict] = []
    for i in range(3000):
        events.append(build_event(seq=i, prev=events[-1]["hash"] if events else None, operator="bob", action="comment",
                                  target={"case": "c"}, reason=f"note {i} " + "x" * 60))
    path.write_bytes(b"".join(canonical_json_bytes(ev) + b"\n" for ev in events))
    j = Journal(path, operator="bob")
    assert j.verify().ok and not j.bad_lines
    j.append("comment", target={"case": "c"}, reason="the last note")
    j.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "eviscene_tui", "decisions", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as head does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert first.startswith(b" seq") or b"seq" in first
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_decisions_json_escapes_what_a_terminal_acts_on_and_stays_lossless(tmp_path, capsys):
    root, work, sroot = _setup(tmp_path)
    hostile = "bidi \u202eevil\u202c, csi \x9b2J, line\u2028sep"
    j = Journal(review_journal_path(work), operator="bob")
    j.append("comment", target={"case": "caseA"}, reason=hostile)
    j.close()
    assert main(["decisions", str(root), "--json"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\u202e\u202c\x9b\u2028")
    assert [r["reason"] for r in json.loads(out)["decisions"] if r["action"] == "comment"] == ["look \x1b[2J again", hostile]
