"""The one wake-up of the relay: a count of changes and a wait for the next one.

The spool and the service note every change (depth, pause, availability, a fault) here;
the app's relay object awaits ``wait``. ``note`` only counts and sets a ``trio.Event``: it
runs nothing of the waiter's, so the listener's call stack ends in the relay package
whatever the app does with the change (issue 8 item 1).
"""

from __future__ import annotations

import trio

__all__ = ["Changes"]


class Changes:
    """Noted synchronously, awaited by any number of tasks; each waiter keeps its own
    ``seen`` count, so none misses a change made while it was busy."""

    def __init__(self) -> None:
        self._count = 0
        self._event = trio.Event()

    @property
    def count(self) -> int:
        """How many changes were noted so far."""
        return self._count

    def note(self) -> None:
        """Count one change and wake the waiters; never raises, never calls out."""
        self._count += 1
        self._event.set()
        self._event = trio.Event()

    async def wait(self, seen: int) -> int:
        """Return the count once it differs from ``seen`` (at once, after a checkpoint,
        if it already does)."""
        if self._count != seen:
            await trio.lowlevel.checkpoint()
        while self._count == seen:
            await self._event.wait()
        return self._count
