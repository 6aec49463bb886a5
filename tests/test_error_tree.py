"""errors.py holds every exception that leaves its module, drawn in its docstring, and the
base class is only ever caught: what the UI shows is raised as the subclass that says why."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import zcoder.errors as errors

SRC = Path(__file__).resolve().parents[1] / "src" / "zcoder"


def _sources() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(SRC)), ast.parse(p.read_text())) for p in sorted(SRC.rglob("*.py"))]


def _is_exception(node: ast.ClassDef) -> bool:
    names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
    return any(n.endswith(("Error", "Exception")) or n in errors.__all__ for n in names)


def test_every_public_exception_class_is_defined_in_errors() -> None:
    outside = [
        f"{where}: {node.name}"
        for where, tree in _sources()
        if where != "errors.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and _is_exception(node) and not node.name.startswith("_")
    ]
    assert outside == []


def test_the_docstring_draws_every_class_of_the_tree() -> None:
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    assert sorted(c.__name__ for c in classes) == sorted(errors.__all__)
    drawn = errors.__doc__ or ""
    for cls in classes:
        assert f" {cls.__name__}\n" in drawn or f" {cls.__name__} " in drawn, cls.__name__
        assert issubclass(cls, errors.ZcoderError)


def test_the_base_class_is_never_raised() -> None:
    raised = [
        f"{where}:{node.lineno}"
        for where, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and isinstance(node.exc.func, ast.Name)
        and node.exc.func.id == "ZcoderError"
    ]
    assert raised == []
