"""The shape rules of the README's Architecture section, checked on the source.

- No function longer than ``MAX_LINES`` lines, except declarative tables listed in ``TABLES``.
- No block nesting deeper than ``MAX_DEPTH`` inside one function (nested functions count afresh).
- Imports sit at the top of a module. An import inside a function must say why on its line with
  a ``# lazy: <reason>`` comment (Textual behind the CLI so ``--help`` stays fast, an optional
  dependency, code run by a worker process or by the driver's own interpreter).

``DEBT`` lists the places that do not follow the rules yet. The test fails on any new one, and on
an entry that no longer needs to be there, so the list can only shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "eviscene_tui"
MAX_LINES = 80
MAX_DEPTH = 4
_BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith, ast.Match)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

# functions that are declarative tables (a route table, a list of rows), allowed to be long
TABLES: set[str] = set()

# "rule path:function" entries not yet fixed; remove an entry when its function follows the rule
DEBT: set[str] = set()


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _depth(node: ast.AST, depth: int = 0) -> int:
    deepest = depth
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _SCOPES):
            continue
        deepest = max(deepest, _depth(child, depth + 1 if isinstance(child, _BLOCKS) else depth))
    return deepest


def _own_imports(func: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _findings() -> set[str]:
    found: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for func in _functions(parsed(source)):
            where = f"{rel}:{func.name}"
            length = (func.end_lineno or func.lineno) - func.lineno + 1
            if length > MAX_LINES and where not in TABLES:
                found.add(f"long {where}")
            if _depth(func) > MAX_DEPTH:
                found.add(f"deep {where}")
            for node in _own_imports(func):
                text = " ".join(lines[node.lineno - 1 : (node.end_lineno or node.lineno)])
                if "# lazy:" not in text:
                    found.add(f"import {where}")
    return found


def test_no_new_long_deep_or_lazily_importing_function() -> None:
    new = sorted(_findings() - DEBT)
    assert not new, "these functions break the shape rules (split them, or say `# lazy: why`):\n" + "\n".join(new)


def test_the_debt_list_only_names_what_is_still_owed() -> None:
    paid = sorted(DEBT - _findings())
    assert not paid, "fixed — remove these entries from DEBT:\n" + "\n".join(paid)


def test_the_rules_see_a_long_deep_function_and_a_bare_lazy_import() -> None:
    body = "\n".join(["    x = 1"] * (MAX_LINES + 1))
    deep = "def g():\n" + "".join("    " * (i + 1) + "if x:\n" for i in range(MAX_DEPTH + 1)) + "    " * (MAX_DEPTH + 2) + "pass\n"
    tree = ast.parse(f"def f():\n{body}\n" + deep + "def h():\n    import os\n")
    funcs = {f.name: f for f in _functions(tree)}
    assert (funcs["f"].end_lineno or 0) - funcs["f"].lineno + 1 > MAX_LINES
    assert _depth(funcs["g"]) == MAX_DEPTH + 1
    assert len(_own_imports(funcs["h"])) == 1
