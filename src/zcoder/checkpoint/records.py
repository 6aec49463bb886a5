"""A session's turns that changed files, as kept beside the shadow repository.

One JSON file per session (``turns/<session id>.json``, written atomically), so the turns
outlive the process and ``--resume`` finds them. Each turn names its two snapshot trees (the
shadow repository keeps a ref on each, ``refs/zcoder/<session>/<n>/before`` and ``after``,
so garbage collection leaves them) and what it changed. ``prune`` (pure) picks the turns
past the age and count limits; the tracker drops them with their refs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from zcoder.atomic_write import write_file
from zcoder.errors import CheckpointError
from zcoder.strict_json import loads

__all__ = [
    "CREATED_REPOSITORY",
    "FileChange",
    "TurnRecord",
    "load_records",
    "prune",
    "refs_of",
    "save_records",
]

CREATED_REPOSITORY = "a git repository the turn created"
_VERSION = 1
_DAY = 86400.0


@attrs.frozen
class FileChange:
    """``A`` created, ``M`` changed (content or mode), ``D`` deleted; ``recorded`` false
    for a change the snapshots could not hold (an ignored or too large file, a git
    repository the turn created: ``lib/``, ``.git/``)."""

    status: str
    path: str
    recorded: bool = True
    why: str = ""


@attrs.frozen
class TurnRecord:
    """One turn of a session that changed files. ``sender`` is ``""`` for the local
    user's turn, else the relayed task's sender (``alpha (pid 123)``); ``undone`` is when
    it was taken back (0: it stands)."""

    number: int
    origin: str
    sender: str
    prompt: str
    started: float
    ended: float
    before: str
    after: str
    changes: tuple[FileChange, ...]
    undone: float = 0.0

    @property
    def standing(self) -> bool:
        return not self.undone

    @property
    def touched(self) -> frozenset[str]:
        return frozenset(c.path for c in self.changes if c.recorded)


def refs_of(session_id: str, number: int) -> tuple[str, str]:
    base = f"refs/zcoder/{session_id}/{number}"
    return f"{base}/before", f"{base}/after"


def prune(
    records: Sequence[TurnRecord], now: float, keep_turns: int, keep_days: int
) -> tuple[list[TurnRecord], list[TurnRecord]]:
    """``(kept, dropped)``: the last ``keep_turns`` turns no older than ``keep_days``."""
    young = [r for r in records if now - r.ended <= keep_days * _DAY]
    kept = young[-keep_turns:] if keep_turns > 0 else []
    dropped = [r for r in records if r not in kept]
    return kept, dropped


def _change(raw: Any) -> FileChange:
    status, path, recorded, why = raw
    if status not in ("A", "M", "D") or not isinstance(path, str) or not path:
        raise ValueError("a change needs A, M or D and a path")
    return FileChange(status, path, bool(recorded), str(why))


def _record(raw: Any) -> TurnRecord:
    return TurnRecord(
        number=int(raw["number"]),
        origin=str(raw["origin"]),
        sender=str(raw["sender"]),
        prompt=str(raw["prompt"]),
        started=float(raw["started"]),
        ended=float(raw["ended"]),
        before=str(raw["before"]),
        after=str(raw["after"]),
        changes=tuple(_change(c) for c in raw["changes"]),
        undone=float(raw.get("undone", 0.0)),
    )


def load_records(path: Path) -> list[TurnRecord]:
    """The turns in ``path`` (none when there is no file); ``CheckpointError`` when the
    file cannot be read or is not what zcoder wrote."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = loads(data)
        if doc.get("version") != _VERSION:
            raise ValueError(f"version {doc.get('version')!r} is not {_VERSION}")
        return [_record(r) for r in doc["turns"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{path} is damaged ({exc}); delete it to start again") from None


def save_records(path: Path, records: Sequence[TurnRecord]) -> None:
    turns = []
    for r in records:
        raw = attrs.asdict(r, recurse=False)
        raw["changes"] = [[c.status, c.path, c.recorded, c.why] for c in r.changes]
        turns.append(raw)
    data = json.dumps({"version": _VERSION, "turns": turns}, indent=1).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_file(path, data, sync=True, mode=0o600)
    except OSError as exc:
        raise CheckpointError(f"cannot write {path}: {exc.strerror or exc}") from None
