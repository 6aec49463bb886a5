"""One save of an open session: a journal line when that is enough, else a fresh
snapshot. Synchronous file I/O; the store serialises the calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from zcoder.conversation import Message, TranscriptEvent
from zcoder.session import journal
from zcoder.session.data import Session, converter
from zcoder.session.files import append_at, write_atomic

__all__ = ["SavedFile", "write_session"]

# The journal may grow to the snapshot's size (at least this much) before a save compacts
# it: the file stays under twice the session, and a save writes about three times what it
# adds, amortised.
COMPACT_FLOOR = 64 * 1024
_LISTS: dict[str, Any] = {
    "history": list[Message],
    "events": list[TranscriptEvent],
    "user_requests": list[str],
}


@attrs.frozen
class SavedFile:
    """What the file of one open session holds: the copy last written (None: no file
    yet), where the next journal line goes, the snapshot's size, whether the next save
    must write a snapshot, and the number of the save that wrote it."""

    image: Session | None = None
    end: int = 0
    base: int = 0
    rewrite: bool = True
    seq: int = 0


def write_session(saved: SavedFile, image: Session, seq: int, directory: Path) -> SavedFile:
    """Write ``image`` (a private copy) into ``directory``; what the file then holds.
    ``OSError`` for the disk, ``TypeError``/``ValueError`` for content that cannot be saved."""
    return _append(saved, image, seq, directory) or _snapshot(image, seq, directory)


def _append(saved: SavedFile, image: Session, seq: int, directory: Path) -> SavedFile | None:
    """One journal line with what ``image`` adds to the saved copy; None when a snapshot
    is due (no file yet, a list that changed other than at its end, a journal grown as
    large as the snapshot)."""
    old = saved.image
    if old is None or saved.rewrite or old.created_at != image.created_at:
        return None
    add: dict[str, list[Any]] = {}
    for name, kind in _LISTS.items():
        before, after = getattr(old, name), getattr(image, name)
        if after[: len(before)] != before:
            return None
        if len(after) > len(before):
            add[name] = converter.unstructure(after[len(before) :], kind)
    changed: dict[str, Any] = {"updated_at": image.updated_at}
    changed.update(
        {
            k: converter.unstructure(getattr(image, k))
            for k in journal.SETTABLE
            if getattr(image, k) != getattr(old, k)
        }
    )
    line = journal.encode_entry(add, changed)
    end = saved.end + len(line)
    if end - saved.base > max(saved.base, COMPACT_FLOOR) or end > journal.MAX_FILE_BYTES:
        return None
    append_at(directory / f"{image.id}.json", saved.end, line)
    return SavedFile(image, end, saved.base, False, seq)


def _snapshot(image: Session, seq: int, directory: Path) -> SavedFile:
    data = journal.encode_snapshot(converter.unstructure(image))
    if len(data) > journal.MAX_FILE_BYTES:  # open would refuse it: keep the last good file
        raise ValueError(f"it would be over {journal.MAX_FILE_BYTES} bytes; start a new session")
    write_atomic(directory, f"{image.id}.json", data)
    return SavedFile(image, len(data), len(data), False, seq)
