"""The in-driver module is one stdlib-only file that parses as Python 3.10, and
``gate --python PY`` runs the driver in that interpreter."""

from __future__ import annotations

import ast
import sys

from eviscene_tui.gate import INPROC_PATH

from gate_fixtures import decide, finish, gated, make_case, pending, run_cli, wait_until


def test_inproc_imports_only_the_standard_library_and_parses_as_3_10():
    source = INPROC_PATH.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 10))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert imported, "no imports found: the walk is broken"
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


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
