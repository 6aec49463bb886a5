"""Argument checking for the small JSON schemas our tools declare.

Supported: an ``object`` with ``properties`` and ``required``; property types ``string``,
``integer``, ``number``, ``boolean``, ``array`` (with ``items``) and ``object``; ``enum``,
``minimum``/``maximum``, ``minLength``/``maxLength`` and ``default``. Keys not in
``properties`` are refused unless ``additionalProperties`` allows them (MCP servers' schemas);
a list of types accepts any of them, and a type or keyword not known here is left to the
tool (an MCP server checks its own arguments). A JSON ``null`` for an optional argument
counts as absent, since small models often send one instead of leaving the key out. Pure:
no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zcoder.errors import ToolError

__all__ = ["check_arguments"]

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "array": "an array",
    "object": "an object",
}


def check_arguments(schema: Mapping[str, Any], arguments: object) -> dict[str, Any]:
    """The arguments with defaults filled in, or ``ToolError`` naming the first problem."""
    if not isinstance(arguments, Mapping):
        raise ToolError(f"arguments must be a JSON object, got {_describe(arguments)}")
    properties: Mapping[str, Mapping[str, Any]] = schema.get("properties", {})
    required = list(schema.get("required", ()))
    unknown = sorted(str(key) for key in arguments if key not in properties)
    if unknown and schema.get("additionalProperties", False) is False:
        expected = ", ".join(properties) or "none"
        raise ToolError(f"unknown argument {unknown[0]!r} (expected: {expected})")
    result: dict[str, Any] = {k: v for k, v in arguments.items() if k not in properties}
    for name, prop in properties.items():
        value = arguments.get(name)
        if value is None:
            if name in required:
                raise ToolError(f"missing required argument {name!r}")
            if "default" in prop:
                result[name] = prop["default"]
            continue
        result[name] = _check_value(f"argument {name!r}", prop, value)
    return result


def _check_value(label: str, prop: Mapping[str, Any], value: object) -> Any:
    kind = prop.get("type")
    if kind is not None:
        value = _check_type(label, kind, value)
    if "enum" in prop and value not in prop["enum"]:
        choices = ", ".join(str(choice) for choice in prop["enum"])
        raise ToolError(f"{label} must be one of: {choices}; got {_describe(value)}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        _check_range(label, prop, value)
    if isinstance(value, str):
        _check_length(label, prop, value)
    if isinstance(value, list) and "items" in prop:
        value = [_check_value(f"{label}[{i}]", prop["items"], item) for i, item in enumerate(value)]
    return value


def _check_type(label: str, kind: object, value: object) -> object:
    if isinstance(kind, list):
        if value is None and "null" in kind:
            return value
        for one in kind:
            if isinstance(one, str) and one in _TYPE_NAMES and _is_type(one, value):
                return _check_type(label, one, value)
        if not any(isinstance(one, str) and one in _TYPE_NAMES for one in kind):
            return value
        expected = " or ".join(_TYPE_NAMES.get(str(one), str(one)) for one in kind)
        raise ToolError(f"{label} must be {expected}, got {_describe(value)}")
    if not isinstance(kind, str) or kind not in _TYPE_NAMES:
        return value  # "null" or a type this checker does not know: the tool decides
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)  # JSON Schema counts 3.0 as an integer
    if _is_type(kind, value):
        return value
    expected = _TYPE_NAMES.get(kind, kind)
    raise ToolError(f"{label} must be {expected}, got {_describe(value)}")


def _is_type(kind: str, value: object) -> bool:
    if isinstance(value, bool):  # bool is an int subclass in Python, never in JSON
        return kind == "boolean"
    checks: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "boolean": bool,
        "array": list,
        "object": Mapping,
    }
    expected = checks.get(kind)
    return expected is not None and isinstance(value, expected)


def _check_range(label: str, prop: Mapping[str, Any], value: float) -> None:
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and value < low:
        raise ToolError(f"{label} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise ToolError(f"{label} must be at most {high}, got {value}")


def _check_length(label: str, prop: Mapping[str, Any], value: str) -> None:
    low, high = prop.get("minLength"), prop.get("maxLength")
    if low is not None and len(value) < low:
        what = "must not be empty" if low == 1 else f"must have at least {low} characters"
        raise ToolError(f"{label} {what}")
    if high is not None and len(value) > high:
        raise ToolError(f"{label} must have at most {high} characters, got {len(value)}")


def _describe(value: object) -> str:
    """A JSON-ish rendering of a bad value, short enough for an error line."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value))
    if kind is None:
        return type(value).__name__
    shown = json.dumps(value, ensure_ascii=False)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{kind} {shown}"
