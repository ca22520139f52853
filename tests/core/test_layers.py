"""The floors of the README's Architecture section, checked on the source.

- A module imports only from its own floor or the floors below, and Textual only from
  ``ui/`` up.
- Inside floor 2 the services have an order (:data:`FLOOR_2`): a service imports only the
  ones before it (and its own package).
- The scaffolding room (``scaffold/``, floor 2′) is imported by no module outside it; inside
  it, its parts have an order too (:data:`ROOM`). The product names it in one place:
  ``cli.py``'s table of commands (``demo``, ``fake-vllm``), as module paths, not imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import parsed

from eviscene_tui.cli import SUBCOMMANDS

PACKAGE = Path(__file__).resolve().parents[2] / "eviscene_tui"

ROOM = "scaffold"

#: inside floor 2, bottom up: each service imports only the ones listed before it. The
#: gate journals its decisions and runs continuations, so it sits above the journal and
#: the policy client. The gate's protocol module (standard library only, it also runs
#: inside a driver) is on floor 1: it imports nothing of the package, and the integrity
#: check applies its feedback rule (one copy of the driver's rules).
FLOOR_2 = ("tokens", "policy", "journal", "gate", "options")

#: inside the room, bottom up, as :data:`FLOOR_2`; its commands are commands (floor 5)
ROOM_PARTS = ("scaffold/loopback", "scaffold/tiny", "scaffold/synthetic_capture", "scaffold/fake_vllm", "scaffold/samples",
              "scaffold/standin", "scaffold/gated_demo", "scaffold/commands", "scaffold/__init__")

#: a unit (the longest prefix of a module's path that is listed) -> (floor, rung)
UNITS: dict[str, tuple[float, int]] = {
    **{name: (1, 0) for name in ("artifacts", "settings", "safe_text", "storage", "pace", "switches", "probes", "gate/protocol")},
    **{name: (2, rung) for rung, name in enumerate(FLOOR_2)},
    **{name: (2.5, rung) for rung, name in enumerate(ROOM_PARTS)},
    "scaffold/commands": (5, 0),
    "state": (3, 0),
    "ui": (4, 0),
    **{name: (5, 0) for name in ("commands", "cli", "__main__", "__init__")},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports (inside functions and ``TYPE_CHECKING`` too); ``from
    eviscene_tui.scaffold import tiny`` imports the module ``eviscene_tui.scaffold.tiny``."""
    tree = parsed(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [f"{node.module}.{alias.name}" for alias in node.names if _is_module(f"{node.module}.{alias.name}")]
            out += [(node.lineno, module) for module in modules or [node.module]]
    return out


def _is_module(name: str) -> bool:
    if not name.startswith("eviscene_tui."):
        return False
    path = PACKAGE.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _unit(rel: str) -> str:
    """The listed unit a module (``gate/decide.py``) or an imported name (``gate/decide``,
    ``gate``: a package's own ``__init__``) belongs to."""
    path = rel.removesuffix(".py").removesuffix("/__init__")
    parts = path.split("/")
    for cut in range(len(parts), 0, -1):
        prefix = "/".join(parts[:cut])
        if prefix in UNITS:
            return prefix
    if rel.startswith(ROOM + "/"):
        return "scaffold/__init__"
    raise KeyError(f"{rel} is on no floor: add it to UNITS")


def _target(module: str) -> str:
    """The unit an imported module (``eviscene_tui.gate.decide``) belongs to."""
    return _unit(module.removeprefix("eviscene_tui").removeprefix(".").replace(".", "/") or "__init__")


def violations(rel: str, imports: list[tuple[int, str]]) -> list[str]:
    """What the module at ``rel`` (relative to the package) imports against the rules."""
    unit = _unit(rel)
    floor, rung = UNITS[unit]
    wrong = []
    for line, module in imports:
        if module.split(".")[0] == "textual" or module.startswith("textual_image"):
            if floor < 4:
                wrong.append(f"{rel}:{line} imports {module} (Textual below ui/)")
            continue
        if module != "eviscene_tui" and not module.startswith("eviscene_tui."):
            continue
        target = _target(module)
        to_floor, to_rung = UNITS[target]
        in_room, to_room = rel.startswith(ROOM + "/"), target.startswith(ROOM)
        if to_room and not in_room:
            wrong.append(f"{rel}:{line} imports {module} (the scaffolding room; no module outside it imports it)")
        elif to_floor > floor:
            wrong.append(f"{rel}:{line} (floor {floor}) imports {module} (floor {to_floor})")
        elif to_floor == floor and to_rung > rung and target != unit:
            wrong.append(f"{rel}:{line} ({unit}) imports {module} ({target}, above it on floor {floor})")
    return wrong


def test_every_module_imports_only_from_its_floor_or_below() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        wrong += violations(rel, _imports(path))
    assert not wrong, "\n".join(wrong)


def _docstrings(tree: ast.Module) -> set[int]:
    bodies = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))]
    return {id(b.body[0].value) for b in bodies if b.body and isinstance(b.body[0], ast.Expr)}


def test_the_room_is_named_only_by_the_command_table() -> None:
    """Besides imports, the product could reach the room by a module path in a string
    (``importlib``, ``python -m``): only ``cli.py``'s table does, for the two commands that
    start the demo and the fake server (prose in docstrings may name it)."""
    in_room = {name for name, (module, _help) in SUBCOMMANDS.items() if module.startswith(f"eviscene_tui.{ROOM}.")}
    assert in_room == {"demo", "fake-vllm"}
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(ROOM + "/") or rel == "cli.py":
            continue
        tree = parsed(path.read_text(encoding="utf-8"))
        prose = _docstrings(tree)
        named += [f"{rel}:{node.lineno} names {node.value[:60]!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
                  and f"eviscene_tui.{ROOM}" in node.value]
    assert not named, "\n".join(named)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("from eviscene_tui.ui.app import EvisceneApp\nimport textual.app\n")
    assert [m for _, m in _imports(bad)] == ["eviscene_tui.ui.app", "textual.app"]
    assert len(violations("policy/m.py", _imports(bad))) == 2


def test_the_checker_sees_a_service_above_its_place_and_the_room() -> None:
    """Each rule fails on a planted import: a service importing one above it on floor 2,
    the protocol module importing the journal, state importing the room, a part of the room
    importing one above it, a part of the room importing state."""
    assert violations("policy/client.py", [(1, "eviscene_tui.journal.store")])
    assert violations("gate/protocol.py", [(1, "eviscene_tui.journal.events")])
    assert violations("tokens/decode.py", [(1, "eviscene_tui.gate.protocol")]) == []  # below it
    assert violations("state/runs.py", [(1, "eviscene_tui.scaffold.samples")])
    assert violations("commands/check.py", [(1, "eviscene_tui.scaffold.fake_vllm.server")])
    assert violations("scaffold/tiny.py", [(1, "eviscene_tui.scaffold.samples.tree")])
    assert violations("scaffold/samples/tree.py", [(1, "eviscene_tui.state.runs")])
    assert violations("scaffold/samples/tree.py", [(1, "eviscene_tui.scaffold.tiny")]) == []
    assert violations("scaffold/commands/demo.py", [(1, "eviscene_tui.ui.launch")]) == []
    assert violations("gate/decide.py", [(1, "eviscene_tui.journal")]) == []


def standard_library_only(imports: list[tuple[int, str]]) -> list[str]:
    """The imports of a module that must run anywhere (inside a driver) that are not of the
    standard library: anything of the package or a third party."""
    import sys

    return [f"{line}: {module}" for line, module in imports
            if module.split(".")[0] not in sys.stdlib_module_names]


def test_the_protocol_module_and_the_probes_import_the_standard_library_only() -> None:
    """The gate's protocol module runs inside a driver (it imports nothing of the package);
    the probes are recorded into from floor 1 up (the policy client too)."""
    wrong = []
    for rel in ("gate/protocol.py", "probes.py"):
        wrong += [f"{rel}:{found}" for found in standard_library_only(_imports(PACKAGE / rel))]
    assert not wrong, "\n".join(wrong)


def test_the_standard_library_check_sees_the_package_and_a_third_party() -> None:
    assert standard_library_only([(1, "eviscene_tui.safe_text"), (2, "orjson"), (3, "json"), (4, "os.path")]) == ["1: eviscene_tui.safe_text", "2: orjson"]
