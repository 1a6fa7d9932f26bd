"""Only settings.py reads DAGWRIGHT_* variables: every other module is given its settings by
the composition root. An AST scan of backend/ and blocks/ for reads of the environment
(`os.environ[...]`, `os.environ.get(...)`, `os.getenv(...)`, `... in os.environ`) whose
variable is a DAGWRIGHT_ string, written in place or as a module constant. Writing a child
process's environment (`os.environ[NAME] = ...`) is not a read."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (ROOT / "backend" / "dagwright", ROOT / "blocks")
ALLOWED = {ROOT / "backend" / "dagwright" / "settings.py"}
PREFIX = "DAGWRIGHT_"


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level `NAME = "..."` (or `NAME: Final = "..."`) strings."""
    found: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = value.value
    return found


def _is_environ(node: ast.expr) -> bool:
    """`os.environ`, `environ`, or anything else named environ (`self._environ`)."""
    if isinstance(node, ast.Name):
        return node.id.lstrip("_") == "environ"
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_") == "environ"
    return False


def _reads_a_variable(func: ast.expr) -> bool:
    """`environ.get`, `os.getenv` or `getenv`."""
    if isinstance(func, ast.Attribute):
        return func.attr == "getenv" or (func.attr == "get" and _is_environ(func.value))
    return isinstance(func, ast.Name) and func.id == "getenv"


def _names_dagwright(node: ast.expr, constants: dict[str, str]) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(PREFIX)
    if isinstance(node, ast.Name):
        return constants.get(node.id, "").startswith(PREFIX)
    return False


def environment_reads(source: str) -> list[int]:
    """The lines of `source` that read a DAGWRIGHT_* variable from the environment."""
    tree = ast.parse(source)
    constants = _constants(tree)
    lines: list[int] = []
    for node in ast.walk(tree):
        variable: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args and _reads_a_variable(node.func):
            variable = node.args[0]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_environ(node.value)
        ):
            variable = node.slice
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
            and any(_is_environ(side) for side in node.comparators)
        ):
            variable = node.left
        if variable is not None and _names_dagwright(variable, constants):
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_each_kind_of_read() -> None:
    source = """
import os
from os import getenv, environ
NAME = "DAGWRIGHT_PORT"
a = os.environ.get("DAGWRIGHT_DATA_DIR")
b = os.getenv(NAME)
c = getenv("DAGWRIGHT_X", "")
d = os.environ["DAGWRIGHT_Y"]
e = "DAGWRIGHT_Z" in environ
os.environ["DAGWRIGHT_DATA_DIR"] = "written for a child"
f = os.environ.get("MYSQL_PWD")
"""
    assert environment_reads(source) == [5, 6, 7, 8, 9]


def test_only_settings_reads_dagwright_variables() -> None:
    found = []
    for folder in SCANNED:
        for path in sorted(folder.rglob("*.py")):
            if path in ALLOWED:
                continue
            for line in environment_reads(path.read_text(encoding="utf-8")):
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert found == [], f"read DAGWRIGHT_* from the environment, not from Settings: {found}"
