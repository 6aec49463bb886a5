"""The house rule of DESIGN.md section 2: a module imports only from its own floor or below,
and ``ui/`` and ``agent/`` never import each other (``app/`` wires them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

FLOORS: dict[str, int] = {
    "zcoder": 1,
    "zcoder.errors": 1,
    "zcoder.atomic_write": 1,
    "zcoder.strict_json": 1,
    "zcoder.text": 1,
    "zcoder.conversation": 1,
    "zcoder.live": 1,
    "zcoder.approval": 1,
    "zcoder.approval.questions": 1,
    "zcoder.defaults": 1,
    "zcoder.logfile": 1,
    "zcoder.instructions": 1,
    "zcoder.config": 2,
    "zcoder.config_file": 2,
    "zcoder.runtime": 2,
    "zcoder.session": 2,
    "zcoder.checkpoint": 2,
    "zcoder.shell": 2,
    "zcoder.approval.policy": 2,
    "zcoder.relay": 2,
    "zcoder.sandbox": 2,
    "zcoder.commands": 3,
    "zcoder.tools": 3,
    "zcoder.mcp": 3,
    "zcoder.mcp.config": 2,
    "zcoder.mcp.project": 2,
    "zcoder.agent": 4,
    "zcoder.ui": 4,
    "zcoder.app": 5,
    "zcoder.oneshot": 5,
    "zcoder.prepare": 5,
    "zcoder.localserver": 5,
    "zcoder.subcommands": 5,
    "zcoder.cli": 6,
    "zcoder.__main__": 6,
}
NEVER = {("zcoder.ui", "zcoder.agent"), ("zcoder.agent", "zcoder.ui")}


def _floor(module: str) -> tuple[str, int]:
    """The longest registered prefix of ``module`` and its floor."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in FLOORS:
            return key, FLOORS[key]
    raise KeyError(f"{module} has no floor in tests/test_layers.py: add it")


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((SRC / "zcoder").rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out.append((name, path))
    return out


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "zcoder" or m.startswith("zcoder.")}


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_no_import_runs_back_up(module: str, path: Path) -> None:
    room, floor = _floor(module)
    for imported in _imports(path):
        other, other_floor = _floor(imported)
        assert other_floor <= floor, f"{module} (floor {floor}) imports {imported} ({other_floor})"
        assert (room, other) not in NEVER, f"{module} imports {imported}"
