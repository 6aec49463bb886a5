"""The checkpoint settings as one frozen value (read by ``config``, which validates them).

They live here, beside what they configure, so that the checkpoint package never imports
the application's settings module.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = [
    "CHECKPOINT_MODES",
    "DEFAULT_FILE_CAP",
    "DEFAULT_KEEP_DAYS",
    "DEFAULT_KEEP_TURNS",
    "CheckpointMode",
    "CheckpointSettings",
]

CheckpointMode = Literal["on", "off"]
CHECKPOINT_MODES: tuple[CheckpointMode, ...] = ("on", "off")
# A file larger than this is not recorded (a model file, a database, a build artefact the
# .gitignore forgot): hashing it before every turn would cost more than undo is worth.
DEFAULT_FILE_CAP = 2 * 1024 * 1024
DEFAULT_KEEP_TURNS = 100  # per session
DEFAULT_KEEP_DAYS = 30


@attrs.frozen
class CheckpointSettings:
    """``mode`` off takes no checkpoint (``/undo`` then says so); the rest bound what is
    kept: files up to ``max_bytes``, each session's last ``keep_turns`` turns, none
    older than ``keep_days`` days."""

    mode: CheckpointMode = "on"
    max_bytes: int = DEFAULT_FILE_CAP
    keep_turns: int = DEFAULT_KEEP_TURNS
    keep_days: int = DEFAULT_KEEP_DAYS
