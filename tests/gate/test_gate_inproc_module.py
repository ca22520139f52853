"""The in-driver module and the protocol it loads beside it are stdlib-only files that
parse as Python 3.10 (an import under ``if TYPE_CHECKING:`` is for mypy only), and
``gate --python PY`` runs the driver in that interpreter."""

from __future__ import annotations

import ast
import sys

from eviscene_tui.gate import INPROC_PATH

from gate_fixtures import decide, finish, gated, make_case, pending, run_cli, wait_until


def _runtime_imports(tree: ast.AST) -> set[str]:
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
               for child in node.body for n in ast.walk(child)}
    imported = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    return imported


def test_inproc_and_protocol_import_only_the_standard_library_and_parse_as_3_10():
    for path in (INPROC_PATH, INPROC_PATH.with_name("protocol.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 10))
        imported = _runtime_imports(tree)
        assert imported, f"no imports found in {path.name}: the walk is broken"
        assert imported <= set(sys.stdlib_module_names), (path.name, imported - set(sys.stdlib_module_names))
    # the check sees an app import that is not for mypy only
    assert "eviscene_tui" in _runtime_imports(ast.parse("from eviscene_tui.gate import protocol\n"))


def test_gate_runs_the_driver_in_the_given_interpreter(tmp_path):
    case = make_case(tmp_path)
    with gated(case, gate_opts=["--python", sys.executable], extra=["--repair-attempts", "1", "--proposal-rounds", "1"]) as proc:
        wait_until(pending(case, "round", 0), "the round-0 gate")
        assert decide(case, "approve-round", 0).returncode == 0
        wait_until(pending(case, "hint", 0), "the round-0 hint gate")
        assert decide(case, "approve-hint", 0).returncode == 0
        assert finish(proc) == 0
    missing = run_cli("gate", "--python", str(tmp_path / "no-python"), "--", *case.argv())
    assert missing.returncode == 2 and "not found or not executable" in missing.stderr
