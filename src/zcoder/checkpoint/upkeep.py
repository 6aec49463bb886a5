"""Keeping ``$ZCODER_HOME/checkpoints`` bounded: what one session's own pruning cannot reach.

A session prunes its own turns each time it keeps one (``records.prune``). Once a day at
most, a turn's end also drops the turns of sessions that were not used for ``keep_days``
(their file and their refs), the indexes of other sessions unused for a day (a session
that comes back starts from the shared index again, which costs only the files changed
since), and then has git drop the snapshots no kept turn reaches.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from zcoder.checkpoint.shadow import ShadowGit

__all__ = ["upkeep"]

_DAY = 86400.0


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


async def upkeep(shadow: ShadowGit, session_id: str, keep_days: int) -> bool:
    """Run at most once a day (whether it ran)."""
    root, now = shadow.root, time.time()
    stamp = root / "last-upkeep"
    if not stamp.exists() or _age(stamp, now) < _DAY:  # the first one a day after the start
        with contextlib.suppress(OSError):
            if not stamp.exists():
                stamp.touch()
        return False
    stamp.touch()
    stale: list[str] = []
    for turns in sorted((root / "turns").glob("*.json")):
        if turns.stem != session_id and _age(turns, now) > keep_days * _DAY:
            stale.append(turns.stem)
    for sid in stale:
        listed = await shadow.git("for-each-ref", "--format=%(refname)", f"refs/zcoder/{sid}/")
        await shadow.set_refs([(ref, None) for ref in listed.decode().split()])
        with contextlib.suppress(OSError):
            (root / "turns" / f"{sid}.json").unlink()
    for index in root.glob("index-*"):
        if index.name != f"index-{session_id}" and _age(index, now) > _DAY:
            with contextlib.suppress(OSError):
                index.unlink()
    await shadow.collect_garbage()
    return True
