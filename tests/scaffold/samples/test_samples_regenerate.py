"""sample_runs/ is exactly what the committed generator writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eviscene_tui.scaffold.samples import generate

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "sample_runs"


def _tree(root: Path) -> tuple[dict[str, bytes], set[str]]:
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for d in dirnames:
            dirs.add(os.path.normpath(os.path.join(rel_dir, d)))
        for f in filenames:
            path = Path(dirpath) / f
            assert not path.is_symlink(), f"unexpected symlink {path}"
            files[os.path.normpath(os.path.join(rel_dir, f))] = path.read_bytes()
    return files, dirs


def test_regenerated_tree_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "sample_runs"
    generate(out)
    want, want_dirs = _tree(SAMPLES)
    got, got_dirs = _tree(out)
    assert sorted(got) == sorted(want), (
        f"file lists differ: missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}"
    )
    differing = [name for name in sorted(want) if want[name] != got[name]]
    assert not differing, f"{len(differing)} files differ, e.g. {differing[:5]} (run `python -m eviscene_tui.scaffold.samples sample_runs`)"
    assert got_dirs == want_dirs


def test_generation_is_deterministic_across_processes(tmp_path: Path) -> None:
    """A second interpreter (different hash seed) writes the same bytes."""
    out = tmp_path / "again"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-m", "eviscene_tui.scaffold.samples", str(out)], check=True, env=env, cwd=REPO, capture_output=True)
    want, _ = _tree(SAMPLES)
    got, _ = _tree(out)
    assert sorted(got) == sorted(want)
    assert all(want[k] == got[k] for k in want)


def test_samples_stay_small_and_machine_free() -> None:
    files, _ = _tree(SAMPLES)
    total = sum(len(v) for v in files.values())
    # about 0.4 MB each case; 12 cases and their inputs
    assert total < 5_500_000, f"sample_runs holds {total} bytes"
    home = str(Path.home()).encode()
    repo = str(REPO).encode()
    for name, data in files.items():
        assert repo not in data, f"{name} contains this machine's repo path"
        if len(home) > 5:
            assert home not in data, f"{name} contains this machine's home path"
        assert not name.endswith(".tmp") or name.startswith("damaged/"), name


def test_refuses_to_replace_a_foreign_folder(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    try:
        generate(target)
    except SystemExit as exc:
        assert "refusing" in str(exc)
    else:  # pragma: no cover - the guard failed
        raise AssertionError("generate() replaced a folder that is not a sample_runs folder")
    assert (target / "notes.txt").read_text() == "keep me"
