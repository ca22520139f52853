"""The probes (``eviscene_tui/probes.py``) are one seam the product records into and never
reads: every ``.probes`` in the package is assigned or has a recording method called on it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from eviscene_tui import probes

PACKAGE = Path(__file__).resolve().parents[2] / "eviscene_tui"

RECORDERS = {name for cls in (probes.AppProbes, probes.ClientProbes, probes.ViewProbes)
             for name, member in vars(cls).items() if inspect.isfunction(member) and not name.startswith("_")}


def reads(source: str, rel: str = "m.py") -> list[str]:
    """Where ``source`` uses a probe other than by assigning it or calling a recorder."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    wrong = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "probes"):
            continue
        if isinstance(node.ctx, ast.Store):
            continue
        up = parents.get(node)
        called = isinstance(up, ast.Attribute) and up.attr in RECORDERS and isinstance(parents.get(up), ast.Call) and parents[up].func is up
        if not called:
            wrong.append(f"{rel}:{node.lineno} reads a probe ({ast.unparse(up if up is not None else node)[:60]})")
    return wrong


def test_the_product_only_records_into_its_probes() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "probes.py":
            continue
        wrong += reads(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix())
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_probe_read() -> None:
    assert reads("if self.probes.first_rows_at is None:\n    pass\n")
    assert reads("n = app.probes.deferred_collections\n")
    assert reads("self.probes.labels_loads += 1\n")  # a field, not its recorder
    assert reads("self.probes = AppProbes()\nself.probes.collected()\n") == []


def test_first_rows_keeps_the_first_and_a_scan_starts_again() -> None:
    app = probes.AppProbes()
    app.first_rows(0.5)
    app.first_rows(2.0)
    assert app.first_rows_at == 0.5
    app.scan_started()
    assert app.first_rows_at is None
