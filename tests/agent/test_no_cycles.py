"""No import cycle among the modules of ``zcoder`` (the agent's, where the last one was, and
the whole package), counting imports under ``TYPE_CHECKING`` too: a cycle hidden from the
runtime is still two modules that cannot be read one at a time."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _module(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, module: str) -> Iterator[str]:
    """Every module name an import statement anywhere in the file may refer to."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - (node.level - 1)]
                base = ".".join([*parent, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(package: str, root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` (found under ``root``) it imports."""
    files = {_module(root, p): p for p in (root / package.replace(".", "/")).rglob("*.py")}
    return {m: {n for n in _imported(p, m) if n in files and n != m} for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_agent_package_has_no_import_cycle() -> None:
    assert cycles(import_graph("zcoder.agent")) == []


def test_zcoder_has_no_import_cycle() -> None:
    graph = import_graph("zcoder")
    assert "zcoder.app.relay.link" in graph
    assert "zcoder.relay.changes" in graph["zcoder.relay.spool.store"]
    assert cycles(graph) == []


def test_the_check_sees_a_cycle_hidden_under_type_checking(tmp_path: Path) -> None:
    # The shape the agent had: rounds imports approvals, approvals imports rounds for a type.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rounds.py").write_text("from pkg.approvals import Approvals\n")
    (package / "approvals.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .rounds import Parts\n"
    )
    (package / "loop.py").write_text("from pkg import rounds\n")
    graph = import_graph("pkg", tmp_path)
    assert graph["pkg.loop"] == {"pkg", "pkg.rounds"}
    assert cycles(graph) == [["pkg.approvals", "pkg.rounds"]]
