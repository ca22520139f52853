"""Deterministic sample data: ``sample_runs/`` and synthetic data for benchmarks.

- :func:`generate` writes the committed sample cases (``python -m eviscene_tui.scaffold.samples sample_runs``);
- :data:`EXPECTED` is what ``eviscene-tui check sample_runs --json`` must report per case;
- :mod:`eviscene_tui.scaffold.samples.synthetic`: ``make_many_cases``, ``make_big_trace``, ``make_big_capture_ids``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from eviscene_tui.scaffold.samples.builders import inputs_rel
from eviscene_tui.scaffold.samples.cases import build_all
from eviscene_tui.scaffold.samples.expected import EXPECTED
from eviscene_tui.scaffold.samples.tree import Tree, reset_dir


def build(base: str | None = None) -> Tree:
    """The whole sample tree in memory (``Tree.files``: relative path -> bytes).
    ``base``: the absolute location its recorded paths name (default the fictitious
    cluster prefix ``/data/eviscene/sample_runs``)."""
    return build_all(base)


def generate(dest: Path, *, replace: bool = True, base: str | None = None) -> int:
    """Write ``sample_runs`` into ``dest``; returns the number of files written.
    ``base``: see :func:`build` (pass ``str(dest.resolve())`` for a tree that was really
    written where it is, as a test of a later move does)."""
    tree = build(base)
    if replace:
        reset_dir(Path(dest))
    tree.write(Path(dest))
    return len(tree.files)


def copy_case(samples: Path, case_rel: str, dest: Path, *, name: str | None = None, with_inputs: bool = True) -> Path:
    """Copy sample case ``case_rel`` to ``dest/<name or case_rel>`` as a researcher would
    copy a run off the cluster: with its inputs (``dest/inputs/<slug>/``, beside it)
    unless ``with_inputs`` is false. Returns the copied case root."""
    samples, dest = Path(samples), Path(dest)
    target = dest / (name or case_rel)
    shutil.copytree(samples / case_rel, target, symlinks=True)
    src_inputs = samples / inputs_rel(case_rel)
    if with_inputs and src_inputs.is_dir():
        shutil.copytree(src_inputs, dest / inputs_rel(case_rel), symlinks=True, dirs_exist_ok=True)
    return target


__all__ = ["EXPECTED", "build", "copy_case", "generate"]
