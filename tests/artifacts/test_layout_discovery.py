"""Layout discovery over every layout, nested folders, wrappers, slate, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import test_integrity_fixtures as fx

from eviscene_tui.artifacts.layout import CaseRef, Layout, classify, discover, discover_cases


def rels(root: Path, cases: list[CaseRef]) -> dict[str, str]:
    return {os.path.relpath(c.path, root): str(c.layout) for c in cases}


def make_tree(root: Path) -> None:
    fx.build_search(root / "searches" / "converged")
    fx.build_run(root / "single" / "a", "/remote/a")
    # minimal no_recoverable_site manifest only
    fx.write_json(
        root / "single" / "nrs" / "manifest.json",
        {"status": "no_recoverable_site", "candidate_count": 0, "accepted_count": 0, "pending_hinted_episode_count": 0},
    )
    # a search root known only by requests/ + rounds/
    (root / "deep" / "x" / "y" / "partial" / "requests").mkdir(parents=True)
    (root / "deep" / "x" / "y" / "partial" / "rounds").mkdir()
    # a search root known only by its manifest schema
    fx.write_json(root / "deep" / "by-manifest" / "manifest.json", {"schema_version": "ifv-psd-feedback-search-v1", "status": "searching"})
    # slate (both markers)
    fx.write_json(root / "slates" / "s1" / "slate-state.json", {"identity": {}, "payload": {"status": "searching"}, "payload_sha256": "x"})
    (root / "slates" / "s2" / "slate-rounds" / "00").mkdir(parents=True)
    # wrapper with two cases, one not started yet
    w = root / "canary"
    (w / "case-inputs" / "k1").mkdir(parents=True)
    fx.write_json(w / "progress.json", {"completed": []})
    fx.build_search(w / "repairs" / "k1", recorded="/remote/canary/repairs/k1")
    (w / "repairs" / "k2").mkdir(parents=True)
    (w / "merged").mkdir()
    # noise
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("hi")
    (root / ".hidden" / "run").mkdir(parents=True)
    fx.write_json(root / ".hidden" / "run" / "run-inputs.json", {})


def test_discovers_every_layout(tmp_path: Path) -> None:
    make_tree(tmp_path)
    cases, problems = discover(tmp_path)
    assert problems == []
    assert rels(tmp_path, cases) == {
        "searches/converged": "feedback_search",
        "single/a": "single_run",
        "single/nrs": "single_run",
        "deep/x/y/partial": "feedback_search",
        "deep/by-manifest": "feedback_search",
        "slates/s1": "slate",
        "slates/s2": "slate",
        "canary/repairs/k1": "feedback_search",
        "canary/repairs/k2": "unknown",
    }
    wrapped = {c.key: c for c in cases if c.wrapper is not None}
    assert set(wrapped) == {"k1", "k2"}
    assert all(c.wrapper == tmp_path / "canary" for c in wrapped.values())
    assert all(c.wrapper is None and c.key is None for c in cases if "canary" not in str(c.path))


def test_round_directories_are_not_cases(tmp_path: Path) -> None:
    fx.build_search(tmp_path / "s")
    cases, _ = discover(tmp_path)
    assert [os.path.relpath(c.path, tmp_path) for c in cases] == ["s"]


def test_root_that_is_a_case(tmp_path: Path) -> None:
    fx.build_run(tmp_path, "/remote/r")
    cases = list(discover_cases(tmp_path))
    assert cases == [CaseRef(tmp_path, Layout.SINGLE_RUN)]


def test_case_with_unreadable_manifest_still_found(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_bytes(b'{"status": "gener')
    assert classify(tmp_path / "broken") == Layout.SINGLE_RUN
    cases, _ = discover(tmp_path)
    assert [c.layout for c in cases] == [Layout.SINGLE_RUN]


def test_damaged_run_without_manifest_or_inputs(tmp_path: Path) -> None:
    (tmp_path / "d" / "continuations").mkdir(parents=True)
    assert classify(tmp_path / "d") == Layout.SINGLE_RUN


def test_unrelated_manifest_is_not_a_case(tmp_path: Path) -> None:
    fx.write_json(tmp_path / "pkg" / "manifest.json", {"name": "some other tool"})
    assert discover(tmp_path)[0] == []


def test_symlink_out_of_root_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    fx.build_run(outside / "run", "/remote/o")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "escape")
    cases, problems = discover(root)
    assert cases == []
    assert [p.code for p in problems] == ["path_outside_root"]
    assert problems[0].path.endswith("escape")


def test_symlink_inside_root_followed_once(tmp_path: Path) -> None:
    fx.build_run(tmp_path / "real" / "run", "/remote/o")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    cases, problems = discover(tmp_path)
    assert problems == []
    assert len(cases) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any directory")
def test_unreadable_directory_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    fx.build_run(tmp_path / "ok", "/remote/o")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        cases, problems = discover(tmp_path)
    finally:
        locked.chmod(0o755)
    assert [os.path.relpath(c.path, tmp_path) for c in cases] == ["ok"]
    assert [p.code for p in problems] == ["missing_artifact"]
    assert "cannot read directory" in problems[0].message


def test_discovery_reads_no_case_internals(tmp_path: Path, monkeypatch) -> None:
    fx.build_search(tmp_path / "s")
    fx.build_run(tmp_path / "r", "/remote/r")
    opened: list[str] = []
    real_scandir = os.scandir

    def spy(path="."):
        if not isinstance(path, int):  # a descriptor: the tmp_path's removal at teardown (rmtree)
            opened.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    discover(tmp_path)
    assert not any(("runtime" in p or "rounds" in p or "episodes" in p) for p in opened), opened


def test_missing_root_gives_problem(tmp_path: Path) -> None:
    cases, problems = discover(tmp_path / "nope")
    assert cases == [] and [p.code for p in problems] == ["missing_artifact"]


def test_unreadable_directory_simulated(tmp_path: Path, monkeypatch) -> None:
    """Same as above but works as root too: scandir raises PermissionError for one folder."""
    fx.build_run(tmp_path / "ok", "/remote/o")
    (tmp_path / "locked" / "inner").mkdir(parents=True)
    real_scandir = os.scandir

    def guarded(path="."):
        if not isinstance(path, int) and os.fspath(path).endswith("locked"):  # int: rmtree's at teardown
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", guarded)
    cases, problems = discover(tmp_path)
    assert [os.path.relpath(c.path, tmp_path) for c in cases] == ["ok"]
    assert [p.code for p in problems] == ["missing_artifact"]
    assert "Permission denied" in problems[0].message


def test_ref_for_path(tmp_path: Path) -> None:
    from eviscene_tui.artifacts.layout import ref_for_path

    make_tree(tmp_path)
    assert ref_for_path(tmp_path / "single" / "a") == CaseRef(tmp_path / "single" / "a", Layout.SINGLE_RUN)
    k2 = ref_for_path(tmp_path / "canary" / "repairs" / "k2")
    assert k2 == CaseRef(tmp_path / "canary" / "repairs" / "k2", Layout.UNKNOWN, tmp_path / "canary", "k2")
    assert ref_for_path(tmp_path / "notes") is None
    assert ref_for_path(tmp_path / "missing") is None


def test_a_layout_from_its_name() -> None:
    assert Layout.of("feedback_search") is Layout.FEEDBACK_SEARCH and Layout.of("slate") is Layout.SLATE
    assert Layout.of("something else") is Layout.UNKNOWN and Layout.of("") is Layout.UNKNOWN
