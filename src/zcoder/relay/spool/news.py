"""What the spool tells its reader: a claimed message, and the news of what entered and
left ``inbox/`` (``Spool.take_news``). Plain records, no Trio: the inbound machine, which
keeps the waiting messages in memory, is built on them.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from zcoder.relay.envelope import Enqueue

__all__ = ["Arrived", "Claimed", "Left", "News", "Refused", "Withdrawn"]


@attrs.frozen
class Claimed:
    """One message taken from the inbox; ``path`` is its file in ``processing/``."""

    sequence: int
    envelope: Enqueue
    verified: bool
    path: Path


@attrs.frozen
class Arrived:
    """A message this spool accepted into ``inbox/`` (what ``take_news`` reports)."""

    sequence: int
    envelope: Enqueue
    verified: bool


@attrs.frozen
class Left:
    """A waiting message that left ``inbox/`` without this object's claim: it was
    quarantined, or another claimer took it."""

    message_id: str


@attrs.frozen
class Withdrawn:
    """A waiting message its sender withdrew (zcoder's ``cancel``): settled, never run."""

    message_id: str


@attrs.frozen
class Refused:
    """A message refused because the spool is paused (its sender was answered
    ``paused``): never stored, but the user who paused should know a send was turned away."""

    envelope: Enqueue


News = Arrived | Left | Withdrawn | Refused
