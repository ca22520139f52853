"""One work directory rule for the app and every command: a pure function of the opened
path and the explicit options (``--workdir``, ``[paths] workdir``), never of what else
exists on disk; discovery never lists the tool's own folders as cases."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from eviscene_tui.artifacts.layout import discover
from eviscene_tui.options import AppOptions
from eviscene_tui.settings import Settings, load_settings
from eviscene_tui.storage import choose_workdir, default_workdir

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_runs"

pytestmark = pytest.mark.skipif(not (SAMPLES / "feedback-converged-3-rounds").is_dir(), reason="sample_runs not generated")


def _tree(tmp_path: Path) -> Path:
    from eviscene_tui.scaffold.samples import copy_case

    tree = tmp_path / "exp" / "runs-A"
    for name in ("feedback-converged-3-rounds", "single-generating", "multi-case"):
        copy_case(SAMPLES, name, tree)
    return tree


def _names(tree: Path) -> set[str]:
    return {p.name for p in tree.iterdir()}


def _every_choice(tree: Path) -> dict[str, Path]:
    case = tree / "feedback-converged-3-rounds"
    wrapped = next((tree / "multi-case" / "repairs").iterdir())
    return {
        "tree": default_workdir(tree),
        "case": default_workdir(case),
        "wrapped": default_workdir(wrapped),
        "app-tree": AppOptions.from_args(tree, Namespace(), settings=Settings()).workdir,
        "app-case": AppOptions.from_args(case, Namespace(), settings=Settings()).workdir,
    }


def test_the_work_directory_is_beside_the_opened_path(tmp_path):
    tree = _tree(tmp_path)
    case = tree / "feedback-converged-3-rounds"
    got = _every_choice(tree)
    assert got["tree"] == got["app-tree"] == tmp_path / "exp" / "runs-A.eviscene-tui"
    # a case opened (or streamed) on its own writes beside the case, never up the tree
    assert got["case"] == got["app-case"] == tree / "feedback-converged-3-rounds.eviscene-tui"
    assert AppOptions.from_args(case, Namespace(), settings=Settings()).key_root == case


def test_unrelated_folders_appearing_and_disappearing_move_nothing(tmp_path):
    """Sibling and parent folders, *.eviscene-tui ones included, between two runs."""
    tree = _tree(tmp_path)
    before = _every_choice(tree)
    strays = [
        tmp_path / "exp" / "my-wd",
        tmp_path / "exp.eviscene-tui",
        tmp_path.parent / f"{tmp_path.name}.eviscene-tui",
        tree / "feedback-converged-3-rounds.eviscene-tui" / "continuations",
        tmp_path / "exp" / "runs-B" / "x",
        tree.parent / "runs-A.eviscene-tui" / "journal",
    ]
    for stray in strays:
        stray.mkdir(parents=True, exist_ok=True)
    try:
        assert _every_choice(tree) == before
    finally:
        for stray in reversed(strays):
            while stray != tmp_path.parent and stray.exists() and not any(stray.iterdir()):
                stray.rmdir()
                stray = stray.parent
    assert _every_choice(tree) == before


def test_a_path_inside_a_work_directory_writes_there(tmp_path):
    work = tmp_path / "runs.eviscene-tui"
    assert default_workdir(work / "supervised" / "some-key") == work.resolve()
    assert default_workdir(work / "demo" / "gated-search") == work.resolve()


def test_explicit_options_come_first(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\nworkdir = "{tmp_path / "records"}"\n')
    settings = load_settings(config)
    assert not settings.problems
    case = tmp_path / "runs" / "c"
    assert choose_workdir(case) == (default_workdir(case), "default: beside the opened path")
    assert choose_workdir(case, configured=settings.paths.workdir)[0] == (tmp_path / "records").resolve()
    assert choose_workdir(case, tmp_path / "flag", settings.paths.workdir)[0] == (tmp_path / "flag").resolve()
    opts = AppOptions.from_args(case, Namespace(config=str(config)))
    assert opts.workdir == (tmp_path / "records").resolve() and "config" in opts.workdir_source
    bad = tmp_path / "bad.toml"
    bad.write_text('[paths]\nworkdir = "relative/dir"\n')
    assert any("absolute" in p for p in load_settings(bad).problems)


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


def test_stream_without_workdir_writes_beside_the_case_and_says_so_first(tmp_path, capsys):
    from eviscene_tui.cli import main

    tree = _tree(tmp_path)
    cases_before, _ = discover(tree)
    case = tree / "feedback-converged-3-rounds"
    # an earlier run's work directory two levels up must not capture the record
    (tmp_path / "exp.eviscene-tui").mkdir()
    (tree.parent / "runs-A.eviscene-tui").mkdir()
    # nothing listens on port 9: the attempt fails and its record is still written
    main(["stream", str(case), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m", "--json"])
    err = capsys.readouterr().err
    want = tree / "feedback-converged-3-rounds.eviscene-tui"
    assert err.splitlines()[0] == f"work directory: {want} (default: beside the opened path)"
    records = list((want / "continuations").rglob("*.json"))
    assert records, "the record goes beside the case"
    assert not any((tmp_path / "exp.eviscene-tui").iterdir()) and not any((tree.parent / "runs-A.eviscene-tui").iterdir())
    assert [c.path for c in discover(tree)[0]] == [c.path for c in cases_before]
