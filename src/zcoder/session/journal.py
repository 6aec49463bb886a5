"""The bytes of a session file: a snapshot line, then one journal line per save. Pure.

Format 2 (written now): the first line is the whole session, ``{"format": 2, "id": ...}``;
every later line is what one save added,
``{"add": {"history": [...], "events": [...], "user_requests": [...]}, "set": {...}}``
(``set`` holds ``updated_at`` and a changed ``model``, ``title``, ``server`` or
``agent_name``). Lines
are ASCII JSON ended by ``\\n``; a last line without its ``\\n`` is a save that did not
finish (a crash, a full disk) and is ignored, never taken as damage to what was saved
before it. A compaction replaces the file with one snapshot line.

Format 1 (read only, migrated by the next save): the whole session as one JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from zcoder import strict_json

__all__ = [
    "FORMAT_VERSION",
    "MAX_FILE_BYTES",
    "SETTABLE",
    "Decoded",
    "decode",
    "encode_entry",
    "encode_snapshot",
]

FORMAT_VERSION = 2
LEGACY_FORMAT = 1
MAX_FILE_BYTES = 64 * 1024 * 1024  # a file larger than this is refused as damaged
_LISTS = frozenset({"history", "events", "user_requests"})
# The fields a journal entry may set: ``updated_at`` with every save, the others when they
# changed (``saves.py``).
SETTABLE = ("model", "title", "server", "agent_name", "oneshot")
_SETTABLE = frozenset({*SETTABLE, "updated_at"})


@attrs.frozen
class Decoded:
    """A session file read back: the session's fields (unstructured, checked by the
    caller), where whole lines end (where the next entry goes) and the snapshot's size.
    ``rewrite`` says the next save must write a fresh snapshot (a format-1 file)."""

    body: dict[str, Any]
    end: int
    base: int
    rewrite: bool


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def encode_snapshot(body: Mapping[str, Any]) -> bytes:
    """The first line of a session file: every field of the session."""
    return _dumps({"format": FORMAT_VERSION, **body}) + b"\n"


def encode_entry(add: Mapping[str, list[Any]], changed: Mapping[str, Any]) -> bytes:
    """One journal line: the items appended to the lists, and the fields set."""
    entry: dict[str, Any] = {}
    if add:
        entry["add"] = dict(add)
    entry["set"] = dict(changed)
    return _dumps(entry) + b"\n"


def _loads(data: bytes, corrupt: Callable[[str], Exception], where: str) -> Any:
    try:
        return strict_json.loads(data, constants=True)
    except ValueError as exc:
        raise corrupt(f"{where}not valid JSON ({exc})") from None


def _legacy(data: bytes, corrupt: Callable[[str], Exception]) -> Decoded:
    raw = _loads(data, corrupt, "")
    if not isinstance(raw, dict):
        raise corrupt("not a JSON object")
    version = raw.pop("format", None)
    if version != LEGACY_FORMAT:
        raise corrupt(f"format {version!r} is not a supported one (1 or {FORMAT_VERSION})")
    return Decoded(raw, len(data), len(data), rewrite=True)


def _apply(body: dict[str, Any], entry: Any, where: str) -> str:
    """Merge one journal entry into ``body``; a problem as text, or ``""``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("set"), dict):
        return f"{where}not a journal entry"
    if set(entry) - {"add", "set"}:
        return f"{where}extra fields found ({', '.join(sorted(set(entry) - {'add', 'set'}))})"
    add, changed = entry.get("add", {}), entry["set"]
    if not isinstance(add, dict) or set(add) - _LISTS or set(changed) - _SETTABLE:
        return f"{where}unknown fields in a journal entry"
    for name, items in add.items():
        if not isinstance(items, list) or not isinstance(body.get(name), list):
            return f"{where}{name} is not a list"
        body[name].extend(items)
    body.update(changed)
    return ""


def decode(data: bytes, corrupt: Callable[[str], Exception]) -> Decoded:
    """Read a session file of either format; ``corrupt(reason)`` builds the error raised
    for damage (a torn last line is not damage)."""
    newline = data.find(b"\n")
    head = data if newline < 0 else data[:newline]
    try:
        first = strict_json.loads(head, constants=True)
    except ValueError:
        first = None
    if not isinstance(first, dict) or first.get("format") != FORMAT_VERSION:
        return _legacy(data, corrupt)
    del first["format"]
    base = pos = len(data) if newline < 0 else newline + 1
    line = 1
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break  # torn: a save that never finished
        line += 1
        where = f"line {line}: "
        problem = _apply(first, _loads(data[pos:end], corrupt, where), where)
        if problem:
            raise corrupt(problem)
        pos = end + 1
    return Decoded(first, pos, base, rewrite=newline < 0)
