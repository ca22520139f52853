"""``eviscene-tui check PATH [--json]``: exit codes 0/1/2, JSON shape, human table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

import test_integrity_fixtures as fx

from eviscene_tui.cli import main


def run_check(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_folder_exits_0(tmp_path: Path, capsys) -> None:
    fx.build_search(tmp_path / "a")
    fx.build_run(tmp_path / "b", "/remote/b")
    code, out, err = run_check(capsys, str(tmp_path))
    assert code == 0, out
    assert "a " in out and "feedback_search" in out and "single_run" in out
    assert out.strip().splitlines()[-1] == "2 case(s) (converged 1, generated 1); 0 problem(s)"


def test_problems_exit_1_and_json_shape(tmp_path: Path, capsys, monkeypatch) -> None:
    fx.build_search(tmp_path / "z-search")
    fx.build_run(tmp_path / "a-run", "/remote/b")
    (tmp_path / "a-run" / "manifest.json.tmp").write_bytes(b"{")
    (tmp_path / "z-search" / "manifest.json").write_bytes(b"{oops")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_check(capsys, ".", "--json")
    assert code == 1
    report = orjson.loads(out)
    assert report["root"] == "."
    assert [c["path"] for c in report["cases"]] == ["a-run", "z-search"]
    keys = {"path", "layout", "status", "rounds", "attempts", "accepted", "pending", "problems"}
    for case in report["cases"]:
        assert keys <= set(case)
        for p in case["problems"]:
            assert set(p) == {"code", "path", "message"}
    run, search = report["cases"]
    assert (run["layout"], run["status"], run["rounds"], run["attempts"], run["accepted"], run["pending"]) == (
        "single_run", "generated", 1, 1, 1, 0)
    assert run["problems"] == [{
        "code": "leftover_tmp", "path": "a-run/manifest.json.tmp",
        "message": "leftover temporary file from an interrupted write (the final file would be manifest.json)",
    }]
    assert (search["layout"], search["status"], search["rounds"], search["attempts"]) == ("feedback_search", "unreadable", 1, 1)
    assert {p["code"] for p in search["problems"]} == {"json_invalid"}
    assert all(p["path"] == "z-search/manifest.json" for p in search["problems"])
    assert report["summary"] == {"cases": 2, "by_status": {"generated": 1, "unreadable": 1}, "problems": 2}


def test_root_as_given_and_case_at_root(tmp_path: Path, capsys) -> None:
    fx.build_run(tmp_path / "run", "/remote/r")
    code, out, _ = run_check(capsys, str(tmp_path / "run"), "--json")
    report = orjson.loads(out)
    assert code == 0 and report["root"] == str(tmp_path / "run")
    assert [c["path"] for c in report["cases"]] == ["."]


def test_missing_path_exits_2(tmp_path: Path, capsys) -> None:
    code, out, err = run_check(capsys, str(tmp_path / "missing"))
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "does not exist" in err


def test_a_folder_without_cases_has_its_own_exit_status(tmp_path: Path, capsys) -> None:
    """A mistyped or empty folder must not pass a CI step as clean: exit 3 and a message,
    in both output modes (the JSON report is still printed)."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("no runs here")
    code, out, err = run_check(capsys, str(tmp_path))
    assert code == 3 and "0 case(s)" in out
    assert "no case found under" in err and err.count("\n") == 1
    code, out, err = run_check(capsys, str(tmp_path), "--json")
    assert code == 3 and orjson.loads(out)["cases"] == [] and "no case found" in err


def test_file_path_exits_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "f").write_text("x")
    code, _, err = run_check(capsys, str(tmp_path / "f"))
    assert code == 2 and "not a directory" in err


def test_subprocess_bad_usage_has_no_traceback(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    for argv in (["check"], ["check", str(tmp_path / "nope")], ["check", str(tmp_path), "--bogus"]):
        proc = subprocess.run([sys.executable, "-m", "eviscene_tui", *argv], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2


def test_hostile_strings_are_neutralised_in_the_table(tmp_path: Path, capsys) -> None:
    run = tmp_path / "evil\x1b[2Jdir"
    fx.build_run(run, "/remote/r")
    fx.write_json(run / "manifest.json", {"schema_version": "ifv-psd-repair-driver-result-v1", "status": "gen\x1b]0;pwned\x07erated\u202e"})
    code, out, _ = run_check(capsys, str(tmp_path))
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert code == 0


def test_wrapper_level_problems_are_reported_at_top_level(tmp_path: Path, capsys) -> None:
    out = tmp_path / "canary"
    (out / "case-inputs" / "k1").mkdir(parents=True)
    fx.write_bound(out / "inputs.json", {"cases": ["k1"]}, {"status": "running"})
    doc = orjson.loads((out / "inputs.json").read_bytes())
    doc["payload"]["status"] = "edited"
    (out / "inputs.json").write_bytes(orjson.dumps(doc))
    fx.build_search(out / "repairs" / "k1", recorded="/remote/canary/repairs/k1")
    (out / "repairs" / "k2").mkdir()
    code, text, _ = run_check(capsys, str(tmp_path), "--json")
    report = orjson.loads(text)
    assert code == 1
    assert [c["path"] for c in report["cases"]] == ["canary/repairs/k1", "canary/repairs/k2"]
    assert report["cases"][0]["wrapper"] == "canary" and report["cases"][0]["key"] == "k1"
    assert report["cases"][0]["problems"] == []
    assert [p["code"] for p in report["cases"][1]["problems"]] == ["missing_artifact"]
    assert report["cases"][1]["layout"] == "unknown" and report["cases"][1]["status"] == "unreadable"
    assert [(p["code"], p["path"]) for p in report["problems"]] == [("bound_hash_mismatch", "canary/inputs.json")]
    assert report["summary"]["problems"] == 2


def test_json_output_escapes_bidi_and_keeps_values(tmp_path: Path, capsys) -> None:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/r", case_id="case-\u202eevil\x1b]0;x\x07")
    code, out, _ = run_check(capsys, str(tmp_path), "--json")
    assert "\u202e" not in out and "\x1b" not in out and "\x07" not in out
    report = orjson.loads(out)
    assert report["cases"][0]["case_id"] == "case-\u202eevil\x1b]0;x\x07"


HOSTILE_JSON = "c1\x85\x9b[31m nel\u2028ls\u2029ps \u202eRLO\u2066iso\u200fRLM soft\u00ad tag\U000e0041 é 漢字 😀"


def test_json_output_escapes_every_character_the_text_mode_escapes(tmp_path: Path, capsys) -> None:
    """C1 controls, line/paragraph separators, bidi controls and other invisible
    characters are written as ``\\u`` escapes (the JSON stays valid and parses to the
    same strings); printable non-ASCII text stays as it is."""
    run = tmp_path / "r"
    fx.build_run(run, "/remote/r", case_id=f"case-{HOSTILE_JSON}")
    _code, out, _ = run_check(capsys, str(tmp_path), "--json")
    for ch in ("\x85", "\x9b", "\u2028", "\u2029", "\u202e", "\u2066", "\u200f", "\u00ad", "\U000e0041"):
        assert ch not in out, repr(ch)
    assert "é 漢字 😀" in out
    assert orjson.loads(out)["cases"][0]["case_id"] == f"case-{HOSTILE_JSON}"


def test_path_map_flag_and_config_table_find_inputs_copied_elsewhere(tmp_path: Path, capsys) -> None:
    """A run copied without its inputs; the inputs were copied somewhere else."""
    fx.build_run(tmp_path / "runs" / "r", "/remote/runs/r")  # its trace: /remote/runs/inputs/source.json
    (tmp_path / "runs" / "inputs").rename(tmp_path / "archive")
    code, out, _ = run_check(capsys, str(tmp_path / "runs"), "--json")
    report = orjson.loads(out)
    assert code == 1 and [p["code"] for p in report["cases"][0]["problems"]] == ["missing_artifact"]
    assert "/remote/runs/inputs/source.json" in report["cases"][0]["problems"][0]["message"]
    code, out, _ = run_check(capsys, str(tmp_path / "runs"), "--path-map", f"/remote/runs/inputs={tmp_path / 'archive'}")
    assert code == 0, out
    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\nmap = {{ "/remote/runs/inputs" = "{tmp_path / "archive"}" }}\n')
    code, out, err = run_check(capsys, str(tmp_path / "runs"), "--config", str(config))
    assert code == 0, out + err
    code, _, err = run_check(capsys, str(tmp_path / "runs"), "--path-map", "/remote/runs/inputs")
    assert code == 2 and "OLD=NEW" in err
