"""The one strict JSON loader, for the files and messages zcoder trusts no one to get right.

Strict means: the bytes are UTF-8 (no BOM, no UTF-16), no object repeats a key (which of
two values would a reader take?), and ``NaN``/``Infinity``/``-Infinity`` are not JSON.
Nesting deep enough to exhaust the recursion limit is an error, not a crash. Every failure
is a ``ValueError`` whose message says what is wrong; the caller puts it in its own words.

``constants=True`` accepts ``NaN`` and the infinities: session files are written by
``json.dumps``, which writes them for a model's tool arguments that held them.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

__all__ = ["loads"]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate key")
    return obj


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# Built once: json.loads with hooks would build a new decoder per call.
_STRICT = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
_WITH_CONSTANTS = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def loads(data: bytes, *, constants: bool = False) -> Any:
    """The value of the JSON document ``data``; ``ValueError`` saying why it is not one."""
    decoder = _WITH_CONSTANTS if constants else _STRICT
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        raise ValueError("a byte order mark (BOM) is not JSON")
    try:
        return decoder.decode(text)
    except RecursionError as exc:
        raise ValueError(str(exc)) from None
