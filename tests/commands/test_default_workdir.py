"""One default work directory rule for the app and every command: a case inside a tree
writes to the tree's work directory (outside any folder the app scans), and discovery
never lists the tool's own folders as cases."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from eviscene_tui.artifacts.layout import discover
from eviscene_tui.options import AppOptions
from eviscene_tui.storage import default_workdir, runs_tree_root

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_runs"

pytestmark = pytest.mark.skipif(not (SAMPLES / "feedback-converged-3-rounds").is_dir(), reason="sample_runs not generated")


def _tree(tmp_path: Path) -> Path:
    from eviscene_tui.samples import copy_case

    tree = tmp_path / "runs"
    for name in ("feedback-converged-3-rounds", "single-generating", "multi-case"):
        copy_case(SAMPLES, name, tree)
    return tree


def _names(tree: Path) -> set[str]:
    return {p.name for p in tree.iterdir()}


def test_a_case_inside_a_tree_uses_the_trees_work_dir(tmp_path):
    tree = _tree(tmp_path)
    want = tmp_path / "runs.eviscene-tui"
    case = tree / "feedback-converged-3-rounds"
    wrapped = next((tree / "multi-case" / "repairs").iterdir())
    assert default_workdir(tree) == want
    assert default_workdir(case) == want
    assert default_workdir(wrapped) == want
    # a supervised root inside the work directory writes to that same work directory
    assert default_workdir(want / "supervised" / "some-key") == want
    # the app opened on the case alone: same work dir, keys relative to the tree
    opts = AppOptions.from_args(case, Namespace())
    assert opts.workdir == want
    assert opts.key_root == tree.resolve()
    assert AppOptions.from_args(tree, Namespace()).key_root == tree


def test_a_lone_case_keeps_its_work_dir_beside_it(tmp_path):
    from eviscene_tui.samples import copy_case

    case = copy_case(SAMPLES, "single-generating", tmp_path / "only")
    assert runs_tree_root(case) == case.resolve()
    assert default_workdir(case) == case.parent / "single-generating.eviscene-tui"


def test_an_existing_tree_work_dir_wins(tmp_path):
    from eviscene_tui.samples import copy_case

    # two levels of folders: the case alone in its group, the tree opened before
    case = copy_case(SAMPLES, "single-generating", tmp_path / "runs" / "group")
    (tmp_path / "runs.eviscene-tui").mkdir()
    assert default_workdir(case) == tmp_path / "runs.eviscene-tui"


def test_discovery_skips_the_tools_own_folders(tmp_path):
    tree = _tree(tmp_path)
    before, _ = discover(tree)
    # what a stream record / a gate sidecar inside the tree looks like
    (tree / "feedback-converged-3-rounds.eviscene-tui" / "continuations").mkdir(parents=True)
    (tree / "feedback-converged-3-rounds.eviscene-tui" / "continuations" / "c.json").write_text("{}")
    gate = tree / "multi-case" / "repairs" / "x.eviscene-gate"
    gate.mkdir()
    (gate / "decisions.jsonl").write_text("")
    (gate / "repair_attempts.jsonl").write_text("")
    after, problems = discover(tree)
    assert [c.path for c in after] == [c.path for c in before]
    assert not problems


def test_stream_without_workdir_writes_outside_the_tree(tmp_path, capsys):
    from eviscene_tui.cli import main

    tree = _tree(tmp_path)
    before = _names(tree)
    cases_before, _ = discover(tree)
    case = tree / "feedback-converged-3-rounds"
    # nothing listens on port 9: the attempt fails and its record is still written
    main(["stream", str(case), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m", "--json"])
    capsys.readouterr()
    assert _names(tree) == before
    records = list((tmp_path / "runs.eviscene-tui" / "continuations").rglob("*.json"))
    assert records, "the record goes to the tree's work directory"
    assert [c.path for c in discover(tree)[0]] == [c.path for c in cases_before]
