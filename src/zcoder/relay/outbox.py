"""The outbox: the messages this instance sent, each with the latest state its receiver
reported (sans I/O, in memory, one owner: the app's relay link).

A message enters with its ack (``accepted`` or ``duplicate``: only stored messages are
kept). A receipt is applied only when it is for a message id this instance sent, from the
exact instance it was sent to, and moves the state forward: after a final state
(``FINAL_STATES``) nothing changes it, so a late or repeated ``started`` cannot undo a
``completed``. A receiver whose ack did not say ``receipts`` (a version-1 peer) never
reports: its messages stay ``accepted`` and say so (``receipts`` false).

Bounded: the oldest settled entries go first once ``limit`` is reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from zcoder.relay.receipt_states import FINAL_STATES

__all__ = ["DEFAULT_LIMIT", "Outbox", "Sent"]

DEFAULT_LIMIT = 200


@attrs.define
class Sent:
    """One sent message and what is known of it."""

    message_id: str
    target_instance_id: str
    target: str  # how the user knows the receiver: project (pid)
    first_line: str
    sent_at: float
    receipts: bool  # the receiver said it reports (its ack carried ``receipts``)
    state: str = "accepted"
    updated_at: float = 0.0
    detail: str = ""
    changed: str = ""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES or self.state == "withdrawn"


class Outbox:
    """The sent messages by id, oldest first."""

    def __init__(self, *, limit: int = DEFAULT_LIMIT, clock: Callable[[], float] = time.time):
        self._limit = limit
        self._clock = clock
        self._sent: dict[str, Sent] = {}

    def record(
        self, message_id: str, target_instance_id: str, target: str, body: str, *, receipts: bool
    ) -> Sent:
        """Keep a message its receiver stored; returns its entry (a repeated id keeps the
        first entry)."""
        if message_id in self._sent:
            return self._sent[message_id]
        now = self._clock()
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        sent = Sent(message_id, target_instance_id, target, first, now, receipts, updated_at=now)
        self._sent[message_id] = sent
        self._trim()
        return sent

    def get(self, message_id: str) -> Sent | None:
        return self._sent.get(message_id)

    def entries(self) -> list[Sent]:
        return list(self._sent.values())

    def apply(
        self, message_id: str, from_instance_id: str, state: str, detail: str, changed: str
    ) -> Sent | None:
        """Apply a receipt; the updated entry, or ``None`` when it is not for a message
        this instance sent to ``from_instance_id`` (then nothing changes). A receipt after
        a final state changes nothing either and returns ``None``."""
        sent = self._sent.get(message_id)
        if sent is None or sent.target_instance_id != from_instance_id:
            return None
        if sent.final:
            return None
        sent.receipts = True  # it reports, whatever its ack said
        sent.state, sent.detail, sent.changed = state, detail, changed
        sent.updated_at = self._clock()
        return sent

    def withdrawn(self, message_id: str) -> Sent | None:
        """Mark a message its receiver removed on our cancel (its ``cancelled`` receipt may
        follow, or not: a final state either way)."""
        sent = self._sent.get(message_id)
        if sent is None or sent.final:
            return None
        sent.state, sent.updated_at = "cancelled", self._clock()
        sent.detail = "withdrawn by this instance before it ran"
        return sent

    def _trim(self) -> None:
        while len(self._sent) > self._limit:
            settled = next((k for k, v in self._sent.items() if v.final), None)
            del self._sent[settled if settled is not None else next(iter(self._sent))]
