"""The probes (``eviscene_tui/probes.py``) are one seam the product records into and never
reads: every ``.probes`` in the package is assigned or has a recording method called on it;
and a figure kept only for the tests and the bench lives there, not as an attribute of the
product that nothing in the package acts on."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from conftest import parsed

from eviscene_tui import probes

PACKAGE = Path(__file__).resolve().parents[2] / "eviscene_tui"

RECORDERS = {name for cls in (probes.AppProbes, probes.CaseProbes, probes.ClientProbes, probes.ViewProbes)
             for name, member in vars(cls).items() if inspect.isfunction(member) and not name.startswith("_")}


def reads(source: str, rel: str = "m.py") -> list[str]:
    """Where ``source`` uses a probe other than by assigning it or calling a recorder."""
    tree = parsed(source)
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


def _sources() -> dict[str, str]:
    return {path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).as_posix() != "probes.py"}


def test_the_product_only_records_into_its_probes() -> None:
    wrong = []
    for rel, source in _sources().items():
        wrong += reads(source, rel)
    assert not wrong, "\n".join(wrong)


def _record_fields(tree: ast.Module) -> set[str]:
    """The fields of the records in ``tree`` (dataclasses, classes with ``__slots__``): a
    record's value, which its users take whole (compared, copied, shown) even where no code
    names a field."""
    fields = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            fields |= {item.target.id for item in node.body if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets) \
                        and isinstance(item.value, (ast.Tuple, ast.List)):
                    fields |= {e.value for e in item.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return fields


def _stored_in(statements: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.ctx, ast.Store)
               for statement in statements for n in ast.walk(statement))


def _acts_on(node: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether this read of an attribute is the product acting on it, not one of the two
    shapes a figure kept for others takes: a test whether it is set yet, guarding the store
    that sets it (``if self.x is None: self.x = now``), or a property handing it on unchanged
    (``def x(self): return self.session.x``)."""
    up = parents.get(node)
    if isinstance(up, ast.Compare) and up.left is node and all(isinstance(op, (ast.Is, ast.IsNot)) for op in up.ops) \
            and all(isinstance(c, ast.Constant) and c.value is None for c in up.comparators):
        test: ast.AST = up
        while isinstance(parents.get(test), ast.BoolOp):
            test = parents[test]
        guard = parents.get(test)
        if isinstance(guard, ast.If) and guard.test is test and _stored_in(guard.body, node.attr):
            return False
    if isinstance(up, ast.Return):
        function = parents.get(up)
        body = function.body if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and function.name == node.attr and body[-1] is up:
            return False
    return True


def _named_read(call: ast.Call) -> str | None:
    """The attribute a call reads by its name: ``getattr(obj, "x")``, ``hasattr(obj, "x")``,
    Textual's ``self.watch(obj, "x", callback)`` (a reactive)."""
    name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if name in ("getattr", "hasattr", "watch") and len(call.args) > 1:
        arg = call.args[1]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def kept_for_others(sources: dict[str, str]) -> list[str]:
    """Attributes the package sets on ``self`` and never acts on (no read of that name
    anywhere in it, ``getattr`` included, beyond the two shapes :func:`_acts_on` passes over):
    a figure only the tests or the bench read (it belongs in a probe), or dead state."""
    stored: dict[str, str] = {}
    acted: set[str] = set()
    fields: set[str] = set()
    for rel, source in sources.items():
        tree = parsed(source)
        fields |= _record_fields(tree)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                if not isinstance(node.ctx, ast.Store):
                    if _acts_on(node, parents):
                        acted.add(node.attr)
                elif isinstance(node.value, ast.Name) and node.value.id == "self":
                    stored.setdefault(node.attr, f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Call) and (name := _named_read(node)) is not None:
                acted.add(name)
    return [f"{where} sets .{name}, which nothing in the package acts on (a probe's figure, or dead)"
            for name, where in sorted(stored.items()) if name not in acted and name not in fields]


def test_no_attribute_is_kept_only_for_the_tests_and_the_bench() -> None:
    wrong = kept_for_others(_sources())
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_an_attribute_kept_for_others() -> None:
    def kept(source: str) -> list[str]:
        return kept_for_others({"m.py": source})

    # the shapes the figures had before they moved into the probes
    assert kept("class View:\n    def flush(self, n):\n        self.flushed = (n, time.perf_counter())\n")
    assert kept("class View:\n    def paint(self):\n        self.flushes += 1\n")
    assert kept("class View:\n    def paint(self, i):\n        if i >= 0 and self.first_at is None:\n            self.first_at = now()\n")
    assert kept("class Session:\n    def load(self):\n        self.updated_at = now()\n"
                "class Screen:\n    @property\n    def updated_at(self):\n        return self.session.updated_at\n")
    # what the product acts on stays state
    assert kept("class View:\n    def paint(self):\n        self.count += 1\n        return self.count\n") == []
    assert kept("class View:\n    def paint(self):\n        if self.at is None:\n            self.at = 1\n        return self.at\n") == []
    assert kept("class View:\n    def paint(self):\n        self.mode = 1\n    def show(self):\n        return getattr(self, 'mode')\n") == []
    assert kept("@dataclass\nclass Row:\n    codes: tuple = ()\n    def set(self, c):\n        self.codes = c\n") == []
    assert kept("class App:\n    def on(self, m):\n        self.status = m\n    def mount(self):\n        self.watch(self.app, 'status', print)\n") == []


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


def test_a_views_paint_probes_keep_the_first_paint_and_the_last_row() -> None:
    view = probes.ViewProbes()
    view.painted_first_row()
    first = view.first_row_painted_at
    view.painted_first_row()
    assert first is not None and view.first_row_painted_at == first
    view.painted_row(3)
    view.painted_row(7)
    assert view.last_row_painted is not None and view.last_row_painted[0] == 7
    view.flushed(10)
    view.flushed(25)
    assert view.flushes == 2 and view.last_flush[0] == 25
