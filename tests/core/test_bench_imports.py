"""The benchmarks (``bench/``) run only under ``make bench``, never in the suite: a name they
import from the package that was renamed or removed would fail only there. Every
``from eviscene_tui… import name`` in them (at the top or inside a function) must resolve."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def unresolved_imports(source: str, filename: str) -> list[str]:
    missing = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("eviscene_tui"):
            continue
        assert node.module is not None
        try:
            module = importlib.import_module(node.module)
        except ImportError as exc:
            missing.append(f"{filename}:{node.lineno} {node.module} ({exc})")
            continue
        for alias in node.names:
            if alias.name == "*" or hasattr(module, alias.name):
                continue
            try:  # a submodule of a package
                importlib.import_module(f"{node.module}.{alias.name}")
            except ImportError:
                missing.append(f"{filename}:{node.lineno} {node.module}.{alias.name}")
    return missing


def test_every_package_name_the_benchmarks_import_exists() -> None:
    files = sorted(BENCH.glob("*.py"))
    assert files
    missing = [m for f in files for m in unresolved_imports(f.read_text(), f.name)]
    assert missing == []


def test_the_check_sees_a_removed_name() -> None:
    planted = "def run():\n    from eviscene_tui.ui.widgets.stream_view import FLUSH_HZ, HEAVY_FLUSH_HZ\n"
    assert unresolved_imports(planted, "planted.py") == ["planted.py:2 eviscene_tui.ui.widgets.stream_view.HEAVY_FLUSH_HZ"]
