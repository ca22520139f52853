"""The worker seam, checked on the source: workers post typed messages (defined in
``ui/messages.py``) and never reach a widget (no ``query`` / ``query_one`` inside a
``@work`` function of the UI package)."""

import ast
from pathlib import Path

import eviscene_tui.ui as ui_pkg

UI = Path(ui_pkg.__file__).parent


def _modules():
    return sorted(p for p in UI.rglob("*.py") if p.name != "__init__.py")


def _is_work(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "work" or isinstance(target, ast.Attribute) and target.attr == "work"


def test_no_worker_queries_a_widget():
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not any(_is_work(d) for d in fn.decorator_list):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and node.attr in ("query", "query_one", "query_children"):
                    offenders.append(f"{path.relative_to(UI)}:{node.lineno} {fn.name}")
    assert not offenders, offenders


def test_screens_define_no_message_classes():
    """Message classes of workers live in ui/messages.py (a widget's own events stay nested in it)."""
    offenders = []
    for path in _modules():
        if path.name == "messages.py":
            continue
        for node in ast.parse(path.read_text()).body:  # module level only: nested widget events are fine
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "Message" for b in node.bases):
                offenders.append(f"{path.relative_to(UI)}:{node.lineno} {node.name}")
    assert not offenders, offenders
