"""The one strict JSON loader: what it refuses, and the sessions' NaN exception."""

from __future__ import annotations

import math

import pytest

from zcoder.strict_json import loads


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"a":1,"a":2}', "duplicate key"),
        (b'[{"x":{"b":1,"b":1}}]', "duplicate key"),
        (b'{"a":NaN}', "NaN is not JSON"),
        (b"[Infinity]", "Infinity is not JSON"),
        (b"-Infinity", "-Infinity is not JSON"),
        (b"\xef\xbb\xbf{}", "BOM"),
        ('{"a":1}'.encode("utf-16"), "codec can't decode"),
        (b'{"a":"\xff"}', "codec can't decode"),
        (b"[" * 100_000 + b"]" * 100_000, "recursion"),
        (b'{"a":1} x', "Extra data"),
    ],
)
def test_refuses_what_is_not_strict_json(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        loads(data)


def test_reads_strict_json() -> None:
    assert loads(b'{"a":[1,2.5,"\xc3\xa9",true,null]}\n') == {"a": [1, 2.5, "é", True, None]}


def test_constants_are_read_only_when_asked_and_duplicates_never() -> None:
    value = loads(b'{"a":NaN,"b":-Infinity}', constants=True)
    assert math.isnan(value["a"]) and value["b"] == -math.inf
    with pytest.raises(ValueError, match="duplicate key"):
        loads(b'{"a":NaN,"a":1}', constants=True)
