"""Deterministic sample data: ``sample_runs/`` and synthetic data for benchmarks.

- :func:`generate` writes the committed sample cases (``python -m eviscene_tui.samples sample_runs``);
- :data:`EXPECTED` is what ``eviscene-tui check sample_runs --json`` must report per case;
- :mod:`eviscene_tui.samples.synthetic`: ``make_many_cases``, ``make_big_trace``, ``make_big_capture_ids``.
"""

from __future__ import annotations

from pathlib import Path

from eviscene_tui.samples.expected import EXPECTED


def build():
    """The whole sample tree in memory (``Tree.files``: relative path -> bytes)."""
    from eviscene_tui.samples.cases import build_all

    return build_all()


def generate(dest: Path, *, replace: bool = True) -> int:
    """Write ``sample_runs`` into ``dest``; returns the number of files written."""
    from eviscene_tui.samples.tree import reset_dir

    tree = build()
    if replace:
        reset_dir(Path(dest))
    tree.write(Path(dest))
    return len(tree.files)


__all__ = ["EXPECTED", "build", "generate"]
