"""The worker seam, checked on the source: workers post typed messages (defined in
``ui/messages.py``) and never reach a widget (no ``query`` / ``query_one`` inside a worker of
the UI package: a ``@work`` function or a ``run_worker`` target); a widget's workers do no
file or process I/O themselves (they call a session or a service); the case screen keeps
no lifecycle state of its own (its session does). Each guard is shown to fail on a planted
violation."""

import ast
from pathlib import Path

import eviscene_tui.ui as ui_pkg
from eviscene_tui.ui import messages as M

UI = Path(ui_pkg.__file__).parent
QUERIES = frozenset({"query", "query_one", "query_children", "query_exactly_one"})
#: calls that read or write files or start processes (a widget's worker calls a service instead)
IO_CALLS = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "unlink", "rename", "replace_file"})
IO_MODULES = frozenset({"subprocess", "os", "shutil", "socket", "httpx"})


def _modules():
    return sorted(p for p in UI.rglob("*.py") if p.name != "__init__.py")


def _is_work(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "work" or isinstance(target, ast.Attribute) and target.attr == "work"


def _callable_name(node: ast.expr) -> str | None:
    """The function a ``run_worker`` argument runs: ``self.f``, ``f``, ``partial(self.f, …)``,
    ``lambda: self.f(…)``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "partial" or isinstance(func, ast.Attribute) and func.attr == "partial") and node.args:
            return _callable_name(node.args[0])
        return None
    if isinstance(node, ast.Lambda) and isinstance(node.body, ast.Call):
        return _callable_name(node.body.func)
    return None


def workers(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every worker function of a module: ``@work`` ones and ``run_worker`` targets."""
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run_worker" and node.args:
            name = _callable_name(node.args[0])
            if name is not None:
                targets.add(name)
    return [fn for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (fn.name in targets or any(_is_work(d) for d in fn.decorator_list))]


def _io_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in IO_CALLS
    if isinstance(func, ast.Attribute):
        base = func.value
        return func.attr in IO_CALLS or isinstance(base, ast.Name) and base.id in IO_MODULES
    return False


def worker_offenders(source: str, where: str, *, widget: bool) -> list[str]:
    """Workers of ``source`` that query a widget, and (in a widget module) do I/O themselves."""
    offenders = []
    for fn in workers(ast.parse(source)):
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and node.attr in QUERIES:
                offenders.append(f"{where}:{node.lineno} {fn.name} queries a widget")
            elif widget and _io_call(node):
                offenders.append(f"{where}:{node.lineno} {fn.name} does I/O in a widget")
    return offenders


def _base_name(base: ast.expr) -> str | None:
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def _is_message_name(name: str | None) -> bool:
    if name is None:
        return False
    known = getattr(M, name, None)
    return name == "Message" or isinstance(known, type) and issubclass(known, M.Message)


def message_class_offenders(source: str, where: str) -> list[str]:
    """Module-level classes of ``source`` that are messages (``Message``, ``M.Message``,
    ``textual.message.Message``, a subclass of a message of ui/messages.py, or of a message
    class defined above them)."""
    offenders: list[str] = []
    local: set[str] = set()
    for node in ast.parse(source).body:  # module level only: nested widget events are fine
        if isinstance(node, ast.ClassDef) and any(_is_message_name(n) or n in local for n in map(_base_name, node.bases)):
            local.add(node.name)
            offenders.append(f"{where}:{node.lineno} {node.name}")
    return offenders


def test_no_worker_queries_a_widget_or_does_io_in_a_widget():
    offenders = []
    for path in _modules():
        offenders += worker_offenders(path.read_text(), str(path.relative_to(UI)), widget=path.parent.name == "widgets")
    assert not offenders, offenders


def test_the_worker_guard_sees_run_worker_targets_and_io_in_a_widget():
    planted = '''
import subprocess
from functools import partial

class Panel(Widget):
    def on_mount(self):
        self.run_worker(self._tail, thread=True)
        self.run_worker(partial(self._launch, ["driver"]), thread=True)
        self.run_worker(lambda: self._count(1), thread=True)

    def _tail(self):
        self.query_one("#x").update("y")

    def _launch(self, argv):
        with open("driver.log", "ab") as out:
            subprocess.Popen(argv, stdout=out)

    def _count(self, n):
        self.query("#rows")

    @work(thread=True)
    def _load(self):
        self.query_children()
'''
    found = worker_offenders(planted, "planted.py", widget=True)
    assert [f.split(" ", 1)[1] for f in found] == [
        "_tail queries a widget", "_launch does I/O in a widget", "_launch does I/O in a widget", "_count queries a widget",
        "_load queries a widget",
    ], found
    # a screen's worker may read files (it posts what it read); it still never queries a widget
    assert [f.split(" ", 1)[1] for f in worker_offenders(planted, "planted.py", widget=False)] == [
        "_tail queries a widget", "_count queries a widget", "_load queries a widget"]


def test_screens_define_no_message_classes():
    """Message classes of workers live in ui/messages.py (a widget's own events stay nested in it)."""
    offenders = []
    for path in _modules():
        if path.name != "messages.py":
            offenders += message_class_offenders(path.read_text(), str(path.relative_to(UI)))
    assert not offenders, offenders


def test_the_message_guard_sees_attribute_bases_and_subclasses():
    planted = '''
import textual.message
from eviscene_tui.ui import messages as M

class IntegrityReady(M.Message):
    pass

class CompareReady(textual.message.Message):
    pass

class Shown(M.CaseShown):
    pass

class Later(IntegrityReady):
    pass

class Fine(Widget):
    class Nested(Message):
        pass
'''
    assert [f.split(" ", 1)[1] for f in message_class_offenders(planted, "planted.py")] == ["IntegrityReady", "CompareReady", "Shown", "Later"]


def _assigned_attributes(cls: ast.ClassDef) -> set[str]:
    """Every ``self.<name> = …`` (or ``+=``, or an annotated assignment) in the class's methods."""
    names = set()
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for part in target.elts if isinstance(target, ast.Tuple) else [target]:
                # ``self.x = …`` (not ``self.app.x = …``: that is the app's, or a widget's)
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self":
                    names.add(part.attr)
    return names


def case_screen_state(source: str) -> set[str]:
    tree = ast.parse(source)
    screen = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CaseScreen")
    return _assigned_attributes(screen) - {"options", "session"}


def test_the_case_screen_holds_no_lifecycle_state():
    """The case's state is its session's (state/case_session.py): the screen assigns only its
    options and its session, anywhere in its methods."""
    assert case_screen_state((UI / "screens" / "case.py").read_text()) == set()


def test_the_state_guard_sees_a_field_kept_in_the_screen():
    planted = '''
class CaseScreen(Screen):
    def __init__(self, options):
        self.options = options
        self.session = CaseSession()
        self._request = 0

    def load(self):
        self._request += 1
        self.integrity: list | None = None
        self.app.reveal_privileged, self._hold = True, None
'''
    assert case_screen_state(planted) == {"_request", "integrity", "_hold"}
