"""zcoder's extension in the listener: receipts and cancels answered in the relay package.

The listener hands every ``receipt`` and ``cancel`` that passed its sender check to
``ExtensionIntake.handle`` and writes the status it returns as the ack. Both are decided
here, from the relay's own records, and become news like an enqueue: nothing here runs code
of the app, and nothing waits.

* A ``receipt`` is taken (``accepted``) only when peer credentials confirmed its sender's
  pid and it reports on a message this instance sent to exactly that sender in this run
  (``expect``, told by the app as it sends the message); a repeat is taken too (the
  receiver need not retry) and the app's outbox decides whether it moves anything forward.
  The taken receipts wait in ``take_receipts`` and a change is noted. A receiver may report
  before its ack has reached the sending task (it stores the message, writes the ack and
  may say ``held`` or ``started`` at once): such a receipt is taken and held back until
  ``confirm`` says the receiver stored the message (the app has recorded it by then), or
  dropped when it did not.
* A ``cancel`` from a verified sender withdraws the message from the spool
  (``Spool.withdraw``: ``withdrawn``, ``too_late`` or ``unknown``); the spool records the
  withdrawal as news (``Withdrawn``) and notes the change itself, so the app learns of it
  as of any message that left, and tells the sender ``cancelled`` from there. A file
  system that refuses the removal leaves the message to run: ``too_late``.
"""

from __future__ import annotations

from collections.abc import Callable

from zcoder.relay.changes import Changes
from zcoder.relay.envelope import Cancel, Receipt
from zcoder.relay.spool.store import Spool, SpoolFault

__all__ = ["ExtensionIntake"]


class ExtensionIntake:
    """The listener's extension handler and what it took in; one per service."""

    def __init__(self, *, spool: Callable[[], Spool | None], changes: Changes) -> None:
        self._spool = spool
        self._changes = changes
        self._sent: dict[str, str] = {}  # message id -> the receiver it was sent to
        self._in_flight: set[str] = set()  # sent, its ack not in yet: receipts held back
        self._receipts: list[Receipt] = []

    def expect(self, message_id: str, receiver_instance_id: str) -> None:
        """Message ``message_id`` of ours is being sent to ``receiver_instance_id``: its
        receipts are taken from now on, and held back until ``confirm``."""
        self._sent[message_id] = receiver_instance_id
        self._in_flight.add(message_id)

    def confirm(self, message_id: str, *, stored: bool) -> None:
        """The send of ``message_id`` ended: the receiver stored it (its receipts held back
        are let through, a change noted) or did not, or the send failed (they are dropped,
        and no more are taken)."""
        self._in_flight.discard(message_id)
        if not stored:
            self._sent.pop(message_id, None)
            self._receipts = [r for r in self._receipts if r.message_id != message_id]
        elif any(r.message_id == message_id for r in self._receipts):
            self._changes.note()

    def handle(self, request: Receipt | Cancel, verified: bool) -> str:
        """The ack status for a receipt or a cancel (see the module docstring)."""
        if not verified:
            return "invalid"
        if isinstance(request, Receipt):
            if self._sent.get(request.message_id) != request.sender_instance_id:
                return "invalid"
            self._receipts.append(request)
            self._changes.note()
            return "accepted"
        spool = self._spool()
        if spool is None:
            return "unknown"
        try:
            return spool.withdraw(request.message_id, request.sender_instance_id)
        except SpoolFault:
            return "too_late"  # nothing changed; it will run

    def take_receipts(self) -> list[Receipt]:
        """The receipts taken since the last call, in the order they came, but those of a
        message whose send has not ended (they stay for a later call)."""
        taken = [r for r in self._receipts if r.message_id not in self._in_flight]
        self._receipts = [r for r in self._receipts if r.message_id in self._in_flight]
        return taken
