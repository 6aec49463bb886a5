from __future__ import annotations

from typing import Any

import pytest

from zcoder.errors import ToolError
from zcoder.tools.schema import check_arguments

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "default": "."},
        "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "status": {"type": "string", "enum": ["complete", "blocked"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object"},
        "name": {"type": "string", "maxLength": 4},
    },
    "required": ["status"],
}


def check(**arguments: Any) -> dict[str, Any]:
    return check_arguments(SCHEMA, arguments)


def error_of(arguments: object) -> str:
    with pytest.raises(ToolError) as info:
        check_arguments(SCHEMA, arguments)
    return str(info.value)


def test_defaults_filled_and_values_kept() -> None:
    assert check(status="complete") == {"path": ".", "count": 5, "status": "complete"}
    got = check(status="blocked", count=3, ratio=0.5, flag=False, tags=["a"], meta={"k": 1})
    assert got["count"] == 3 and got["ratio"] == 0.5 and got["flag"] is False
    assert got["tags"] == ["a"] and got["meta"] == {"k": 1}


def test_null_optional_is_default_and_integral_float_is_int() -> None:
    got = check(status="complete", path=None, count=7.0)
    assert got["path"] == "." and got["count"] == 7 and type(got["count"]) is int


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([1], "arguments must be a JSON object, got array"),
        ("x", 'arguments must be a JSON object, got string "x"'),
        ({"status": "complete", "bogus": 1}, "unknown argument 'bogus' (expected: path, count"),
        ({}, "missing required argument 'status'"),
        ({"status": None}, "missing required argument 'status'"),
        (
            {"status": "complete", "count": True},
            "argument 'count' must be an integer, got boolean true",
        ),
        (
            {"status": "complete", "count": "3"},
            "argument 'count' must be an integer, got string \"3\"",
        ),
        (
            {"status": "complete", "count": 2.5},
            "argument 'count' must be an integer, got number 2.5",
        ),
        ({"status": "complete", "count": 0}, "argument 'count' must be at least 1, got 0"),
        ({"status": "complete", "count": 11}, "argument 'count' must be at most 10, got 11"),
        (
            {"status": "complete", "ratio": False},
            "argument 'ratio' must be a number, got boolean false",
        ),
        (
            {"status": "complete", "flag": 1},
            "argument 'flag' must be a boolean (true or false), got integer 1",
        ),
        (
            {"status": "done"},
            "argument 'status' must be one of: complete, blocked; got string \"done\"",
        ),
        ({"status": "complete", "path": ""}, "argument 'path' must not be empty"),
        (
            {"status": "complete", "name": "abcde"},
            "argument 'name' must have at most 4 characters, got 5",
        ),
        ({"status": "complete", "tags": "a"}, "argument 'tags' must be an array, got string \"a\""),
        (
            {"status": "complete", "tags": ["a", 2]},
            "argument 'tags'[1] must be a string, got integer 2",
        ),
        ({"status": "complete", "meta": []}, "argument 'meta' must be an object, got array"),
    ],
)
def test_errors_are_precise(arguments: object, message: str) -> None:
    assert error_of(arguments).startswith(message)


def test_long_bad_values_are_shortened() -> None:
    message = error_of({"status": "x" * 500})
    assert (
        message
        == f"argument 'status' must be one of: complete, blocked; got string \"{'x' * 56}..."
    )
