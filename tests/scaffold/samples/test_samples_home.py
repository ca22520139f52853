"""The demo's own samples where the app is installed: built once per version in the user's
data directory, the same bytes as ``make samples`` writes, and said where first."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import orjson
import pytest

from eviscene_tui.cli import UsageError
from eviscene_tui.scaffold.commands import demo
from eviscene_tui.scaffold.samples import home

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "sample_runs"


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256)."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_first_run_builds_the_samples_in_the_data_directory_as_make_samples_does(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    place = tmp_path / "data" / "eviscene-tui" / "sample_runs"
    assert home.home_dir() == place
    first = home.ensure_samples()
    assert first == home.SampleHome(place, built=True)
    assert tree_digest(place) == tree_digest(SAMPLES)  # the committed tree, byte for byte
    stamp = orjson.loads((place.parent / "sample_runs.built.json").read_bytes())
    assert stamp["generator"] == home.generator_digest() and stamp["files"] == len(tree_digest(SAMPLES))
    assert [p.name for p in place.parent.iterdir() if p.name.startswith(".")] == []  # no scratch left
    before = {p: p.stat().st_mtime_ns for p in place.rglob("*")}
    assert home.ensure_samples() == home.SampleHome(place, built=False)  # this version built them: kept
    assert {p: p.stat().st_mtime_ns for p in place.rglob("*")} == before


def test_samples_of_another_version_are_built_again(tmp_path):
    place = tmp_path / "sample_runs"
    place.mkdir()
    (place / "README.md").write_text("an older version's samples\n")
    (place / "gone-case").mkdir()
    (tmp_path / "sample_runs.built.json").write_bytes(orjson.dumps({"generator": "0" * 64, "files": 2}))
    assert home.ensure_samples(place).built
    assert tree_digest(place) == tree_digest(SAMPLES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sample_runs", "sample_runs.built.json"]


def test_a_tree_without_its_stamp_is_built_again(tmp_path):
    """A crash between the rename and the stamp leaves a tree nobody vouches for."""
    place = tmp_path / "sample_runs"
    place.mkdir()
    (place / "README.md").write_text("half\n")
    assert home.ensure_samples(place).built
    assert (place / "README.md").read_bytes() == (SAMPLES / "README.md").read_bytes()


def test_the_demo_says_where_its_samples_are_first(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    place = tmp_path / "data" / "eviscene-tui" / "sample_runs"
    assert demo._own_samples() == place
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"sample runs: {place} (building them now")
    assert demo._own_samples() == place
    assert capsys.readouterr().err.splitlines()[0].startswith(f"sample runs: {place} (built on an earlier run")


def test_a_data_directory_that_cannot_be_written_is_a_usage_error(tmp_path, monkeypatch):
    (tmp_path / "data").write_text("a file where the data directory goes\n")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with pytest.raises(UsageError, match="cannot build the demo's samples in"):
        demo._own_samples()


def test_a_missing_path_names_the_demo_s_own_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    with pytest.raises(UsageError) as err:
        demo.run(parser.parse_args([str(tmp_path / "nope")]))
    assert "make samples" not in str(err.value)  # there is no Makefile where the app is installed
    assert str(tmp_path / "data" / "eviscene-tui" / "sample_runs") in str(err.value)
