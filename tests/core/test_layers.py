"""The floors of the README's Architecture section, checked on the source: a module
imports only from its own floor or the floors below, and Textual only from ``ui/`` up."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "eviscene_tui"

# top-level module or package of eviscene_tui -> floor
FLOORS = {
    "artifacts": 1, "settings": 1, "safe_text": 1, "storage": 1, "loopback": 1, "pace": 1, "switches": 1,
    "policy": 2, "journal": 2, "tokens": 2, "gate": 2, "scaffold": 2, "options": 2,
    "state": 3,
    "ui": 4,
    "commands": 5, "cli": 5, "__main__": 5, "__init__": 5,
}
# a package deeper in the tree whose floor differs from its top-level package's
SUBFLOORS = {"scaffold/commands": 5}
# the stand-in driver is run as its own program (the real driver's shape), not a floor
SKIP = ("scaffold/standin/",)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _floor(rel: str) -> int:
    for prefix, floor in SUBFLOORS.items():
        if rel.startswith(prefix + "/"):
            return floor
    return FLOORS[rel.split("/", 1)[0].removesuffix(".py")]


def test_every_module_imports_only_from_its_floor_or_below() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(SKIP):
            continue
        floor = _floor(rel)
        for line, module in _imports(path):
            if module.split(".")[0] == "textual" or module.startswith("textual_image"):
                if floor < 4:
                    wrong.append(f"{rel}:{line} imports {module} (Textual below ui/)")
                continue
            if not module.startswith("eviscene_tui."):
                continue
            target = module.removeprefix("eviscene_tui.").split(".")[0]
            if target in FLOORS and FLOORS[target] > floor:
                wrong.append(f"{rel}:{line} (floor {floor}) imports {module} (floor {FLOORS[target]})")
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("from eviscene_tui.ui.app import EvisceneApp\nimport textual.app\n")
    assert [m for _, m in _imports(bad)] == ["eviscene_tui.ui.app", "textual.app"]
