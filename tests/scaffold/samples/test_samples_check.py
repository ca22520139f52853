"""`eviscene-tui check sample_runs --json` reports exactly what each sample case was built to show."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from eviscene_tui.scaffold.samples import EXPECTED

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(
    not (REPO / "eviscene_tui/commands/check.py").exists(), reason="the check command is not there yet"
)


@pytest.fixture(scope="module")
def report() -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "eviscene_tui", "check", "sample_runs", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, f"exit {proc.returncode} (the damaged cases must make it 1): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout)


def test_every_case_is_found_once(report: dict) -> None:
    paths = [c["path"] for c in report["cases"]]
    assert report["root"] == "sample_runs"
    assert sorted(paths) == sorted(EXPECTED), f"unexpected {set(paths) ^ set(EXPECTED)}"
    assert len(paths) == len(set(paths))


@pytest.mark.parametrize("case_path", sorted(EXPECTED))
def test_case_row(report: dict, case_path: str) -> None:
    row = next(c for c in report["cases"] if c["path"] == case_path)
    want = EXPECTED[case_path]
    got = {k: row[k] for k in ("layout", "status", "rounds", "attempts", "accepted", "pending")}
    assert got == {k: want[k] for k in got}, case_path
    codes = sorted({p["code"] for p in row["problems"]})
    assert codes == want["problems"], f"{case_path}: {[(p['code'], p['path']) for p in row['problems']]}"
    for code, fragments in want["problem_paths"].items():
        paths = [p["path"] for p in row["problems"] if p["code"] == code]
        for fragment in fragments:
            assert any(fragment in p for p in paths), f"{case_path}: no {code} problem at {fragment} (got {paths})"
    for p in row["problems"]:
        assert not Path(p["path"]).is_absolute(), p
        inside = p["path"].startswith(case_path + "/") or p["path"] == case_path
        # a missing bound input is reported where it was looked for: beside the case roots
        assert inside or (p["code"] == "missing_artifact" and p["path"].startswith("inputs/")), p


def test_summary(report: dict) -> None:
    by_status = Counter(v["status"] for v in EXPECTED.values())
    assert report["summary"]["cases"] == len(EXPECTED)
    assert report["summary"]["by_status"] == dict(by_status)
    assert report["summary"]["problems"] == sum(len(c["problems"]) for c in report["cases"])
    assert report["summary"]["problems"] >= sum(len(v["problems"]) for v in EXPECTED.values())
